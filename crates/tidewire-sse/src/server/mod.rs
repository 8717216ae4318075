//! The legacy HTTP+SSE server (MCP 2024-11-05): two routes, mounted in any axum app.
//!
//! ```no_run
//! # async fn demo(make_driver: impl Fn(tidewire_sse::server::SseTransport) -> tidewire_core::session::Driver + Send + Sync + 'static) -> std::io::Result<()> {
//! use tidewire_sse::server::{LegacySse, SseConfig};
//!
//! // `make_driver` starts one engine session per stream, e.g.
//! // a `tidewire_server::Server` (cloned per connection), or any `Fn(transport) -> Driver`.
//! let sse = LegacySse::new(SseConfig::default(), make_driver);
//! let app = axum::Router::new().merge(sse.router("/sse", "/messages"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! ## The exchange
//! - `GET /sse` opens a session and its stream. The first event is `endpoint`, whose data is
//!   the path to POST to, with the session in the query: `/messages?sessionId=<32 hex digits>`.
//!   Every message from the server follows as a `message` event (one JSON-RPC message in
//!   `data`); an idle stream gets a `: keep-alive` comment every [`SseConfig::keep_alive`].
//! - `POST /messages?sessionId=…` carries one client message. It is answered `202 Accepted`
//!   as soon as the session has it; the reply travels on the stream. An unknown or ended
//!   session gets 404, a missing one 400, a body that is no JSON-RPC message 400 with the
//!   JSON-RPC error in the body, a body over [`SseConfig::max_body`] 413, a body that is not
//!   `application/json` 415.
//! - When the stream closes (the client went away, or the session expired), the session ends:
//!   the engine stops and cancels what it was running, and its id gets 404.
//! - `Host` and `Origin` are checked first (loopback only by default, see
//!   [`HostPolicy`](tidewire_core::http::HostPolicy)); refusals get 403. Past
//!   [`SseConfig::max_sessions`] a new stream gets 503 with `Retry-After`.
//!
//! The server never looks at the protocol version: whatever `initialize` negotiates, the
//! framing stays the same.

mod config;
mod handlers;
mod session;

use std::sync::Arc;

use tidewire_core::http::HostLayer;
use tidewire_core::session::{BoxedServe, Serve};

pub use config::SseConfig;
pub use session::{SseReceiver, SseSender, SseTransport};
pub use tidewire_core::http::HttpRequestInfo;

use handlers::State;

/// A legacy HTTP+SSE endpoint pair. Cheap to clone; clones share the session table.
#[derive(Clone, Debug)]
pub struct LegacySse {
    state: Arc<State>,
}

impl LegacySse {
    /// A server with `config`; `make_driver` starts the engine of each new session (a
    /// `tidewire_server::Server`, or any `Fn(transport) -> Driver`: see [`Serve`]). Drivers are spawned on the
    /// current tokio runtime.
    pub fn new(config: SseConfig, make_driver: impl Serve<SseTransport>) -> Self {
        Self {
            state: Arc::new(State::new(config, BoxedServe::new(make_driver))),
        }
    }

    /// An axum router with the stream at `sse_path` (GET) and the message endpoint at
    /// `post_path` (POST). The `endpoint` event names `post_path` as given, so merge the router
    /// at the root of your app (or pass the full path).
    pub fn router(&self, sse_path: &str, post_path: &str) -> axum::Router {
        let post_path: Arc<str> = post_path.into();
        axum::Router::new()
            .route(
                sse_path,
                axum::routing::get({
                    let post_path = post_path.clone();
                    move |state, principal| {
                        handlers::open_stream(state, principal, post_path.clone())
                    }
                }),
            )
            .route(
                post_path.as_ref(),
                axum::routing::post(handlers::post_message),
            )
            .with_state(self.state.clone())
            .layer(HostLayer::new(self.state.config.limits.hosts.clone()))
    }

    /// Sessions open now.
    pub fn session_count(&self) -> usize {
        self.state.sessions.len()
    }

    /// Ends every session: their streams close and their engines stop.
    pub fn close_all(&self) {
        self.state.sessions.end_all();
    }
}
