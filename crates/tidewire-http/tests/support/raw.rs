//! What the Streamable HTTP server tests share: the demo server plus a `burst` tool, started on
//! a loopback port, and a hand-rolled client that controls every header.

#![allow(dead_code)]

use eventsource_stream::Eventsource;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tidewire_core::schema::{CallToolResult, EmptyParams, ResourceListChangedNotification};
use tidewire_core::transport::Route;
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_server::Context;
use tokio::time::timeout;

pub use super::LIMIT;

#[derive(Deserialize, JsonSchema)]
pub struct Burst {
    /// How many `resources/list_changed` to send, unrelated to the request.
    pub n: u64,
}

/// The demo server plus `burst`, which sends `n` unrelated notifications (GET stream).
pub fn test_server() -> tidewire_server::Server {
    tidewire_demo::demo_builder()
        .tool(
            "burst",
            "Sends n list_changed notifications",
            |args: Burst, ctx: Context| async move {
                // To this client only, unrelated to the request (so on the GET stream), waiting
                // for room as it goes: a broadcast would drop what does not fit in the queue.
                let Some(peer) = ctx.peer() else {
                    return Err(tidewire_server::ToolError::new("burst needs a session"));
                };
                let unrelated = peer.with_route(Route::Unrelated);
                for _ in 0..args.n {
                    unrelated
                        .notify::<ResourceListChangedNotification>(EmptyParams::new())
                        .await?;
                }
                Ok(CallToolResult::text(format!("sent {}", args.n)))
            },
        )
        .build()
}

pub async fn start(config: HttpConfig) -> (String, StreamableHttp) {
    start_with(config, test_server()).await
}

/// Serves `server` at `/mcp` on a loopback port; its URL and the endpoint.
pub async fn start_with(
    config: HttpConfig,
    server: tidewire_server::Server,
) -> (String, StreamableHttp) {
    let mcp = StreamableHttp::new(config, server);
    let app = mcp.router("/mcp");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), mcp)
}

/// A hand-rolled MCP-over-HTTP client, so every header is under the test's control.
#[derive(Clone)]
pub struct Raw {
    pub http: reqwest::Client,
    pub url: String,
    pub session: Option<String>,
}

pub fn init_body(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
}

impl Raw {
    pub fn new(url: &str) -> Self {
        Self {
            // Every request fails after LIMIT rather than hanging the test.
            http: reqwest::Client::builder()
                .timeout(LIMIT)
                .build()
                .expect("an HTTP client"),
            url: url.to_owned(),
            session: None,
        }
    }

    pub fn post(&self, body: &Value) -> reqwest::RequestBuilder {
        self.post_with(body, &[])
    }

    /// A POST whose default headers are replaced by `overrides`.
    pub fn post_with(
        &self,
        body: &Value,
        overrides: &[(&'static str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut headers = reqwest::header::HeaderMap::new();
        let mut set = |k: &'static str, v: &str| {
            headers.insert(
                k,
                reqwest::header::HeaderValue::from_str(v).expect("header value"),
            );
        };
        set("accept", "application/json, text/event-stream");
        set("content-type", "application/json");
        set("mcp-protocol-version", "2025-11-25");
        if let Some(session) = &self.session {
            set("mcp-session-id", session);
        }
        for (k, v) in overrides {
            set(k, v);
        }
        self.http
            .post(&self.url)
            .headers(headers)
            .body(body.to_string())
    }

    pub fn get(&self, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-11-25");
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        request
    }

    /// `initialize` + `initialized`; keeps the session id.
    pub async fn initialize(&mut self) -> Value {
        let response = self.post(&init_body(0)).send().await.expect("initialize");
        assert_eq!(response.status(), 200);
        self.session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let messages = read_messages(response).await;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self.post(&initialized).send().await.expect("initialized");
        assert_eq!(ack.status(), 202);
        assert!(
            ack.text().await.expect("body").is_empty(),
            "202 has no body"
        );
        messages.last().cloned().expect("the initialize response")
    }

    /// POSTs a request and collects every message of its reply (SSE or JSON).
    pub async fn call(&self, body: &Value) -> Vec<Value> {
        let response = self.post(body).send().await.expect("post");
        assert_eq!(response.status(), 200, "{body}");
        read_messages(response).await
    }
}

pub fn tool_call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

pub async fn json_of(response: reqwest::Response) -> Result<Value, String> {
    let bytes = response.bytes().await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// The JSON-RPC messages of a reply: one JSON body, or the data of each SSE event.
pub async fn read_messages(response: reqwest::Response) -> Vec<Value> {
    let is_sse = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return vec![json_of(response).await.expect("json body")];
    }
    let mut events = response.bytes_stream().eventsource();
    let mut out = Vec::new();
    while let Some(event) = timeout(LIMIT, events.next()).await.expect("in time") {
        let event = event.expect("valid SSE");
        if event.data.is_empty() {
            continue; // the priming event
        }
        out.push(serde_json::from_str(&event.data).expect("JSON data"));
    }
    out
}
