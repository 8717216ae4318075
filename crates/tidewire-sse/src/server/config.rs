//! The settings of a legacy HTTP+SSE server.

use std::time::Duration;

use tidewire_core::transport::DEFAULT_MAX_MESSAGE_SIZE;

use tidewire_core::transport::HostPolicy;

/// Settings of a [`LegacySse`](super::LegacySse) server. Every table and queue has a limit.
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
    pub(crate) max_sessions: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) max_body: usize,
    pub(crate) max_message_size: usize,
    pub(crate) keep_alive: Duration,
    pub(crate) outbound_queue: usize,
    pub(crate) inbound_queue: usize,
    pub(crate) hosts: HostPolicy,
}

impl Default for SseConfig {
    fn default() -> Self {
        Self {
            max_sessions: 10_000,
            idle_timeout: Duration::from_secs(30 * 60),
            max_body: DEFAULT_MAX_MESSAGE_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            keep_alive: Duration::from_secs(15),
            outbound_queue: 256,
            inbound_queue: 64,
            hosts: HostPolicy::default(),
        }
    }
}

impl SseConfig {
    /// The most open streams (sessions) at once (default 10,000). Past it a new `GET` gets 503
    /// with `Retry-After`; open sessions are unaffected.
    #[must_use]
    pub fn max_sessions(mut self, limit: usize) -> Self {
        self.max_sessions = limit.max(1);
        self
    }

    /// A session whose client has POSTed nothing, and to which the server has sent nothing, for
    /// this long is ended, its stream closed (default 30 minutes). A session with a request of
    /// the client's still running is never idle, however long the handler stays silent.
    #[must_use]
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// The largest POST body (default 8 MiB); larger ones get 413.
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The largest message the server sends (default 8 MiB).
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// How often an idle stream gets a keep-alive comment (default 15 s). A client that went
    /// away is noticed when writing one fails.
    #[must_use]
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval.max(Duration::from_millis(1));
        self
    }

    /// Messages waiting for a slow stream reader before the engine waits too (default 256).
    #[must_use]
    pub fn outbound_queue(mut self, messages: usize) -> Self {
        self.outbound_queue = messages.max(1);
        self
    }

    /// Also accept `Host: host` (see [`HostPolicy`]); by default only loopback names pass.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts = self.hosts.allow_host(host);
        self
    }

    /// Accept any `Host` (behind a proxy that checks it); `Origin` is still checked.
    #[must_use]
    pub fn allow_any_host(mut self) -> Self {
        self.hosts = self.hosts.allow_any_host();
        self
    }

    /// Also accept `Origin: origin`; by default only loopback origins (and no `Origin`) pass.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.hosts = self.hosts.allow_origin(origin);
        self
    }
}
