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
//!   requests without a session 400, a full session table 503 with `Retry-After`, and so is
//!   a new session or stateless request while the server drains ([`health`] reports it).
//! - `Host` and `Origin` are checked (loopback only by default), and so are `Accept`,
//!   `Content-Type`, `MCP-Protocol-Version` and the body size, each with its status and a
//!   JSON-RPC error body.
//! - **The stateless revision 2026-07-28** is served on the same endpoint
//!   ([`HttpConfig::eras`]): a POST carrying `_meta` `io.modelcontextprotocol/protocolVersion`
//!   is one request, with no session, checked against its `Mcp-Method` / `Mcp-Name` headers,
//!   answered as JSON or an id-less SSE stream; closing the response cancels it.

mod admission;
mod body;
mod checks;
mod config;
mod deliver;
mod event_store;
mod handlers;
mod health;
mod listen;
mod one_shot;
mod post;
mod refusals;
mod served;
mod session;
mod session_post;
mod sse_body;
mod state;
mod stateless;
mod stream_table;
mod streams;

use std::sync::Arc;

use tidewire_core::session::{BoxedServe, Serve};

/// The axum this server is built on, so an app can be put together without matching versions.
pub use admission::Admission;
pub use axum;
pub use config::{HttpConfig, ResponseMode};
pub use event_store::{
    EventStore, EventStoreLimits, MemoryEventStore, StoredEvent, StreamId, done as event_store_done,
};
pub use health::health;
pub use listen::{serve, serve_until};
pub use session::{HttpReceiver, HttpSender, HttpTransport};
pub use sse_body::replay;
pub use streams::parse_event_id;
pub use tidewire_core::http::HttpRequestInfo;

use state::State;

/// A Streamable HTTP endpoint. Cheap to clone; clones share the session table.
#[derive(Clone, Debug)]
pub struct StreamableHttp {
    state: Arc<State>,
}

impl StreamableHttp {
    /// An endpoint with `config`; `make_driver` starts the engine of each new session (a
    /// `tidewire_server::Server`, or any `Fn(transport) -> Driver`: see [`Serve`]). The driver is spawned on the
    /// current tokio runtime.
    pub fn new(config: HttpConfig, make_driver: impl Serve<HttpTransport>) -> Self {
        Self {
            state: Arc::new(State::new(config, BoxedServe::new(make_driver))),
        }
    }

    /// An axum router serving the endpoint at `path` (POST, GET, DELETE). Merge or nest it into
    /// your app; add tower layers (auth, tracing, CORS) around it as usual.
    ///
    /// The endpoint applies its `Host`/`Origin` rule ([`ServerLimits::hosts`], set with
    /// [`HttpConfig::host_policy`]) first thing, as [`HostLayer`] does, but in its handler: a
    /// layer on the router would box every request's service and future once more.
    ///
    /// [`ServerLimits::hosts`]: tidewire_core::http::ServerLimits::hosts
    /// [`HostLayer`]: tidewire_core::http::HostLayer
    pub fn router(&self, path: &str) -> axum::Router {
        axum::Router::new()
            .route(path, axum::routing::any(handlers::endpoint))
            .with_state(self.state.clone())
    }

    /// This endpoint's admission checks (its `Host`/`Origin` rule, its body limits), for a
    /// layer in front of it that reads a request itself before it reaches the endpoint.
    pub fn admission(&self) -> Admission {
        Admission::new(self.state.clone())
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

    /// Bytes of SSE events the endpoint's event stores hold in this process, kept for their
    /// readers and for resumption, as the stores' budgets count them (see
    /// [`EventStoreLimits`]; 0 for a store that does not say).
    pub fn event_store_bytes(&self) -> usize {
        let state = &self.state;
        let main = state.store.bytes_held().unwrap_or(0);
        if Arc::ptr_eq(&state.store, &state.one_shot_store) {
            main
        } else {
            main + state.one_shot_store.bytes_held().unwrap_or(0)
        }
    }

    /// Ends every session (their streams end, their engines stop).
    pub fn close_all(&self) {
        self.state.sessions.end_all();
    }

    /// The lifecycle of the server behind this endpoint (see [`Serve::lifecycle`]): while it
    /// drains, new sessions and new stateless requests get 503 with `Retry-After`; [`health`]
    /// reports it.
    pub fn lifecycle(&self) -> &tidewire_core::lifecycle::Lifecycle {
        &self.state.lifecycle
    }
}
