//! Noticing a Redis connection that went silent: TCP keepalive and a user timeout on every
//! connection, a time limit on every command, and a ping through each subscription's own
//! connection.
//!
//! A subscription only reads: when the path to Redis freezes (a proxy, a half-dead NAT entry)
//! nothing fails, and the replica waits for messages that never come. A ping sent on the
//! subscription's connection gives the kernel unacknowledged data to time out on, and its
//! missing answer tells the reader to subscribe again.

use std::time::Duration;

use redis::aio::PubSubSink;
use redis::io::tcp::{TcpSettings, socket2::TcpKeepalive};

/// How often a subscription is pinged.
const PING_EVERY: Duration = Duration::from_secs(2);
/// How long a ping may go unanswered before the subscription counts as lost.
const PING_WITHIN: Duration = Duration::from_secs(3);
/// The longest a command may wait for its answer.
pub(crate) const RESPONSE_WITHIN: Duration = Duration::from_secs(5);

/// Keepalive probes after 5 s of silence, every 2 s, 3 of them; unacknowledged data fails the
/// connection after 10 s.
pub(crate) fn tcp_settings() -> TcpSettings {
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(5))
        .with_interval(Duration::from_secs(2))
        .with_retries(3);
    let settings = TcpSettings::default()
        .set_nodelay(true)
        .set_keepalive(keepalive);
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    let settings = settings.set_user_timeout(Duration::from_secs(10));
    settings
}

/// Completes when the subscription behind `sink` stops answering pings (or its connection is
/// gone); pending while it answers.
pub(crate) async fn lost(mut sink: PubSubSink) {
    loop {
        tokio::time::sleep(PING_EVERY).await;
        match tokio::time::timeout(PING_WITHIN, sink.ping::<redis::Value>()).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "a Redis subscription does not answer its ping");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    "a Redis subscription did not answer its ping within {} s",
                    PING_WITHIN.as_secs()
                );
                return;
            }
        }
    }
}
