//! A scriptable fake Streamable HTTP server for the client tests: each test gives it a handler
//! that answers every HTTP request (with raw JSON or raw SSE text, so every byte on the wire is
//! under the test's control), and it records every request it receives.

#![allow(dead_code)]

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tidewire_client::Client;
use tidewire_core::schema::Implementation;
use tidewire_http::client::{HttpClientHandle, ReconnectPolicy, StreamableHttpConnector};
use tokio::sync::{Notify, mpsc};

/// The most any test may take.
pub use super::LIMIT;

/// Runs `future`, failing the test if it takes longer than [`LIMIT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("the test took too long")
}

/// One HTTP request the fake received.
#[derive(Debug, Clone)]
pub struct Incoming {
    pub method: Method,
    pub headers: HeaderMap,
    /// The JSON body, if any.
    pub body: Option<Value>,
    pub at: Instant,
}

impl Incoming {
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `Mcp-Session-Id` header.
    pub fn session(&self) -> Option<&str> {
        self.header("mcp-session-id")
    }

    /// The JSON-RPC method of the body.
    pub fn rpc_method(&self) -> Option<&str> {
        self.body.as_ref()?.get("method")?.as_str()
    }

    /// The JSON-RPC id of the body.
    pub fn id(&self) -> Option<Value> {
        self.body.as_ref()?.get("id").cloned()
    }

    /// The tool a `tools/call` body names (empty for anything else).
    pub fn tool(&self) -> &str {
        self.body
            .as_ref()
            .and_then(|b| b.pointer("/params/name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// True for a POST carrying `method`.
    pub fn is_post(&self, method: &str) -> bool {
        self.method == Method::POST && self.rpc_method() == Some(method)
    }
}

/// Everything the fake received, in order, with a way to wait for what a test expects.
#[derive(Debug, Default)]
pub struct Log {
    entries: Mutex<Vec<Incoming>>,
    changed: Notify,
}

impl Log {
    fn record(&self, incoming: Incoming) {
        self.entries.lock().expect("log lock").push(incoming);
        self.changed.notify_waiters();
    }

    /// Everything so far.
    pub fn all(&self) -> Vec<Incoming> {
        self.entries.lock().expect("log lock").clone()
    }

    /// The requests with this HTTP method.
    pub fn with_method(&self, method: &Method) -> Vec<Incoming> {
        self.all()
            .into_iter()
            .filter(|i| i.method == *method)
            .collect()
    }

    /// Waits until `check` finds what it looks for in the log.
    pub async fn wait_for<T>(&self, mut check: impl FnMut(&[Incoming]) -> Option<T>) -> T {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(found) = check(&self.entries.lock().expect("log lock")) {
                return found;
            }
            changed.await;
        }
    }

    /// Waits until `count` requests match `matches`, and returns them.
    pub async fn wait_count(
        &self,
        count: usize,
        matches: impl Fn(&Incoming) -> bool,
    ) -> Vec<Incoming> {
        self.wait_for(|all| {
            let found: Vec<Incoming> = all.iter().filter(|i| matches(i)).cloned().collect();
            (found.len() >= count).then_some(found)
        })
        .await
    }
}

type Handler = Arc<dyn Fn(Incoming) -> BoxFuture<'static, Response> + Send + Sync>;

#[derive(Clone)]
struct AppState {
    log: Arc<Log>,
    handler: Handler,
}

/// A running fake server; it stops when dropped.
pub struct Fake {
    pub url: String,
    pub log: Arc<Log>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts a fake server on 127.0.0.1 answering every request at `/mcp` with `handler`.
pub async fn serve<F, Fut>(handler: F) -> Fake
where
    F: Fn(Incoming) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Response> + Send + 'static,
{
    let handler: Handler = Arc::new(move |incoming| Box::pin(handler(incoming)));
    let log = Arc::new(Log::default());
    let state = AppState {
        log: log.clone(),
        handler,
    };
    let app = Router::new()
        .route("/mcp", axum::routing::any(endpoint))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let addr = listener.local_addr().expect("local addr");
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Fake {
        url: format!("http://{addr}/mcp"),
        log,
        task,
    }
}

async fn endpoint(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let incoming = Incoming {
        method,
        headers,
        body: serde_json::from_slice(&body).ok(),
        at: Instant::now(),
    };
    state.log.record(incoming.clone());
    (state.handler)(incoming).await
}

// ---- replies ----

/// `200 application/json` with `value`.
pub fn json_reply(value: Value) -> Response {
    (
        StatusCode::OK,
        [("content-type", "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// `202 Accepted`, no body.
pub fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// A status with a plain-text body.
pub fn status(code: StatusCode, body: &str) -> Response {
    (code, body.to_owned()).into_response()
}

/// Adds `Mcp-Session-Id: id`.
pub fn with_session(mut response: Response, id: &str) -> Response {
    response.headers_mut().insert(
        "mcp-session-id",
        HeaderValue::from_str(id).expect("session id"),
    );
    response
}

/// An SSE reply with these events, ended after the last one.
pub fn sse_reply(events: Vec<String>) -> Response {
    let stream = futures::stream::iter(
        events
            .into_iter()
            .map(|e| Ok::<_, Infallible>(Bytes::from(e))),
    );
    sse_response(Body::from_stream(stream))
}

/// An SSE reply that stays open: send events with the returned sender (and its clones); the
/// stream ends when every sender is dropped.
pub fn sse_open() -> (mpsc::UnboundedSender<String>, Response) {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(Bytes::from(event)), rx))
    });
    (tx, sse_response(Body::from_stream(stream)))
}

fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

/// One `message` event, with an id when given.
pub fn message_event(id: Option<&str>, message: &Value) -> String {
    let id = id.map(|i| format!("id: {i}\n")).unwrap_or_default();
    format!("{id}event: message\ndata: {message}\n\n")
}

/// A priming event: an id, maybe a retry, and empty data.
pub fn priming(id: &str, retry_ms: Option<u64>) -> String {
    let retry = retry_ms
        .map(|r| format!("retry: {r}\n"))
        .unwrap_or_default();
    format!("id: {id}\n{retry}data: \n\n")
}

// ---- JSON-RPC bodies ----

/// The result of `initialize`.
pub fn init_result(id: &Value, version: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {
            "protocolVersion": version,
            "capabilities": {"tools": {}, "logging": {}, "resources": {"subscribe": true}},
            "serverInfo": {"name": "fake-http", "version": "1.0.0"},
        }
    })
}

/// A `tools/call` result with one text block.
pub fn text_result(id: &Value, text: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}]}
    })
}

/// A result.
pub fn result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A notification.
pub fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

// ---- the client side ----

/// A fast reconnect policy for tests.
pub fn quick_policy() -> ReconnectPolicy {
    ReconnectPolicy::default()
        .initial_delay(Duration::from_millis(20))
        .max_delay(Duration::from_millis(200))
        .max_attempts(4)
}

/// The transport builder for `fake`, with test settings.
pub fn transport_for(fake: &Fake) -> StreamableHttpConnector {
    StreamableHttpConnector::new(fake.url.clone())
        .reconnect(quick_policy())
        .request_timeout(Duration::from_secs(5))
}

/// Connects a client over `builder`'s transport.
pub async fn connect(builder: StreamableHttpConnector) -> (Client, HttpClientHandle) {
    let transport = builder
        .connect()
        .await
        .expect("a valid transport configuration");
    let handle = transport.handle();
    // The fake speaks the session era only: no `server/discover` probe first.
    let client = Client::builder(Implementation::new("http-test-client", "0.1.0"))
        .era(tidewire_client::Era::Legacy)
        .connect(transport)
        .await
        .expect("the client connects");
    (client, handle)
}

/// Calls `tool` through `client` in a task of its own, once `fake` has the call's POST.
pub async fn call_in_flight(
    client: &Client,
    fake: &Fake,
    tool: &'static str,
) -> tokio::task::JoinHandle<
    Result<tidewire_core::schema::CallToolResult, tidewire_client::ClientError>,
> {
    let call = tokio::spawn({
        let client = client.clone();
        async move { client.call_tool(tool, json!({})).await }
    });
    fake.log
        .wait_for(|all| all.iter().any(|r| r.is_post("tools/call")).then_some(()))
        .await;
    call
}

/// The first text block of a tool result.
pub fn first_text(result: &tidewire_core::schema::CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|c| c.as_text().map(str::to_owned))
        .unwrap_or_default()
}
