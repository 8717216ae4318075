//! The WebSocket server: one axum route; each upgraded connection is one MCP session.
//!
//! ```no_run
//! # async fn demo(make_driver: impl Fn(tidewire_ws::WsTransport) -> tidewire_core::session::Driver + Send + Sync + 'static) -> std::io::Result<()> {
//! use tidewire_ws::server::{WebSocket, WsConfig};
//!
//! // `make_driver` starts one engine session per connection, e.g.
//! // a `tidewire_server::Server` (cloned per connection), or any `Fn(transport) -> Driver`.
//! let ws = WebSocket::new(WsConfig::default(), make_driver);
//! let app = axum::Router::new().merge(ws.router("/ws"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! - The upgrade is checked first: `Host` (loopback only by default) and `Origin` (this
//!   server's own origin only by default, plus those allowed; see
//!   [`tidewire_core::http::HostPolicy::same_origin`]) → 403; past
//!   [`WsConfig::max_sessions`], or while the server drains
//!   ([`Lifecycle`]) → 503 with `Retry-After`. A request that is no WebSocket
//!   upgrade gets axum's 4xx answer.
//! - The subprotocol `mcp` is chosen when the client offers it (browsers require the echo);
//!   a client that offers no subprotocol is served too, one that offers only others is
//!   refused with 400.
//! - Framing, limits, keep-alive and close codes are those of the crate docs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::extract::State as Extract;
use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket as Socket, WebSocketUpgrade};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt, StreamExt};
use tidewire_core::http::HostLayer;
use tidewire_core::http::HostPolicy;
use tidewire_core::http::ServerLimits;
use tidewire_core::lifecycle::Lifecycle;
use tidewire_core::session::Serve;
use tidewire_core::transport::{AccessLease, Codec, Principal};
use tokio_util::sync::CancellationToken;

use crate::SUBPROTOCOL;
use crate::connection::{self, Frame, ReadFailure, Settings, WsTransport};

type MakeDriver = dyn Serve<WsTransport>;

/// Settings of a [`WebSocket`].
///
/// ```
/// use std::time::Duration;
/// use tidewire_ws::server::WsConfig;
///
/// let config = WsConfig::default()
///     .ping_interval(Duration::from_secs(10))
///     .allow_origin("https://app.example.com");
/// ```
#[derive(Debug, Clone)]
pub struct WsConfig {
    limits: ServerLimits,
    ping_interval: Duration,
    pong_timeout: Duration,
    queue: usize,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            limits: ServerLimits {
                // Browsers let any page open a WebSocket anywhere: only our own origin by
                // default.
                hosts: HostPolicy::default().same_origin(),
                ..ServerLimits::default()
            },
            ping_interval: Duration::from_secs(20),
            pong_timeout: Duration::from_secs(20),
            queue: 64,
        }
    }
}

impl WsConfig {
    // The connection is the session: `max_sessions` bounds connections. `allow_origin` adds to
    // the default, which is this server's own origin (the request's `Host`) and requests
    // without `Origin`.
    tidewire_core::__server_limit_setters!(common);

    /// After this long without hearing from the client, ping it (default 20 s).
    #[must_use]
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = interval.max(Duration::from_millis(1));
        self
    }

    /// A client silent for the ping interval plus this long is dropped (default 20 s).
    #[must_use]
    pub fn pong_timeout(mut self, timeout: Duration) -> Self {
        self.pong_timeout = timeout.max(Duration::from_millis(1));
        self
    }
}

/// A WebSocket MCP endpoint. Cheap to clone; clones share the connection count.
#[derive(Clone)]
pub struct WebSocket {
    state: Arc<State>,
}

impl std::fmt::Debug for WebSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocket")
            .field("connections", &self.connection_count())
            .finish_non_exhaustive()
    }
}

struct State {
    config: WsConfig,
    make_driver: Box<MakeDriver>,
    connections: AtomicUsize,
    /// The server's: while it drains, new connections get 503.
    lifecycle: Lifecycle,
    /// Cancelled by [`WebSocket::close_all`]: every connection ends.
    closing: CancellationToken,
}

impl WebSocket {
    /// A server with `config`; `make_driver` starts the engine of each connection (a
    /// `tidewire_server::Server`, or any `Fn(transport) -> Driver`: see [`Serve`]). Drivers are spawned on the
    /// current tokio runtime.
    pub fn new(config: WsConfig, make_driver: impl Serve<WsTransport>) -> Self {
        let lifecycle = make_driver.lifecycle().unwrap_or_default();
        Self {
            state: Arc::new(State {
                config,
                make_driver: Box::new(make_driver),
                connections: AtomicUsize::new(0),
                lifecycle,
                closing: CancellationToken::new(),
            }),
        }
    }

    /// An axum router upgrading GET requests at `path`.
    pub fn router(&self, path: &str) -> axum::Router {
        axum::Router::new()
            .route(path, axum::routing::get(upgrade))
            .with_state(self.state.clone())
            .layer(HostLayer::new(self.state.config.limits.hosts.clone()))
    }

    /// Connections open now.
    pub fn connection_count(&self) -> usize {
        self.state.connections.load(Ordering::Acquire)
    }

    /// Ends every connection, those opened later too (their engines stop; for a shutdown,
    /// after the server drained, so nothing is in flight).
    pub fn close_all(&self) {
        self.state.closing.cancel();
    }
}

fn refuse(status: StatusCode, text: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        )],
        text,
    )
        .into_response()
}

fn offers(headers: &HeaderMap) -> (bool, bool) {
    let mut any = false;
    let mut mcp = false;
    for value in headers.get_all(header::SEC_WEBSOCKET_PROTOCOL) {
        for item in value.to_str().unwrap_or_default().split(',') {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            any = true;
            mcp |= item == SUBPROTOCOL;
        }
    }
    (any, mcp)
}

async fn upgrade(
    Extract(state): Extract<Arc<State>>,
    headers: HeaderMap,
    principal: Option<axum::Extension<Principal>>,
    lease: Option<axum::Extension<AccessLease>>,
    ws: WebSocketUpgrade,
) -> Response {
    let principal = principal.map(|p| p.0);
    let lease = lease.map(|l| l.0);
    let (offered_any, offered_mcp) = offers(&headers);
    if offered_any && !offered_mcp {
        return refuse(
            StatusCode::BAD_REQUEST,
            format!(
                "Bad Request: this endpoint speaks the WebSocket subprotocol {SUBPROTOCOL:?} only"
            ),
        );
    }
    if state.lifecycle.is_draining() || state.closing.is_cancelled() {
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "Service Unavailable: the server is shutting down; retry, another server will \
             answer"
                .to_owned(),
        );
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(tidewire_core::lifecycle::DRAINING_RETRY_AFTER_SECS),
        );
        return response;
    }
    if state.connections.load(Ordering::Acquire) >= state.config.limits.max_sessions {
        let mut response = refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Service Unavailable: the server holds its maximum of {} connections; retry later",
                state.config.limits.max_sessions
            ),
        );
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        return response;
    }
    let limit = state.config.limits.max_message_size;
    ws.protocols([SUBPROTOCOL])
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| serve(state, socket, principal, lease))
}

/// Serves one connection, until it closes or, when an authentication layer leased it, until
/// its token expires or is found no longer valid (the connection is then dropped).
async fn serve(
    state: Arc<State>,
    socket: Socket,
    principal: Option<Principal>,
    lease: Option<AccessLease>,
) {
    state.connections.fetch_add(1, Ordering::AcqRel);
    let _count = Decrement(state.clone());
    let config = &state.config;
    let settings = Settings {
        codec: Codec::new(config.limits.max_message_size),
        ping_interval: config.ping_interval,
        pong_timeout: config.pong_timeout,
        queue: config.queue,
    };
    let (sink, stream) = socket.split();
    let sink = sink.with(|frame: Frame| async move { Ok::<_, axum::Error>(to_axum(frame)) });
    let stream = stream.map(|item| match item {
        Ok(message) => Ok(from_axum(message)),
        Err(e) => Err(ReadFailure::classify(e.to_string())),
    });
    let transport =
        connection::start(Box::pin(sink), Box::pin(stream), settings).acting_for(principal);
    let served = state.make_driver.serve_connection(transport);
    let ended = async move {
        match lease {
            Some(lease) => lease.ended().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        outcome = served => {
            if let Err(error) = outcome {
                tracing::debug!(%error, "a WebSocket session's engine stopped");
            }
        }
        why = ended => tracing::info!("a WebSocket connection closed: {why}"),
        () = state.closing.cancelled() => tracing::debug!("a WebSocket connection closed by close_all"),
    }
}

struct Decrement(Arc<State>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

fn to_axum(frame: Frame) -> Message {
    match frame {
        Frame::Text(text) => Message::Text(Utf8Bytes::from(text)),
        Frame::Binary => Message::Binary(bytes::Bytes::new()),
        Frame::Ping(data) => Message::Ping(data),
        Frame::Pong => Message::Pong(bytes::Bytes::new()),
        Frame::Close(frame) => Message::Close(frame.map(|(code, reason)| CloseFrame {
            code,
            reason: Utf8Bytes::from(reason),
        })),
    }
}

fn from_axum(message: Message) -> Frame {
    match message {
        Message::Text(text) => Frame::Text(text.as_str().to_owned()),
        Message::Binary(_) => Frame::Binary,
        Message::Ping(data) => Frame::Ping(data),
        Message::Pong(_) => Frame::Pong,
        Message::Close(frame) => {
            Frame::Close(frame.map(|f| (f.code, f.reason.as_str().to_owned())))
        }
    }
}
