//! [`ServerLimits`]: the limits every tidewire server transport on HTTP applies, under one set
//! of names.

use std::time::Duration;

use super::HostPolicy;
use crate::transport::DEFAULT_MAX_MESSAGE_SIZE;

/// The limits shared by the Streamable HTTP, HTTP+SSE and WebSocket servers: each config
/// (`HttpConfig`, `SseConfig`, `WsConfig`) holds one and has a setter of the same name for each
/// field, so a limit is spelled the same on every transport. (`idle_timeout`, `max_body` and
/// `keep_alive` concern the HTTP servers; a WebSocket connection pings instead.)
///
/// ```
/// use std::time::Duration;
/// use tidewire_core::http::ServerLimits;
///
/// let limits = ServerLimits {
///     max_sessions: 500,
///     idle_timeout: Duration::from_secs(600),
///     ..ServerLimits::default()
/// };
/// assert_eq!(limits.max_body, 8 * 1024 * 1024);
/// ```
#[derive(Debug, Clone)]
pub struct ServerLimits {
    /// The most sessions (WebSocket: connections) at once (default 10,000): past it a new one
    /// (an `initialize`, an SSE stream, an upgrade) gets 503 with `Retry-After`; open ones are
    /// unaffected.
    pub max_sessions: usize,
    /// A session with no request in flight and nothing sent either way for this long ends
    /// (default 30 minutes).
    pub idle_timeout: Duration,
    /// The largest POST body (default 8 MiB); a larger one gets 413.
    pub max_body: usize,
    /// The largest message either way (default 8 MiB).
    pub max_message_size: usize,
    /// How often an idle SSE stream gets a keep-alive comment (default 15 s).
    pub keep_alive: Duration,
    /// The `Host` and `Origin` rules (default: loopback only).
    pub hosts: HostPolicy,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_sessions: 10_000,
            idle_timeout: Duration::from_secs(30 * 60),
            max_body: DEFAULT_MAX_MESSAGE_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            keep_alive: Duration::from_secs(15),
            hosts: HostPolicy::default(),
        }
    }
}

/// The setters of the [`ServerLimits`] every server config has, over its `limits` field.
#[doc(hidden)]
#[macro_export]
macro_rules! __server_limit_setters {
    (common) => {
        /// All the shared limits at once (see
        /// [`ServerLimits`](tidewire_core::http::ServerLimits)).
        #[must_use]
        pub fn limits(mut self, limits: $crate::http::ServerLimits) -> Self {
            self.limits = limits;
            self
        }

        /// The most sessions at once (default 10,000): past it a new one gets 503 with
        /// `Retry-After`; open ones are unaffected.
        #[must_use]
        pub fn max_sessions(mut self, limit: usize) -> Self {
            self.limits.max_sessions = limit.max(1);
            self
        }

        /// The largest message either way (default 8 MiB).
        #[must_use]
        pub fn max_message_size(mut self, bytes: usize) -> Self {
            self.limits.max_message_size = bytes;
            self
        }

        /// Also accept `Host: host` (a host name, with or without port). By default only
        /// loopback names pass (`localhost`, `127.0.0.1`, `[::1]`, any port), which protects a
        /// local server against DNS rebinding.
        #[must_use]
        pub fn allow_host(mut self, host: impl Into<String>) -> Self {
            self.limits.hosts = self.limits.hosts.allow_host(host);
            self
        }

        /// Accept any `Host` (behind a proxy that checks it); `Origin` is still checked.
        #[must_use]
        pub fn allow_any_host(mut self) -> Self {
            self.limits.hosts = self.limits.hosts.allow_any_host();
            self
        }

        /// Also accept `Origin: origin` (e.g. `https://app.example.com`). Requests without
        /// `Origin` (non-browser clients) always pass.
        #[must_use]
        pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
            self.limits.hosts = self.limits.hosts.allow_origin(origin);
            self
        }

        /// Replaces the `Host`/`Origin` rules at once.
        #[must_use]
        pub fn host_policy(mut self, policy: $crate::http::HostPolicy) -> Self {
            self.limits.hosts = policy;
            self
        }
    };
    (http) => {
        /// A session with no request in flight and nothing sent either way for this long ends
        /// (default 30 minutes).
        #[must_use]
        pub fn idle_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.limits.idle_timeout = timeout;
            self
        }

        /// The largest POST body (default 8 MiB); a larger one gets 413.
        #[must_use]
        pub fn max_body(mut self, bytes: usize) -> Self {
            self.limits.max_body = bytes;
            self
        }

        /// How often an idle SSE stream gets a keep-alive comment (default 15 s); a client that
        /// went away is noticed when writing one fails.
        #[must_use]
        pub fn keep_alive(mut self, interval: ::std::time::Duration) -> Self {
            self.limits.keep_alive = interval.max(::std::time::Duration::from_millis(1));
            self
        }
    };
}
