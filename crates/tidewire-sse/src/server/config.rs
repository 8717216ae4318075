//! The settings of a legacy HTTP+SSE server.

use tidewire_core::http::ServerLimits;

/// Settings of a [`LegacySse`](super::LegacySse) server. Every table and queue has a limit;
/// the limits every HTTP server shares are [`ServerLimits`], under the same names.
///
/// ```
/// use std::time::Duration;
/// use tidewire_sse::server::SseConfig;
///
/// let config = SseConfig::default()
///     .max_sessions(100)
///     .keep_alive(Duration::from_secs(10))
///     .allow_origin("https://app.example.com");
/// ```
#[derive(Debug, Clone)]
pub struct SseConfig {
    pub(crate) limits: ServerLimits,
    pub(crate) outbound_queue: usize,
    pub(crate) inbound_queue: usize,
}

impl Default for SseConfig {
    fn default() -> Self {
        Self {
            limits: ServerLimits::default(),
            outbound_queue: 256,
            inbound_queue: 64,
        }
    }
}

impl SseConfig {
    tidewire_core::__server_limit_setters!(common);
    tidewire_core::__server_limit_setters!(http);

    /// Messages waiting for a slow stream reader before the engine waits too (default 256).
    #[must_use]
    pub fn outbound_queue(mut self, messages: usize) -> Self {
        self.outbound_queue = messages.max(1);
        self
    }
}
