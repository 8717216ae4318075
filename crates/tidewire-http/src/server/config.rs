//! The settings of a Streamable HTTP server.

use std::time::Duration;

use tidewire_core::http::ServerLimits;
use tidewire_core::transport::DEFAULT_MAX_MESSAGE_SIZE;
use tidewire_core::version::Eras;

use super::event_store::{EventStore, EventStoreLimits};

/// How POST requests are answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ResponseMode {
    /// An SSE stream per request, carrying its progress, logs and requests back to the client,
    /// then its response (the default).
    #[default]
    Sse,
    /// One JSON body per request. Nothing related to the request can travel before the
    /// response: handlers that try are told so (`ProgressError::Unsupported`,
    /// `SessionError::NotSupported`).
    Json,
}

/// Settings of a Streamable HTTP server. Every table and buffer has a limit.
///
/// ```
/// use std::time::Duration;
/// use tidewire_http::server::{HttpConfig, ResponseMode};
///
/// let config = HttpConfig::default()
///     .response_mode(ResponseMode::Json)
///     .max_sessions(100)
///     .idle_timeout(Duration::from_secs(600))
///     .allow_origin("https://app.example.com");
/// ```
#[derive(Clone)]
pub struct HttpConfig {
    pub(crate) response_mode: ResponseMode,
    pub(crate) one_shot: bool,
    pub(crate) limits: ServerLimits,
    pub(crate) retry: Duration,
    pub(crate) stream_capacity: usize,
    pub(crate) stream_patience: Duration,
    pub(crate) inbound_queue: usize,
    pub(crate) event_store: Option<std::sync::Arc<dyn EventStore>>,
    pub(crate) event_store_limits: EventStoreLimits,
    pub(crate) first_event_wait: Duration,
    pub(crate) max_streams_per_session: usize,
    pub(crate) body_read_timeout: Duration,
    pub(crate) body_bytes_per_session: usize,
    pub(crate) body_bytes_total: usize,
    pub(crate) eras: Eras,
    pub(crate) json_wait: Duration,
    pub(crate) max_stateless_requests: usize,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("response_mode", &self.response_mode)
            .field("one_shot", &self.one_shot)
            .field("limits", &self.limits)
            .field("stream_capacity", &self.stream_capacity)
            .field("max_streams_per_session", &self.max_streams_per_session)
            .field("event_store_limits", &self.event_store_limits)
            .field("eras", &self.eras)
            .finish_non_exhaustive()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            response_mode: ResponseMode::Sse,
            one_shot: false,
            limits: ServerLimits::default(),
            retry: Duration::from_secs(1),
            stream_capacity: 16_384,
            stream_patience: Duration::from_secs(10),
            inbound_queue: 64,
            event_store: None,
            event_store_limits: EventStoreLimits::default(),
            first_event_wait: Duration::from_millis(2),
            max_streams_per_session: Self::DEFAULT_MAX_STREAMS_PER_SESSION,
            body_read_timeout: Duration::from_secs(30),
            body_bytes_per_session: 2 * DEFAULT_MAX_MESSAGE_SIZE,
            body_bytes_total: 8 * DEFAULT_MAX_MESSAGE_SIZE,
            eras: Eras::Dual,
            json_wait: Duration::from_secs(10),
            max_stateless_requests: 10_000,
        }
    }
}

impl HttpConfig {
    tidewire_core::__server_limit_setters!(common);
    tidewire_core::__server_limit_setters!(http);

    /// The default of [`max_streams_per_session`](Self::max_streams_per_session): 256, the
    /// engine's default cap on requests in flight per session.
    pub const DEFAULT_MAX_STREAMS_PER_SESSION: usize = 256;

    /// The most POST streams one session holds at once (default 256): those with a request in
    /// flight, and those whose reader went away before their end, kept for resumption. A new
    /// stream past it first drops the oldest kept one; when every one has a request in flight,
    /// the POST gets 429 with a JSON-RPC error (`-32001`) and `Retry-After`.
    #[must_use]
    pub fn max_streams_per_session(mut self, limit: usize) -> Self {
        self.max_streams_per_session = limit.max(1);
        self
    }

    /// The most bytes the default event store keeps, over every session (default 64 MiB); past
    /// it the oldest events of the largest sessions go first. See [`event_store_limits`](Self::event_store_limits)
    /// for the per-stream and per-session budgets.
    #[must_use]
    pub fn event_store_bytes(mut self, bytes: usize) -> Self {
        self.event_store_limits = self.event_store_limits.total_bytes(bytes);
        self
    }

    /// Every byte limit of the default event store at once (per stream, per session, in all).
    /// The events kept per stream are set by [`stream_buffer`](Self::stream_buffer).
    #[must_use]
    pub fn event_store_limits(mut self, limits: EventStoreLimits) -> Self {
        self.event_store_limits = limits;
        self
    }

    /// How long a POST body may take to arrive (default 30 s); a slower one gets 408 and its
    /// connection is closed.
    #[must_use]
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// How many bytes of POST bodies are read at once, per session and over the whole endpoint
    /// (defaults 16 MiB and 64 MiB; a body counts as its `Content-Length`, or the body limit
    /// when it has none). A body that would pass a budget waits its turn, so memory for bodies
    /// in flight stays bounded however many arrive together.
    #[must_use]
    pub fn body_budget(mut self, per_session: usize, total: usize) -> Self {
        self.body_bytes_per_session = per_session.max(1);
        self.body_bytes_total = total.max(1);
        self
    }

    /// Keeps stream events in `store` instead of the default [`MemoryEventStore`](super::event_store::MemoryEventStore)
    /// (which keeps `stream_buffer` events per stream in this process, within
    /// [`event_store_limits`](Self::event_store_limits)). It holds the streams of sessions; a
    /// stateless request's stream, which cannot be resumed, stays in a memory store of its own.
    #[must_use]
    pub fn event_store(mut self, store: std::sync::Arc<dyn EventStore>) -> Self {
        self.event_store = Some(store);
        self
    }

    /// JSON or SSE replies to POSTed requests (default SSE).
    #[must_use]
    pub fn response_mode(mut self, mode: ResponseMode) -> Self {
        self.response_mode = mode;
        self
    }

    /// One-shot sessions (what other SDKs call stateless mode; not the stateless revision
    /// 2026-07-28, which needs no setting): no session ids, no GET stream, every session-era
    /// POST served in a session of its own that ends with it; the server cannot send requests
    /// to the client (handlers that try are told so).
    #[must_use]
    pub fn one_shot_sessions(mut self, one_shot: bool) -> Self {
        self.one_shot = one_shot;
        self
    }

    /// The `retry` a client is told to wait before reconnecting a stream (default 1 s).
    #[must_use]
    pub fn retry(mut self, retry: Duration) -> Self {
        self.retry = retry;
        self
    }

    /// Events kept per stream for resumption by the default store, which is also how far a
    /// writer may run ahead of a stream's reader (default 16,384); and how long a writer waits for
    /// a slow or absent reader before going on anyway, the store then dropping the oldest unread
    /// event (default 10 s).
    ///
    /// A client that resumes with `Last-Event-ID` gets what came after, as long as it is still
    /// kept: what a reader has taken may still sit in socket buffers when a connection drops,
    /// so the history must cover that window (on loopback, thousands of small events). Memory is
    /// spent only on events actually sent; an idle session keeps none.
    #[must_use]
    pub fn stream_buffer(mut self, events: usize, patience: Duration) -> Self {
        self.stream_capacity = events.max(1);
        self.stream_patience = patience;
        self
    }

    /// Which eras the endpoint serves (default: both). A POST whose body carries `_meta`
    /// `io.modelcontextprotocol/protocolVersion`, or whose `MCP-Protocol-Version` is not a
    /// session-era revision, is a stateless request; the others are session-era messages.
    /// [`Eras::Modern`] answers GET and DELETE 405 and refuses `initialize` naming the versions
    /// it serves; [`Eras::Legacy`] serves as before 2026-07-28. Only for an engine that does not
    /// say its eras (a closure): a `tidewire_server::Server` does
    /// ([`Serve::eras`](tidewire_core::session::Serve::eras), from `ServerBuilder::eras`), and
    /// the endpoint follows it whatever this says, so the eras are set in one place.
    #[must_use]
    pub fn eras(mut self, eras: Eras) -> Self {
        self.eras = eras;
        self
    }

    /// How long a stateless (2026-07-28) request may take to send its first message and still
    /// be answered as one JSON body (default 10 s): a response that comes first goes back as
    /// JSON with the status its error calls for; anything else first, or nothing by then, makes
    /// the answer an SSE stream. (In [`ResponseMode::Json`] the answer is always one JSON body,
    /// whenever the response comes.)
    #[must_use]
    pub fn json_wait(mut self, wait: Duration) -> Self {
        self.json_wait = wait;
        self
    }

    /// The most stateless requests running at once (default 10,000): those of the 2026-07-28
    /// wire, listen streams included, and those of [one-shot sessions](Self::one_shot_sessions) (each in
    /// its one-shot session); past it a request gets 503 with `Retry-After`.
    #[must_use]
    pub fn max_stateless_requests(mut self, limit: usize) -> Self {
        self.max_stateless_requests = limit;
        self
    }

    /// How long a POST's SSE reply waits for its first event before its head is sent (default
    /// 2 ms), counted from when the engine says the handler did not answer at once (until then
    /// it waits without a timer: the engine takes the request on its next turn). A quick answer
    /// then leaves with the head in one write instead of two; a slow one starts its stream
    /// after this wait.
    #[must_use]
    pub fn first_event_wait(mut self, wait: Duration) -> Self {
        self.first_event_wait = wait;
        self
    }
}
