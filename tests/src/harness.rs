//! A client connected to the suite server over one transport: the thing each scenario gets.

use std::ffi::OsString;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tidewire_client::{Client, ClientBuilder};
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, Implementation, Root,
};
use tidewire_core::session::RequestContext;
use tidewire_core::transport::memory;
use tidewire_stdio::client::{ChildHandle, StderrMode, StdioConnector};

/// The transports the suite runs on.
#[derive(Debug, Clone)]
pub enum TransportUnderTest {
    /// The in-memory duplex transport, server in-process.
    Memory,
    /// The server as a child process over stdio.
    Stdio {
        /// The server program.
        program: OsString,
        /// Its arguments.
        args: Vec<OsString>,
    },
    /// Streamable HTTP, server in-process on a loopback port, in one of its modes.
    Http(HttpMode),
    /// Legacy HTTP+SSE (2024-11-05), server in-process on a loopback port.
    LegacySse,
    /// WebSocket (subprotocol `mcp`), server in-process on a loopback port.
    WebSocket,
    /// The stateless revision (2026-07-28) over one of memory, stdio, Streamable HTTP
    /// (`StatelessHttpConnector`) or WebSocket: the client in `Era::Modern`.
    Stateless(Box<TransportUnderTest>),
}

/// The Streamable HTTP server modes the suite runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpMode {
    /// Sessions, SSE replies, the GET stream.
    Sse,
    /// Sessions, one JSON body per request.
    Json,
    /// One-shot sessions (`HttpConfig::one_shot_sessions`): no session ids.
    OneShot,
}

impl TransportUnderTest {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Stdio { .. } => "stdio",
            Self::Http(HttpMode::Sse) => "http-sse",
            Self::Http(HttpMode::Json) => "http-json",
            Self::Http(HttpMode::OneShot) => "http-one-shot",
            Self::LegacySse => "legacy-sse",
            Self::WebSocket => "websocket",
            Self::Stateless(inner) => match **inner {
                Self::Memory => "memory-2026",
                Self::Stdio { .. } => "stdio-2026",
                Self::Http(_) => "http-2026",
                Self::WebSocket => "websocket-2026",
                _ => "stateless",
            },
        }
    }

    /// True on the stateless revision.
    pub fn is_stateless(&self) -> bool {
        matches!(self, Self::Stateless(_))
    }

    /// Why a scenario that needs `needs` cannot run on this transport, if it cannot.
    pub fn cannot(&self, needs: Needs) -> Option<&'static str> {
        if let Self::Stateless(inner) = self {
            return match needs {
                Needs::ProgressFromClient => Some(
                    "the stateless revision asks the client inside input_required results: \
                     no request reaches the client's handlers, so they report no progress back",
                ),
                Needs::Ping => Some("the stateless revision has no ping"),
                other => inner.cannot(other),
            };
        }
        // On sessions, progress back from the client needs what any server request needs, and
        // `ping` is always there.
        let needs = match needs {
            Needs::ProgressFromClient => Needs::ServerRequests,
            Needs::Ping => Needs::Nothing,
            other => other,
        };
        match (self, needs) {
            (Self::Http(HttpMode::Json | HttpMode::OneShot), Needs::Streaming) => Some(
                "one JSON body answers each request (JSON mode) or each POST stands alone \
                 (stateless): nothing related to a request can travel before its response",
            ),
            (Self::Http(HttpMode::Json | HttpMode::OneShot), Needs::ServerRequests) => {
                Some("the server cannot send requests to the client in this mode")
            }
            (Self::Http(HttpMode::OneShot), Needs::Session) => Some(
                "stateless: no session, so no GET stream, no subscriptions and no cancellation \
                 of a request served by another POST",
            ),
            (Self::Http(_) | Self::Memory | Self::LegacySse | Self::WebSocket, Needs::Stdio) => {
                Some("this scenario is about a child process")
            }
            _ => None,
        }
    }
}

/// What a scenario needs from its transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing special.
    Nothing,
    /// Notifications related to a request before its response (progress, logs).
    Streaming,
    /// Requests from the server to the client (sampling, elicitation, roots).
    ServerRequests,
    /// A session: state across requests, a GET stream, subscriptions, cancellation.
    Session,
    /// A child process.
    Stdio,
    /// Progress reported by the client's handlers back to the server (session era only).
    ProgressFromClient,
    /// `ping` (session era only).
    Ping,
}

/// How many server-to-client requests the canned handlers answered.
#[derive(Debug, Default)]
pub struct Counters {
    /// `sampling/createMessage` requests.
    pub sampling: AtomicUsize,
    /// `elicitation/create` requests.
    pub elicitation: AtomicUsize,
    /// `roots/list` requests.
    pub roots: AtomicUsize,
}

/// A connected client, what served it, and the counters of its handlers.
#[derive(Debug)]
pub struct Harness {
    /// The client.
    pub client: Client,
    /// Which transport.
    pub transport: &'static str,
    /// What the client's handlers were asked.
    pub counters: Arc<Counters>,
    /// The in-process server (memory, Streamable HTTP, legacy SSE, WebSocket).
    pub server: Option<tidewire_server::Server>,
    /// The child process, on stdio.
    pub child: Option<ChildHandle>,
    /// The HTTP endpoint and its URL, on Streamable HTTP.
    pub http: Option<(tidewire_http::server::StreamableHttp, String)>,
}

impl Harness {
    /// A harness around a client connected elsewhere (to a peer of another SDK, say).
    pub fn for_client(client: Client, transport: &'static str, counters: Arc<Counters>) -> Self {
        Self {
            client,
            transport,
            counters,
            server: None,
            child: None,
            http: None,
        }
    }

    /// Closes the client and, on stdio, shuts the child down.
    pub async fn finish(self) {
        self.client.close().await;
        if let Some(child) = self.child {
            let _ = child.shutdown().await;
        }
    }
}

/// The client every peer scenario uses: canned sampling, elicitation and roots answers, as in
/// the interop contract. Sampling reports progress 1, 2, 3 and elicitation 1, 2 back when the
/// server asked for it.
pub fn peer_client(counters: &Arc<Counters>) -> ClientBuilder {
    let sampling = counters.clone();
    let elicitation = counters.clone();
    // The session era unless asked otherwise: the stateless rows of the suite ask.
    Client::builder(Implementation::new("tidewire-suite-client", "0.1.0"))
        .era(tidewire_client::Era::Legacy)
        .sampling_handler(move |params: CreateMessageParams, ctx: RequestContext| {
            let counters = sampling.clone();
            async move {
                counters.sampling.fetch_add(1, Ordering::SeqCst);
                for step in 1..=3 {
                    ctx.report_progress(
                        f64::from(step),
                        Some(3.0),
                        Some(format!("thinking {step}/3")),
                    )
                    .await
                    .map_err(ErrorObject::internal)?;
                }
                let prompt = params
                    .messages
                    .first()
                    .and_then(|m| {
                        m.content
                            .iter()
                            .find_map(|c| c.as_text().map(str::to_owned))
                    })
                    .unwrap_or_default();
                Ok::<_, ErrorObject>(CreateMessageResult::text(
                    "peer-canned-model",
                    format!("canned answer to: {prompt}"),
                ))
            }
        })
        .elicitation_handler(move |_params: ElicitParams, ctx: RequestContext| {
            let counters = elicitation.clone();
            async move {
                counters.elicitation.fetch_add(1, Ordering::SeqCst);
                for step in 1..=2 {
                    ctx.report_progress(
                        f64::from(step),
                        Some(2.0),
                        Some(format!("asking {step}/2")),
                    )
                    .await
                    .map_err(ErrorObject::internal)?;
                }
                let mut content = std::collections::BTreeMap::new();
                content.insert("name".to_owned(), "peer-canned-name".into());
                Ok::<_, ErrorObject>(ElicitResult::accept(content))
            }
        })
        .roots_handler(CountingRoots(counters.clone()))
}

/// Serves the two canned roots and counts the requests.
#[derive(Debug)]
struct CountingRoots(Arc<Counters>);

impl tidewire_client::RootsHandler for CountingRoots {
    async fn list_roots(
        &self,
        _ctx: RequestContext,
    ) -> Result<tidewire_core::schema::ListRootsResult, ErrorObject> {
        self.0.roots.fetch_add(1, Ordering::SeqCst);
        Ok(tidewire_core::schema::ListRootsResult::new(vec![
            Root::new("file:///tmp/peer-root-a").with_name("root-a"),
            Root::new("file:///tmp/peer-root-b").with_name("root-b"),
        ]))
    }
}

/// Connects `builder` to the suite server over `transport`.
///
/// # Panics
/// When the connection cannot be made (a test failure).
pub async fn connect_with(
    transport: &TransportUnderTest,
    builder: ClientBuilder,
    counters: Arc<Counters>,
) -> Harness {
    match transport {
        TransportUnderTest::Memory => {
            let server = crate::suite_server();
            let (a, b) = memory::duplex();
            let (_peer, driver) = server.serve(a);
            tokio::spawn(driver);
            let client = builder.connect(b).await.expect("connect over memory");
            Harness {
                client,
                transport: "memory",
                counters,
                server: Some(server),
                child: None,
                http: None,
            }
        }
        TransportUnderTest::Stdio { program, args } => {
            let child = StdioConnector::command(program)
                .args(args)
                .stderr(StderrMode::Inherit)
                .spawn()
                .expect("spawn the stdio server");
            let handle = child.handle();
            let client = builder.connect(child).await.expect("connect over stdio");
            Harness {
                client,
                transport: "stdio",
                counters,
                server: None,
                child: Some(handle),
                http: None,
            }
        }
        TransportUnderTest::LegacySse => {
            let (url, server, _sse) = start_sse(tidewire_sse::server::SseConfig::default()).await;
            let client_transport = tidewire_sse::client::LegacySseConnector::new(url)
                .connect()
                .await
                .expect("open the legacy SSE stream");
            let client = builder
                .connect(client_transport)
                .await
                .expect("connect over legacy SSE");
            Harness {
                client,
                transport: transport.name(),
                counters,
                server: Some(server),
                child: None,
                http: None,
            }
        }
        TransportUnderTest::WebSocket => {
            let (url, server, _ws) = start_ws(tidewire_ws::server::WsConfig::default()).await;
            let client_transport = tidewire_ws::client::WebSocketConnector::new(url)
                .connect()
                .await
                .expect("open the WebSocket");
            let client = builder
                .connect(client_transport)
                .await
                .expect("connect over WebSocket");
            Harness {
                client,
                transport: transport.name(),
                counters,
                server: Some(server),
                child: None,
                http: None,
            }
        }
        TransportUnderTest::Stateless(inner) => {
            let builder = builder.era(tidewire_client::Era::Modern);
            if let TransportUnderTest::Http(_) = **inner {
                let (url, server, http) = start_http(HttpMode::Sse).await;
                let transport = tidewire_http::client::StatelessHttpConnector::new(url.clone())
                    .connect()
                    .await
                    .expect("a stateless HTTP transport");
                let client = builder
                    .connect(transport)
                    .await
                    .expect("connect over HTTP (2026-07-28)");
                Harness {
                    client,
                    transport: transport_name(transport_kind(inner)),
                    counters,
                    server: Some(server),
                    child: None,
                    http: Some((http, url)),
                }
            } else {
                let mut harness = Box::pin(connect_with(inner, builder, counters)).await;
                harness.transport = transport_name(transport_kind(inner));
                harness
            }
        }
        TransportUnderTest::Http(mode) => {
            let (url, server, http) = start_http(*mode).await;
            let url_for_harness = url.clone();
            let client_transport = tidewire_http::client::StreamableHttpConnector::new(url)
                .connect()
                .await
                .expect("an HTTP client transport");
            let client = builder
                .connect(client_transport)
                .await
                .expect("connect over HTTP");
            Harness {
                client,
                transport: transport.name(),
                counters,
                server: Some(server),
                child: None,
                http: Some((http, url_for_harness)),
            }
        }
    }
}

fn transport_kind(inner: &TransportUnderTest) -> TransportUnderTest {
    TransportUnderTest::Stateless(Box::new(inner.clone()))
}

fn transport_name(t: TransportUnderTest) -> &'static str {
    t.name()
}

/// Starts the suite server over legacy HTTP+SSE on a free loopback port; returns the stream's
/// URL (`…/sse`; messages go to `/messages`).
///
/// # Panics
/// When the port cannot be bound.
pub async fn start_sse(
    config: tidewire_sse::server::SseConfig,
) -> (
    String,
    tidewire_server::Server,
    tidewire_sse::server::LegacySse,
) {
    let server = crate::suite_server();
    let serving = server.clone();
    let sse = tidewire_sse::server::LegacySse::new(config, serving);
    let app = sse.router("/sse", "/messages");
    let addr = serve_on_loopback(app).await;
    (format!("http://{addr}/sse"), server, sse)
}

/// Starts the suite server over WebSocket on a free loopback port; returns its `ws://` URL.
///
/// # Panics
/// When the port cannot be bound.
pub async fn start_ws(
    config: tidewire_ws::server::WsConfig,
) -> (
    String,
    tidewire_server::Server,
    tidewire_ws::server::WebSocket,
) {
    let server = crate::suite_server();
    let serving = server.clone();
    let ws = tidewire_ws::server::WebSocket::new(config, serving);
    let app = ws.router("/ws");
    let addr = serve_on_loopback(app).await;
    (format!("ws://{addr}/ws"), server, ws)
}

async fn serve_on_loopback(app: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Starts the suite server over Streamable HTTP on a free loopback port; returns its URL.
///
/// # Panics
/// When the port cannot be bound.
pub async fn start_http(
    mode: HttpMode,
) -> (
    String,
    tidewire_server::Server,
    tidewire_http::server::StreamableHttp,
) {
    use tidewire_http::server::{HttpConfig, ResponseMode, StreamableHttp};
    let config = match mode {
        HttpMode::Sse => HttpConfig::default(),
        HttpMode::Json => HttpConfig::default().response_mode(ResponseMode::Json),
        HttpMode::OneShot => HttpConfig::default().one_shot_sessions(true),
    };
    let server = crate::suite_server();
    let serving = server.clone();
    let http = StreamableHttp::new(config, serving);
    let app = http.router("/mcp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("the bound address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), server, http)
}

/// Connects the standard peer client to the suite server over `transport`.
pub async fn connect(transport: &TransportUnderTest) -> Harness {
    let counters = Arc::new(Counters::default());
    connect_with(transport, peer_client(&counters), counters).await
}
