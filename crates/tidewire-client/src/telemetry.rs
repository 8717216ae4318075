//! `mcp.client.session.duration` (feature `otel`): a session-era client's session, from its
//! handshake to its end, recorded once with the revision it spoke.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use tidewire_core::session::Peer;

/// When a session started, and whether its end was recorded yet.
#[derive(Debug)]
pub(crate) struct SessionClock {
    opened: Instant,
    /// Held while the end is recorded, so a second caller returns only once it is: the
    /// watcher could win a flag, and `close` return before the watcher had recorded (a
    /// flaky test caught it).
    recorded: Mutex<bool>,
}

impl SessionClock {
    /// A clock for a session whose handshake just ended, and a watcher that records the
    /// session's end however it comes (the server ends it, the connection fails).
    pub(crate) fn start(peer: &Peer) -> Arc<Self> {
        let clock = Arc::new(Self {
            opened: Instant::now(),
            recorded: Mutex::new(false),
        });
        let (watched, watcher) = (peer.clone(), clock.clone());
        tokio::spawn(async move {
            watched.closed().await;
            watcher.record(&watched);
        });
        clock
    }

    /// Records the session's duration, the first time only (`Client::close` records it as the
    /// connection stops, so it is there when `close` returns; the watcher covers every other
    /// end).
    pub(crate) fn record(&self, peer: &Peer) {
        let mut recorded = self
            .recorded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *recorded {
            return;
        }
        *recorded = true;
        let mut attributes = Vec::new();
        if let Some(version) = peer.protocol_version() {
            attributes.push(opentelemetry::KeyValue::new(
                tidewire_otel::semconv::MCP_PROTOCOL_VERSION,
                version.as_str(),
            ));
        }
        tidewire_otel::metrics::client_session_duration()
            .record(self.opened.elapsed().as_secs_f64(), &attributes);
    }
}
