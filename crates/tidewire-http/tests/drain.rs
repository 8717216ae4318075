//! A draining server over Streamable HTTP: new sessions and stateless requests get 503 with
//! `Retry-After` at once, the request in flight runs to its end, and past the deadline what
//! still runs is cancelled with its session. And the stateless client sends a request refused
//! that way again.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::response::IntoResponse;
use tidewire_client::{Client, Era};
use tidewire_http::client::StatelessHttpConnector;
use tidewire_http::server::StreamableHttp;

use serde_json::{Value, json};
use support::raw::{LIMIT, Raw, init_body, json_of, start_with, tool_call};
use tidewire_core::schema::{CallToolResult, Implementation};
use tidewire_http::server::HttpConfig;
use tidewire_server::{Context, NoArgs, Server};
use tokio::sync::Notify;
use tokio::time::timeout;

/// A server whose `hold` tool tells `entered` it runs, then waits for `release`.
fn holding_server(entered: Arc<Notify>, release: Arc<Notify>) -> Server {
    Server::builder(Implementation::new("drain-test", "1.0"))
        .tool(
            "hold",
            "Waits to be released",
            move |_: NoArgs, _ctx: Context| {
                let (entered, release) = (entered.clone(), release.clone());
                async move {
                    entered.notify_one();
                    release.notified().await;
                    Ok(CallToolResult::text("done"))
                }
            },
        )
        .build()
}

fn stateless_discover() -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }}})
}

async fn refused_as_draining(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 503);
    assert_eq!(
        response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let body = json_of(response).await.expect("a JSON-RPC error body");
    assert_eq!(body["error"]["code"], -32000, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{body}"
    );
    body
}

#[tokio::test]
async fn a_draining_server_refuses_new_work_and_finishes_the_call_in_flight() {
    timeout(Duration::from_secs(60), async {
        let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let server = holding_server(entered.clone(), release.clone());
        let (url, mcp) = start_with(HttpConfig::default(), server.clone()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let call = tokio::spawn({
            let raw = raw.clone();
            async move { raw.call(&tool_call(1, "hold", json!({}))).await }
        });
        timeout(LIMIT, entered.notified()).await.expect("hold runs");
        assert_eq!(server.lifecycle().in_flight(), 1);

        let drain = tokio::spawn({
            let server = server.clone();
            async move { server.drain(LIMIT).await }
        });
        timeout(LIMIT, server.lifecycle().draining())
            .await
            .expect("the drain starts");
        assert!(
            mcp.lifecycle().is_draining(),
            "the endpoint sees the server's"
        );

        // A new session and a stateless request are turned away; the open session is not.
        let fresh = Raw::new(&url);
        refused_as_draining(fresh.post(&init_body(1)).send().await.expect("post")).await;
        let stateless = fresh
            .post_with(
                &stateless_discover(),
                &[
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", "server/discover"),
                ],
            )
            .send()
            .await
            .expect("post");
        let body = refused_as_draining(stateless).await;
        assert_eq!(body["id"], 7, "the refusal names the request");
        assert!(!drain.is_finished(), "a request is still in flight");

        release.notify_one();
        let replies = timeout(LIMIT, call).await.expect("in time").expect("ran");
        let last = replies.last().expect("a reply");
        assert_eq!(last["result"]["content"][0]["text"], "done", "{last}");
        let drained = timeout(LIMIT, drain).await.expect("in time").expect("ran");
        assert_eq!(drained.cancelled, 0);
        assert_eq!(server.lifecycle().in_flight(), 0);
    })
    .await
    .expect("the test ends in time");
}

#[tokio::test]
async fn past_the_deadline_what_still_runs_is_cancelled_with_its_session() {
    timeout(Duration::from_secs(60), async {
        let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
        let server = holding_server(entered.clone(), release);
        let (url, _mcp) = start_with(HttpConfig::default(), server.clone()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let call = tokio::spawn({
            let raw = raw.clone();
            async move {
                let response = raw
                    .post(&tool_call(1, "hold", json!({})))
                    .send()
                    .await
                    .expect("post");
                response.text().await.unwrap_or_default()
            }
        });
        timeout(LIMIT, entered.notified()).await.expect("hold runs");

        // `hold` is never released: the drain gives up at its deadline.
        let drained = timeout(LIMIT, server.drain(Duration::from_millis(100)))
            .await
            .expect("the drain ends at its deadline");
        assert_eq!(drained.cancelled, 1);
        assert!(drained.took >= Duration::from_millis(100));
        // The session was closed: the call's stream ends without a result, and the handler
        // was dropped (nothing is in flight any more).
        let body = timeout(LIMIT, call).await.expect("in time").expect("ran");
        assert!(!body.contains("done"), "{body}");
        timeout(LIMIT, server.lifecycle().idle())
            .await
            .expect("the cancelled handler is gone");
    })
    .await
    .expect("the test ends in time");
}

/// Serves `server` at `/mcp`, with the first `refusals` `tools/call` POSTs answered 503 with
/// `Retry-After: 0` (as a draining server answers); returns the URL and the count of
/// `tools/call` POSTs that arrived.
async fn refusing(server: Server, refusals: usize) -> (String, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let mcp = StreamableHttp::new(HttpConfig::default(), server);
    let app = mcp.router("/mcp").layer(axum::middleware::from_fn(
        move |request: axum::extract::Request, next: axum::middleware::Next| {
            let seen = seen.clone();
            async move {
                let is_call = request
                    .headers()
                    .get("mcp-method")
                    .is_some_and(|m| m == "tools/call");
                if is_call && seen.fetch_add(1, Ordering::AcqRel) < refusals {
                    let body = json!({"jsonrpc": "2.0", "id": null, "error": {
                        "code": -32000, "message": "Service Unavailable: shutting down"}});
                    return (
                        axum::http::StatusCode::SERVICE_UNAVAILABLE,
                        [("retry-after", "0"), ("content-type", "application/json")],
                        body.to_string(),
                    )
                        .into_response();
                }
                next.run(request).await
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/mcp"), calls)
}

async fn stateless_client(url: &str) -> Client {
    let transport = StatelessHttpConnector::new(url)
        .connect()
        .await
        .expect("transport");
    Client::builder(Implementation::new("drain-test", "1"))
        .era(Era::Modern)
        .connect(transport)
        .await
        .expect("connected")
}

#[tokio::test]
async fn a_stateless_client_sends_a_request_refused_with_503_and_retry_after_again() {
    timeout(Duration::from_secs(60), async {
        let (url, calls) = refusing(tidewire_demo::demo_builder().build(), 2).await;
        let client = stateless_client(&url).await;
        let result = timeout(LIMIT, client.call_tool("echo", json!({"text": "again"})))
            .await
            .expect("in time")
            .expect("answered on the third POST");
        assert_eq!(result.content[0].as_text(), Some("again"));
        assert_eq!(
            calls.load(Ordering::Acquire),
            3,
            "two refusals, then served"
        );

        // Refused every time: three retries, then the refusal is the call's error.
        let (url, calls) = refusing(tidewire_demo::demo_builder().build(), usize::MAX).await;
        let client = stateless_client(&url).await;
        let error = timeout(LIMIT, client.call_tool("echo", json!({"text": "never"})))
            .await
            .expect("in time")
            .expect_err("refused for good");
        assert!(error.to_string().contains("Service Unavailable"), "{error}");
        assert_eq!(
            calls.load(Ordering::Acquire),
            4,
            "one POST and three retries"
        );
    })
    .await
    .expect("the test ends in time");
}
