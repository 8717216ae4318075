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
/// The longest one attempt to connect (again) may take.
pub(crate) const CONNECT_WITHIN: Duration = Duration::from_secs(1);
/// Tries to connect again after the first, when a connection is lost.
pub(crate) const RECONNECT_RETRIES: usize = 2;
/// The longest pause between two of those tries.
pub(crate) const RECONNECT_PAUSE_AT_MOST: Duration = Duration::from_millis(250);

/// The shared connection's settings. A command sent while the connection is being made again
/// waits for that attempt, and `redis`' defaults retry it six times with pauses doubling from
/// 100 ms: a command could wait 6.3 s on a Redis that refuses every connection, and much
/// longer on one that drops them (measured: calls needing Redis hung past 8 s while it was
/// away). Bounded here, a command fails within about `RECONNECT_RETRIES + 1` connection
/// attempts; the next command starts a new attempt, so nothing is lost by giving up early.
pub(crate) fn manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(RESPONSE_WITHIN))
        .set_connection_timeout(Some(CONNECT_WITHIN))
        .set_number_of_retries(RECONNECT_RETRIES)
        .set_max_delay(RECONNECT_PAUSE_AT_MOST)
}

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
