//! What a transport asks of the session engine besides carrying messages.

/// What a transport asks of the engine besides the messages, read once when a connection is set
/// up ([`TransportSender::profile`](super::TransportSender::profile)).
///
/// Start from [`MESSAGE_STREAM`](Self::MESSAGE_STREAM) (stdio, WebSocket, in-memory: a plain
/// stream of messages, which asks nothing) and name what differs. `#[non_exhaustive]`: read
/// the fields, build one with the constants and methods, so a new need does not break a
/// transport written outside this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TransportProfile {
    /// The connection can carry requests of the stateless revision (2026-07-28): true for a
    /// plain message stream; false for a transport built around sessions (the session-era
    /// Streamable HTTP and HTTP+SSE transports), which then carries the session era only.
    pub carries_stateless: bool,
    /// Stateless requests travel with routing headers (`Mcp-Method`, `Mcp-Name`,
    /// `Mcp-Param-*`: the stateless Streamable HTTP client), so a client builds them
    /// ([`RoutingHeaders`](crate::stateless::RoutingHeaders) in the envelope); other transports would drop them.
    pub routes_by_headers: bool,
    /// The engine attaches an [`Exchange`](super::Exchange) to every request it sends
    /// (`envelope.exchange`): for a transport that runs something per request (an HTTP
    /// exchange) and must learn when the engine stops waiting for it.
    pub tracks_requests: bool,
    /// Closing a request's exchange is how this transport cancels a request of the stateless
    /// revision (over HTTP), or one sent before a revision is negotiated: the engine then sends
    /// no `notifications/cancelled`, and the transport acts on
    /// [`Exchange::over`](super::Exchange::over). When a session era is negotiated over the
    /// same transport, the engine sends `notifications/cancelled` as on any other.
    pub cancels_by_closing: bool,
    /// The largest message the transport writes, when it has a limit: the engine refuses a
    /// message it already holds in wire form (a progress report) over it before queueing it,
    /// so its sender is told, instead of the transport refusing it later where no one hears.
    pub max_message_size: Option<usize>,
}

impl TransportProfile {
    /// A plain stream of messages: carries both eras, asks nothing more.
    pub const MESSAGE_STREAM: Self = Self {
        carries_stateless: true,
        routes_by_headers: false,
        tracks_requests: false,
        cancels_by_closing: false,
        max_message_size: None,
    };

    /// The same, for a transport that carries the session era only.
    #[must_use]
    pub const fn sessions_only(mut self) -> Self {
        self.carries_stateless = false;
        self
    }

    /// The same, with an [`Exchange`](super::Exchange) on every request sent.
    #[must_use]
    pub const fn tracking_requests(mut self) -> Self {
        self.tracks_requests = true;
        self
    }

    /// The same, writing messages of at most `limit` bytes.
    #[must_use]
    pub const fn limiting_messages_to(mut self, limit: usize) -> Self {
        self.max_message_size = Some(limit);
        self
    }

    /// The same, with routing headers on stateless requests.
    #[must_use]
    pub const fn routing_by_headers(mut self) -> Self {
        self.routes_by_headers = true;
        self
    }

    /// The same, cancelling a request by closing its exchange (implies
    /// [`tracking_requests`](Self::tracking_requests)).
    #[must_use]
    pub const fn cancelling_by_closing(mut self) -> Self {
        self.cancels_by_closing = true;
        self.tracks_requests = true;
        self
    }
}

impl Default for TransportProfile {
    fn default() -> Self {
        Self::MESSAGE_STREAM
    }
}
