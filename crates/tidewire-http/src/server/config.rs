//! The settings of a Streamable HTTP server.

use std::time::Duration;

use tidewire_core::transport::{DEFAULT_MAX_MESSAGE_SIZE, HostPolicy};
use tidewire_core::version::Eras;

use super::EventStoreLimits;

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
///     .session_idle_timeout(Duration::from_secs(600))
///     .allow_origin("https://app.example.com");
/// ```
#[derive(Clone)]
pub struct HttpConfig {
    pub(crate) response_mode: ResponseMode,
    pub(crate) stateless: bool,
    pub(crate) max_sessions: usize,
    pub(crate) session_idle_timeout: Duration,
    pub(crate) max_body: usize,
    pub(crate) max_message_size: usize,
    pub(crate) keep_alive: Duration,
    pub(crate) retry: Duration,
    pub(crate) stream_capacity: usize,
    pub(crate) stream_patience: Duration,
    pub(crate) inbound_queue: usize,
    pub(crate) hosts: HostPolicy,
    pub(crate) event_store: Option<std::sync::Arc<dyn super::EventStore>>,
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

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            response_mode: ResponseMode::Sse,
            stateless: false,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(30 * 60),
            max_body: DEFAULT_MAX_MESSAGE_SIZE,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            keep_alive: Duration::from_secs(15),
            retry: Duration::from_secs(1),
            stream_capacity: 16_384,
            stream_patience: Duration::from_secs(10),
            inbound_queue: 64,
            hosts: HostPolicy::default(),
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

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("response_mode", &self.response_mode)
            .field("stateless", &self.stateless)
            .field("max_sessions", &self.max_sessions)
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("max_body", &self.max_body)
            .field("stream_capacity", &self.stream_capacity)
            .field("max_streams_per_session", &self.max_streams_per_session)
            .field("event_store_limits", &self.event_store_limits)
            .field("eras", &self.eras)
            .finish_non_exhaustive()
    }
}

impl HttpConfig {
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

    /// Keeps stream events in `store` instead of the default [`MemoryEventStore`](super::MemoryEventStore)
    /// (which keeps `stream_buffer` events per stream in this process, within
    /// [`event_store_limits`](Self::event_store_limits)).
    #[must_use]
    pub fn event_store(mut self, store: std::sync::Arc<dyn super::EventStore>) -> Self {
        self.event_store = Some(store);
        self
    }

    /// JSON or SSE replies to POSTed requests (default SSE).
    #[must_use]
    pub fn response_mode(mut self, mode: ResponseMode) -> Self {
        self.response_mode = mode;
        self
    }

    /// Stateless mode: no sessions, no GET stream, every POST served on its own; the server
    /// cannot send requests to the client (handlers that try are told so).
    #[must_use]
    pub fn stateless(mut self, stateless: bool) -> Self {
        self.stateless = stateless;
        self
    }

    /// The most sessions at once (default 10,000). Past it `initialize` gets 503 with
    /// `Retry-After`, and existing sessions are unaffected.
    #[must_use]
    pub fn max_sessions(mut self, limit: usize) -> Self {
        self.max_sessions = limit.max(1);
        self
    }

    /// A session with no request in flight, no open stream and no request for this long ends
    /// (default 30 minutes); its id then gets 404.
    #[must_use]
    pub fn session_idle_timeout(mut self, timeout: Duration) -> Self {
        self.session_idle_timeout = timeout;
        self
    }

    /// The largest POST body (default 8 MiB); larger ones get 413.
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The largest outbound message (default 8 MiB).
    #[must_use]
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }

    /// How often an idle SSE stream gets a keep-alive comment (default 15 s).
    #[must_use]
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
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

    /// Allows requests whose `Host` is `host` (a host name, with or without port). By default
    /// only loopback names are allowed (`localhost`, `127.0.0.1`, `[::1]`, any port), which
    /// protects local servers against DNS rebinding.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts = self.hosts.allow_host(host);
        self
    }

    /// Allows any `Host` (for servers behind a proxy that checks it). `Origin` is still checked.
    #[must_use]
    pub fn allow_any_host(mut self) -> Self {
        self.hosts = self.hosts.allow_any_host();
        self
    }

    /// Allows requests with this `Origin` (e.g. `https://app.example.com`). By default only
    /// loopback origins are allowed; requests without `Origin` (non-browser clients) always are.
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.hosts = self.hosts.allow_origin(origin);
        self
    }

    /// Which eras the endpoint serves (default: both). A POST whose body carries `_meta`
    /// `io.modelcontextprotocol/protocolVersion`, or whose `MCP-Protocol-Version` is not a
    /// session-era revision, is a stateless request; the others are session-era messages.
    /// [`Eras::Modern`] answers GET and DELETE 405 and refuses `initialize` naming the versions
    /// it serves; [`Eras::Legacy`] serves as before 2026-07-28. Give the server the same value
    /// (`ServerBuilder::eras`).
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

    /// The most stateless (2026-07-28) requests running at once, listen streams included
    /// (default 10,000); past it a request gets 503 with `Retry-After`.
    #[must_use]
    pub fn max_stateless_requests(mut self, limit: usize) -> Self {
        self.max_stateless_requests = limit;
        self
    }

    /// How long a POST's SSE reply waits for its first event before its head is sent (default
    /// 2 ms), after letting every ready task run once (which is enough for most answers, and
    /// arms no timer). A quick answer then leaves with the head in one write instead of two; a
    /// slow one starts its stream after this wait.
    #[must_use]
    pub fn first_event_wait(mut self, wait: Duration) -> Self {
        self.first_event_wait = wait;
        self
    }

    /// Replaces the `Host`/`Origin` rules at once.
    #[must_use]
    pub fn host_policy(mut self, policy: HostPolicy) -> Self {
        self.hosts = policy;
        self
    }
}
