//! A draining server over Streamable HTTP: new sessions and stateless requests get 503 with
//! `Retry-After` at once, the request in flight runs to its end, and past the deadline what
//! still runs is cancelled, cooperative handlers first (told, their own return answers; an
//! aborting one answered with the draining error), in both eras. And the stateless client
//! sends a request refused that way again.

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
use tidewire_core::session::CancelPolicy;
use tidewire_http::server::HttpConfig;
use tidewire_server::{Context, DRAIN_CANCEL_GRACE, NoArgs, Server};
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
async fn past_the_deadline_an_aborting_handler_is_dropped_and_answered_draining() {
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
        assert_eq!(
            drained.unfinished, 0,
            "an aborting handler is dropped at once"
        );
        // `hold` aborts on a cancel: it was dropped, and its call answered with the draining
        // error, so its client knows to retry elsewhere.
        let body = timeout(LIMIT, call).await.expect("in time").expect("ran");
        assert!(!body.contains("done"), "{body}");
        assert!(body.contains("-32000"), "{body}");
        assert!(body.contains("shutting down"), "{body}");
        timeout(LIMIT, server.lifecycle().idle())
            .await
            .expect("the cancelled handler is gone");
    })
    .await
    .expect("the test ends in time");
}

/// A server whose `crawl` (cooperative) steps every few milliseconds until its context is
/// cancelled, then returns how it stopped; `stubborn` (cooperative too) never looks; each tells
/// `entered` it runs.
fn cooperative_server(entered: Arc<Notify>) -> Server {
    let stubborn_entered = entered.clone();
    Server::builder(Implementation::new("drain-test", "1.0"))
        .tool(
            "crawl",
            "Steps until cancelled",
            move |_: NoArgs, ctx: Context| {
                let entered = entered.clone();
                async move {
                    entered.notify_one();
                    let mut steps = 0;
                    while !ctx.is_cancelled() {
                        steps += 1;
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                    Ok(CallToolResult::text(format!(
                        "stopped cooperatively after {steps} steps"
                    )))
                }
            },
        )
        .tool(
            "stubborn",
            "Never returns",
            move |_: NoArgs, _ctx: Context| {
                let entered = stubborn_entered.clone();
                async move {
                    entered.notify_one();
                    std::future::pending::<()>().await;
                    Ok(CallToolResult::text("never"))
                }
            },
        )
        .cancel_policy_for("crawl", CancelPolicy::Cooperative)
        .cancel_policy_for("stubborn", CancelPolicy::Cooperative)
        .build()
}

/// POSTs a stateless (2026-07-28) `tools/call` of `tool`, with its routing headers.
async fn call_stateless(url: &str, id: i64, tool: &str) -> reqwest::Response {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": tool, "arguments": {}, "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    }}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", tool),
    ];
    Raw::new(url)
        .post_with(&body, &headers)
        .send()
        .await
        .expect("post")
}

#[tokio::test]
async fn past_the_deadline_a_cooperative_handler_is_told_and_its_return_answers_in_both_eras() {
    timeout(Duration::from_secs(60), async {
        let entered = Arc::new(Notify::new());
        let server = cooperative_server(entered.clone());
        let (url, _mcp) = start_with(HttpConfig::default(), server.clone()).await;
        let mut session = Raw::new(&url);
        session.initialize().await;
        let in_session = tokio::spawn({
            let session = session.clone();
            async move { session.call(&tool_call(1, "crawl", json!({}))).await }
        });
        timeout(LIMIT, entered.notified())
            .await
            .expect("crawl runs");
        let stateless = tokio::spawn({
            let url = url.clone();
            async move { support::raw::read_messages(call_stateless(&url, 2, "crawl").await).await }
        });
        timeout(LIMIT, entered.notified())
            .await
            .expect("crawl runs");
        assert_eq!(server.lifecycle().in_flight(), 2);

        let drained = timeout(LIMIT, server.drain(Duration::from_millis(100)))
            .await
            .expect("the drain ends soon after its deadline");
        assert_eq!(drained.cancelled, 2, "{drained:?}");
        assert_eq!(
            drained.unfinished, 0,
            "both returned in the grace: {drained:?}"
        );
        for (era, call) in [("session", in_session), ("2026-07-28", stateless)] {
            let replies = timeout(LIMIT, call).await.expect("in time").expect("ran");
            let last = replies.last().expect("an answer");
            let text = last["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            assert!(
                text.starts_with("stopped cooperatively after"),
                "{era}: the tool's own return is the answer: {last}"
            );
        }
    })
    .await
    .expect("the test ends in time");
}

#[tokio::test]
async fn a_cooperative_handler_that_never_returns_is_dropped_after_the_grace() {
    timeout(Duration::from_secs(60), async {
        let entered = Arc::new(Notify::new());
        let server = cooperative_server(entered.clone());
        let (url, _mcp) = start_with(HttpConfig::default(), server.clone()).await;
        let call = tokio::spawn({
            let url = url.clone();
            async move { call_stateless(&url, 3, "stubborn").await.status() }
        });
        timeout(LIMIT, entered.notified())
            .await
            .expect("stubborn runs");
        let deadline = Duration::from_millis(100);
        let drained = timeout(LIMIT, server.drain(deadline))
            .await
            .expect("the drain ends after its deadline and the grace");
        assert_eq!(drained.cancelled, 1, "{drained:?}");
        assert_eq!(drained.unfinished, 1, "{drained:?}");
        assert!(
            drained.took >= deadline + DRAIN_CANCEL_GRACE,
            "the grace was given: {drained:?}"
        );
        // Still running: the process that drained would now exit, dropping it.
        assert_eq!(server.lifecycle().in_flight(), 1);
        call.abort();
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
