//! A small fake MCP server written against the core `Handler` trait in raw JSON, run over the
//! in-memory transport, and helpers shared by the client tests.

#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tidewire_client::{Client, ClientBuilder, ClientError};
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request, RequestId};
use tidewire_core::schema::Implementation;
use tidewire_core::session::{Handler, Peer, RequestContext, Session, SessionOptions};
use tidewire_core::transport::memory;
use tokio::sync::mpsc;

/// The most any test may take.
pub const LIMIT: Duration = Duration::from_secs(10);

/// Runs `future`, failing the test if it takes longer than [`LIMIT`].
pub async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future)
        .await
        .expect("the test took too long")
}

/// What the fake server received, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Request { method: String, params: Value },
    Notification { method: String, params: Value },
}

/// How `tools/list` pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// Three pages: `a b`, `c d`, `e`.
    Three,
    /// A new cursor on every page, forever.
    Endless,
    /// The same cursor on every page after the first.
    Repeat,
}

/// The fake server's behaviour.
#[derive(Debug, Clone)]
pub struct FakeServer {
    /// The version to answer `initialize` with; `None` echoes the client's.
    pub version: Option<String>,
    pub pages: Pages,
}

impl Default for FakeServer {
    fn default() -> Self {
        Self {
            version: None,
            pages: Pages::Three,
        }
    }
}

impl FakeServer {
    pub fn answering(version: &str) -> Self {
        Self {
            version: Some(version.to_owned()),
            ..Self::default()
        }
    }
}

struct FakeHandler {
    config: FakeServer,
    seen: mpsc::UnboundedSender<Seen>,
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": format!("tool {name}"),
           "inputSchema": {"type": "object"}})
}

fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

fn internal(e: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::internal(e)
}

impl FakeHandler {
    fn tools_page(&self, cursor: Option<&str>) -> Result<Value, ErrorObject> {
        match (self.config.pages, cursor) {
            (_, Some("garbage")) => Ok(json!({"tools": "not a list"})),
            (Pages::Three, None) => {
                Ok(json!({"tools": [tool("a"), tool("b")], "nextCursor": "p2"}))
            }
            (Pages::Three, Some("p2")) => {
                Ok(json!({"tools": [tool("c"), tool("d")], "nextCursor": "p3"}))
            }
            (Pages::Three, Some("p3")) => Ok(json!({"tools": [tool("e")]})),
            (Pages::Endless, cursor) => {
                let n: u64 = cursor.and_then(|c| c.parse().ok()).unwrap_or(0);
                Ok(json!({"tools": [tool(&format!("t{n}"))], "nextCursor": (n + 1).to_string()}))
            }
            (Pages::Repeat, _) => Ok(json!({"tools": [tool("r")], "nextCursor": "again"})),
            (_, Some(other)) => Err(ErrorObject::invalid_params(format!("bad cursor {other}"))),
        }
    }

    async fn call_tool(&self, params: &Value, ctx: &RequestContext) -> Result<Value, ErrorObject> {
        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
        match params["name"].as_str().unwrap_or_default() {
            "echo" => Ok(json!({
                "content": [{"type": "text", "text": args.to_string()}],
                "structuredContent": args,
            })),
            "count" => {
                let n = args["n"].as_u64().unwrap_or(3);
                for i in 1..=n {
                    ctx.report_progress(i as f64, Some(n as f64), Some(format!("step {i}")))
                        .await
                        .map_err(internal)?;
                }
                Ok(text_result(format!("counted {n}")))
            }
            "hang" => {
                ctx.report_progress(1.0, None, Some("started".into()))
                    .await
                    .map_err(internal)?;
                std::future::pending::<()>().await;
                Ok(Value::Null)
            }
            "slow" => {
                let n = args["n"].as_u64().unwrap_or(1);
                let every = Duration::from_millis(args["every_ms"].as_u64().unwrap_or(10));
                for i in 1..=n {
                    tokio::time::sleep(every).await;
                    ctx.report_progress(i as f64, Some(n as f64), None)
                        .await
                        .map_err(internal)?;
                }
                Ok(text_result(format!("slept {n} times")))
            }
            "fail" => {
                Ok(json!({"content": [{"type": "text", "text": "it broke"}], "isError": true}))
            }
            other => Err(ErrorObject::invalid_params(format!("unknown tool {other}"))),
        }
    }
}

impl Handler for FakeHandler {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        let params = request.params.clone().unwrap_or(Value::Null);
        let _ = self.seen.send(Seen::Request {
            method: request.method.clone(),
            params: params.clone(),
        });
        match request.method.as_str() {
            "initialize" => {
                let version = self.config.version.clone().unwrap_or_else(|| {
                    params["protocolVersion"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                });
                Ok(json!({
                    "protocolVersion": version,
                    "capabilities": {
                        "tools": {"listChanged": true},
                        "resources": {"subscribe": true, "listChanged": true},
                        "prompts": {},
                        "logging": {},
                        "completions": {}
                    },
                    "serverInfo": {"name": "fake-server", "version": "0.0.1"},
                    "instructions": "Use the tools."
                }))
            }
            "tools/list" => self.tools_page(params["cursor"].as_str()),
            "tools/call" => self.call_tool(&params, &ctx).await,
            "resources/list" => match params["cursor"].as_str() {
                None => Ok(json!({"resources": [{"uri": "file:///a", "name": "a"}],
                                  "nextCursor": "r2"})),
                Some("r2") => Ok(json!({"resources": [{"uri": "file:///b", "name": "b"}]})),
                Some(other) => Err(ErrorObject::invalid_params(other)),
            },
            "resources/templates/list" => Ok(json!({
                "resourceTemplates": [{"uriTemplate": "file:///{path}", "name": "files"}]
            })),
            "resources/read" => Ok(json!({
                "contents": [{"uri": params["uri"], "mimeType": "text/plain", "text": "contents"}]
            })),
            "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => Ok(json!({})),
            "prompts/list" => Ok(json!({"prompts": [{"name": "greet"}]})),
            "prompts/get" => Ok(json!({
                "description": "a greeting",
                "messages": [{"role": "user", "content": {"type": "text",
                               "text": format!("hello {}", params["arguments"]["name"].as_str().unwrap_or("?"))}}]
            })),
            "completion/complete" => Ok(json!({
                "completion": {"values": [format!("{}1", params["argument"]["value"].as_str().unwrap_or_default())],
                               "hasMore": false}
            })),
            other => Err(ErrorObject::method_not_found(other)),
        }
    }

    fn handle_notification(&self, notification: Notification, _peer: &Peer) {
        let _ = self.seen.send(Seen::Notification {
            method: notification.method,
            params: notification.params.unwrap_or(Value::Null),
        });
    }
}

/// The server end of a test connection.
pub struct Harness {
    /// The fake server's handle to the client (to send it requests and notifications).
    pub server: Peer,
    /// What the fake server received, in order.
    pub seen: mpsc::UnboundedReceiver<Seen>,
}

impl Harness {
    /// The next thing the server received.
    pub async fn next(&mut self) -> Seen {
        within(self.seen.recv())
            .await
            .expect("the fake server is gone")
    }

    /// Skips ahead to the next notification called `method` and returns its params.
    pub async fn notification(&mut self, method: &str) -> Value {
        loop {
            if let Seen::Notification { method: m, params } = self.next().await
                && m == method
            {
                return params;
            }
        }
    }

    /// Skips ahead to the `notifications/cancelled` for `id` and returns its reason.
    pub async fn cancellation_of(&mut self, id: &RequestId) -> Option<String> {
        loop {
            let params = self.notification("notifications/cancelled").await;
            if RequestId::from_json(&params["requestId"]).as_ref() == Some(id) {
                return params["reason"].as_str().map(str::to_owned);
            }
        }
    }

    /// The requests received for `method` so far (without waiting).
    pub fn drain_requests(&mut self, method: &str) -> Vec<Value> {
        let mut found = Vec::new();
        while let Ok(seen) = self.seen.try_recv() {
            if let Seen::Request { method: m, params } = seen
                && m == method
            {
                found.push(params);
            }
        }
        found
    }
}

/// The client identity the tests use, in the session era (the fake server speaks it; the
/// stateless revision is tested against the real server in `tests/tests/client_stateless.rs`).
pub fn builder() -> ClientBuilder {
    ClientBuilder::new(Implementation::new("test-client", "9.9.9"))
        .era(tidewire_client::Era::Legacy)
}

/// Starts a fake server and connects `builder` to it.
pub async fn connect_to(
    config: FakeServer,
    builder: ClientBuilder,
) -> (Result<Client, ClientError>, Harness) {
    let (server_end, client_end) = memory::duplex();
    let (tx, seen) = mpsc::unbounded_channel();
    let server = Session::spawn(
        server_end,
        FakeHandler { config, seen: tx },
        SessionOptions::default(),
    );
    let client = within(builder.connect(client_end)).await;
    (client, Harness { server, seen })
}

/// Connects `builder` to a default fake server, which must accept it.
pub async fn connect(builder: ClientBuilder) -> (Client, Harness) {
    let (client, harness) = connect_to(FakeServer::default(), builder).await;
    (client.expect("the handshake succeeds"), harness)
}
