//! How long a client transport waits: to connect, and for one HTTP exchange. One type, with
//! the same setters on every client builder (`__client_timeout_setters!`).

use std::time::Duration;

/// How long a client transport waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientTimeouts {
    /// To connect: the TCP (and TLS) connection, and whatever the transport's handshake is
    /// (the WebSocket upgrade; the legacy SSE stream and its `endpoint` event).
    pub connect: Duration,
    /// One HTTP exchange that carries no MCP request: what bounds a request is its own
    /// timeout, since a server may take as long as a tool runs to answer it.
    pub request: Duration,
}

impl ClientTimeouts {
    /// 30 seconds each.
    pub const DEFAULT: Self = Self {
        connect: Duration::from_secs(30),
        request: Duration::from_secs(30),
    };
}

impl Default for ClientTimeouts {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// The timeout setters of a client builder, over a [`ClientTimeouts`] field: `connect_timeout`,
/// and, unless `connect_only` (a transport that makes no HTTP exchange), `request_timeout`.
#[doc(hidden)]
#[macro_export]
macro_rules! __client_timeout_setters {
    ($($field:ident).+, connect_only) => {
        /// How long connecting may take (default 30 s): the TCP (and TLS) connection and the
        /// transport's handshake, if it has one (the WebSocket upgrade; the legacy SSE stream up
        /// to its `endpoint` event).
        pub fn connect_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.$($field).+.connect = timeout;
            self
        }
    };
    ($($field:ident).+) => {
        $crate::__client_timeout_setters!($($field).+, connect_only);

        /// How long one HTTP exchange that carries no MCP request may take (default 30 s): the
        /// POST of a notification or a response, the response headers of a GET, a DELETE. The
        /// POST that carries a request is bounded by that request's own timeout (set on the
        /// session or the call) instead, since a server may hold it open while a tool runs;
        /// cancelling the request drops it.
        pub fn request_timeout(mut self, timeout: ::std::time::Duration) -> Self {
            self.$($field).+.request = timeout;
            self
        }
    };
}
