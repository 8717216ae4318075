//! The suite's stateless (2026-07-28) scenarios, each written once and run on every transport
//! that carries the stateless wire: in-memory, stdio and WebSocket (the era chosen per message)
//! and Streamable HTTP (one POST per request). Legacy HTTP+SSE carries sessions only.
//!
//! tidewire's client speaks the session era, so these scenarios drive the server with raw
//! JSON-RPC: through the core engine on the connection transports, through plain HTTP on
//! Streamable HTTP. The session-era scenarios are in `suite.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request};
use tidewire_core::session::{
    Handler, Peer, RequestContext, Session, SessionError, SessionOptions,
};
use tidewire_core::transport::Transport;
use tidewire_core::transport::memory as memory_transport;
use tidewire_stdio::client::{StderrMode, StdioConnector};
use tidewire_tests::harness::{self, HttpMode};
use tokio::sync::{Mutex, mpsc};
use tokio::time::timeout;

/// Every scenario gets this long, start to finish.
use tidewire_tests::LIMIT;

/// The transports of the stateless wire.
#[derive(Debug, Clone, Copy)]
enum Wire {
    Memory,
    Stdio,
    Http,
    WebSocket,
}

/// A client of the stateless wire: requests carry the `_meta` envelope; every notification the
/// server sends (on any request's stream) lands in `notes`, in arrival order.
struct Stateless {
    wire: Wire,
    via: Via,
    notes: Mutex<mpsc::UnboundedReceiver<Value>>,
    next_id: AtomicI64,
    /// Kept alive for the scenario (an in-process server, a child process).
    _keep: Vec<Box<dyn std::any::Any + Send + Sync>>,
}

enum Via {
    /// The core engine over a connection transport.
    Engine(Peer),
    /// One POST per request.
    Http {
        http: reqwest::Client,
        url: String,
        notes: mpsc::UnboundedSender<Value>,
    },
}

/// Hands every notification to the scenario.
#[derive(Clone)]
struct Notes(mpsc::UnboundedSender<Value>);

impl Handler for Notes {
    async fn handle_request(
        &self,
        request: Request,
        _ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        // The stateless wire has no server-to-client requests: this would be a defect.
        Err(ErrorObject::method_not_found(&format!(
            "{} (a server sent a request on the stateless wire)",
            request.method
        )))
    }

    fn handle_notification(&self, notification: Notification, _peer: &Peer) {
        let _ = self
            .0
            .send(json!({"method": notification.method, "params": notification.params}));
    }
}

fn envelope(mut params: Value, extra_meta: Value) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "suite", "version": "1"},
    });
    if let (Value::Object(meta), Value::Object(extra)) = (&mut meta, extra_meta) {
        meta.extend(extra);
    }
    params["_meta"] = meta;
    params
}

impl Stateless {
    async fn connect(wire: Wire) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut keep: Vec<Box<dyn std::any::Any + Send + Sync>> = Vec::new();
        let via = match wire {
            Wire::Memory => {
                let server = tidewire_tests::suite_server();
                let (a, b) = memory_transport::duplex();
                let (_peer, driver) = server.serve(a);
                tokio::spawn(driver);
                keep.push(Box::new(server));
                Via::Engine(engine(b, tx))
            }
            Wire::Stdio => {
                let child = StdioConnector::command(env!("CARGO_BIN_EXE_tidewire-demo-stdio"))
                    .stderr(StderrMode::Inherit)
                    .spawn()
                    .expect("spawn the stdio server");
                keep.push(Box::new(child.handle()));
                Via::Engine(engine(child, tx))
            }
            Wire::WebSocket => {
                let (url, server, ws) =
                    harness::start_ws(tidewire_ws::server::WsConfig::default()).await;
                keep.push(Box::new(server));
                keep.push(Box::new(ws));
                let transport = tidewire_ws::client::WebSocketConnector::new(url)
                    .connect()
                    .await
                    .expect("open the WebSocket");
                Via::Engine(engine(transport, tx))
            }
            Wire::Http => {
                let (url, server, http) = harness::start_http(HttpMode::Sse).await;
                keep.push(Box::new(server));
                keep.push(Box::new(http));
                Via::Http {
                    http: tidewire_tests::http_client(),
                    url,
                    notes: tx,
                }
            }
        };
        Self {
            wire,
            via,
            notes: Mutex::new(rx),
            next_id: AtomicI64::new(1),
            _keep: keep,
        }
    }

    /// Sends `method` with `params` (the envelope added, plus `extra_meta`): its result, or its
    /// error object as JSON.
    fn send(
        &self,
        method: &str,
        params: Value,
        extra_meta: Value,
    ) -> impl std::future::Future<Output = Result<Value, Value>> + Send + 'static {
        let params = envelope(params, extra_meta);
        let method = method.to_owned();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let via = match &self.via {
            Via::Engine(peer) => Ok(peer.clone()),
            Via::Http { http, url, notes } => Err((http.clone(), url.clone(), notes.clone())),
        };
        async move {
            match via {
                Ok(peer) => peer
                    .request_raw(&method, Some(params))
                    .await
                    .map_err(|e| match e {
                        SessionError::Remote(e) => serde_json::to_value(e).unwrap_or_default(),
                        other => json!({"code": 0, "message": other.to_string()}),
                    }),
                Err((http, url, notes)) => post(&http, &url, id, &method, params, &notes).await,
            }
        }
    }

    async fn call(&self, method: &str, params: Value) -> Result<Value, Value> {
        timeout(LIMIT, self.send(method, params, json!({})))
            .await
            .expect("answered in time")
    }

    /// The next notification, from any stream.
    async fn note(&self) -> Value {
        timeout(LIMIT, self.notes.lock().await.recv())
            .await
            .expect("a notification in time")
            .expect("the notification channel is open")
    }

    /// The notifications already here.
    async fn notes_now(&self) -> Vec<Value> {
        let mut notes = self.notes.lock().await;
        let mut out = Vec::new();
        while let Ok(note) = notes.try_recv() {
            out.push(note);
        }
        out
    }
}

fn engine<T: Transport>(transport: T, notes: mpsc::UnboundedSender<Value>) -> Peer {
    Session::spawn(transport, Notes(notes), SessionOptions::default())
}

/// One stateless POST: notifications go to `notes` as they come; the response is returned.
async fn post(
    http: &reqwest::Client,
    url: &str,
    id: i64,
    method: &str,
    params: Value,
    notes: &mpsc::UnboundedSender<Value>,
) -> Result<Value, Value> {
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
    {
        request = request.header(
            "mcp-name",
            tidewire_core::stateless::header_value::encode(name),
        );
    }
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let response = request.body(body.to_string()).send().await.expect("POST");
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let reply: Value = if sse {
        let mut events = response.bytes_stream().eventsource();
        loop {
            let event = events
                .next()
                .await
                .expect("the stream ends with the response")
                .expect("valid SSE");
            let message: Value = serde_json::from_str(&event.data).expect("JSON data");
            if message.get("id").is_some() && message.get("method").is_none() {
                break message;
            }
            assert!(
                message.get("id").is_none(),
                "a request on the stream: {message}"
            );
            let _ = notes.send(json!({"method": message["method"], "params": message["params"]}));
        }
    } else {
        serde_json::from_slice(&response.bytes().await.expect("body")).expect("a JSON body")
    };
    assert_eq!(reply["id"], id, "the response answers this request");
    match reply.get("error") {
        Some(error) => Err(error.clone()),
        None => Ok(reply["result"].clone()),
    }
}

/// Answers each question of an `input_required` result the way a client would.
fn answers(result: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for (key, question) in result["inputRequests"].as_object().into_iter().flatten() {
        let answer = match question["method"].as_str() {
            Some("elicitation/create") => {
                let field = question["params"]["requestedSchema"]["properties"]
                    .as_object()
                    .and_then(|p| p.keys().next().cloned())
                    .unwrap_or_else(|| "name".to_owned());
                json!({"action": "accept", "content": {field: "Ada"}})
            }
            Some("sampling/createMessage") => json!({
                "role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m",
            }),
            _ => json!({"roots": [{"uri": "file:///r"}]}),
        };
        out.insert(key.clone(), answer);
    }
    Value::Object(out)
}

// ----- the scenarios -----

async fn echo(s: &Stateless) {
    let result = s
        .call(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "héllo ✓"}}),
        )
        .await
        .expect("echo");
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["content"][0]["text"], "héllo ✓");
    assert!(result["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
}

async fn progress_rises_before_the_result(s: &Stateless) {
    let urls: Vec<String> = (1..=5)
        .map(|i| format!("https://example.test/{i}"))
        .collect();
    let result = timeout(
        LIMIT,
        s.send(
            "tools/call",
            json!({"name": "crawl", "arguments": {"urls": urls, "delay_ms": 5}}),
            json!({"progressToken": "p-1"}),
        ),
    )
    .await
    .expect("in time")
    .expect("crawl");
    assert_eq!(result["content"][0]["text"], "Crawled 5 URLs");
    let progress: Vec<f64> = s
        .notes_now()
        .await
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .inspect(|n| assert_eq!(n["params"]["progressToken"], "p-1"))
        .filter_map(|n| n["params"]["progress"].as_f64())
        .collect();
    assert_eq!(progress, [1.0, 2.0, 3.0, 4.0, 5.0], "{:?}", s.wire);
}

async fn questions_take_rounds(s: &Stateless) {
    for (tool, rounds, text) in [
        ("test_input_required_result_multi_round", 3, "Ada likes Ada"),
        (
            "test_input_required_result_multiple_inputs",
            2,
            "hi Ada (1 roots)",
        ),
    ] {
        let mut params = json!({"name": tool, "arguments": {}});
        let mut seen = 0;
        let result = loop {
            seen += 1;
            let result = s.call("tools/call", params.clone()).await.expect(tool);
            if result["resultType"] != "input_required" {
                break result;
            }
            assert!(seen < 5, "{tool} keeps asking");
            params["inputResponses"] = answers(&result);
            params["requestState"] = result["requestState"].clone();
        };
        assert_eq!(seen, rounds, "{tool}");
        assert_eq!(result["content"][0]["text"], text, "{tool}");
    }
    // An altered state is refused, not re-asked.
    let first = s
        .call(
            "tools/call",
            json!({"name": "test_input_required_result_tampered_state", "arguments": {}}),
        )
        .await
        .expect("round 1");
    let tampered = json!({
        "name": "test_input_required_result_tampered_state",
        "arguments": {},
        "inputResponses": answers(&first),
        "requestState": format!("{}-TAMPERED", first["requestState"].as_str().expect("state")),
    });
    let error = s.call("tools/call", tampered).await.expect_err("refused");
    assert_eq!(error["code"], -32602);
}

async fn listen_is_filtered_and_tagged(s: &Stateless) {
    let listen = tokio::spawn(s.send(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
        json!({}),
    ));
    let ack = s.note().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let id = ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
    assert!(!id.is_null());
    for trigger in ["test_trigger_prompt_change", "test_trigger_tool_change"] {
        s.call("tools/call", json!({"name": trigger, "arguments": {}}))
            .await
            .expect(trigger);
    }
    let changed = s.note().await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "not the prompt change"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        id
    );
    listen.abort();
}

async fn cancelling_stops_the_handler(s: &Stateless) {
    let urls: Vec<String> = (1..=10)
        .map(|i| format!("https://example.test/slow/{i}"))
        .collect();
    let crawl = tokio::spawn(s.send(
        "tools/call",
        json!({"name": "crawl", "arguments": {"urls": urls, "delay_ms": 200}}),
        json!({"progressToken": 7}),
    ));
    let mut reports = 0;
    while reports < 2 {
        if s.note().await["method"] == "notifications/progress" {
            reports += 1;
        }
    }
    // Dropping the call: the engine sends notifications/cancelled; on HTTP the POST closes.
    crawl.abort();
    let status = timeout(LIMIT, async {
        loop {
            let status = s
                .call(
                    "tools/call",
                    json!({"name": "crawl_status", "arguments": {}}),
                )
                .await
                .expect("crawl_status");
            let status: Value =
                serde_json::from_str(status["content"][0]["text"].as_str().unwrap_or("null"))
                    .expect("JSON status");
            // Each ask is a round trip: no sleep needed between them.
            if status["finished"] == true {
                break status;
            }
        }
    })
    .await
    .expect("the crawl stops");
    assert_eq!(status["cancelled"], true, "{status}");
    assert!(
        status["completed"].as_u64().is_some_and(|c| c < 10),
        "{status}"
    );
}

async fn logs_only_when_asked(s: &Stateless) {
    s.call(
        "tools/call",
        json!({"name": "test_logging_tool", "arguments": {}}),
    )
    .await
    .expect("quiet");
    let logs = |notes: &[Value]| {
        notes
            .iter()
            .filter(|n| n["method"] == "notifications/message")
            .count()
    };
    assert_eq!(logs(&s.notes_now().await), 0, "no logLevel, no logs");
    timeout(
        LIMIT,
        s.send(
            "tools/call",
            json!({"name": "test_logging_tool", "arguments": {}}),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        ),
    )
    .await
    .expect("in time")
    .expect("loud");
    assert_eq!(logs(&s.notes_now().await), 3);
}

async fn removed_methods_are_unknown(s: &Stateless) {
    for method in ["ping", "logging/setLevel", "resources/subscribe"] {
        let error = s.call(method, json!({})).await.expect_err(method);
        assert_eq!(error["code"], -32601, "{method}");
    }
    let discover = s
        .call("server/discover", json!({}))
        .await
        .expect("discover");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28")))
    );
}

async fn run<F, Fut>(wire: Wire, scenario: F)
where
    F: FnOnce(Arc<Stateless>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let s = Arc::new(
        timeout(LIMIT, Stateless::connect(wire))
            .await
            .unwrap_or_else(|_| panic!("connecting over {wire:?} took too long")),
    );
    timeout(LIMIT, scenario(s))
        .await
        .unwrap_or_else(|_| panic!("the scenario over {wire:?} took longer than {LIMIT:?}"));
}

/// Expands every scenario for every transport of the stateless wire.
macro_rules! suite {
    ($($scenario:ident),* $(,)?) => {
        suite!(@wire memory, Wire::Memory; $($scenario),*);
        suite!(@wire stdio, Wire::Stdio; $($scenario),*);
        suite!(@wire http, Wire::Http; $($scenario),*);
        suite!(@wire websocket, Wire::WebSocket; $($scenario),*);
    };
    (@wire $module:ident, $wire:expr; $($scenario:ident),*) => {
        mod $module {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    run($wire, |s| async move { super::$scenario(&s).await }).await;
                }
            )*
        }
    };
}

suite!(
    echo,
    progress_rises_before_the_result,
    questions_take_rounds,
    listen_is_filtered_and_tagged,
    cancelling_stops_the_handler,
    logs_only_when_asked,
    removed_methods_are_unknown,
);
