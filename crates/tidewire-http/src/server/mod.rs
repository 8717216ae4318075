//! The Streamable HTTP server: one endpoint, mounted in any axum app.
//!
//! ```no_run
//! # async fn demo(make_driver: impl Fn(tidewire_http::server::HttpTransport) -> tidewire_core::session::Driver + Send + Sync + 'static) -> std::io::Result<()> {
//! use tidewire_http::server::{HttpConfig, StreamableHttp};
//!
//! // `make_driver` starts one engine session per MCP session, e.g.
//! // a `tidewire_server::Server` (cloned per connection), or any `Fn(transport) -> Driver`.
//! let mcp = StreamableHttp::new(HttpConfig::default(), make_driver);
//! let app = axum::Router::new().merge(mcp.router("/mcp"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! ## What goes where
//! - **POST** carries each client message. A request is answered with an SSE stream (default)
//!   that carries everything related to it — progress, logs, requests back to the client — and
//!   ends with its response; or, in [`ResponseMode::Json`], with one JSON body. Notifications
//!   and responses get 202.
//! - **GET** opens the session's standalone stream, for messages related to no request
//!   (list_changed, resource updates). Until one is open they wait in the session's buffer.
//! - Each message goes to exactly one stream. Every event has an id `<stream>-<seq>`; a client
//!   that lost a stream resumes it with GET and `Last-Event-ID`, and gets what came after on
//!   that stream only. On 2025-11-25 a POST stream starts with a priming event and `retry`.
//! - **DELETE** ends the session. Idle sessions expire. Unknown or ended sessions get 404,
//!   requests without a session 400, a full session table 503 with `Retry-After`.
//! - `Host` and `Origin` are checked (loopback only by default), and so are `Accept`,
//!   `Content-Type`, `MCP-Protocol-Version` and the body size, each with its status and a
//!   JSON-RPC error body.
//! - **The stateless revision 2026-07-28** is served on the same endpoint
//!   ([`HttpConfig::eras`]): a POST carrying `_meta` `io.modelcontextprotocol/protocolVersion`
//!   is one request, with no session, checked against its `Mcp-Method` / `Mcp-Name` headers,
//!   answered as JSON or an id-less SSE stream; closing the response cancels it.

mod body;
mod checks;
mod config;
mod event_store;
mod handlers;
mod listen;
mod session;
mod sse_body;
mod stateless;
mod streams;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use tidewire_core::session::Serve;
use tidewire_core::transport::Codec;
use tidewire_core::transport::sessions::SessionTable;

/// The axum this server is built on, so an app can be put together without matching versions.
pub use axum;
pub use config::{HttpConfig, ResponseMode};
pub use event_store::{EventStore, EventStoreLimits, MemoryEventStore, StoredEvent, StreamId};
pub use listen::{serve, serve_until};
pub use session::{HttpReceiver, HttpSender};
pub use tidewire_core::transport::HttpRequestInfo;

use session::HttpSession;

/// The transport one engine session runs on: what [`StreamableHttp`] hands to the function
/// that starts a session.
pub type HttpTransport = (HttpSender, HttpReceiver);

type MakeDriver = dyn Serve<HttpTransport>;

/// A Streamable HTTP endpoint. Cheap to clone; clones share the session table.
#[derive(Clone)]
pub struct StreamableHttp {
    state: Arc<State>,
}

impl std::fmt::Debug for StreamableHttp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamableHttp")
            .field("sessions", &self.session_count())
            .finish_non_exhaustive()
    }
}

pub(crate) struct State {
    config: HttpConfig,
    codec: Codec,
    make_driver: Box<MakeDriver>,
    store: Arc<dyn EventStore>,
    sessions: Arc<SessionTable<HttpSession>>,
    /// Numbers the one-shot sessions of stateless mode (their key in the event store).
    stateless_seq: std::sync::atomic::AtomicU64,
    /// Stateless (2026-07-28) requests running now.
    stateless_running: std::sync::atomic::AtomicUsize,
    /// Bytes of POST bodies being read at once, over the endpoint.
    body_budget: body::BodyBudget,
    /// Refused bodies being read and thrown away now.
    drains: Arc<std::sync::atomic::AtomicUsize>,
}

impl StreamableHttp {
    /// An endpoint with `config`; `make_driver` starts the engine of each new session (a
    /// `tidewire_server::Server`, or any `Fn(transport) -> Driver`: see [`Serve`]). The driver is spawned on the
    /// current tokio runtime.
    pub fn new(config: HttpConfig, make_driver: impl Serve<HttpTransport>) -> Self {
        let codec = Codec::new(config.limits.max_message_size);
        let store: Arc<dyn EventStore> = match &config.event_store {
            Some(store) => store.clone(),
            None => Arc::new(MemoryEventStore::with_limits(
                config
                    .event_store_limits
                    .events_per_stream(config.stream_capacity),
            )),
        };
        Self {
            state: Arc::new(State {
                codec,
                make_driver: Box::new(make_driver),
                store,
                sessions: Arc::new(SessionTable::new(
                    config.limits.max_sessions,
                    config.limits.idle_timeout,
                )),
                stateless_seq: std::sync::atomic::AtomicU64::new(0),
                stateless_running: std::sync::atomic::AtomicUsize::new(0),
                body_budget: body::BodyBudget::new(config.body_bytes_total),
                drains: Arc::default(),
                config,
            }),
        }
    }

    /// An axum router serving the endpoint at `path` (POST, GET, DELETE). Merge or nest it into
    /// your app; add tower layers (auth, tracing, CORS) around it as usual.
    pub fn router(&self, path: &str) -> axum::Router {
        axum::Router::new()
            .route(path, axum::routing::any(handlers::endpoint))
            .with_state(self.state.clone())
    }

    /// Sessions open now.
    pub fn session_count(&self) -> usize {
        self.state.sessions.len()
    }

    /// Bytes of POST bodies being read now, over the endpoint, as the body budget counts them
    /// (`Content-Length` rounded up to KiB; see [`HttpConfig::body_budget`]).
    pub fn body_bytes_reading(&self) -> usize {
        self.state.body_budget.in_use()
    }

    /// Ends every session (their streams end, their engines stop).
    pub fn close_all(&self) {
        self.state.sessions.end_all();
    }
}

impl State {
    /// Starts a session's engine on a fresh transport; the session is removed when it stops.
    fn start_session(self: &Arc<Self>, id: Arc<str>) -> Arc<HttpSession> {
        let session = Arc::new(HttpSession::new(
            id,
            self.config.inbound_queue,
            self.store.clone(),
            self.config.stream_capacity,
            self.config.stream_patience,
            self.config.max_streams_per_session,
            self.config.body_bytes_per_session,
        ));
        let transport = (
            HttpSender {
                session: session.clone(),
                codec: self.codec,
            },
            HttpReceiver {
                session: session.clone(),
            },
        );
        let driver = self.make_driver.serve_connection(transport);
        let weak: Weak<State> = Arc::downgrade(self);
        let ended = session.clone();
        tokio::spawn(async move {
            // A session the server ended reaches its engine as a closed transport: no error.
            if let Err(error) = driver.await
                && !error.is_closed()
            {
                tracing::debug!(%error, "an HTTP session's engine stopped with an error");
            }
            ended.close();
            if let Some(state) = weak.upgrade() {
                state.sessions.remove(&ended.id);
            }
        });
        session
    }
}

/// A place among the stateless requests running at once, bounded by
/// [`HttpConfig::max_stateless_requests`](HttpConfig::max_stateless_requests).
pub(crate) struct StatelessSlot(Arc<State>);

impl StatelessSlot {
    pub(crate) fn take(state: &Arc<State>) -> Option<Self> {
        let before = state.stateless_running.fetch_add(1, Ordering::AcqRel);
        let slot = Self(state.clone());
        (before < state.config.max_stateless_requests).then_some(slot)
    }
}

impl Drop for StatelessSlot {
    fn drop(&mut self) {
        self.0.stateless_running.fetch_sub(1, Ordering::AcqRel);
    }
}
