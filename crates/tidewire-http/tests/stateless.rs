//! The 2026-07-28 wire on the Streamable HTTP endpoint, next to sessions: the envelope and header
//! checks with their statuses, answers as JSON or id-less SSE, questions in rounds, listen
//! streams, close = cancel, the per-request log level, and the era settings.

mod support;

use std::sync::Arc;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use support::raw::{LIMIT, Raw, json_of, read_messages, start, start_with};
use tidewire_core::schema::CallToolResult;
use tidewire_core::version::Eras;
use tidewire_http::server::HttpConfig;
use tidewire_server::{Context, NoArgs};
use tokio::sync::Notify;
use tokio::time::timeout;

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    })
}

fn body(id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A stateless POST with the headers its body calls for (`Mcp-Name` from `name` or `uri`), then
/// `overrides` on top.
fn post(raw: &Raw, body: &Value, overrides: &[(&'static str, &str)]) -> reqwest::RequestBuilder {
    let method = body["method"].as_str().unwrap_or_default().to_owned();
    let name = body["params"]["name"]
        .as_str()
        .or_else(|| body["params"]["uri"].as_str())
        .map(str::to_owned);
    let mut headers: Vec<(&'static str, String)> = vec![
        ("mcp-protocol-version", "2026-07-28".to_owned()),
        ("mcp-method", method),
    ];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    let mut all: Vec<(&'static str, &str)> =
        headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    all.extend_from_slice(overrides);
    raw.post_with(body, &all)
}

async fn error_of(response: reqwest::Response) -> (u16, String, Value) {
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (status, kind, json_of(response).await.expect("a JSON body"))
}

#[tokio::test]
async fn discover_is_one_json_body_with_no_session() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, mcp) = start(HttpConfig::default()).await;
        let raw = Raw::new(&url);
        let response = post(&raw, &body(1, "server/discover", json!({})), &[])
            .send()
            .await
            .expect("post");
        assert_eq!(response.status(), 200);
        assert!(response.headers().get("mcp-session-id").is_none());
        let (_, kind, reply) = error_of(response).await;
        assert_eq!(kind, "application/json");
        assert_eq!(reply["id"], 1);
        assert_eq!(reply["result"]["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(reply["result"]["resultType"], "complete");
        assert!(reply["result"]["_meta"]["io.modelcontextprotocol/serverInfo"].is_object());
        assert_eq!(
            mcp.session_count(),
            0,
            "a stateless request opens no session"
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// A request, the headers it overrides, and the status and error code it must get.
type Case = (Value, Vec<(&'static str, &'static str)>, u16, i64);

#[tokio::test]
async fn envelope_and_header_errors_have_their_status_and_echo_the_id() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let raw = Raw::new(&url);
        let no_meta = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {}});
        let v999 = {
            let mut b = body(6, "server/discover", json!({}));
            b["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
            b
        };
        let list = body(7, "tools/list", json!({}));
        let call = body(
            8,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}}),
        );
        let cases: Vec<Case> = vec![
            (no_meta, vec![], 400, -32602),
            (
                v999.clone(),
                vec![("mcp-protocol-version", "v999.0.0")],
                400,
                -32022,
            ),
            (v999, vec![], 400, -32020),
            (
                list.clone(),
                vec![("mcp-method", "prompts/list")],
                400,
                -32020,
            ),
            (
                list.clone(),
                vec![("mcp-method", "TOOLS/LIST")],
                400,
                -32020,
            ),
            (call.clone(), vec![("mcp-name", "other")], 400, -32020),
            (call, vec![("mcp-name", "=?base64?!!?=")], 400, -32020),
            (body(9, "initialize", json!({})), vec![], 404, -32601),
            (body(10, "ping", json!({})), vec![], 404, -32601),
            (
                body(11, "resources/subscribe", json!({})),
                vec![],
                404,
                -32601,
            ),
            (body(12, "unknown/method", json!({})), vec![], 404, -32601),
        ];
        for (request, overrides, status, code) in cases {
            let response = post(&raw, &request, &overrides).send().await.expect("post");
            let (got, kind, reply) = error_of(response).await;
            assert_eq!(
                (got, reply["error"]["code"].as_i64()),
                (status, Some(code)),
                "{request}"
            );
            assert_eq!(kind, "application/json");
            assert_eq!(reply["id"], request["id"], "the id is echoed");
        }
        // Header names in any case, values trimmed; a stale session id is ignored.
        let response = post(
            &raw,
            &list,
            &[("MCP-METHOD", " tools/list "), ("mcp-session-id", "gone")],
        )
        .send()
        .await
        .expect("post");
        assert_eq!(response.status(), 200);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn progress_and_logs_stream_without_event_ids_and_only_when_asked() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let raw = Raw::new(&url);
        let quiet = body(
            1,
            "tools/call",
            json!({"name": "test_logging_tool", "arguments": {}}),
        );
        let response = post(&raw, &quiet, &[]).send().await.expect("post");
        let messages = read_messages(response).await;
        assert_eq!(
            messages.len(),
            1,
            "no logLevel: only the response: {messages:?}"
        );

        let mut loud = body(
            2,
            "tools/call",
            json!({"name": "test_logging_tool", "arguments": {}}),
        );
        loud["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("info");
        let response = post(&raw, &loud, &[]).send().await.expect("post");
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream")
        );
        let text = timeout(LIMIT, response.text())
            .await
            .expect("in time")
            .expect("body");
        assert!(
            !text.contains("\nid:") && !text.starts_with("id:"),
            "no resumption ids: {text}"
        );
        let logs = text.matches("notifications/message").count();
        assert_eq!(logs, 3, "{text}");
        assert!(text.contains("\"resultType\":\"complete\""));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn questions_travel_in_rounds_and_altered_state_is_refused() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let raw = Raw::new(&url);
        let call = |id: i64, extra: Value| {
            let mut params =
                json!({"name": "test_input_required_result_multi_round", "arguments": {}});
            if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
                p.extend(e);
            }
            body(id, "tools/call", params)
        };
        let send = |b: Value| {
            let raw = raw.clone();
            async move {
                json_of(post(&raw, &b, &[]).send().await.expect("post"))
                    .await
                    .expect("json")
            }
        };
        let first = send(call(1, json!({}))).await["result"].clone();
        assert_eq!(
            first["inputRequests"]["step1"]["method"],
            "elicitation/create"
        );
        let state1 = first["requestState"].as_str().expect("state").to_owned();
        let accept =
            |field: &str, value: &str| json!({"action": "accept", "content": {field: value}});
        let second = send(call(
            2,
            json!({"inputResponses": {"step1": accept("name", "Ada")}, "requestState": state1}),
        ))
        .await["result"]
            .clone();
        assert!(second["inputRequests"].get("step2").is_some(), "{second}");
        let state2 = second["requestState"].as_str().expect("state").to_owned();
        let third = send(call(
            3,
            json!({"inputResponses": {"step2": accept("color", "blue")}, "requestState": state2}),
        ))
        .await["result"]
            .clone();
        assert_eq!(third["content"][0]["text"], "Ada likes blue");

        let tampered = call(4, json!({"requestState": format!("{state2}-TAMPERED")}));
        let response = post(&raw, &tampered, &[]).send().await.expect("post");
        let (status, _, reply) = error_of(response).await;
        assert_eq!(
            (status, reply["error"]["code"].as_i64()),
            (400, Some(-32602))
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn listen_streams_are_filtered_and_tagged() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let raw = Raw::new(&url);
        let listen = body(
            77,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        );
        let response = post(&raw, &listen, &[]).send().await.expect("listen");
        assert_eq!(response.status(), 200);
        let mut events = Box::pin(response.bytes_stream().eventsource());
        let ack = next_frame(&mut events).await;
        assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
        assert_eq!(
            ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            77
        );
        // A prompt change (not asked for) first, then a tool change: the tool change comes next.
        for trigger in ["test_trigger_prompt_change", "test_trigger_tool_change"] {
            let call = body(1, "tools/call", json!({"name": trigger, "arguments": {}}));
            let response = post(&raw, &call, &[]).send().await.expect("trigger");
            assert_eq!(response.status(), 200);
            read_messages(response).await;
        }
        let changed = next_frame(&mut events).await;
        assert_eq!(changed["method"], "notifications/tools/list_changed");
        assert_eq!(
            changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            77
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// The next SSE event of a stream, as JSON.
async fn next_frame<S, E>(events: &mut S) -> Value
where
    S: futures::Stream<Item = Result<eventsource_stream::Event, E>> + Unpin,
    E: std::fmt::Debug,
{
    let event = timeout(LIMIT, events.next())
        .await
        .expect("in time")
        .expect("an event")
        .expect("valid SSE");
    serde_json::from_str(&event.data).expect("JSON")
}

#[tokio::test]
async fn closing_the_response_cancels_the_request() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        /// Tells the test when the handler stops (returns, or is dropped when aborted).
        struct Stopped(Arc<Notify>);
        impl Drop for Stopped {
            fn drop(&mut self) {
                self.0.notify_one();
            }
        }
        let started = Arc::new(Notify::new());
        let stopped = Arc::new(Notify::new());
        let (s, c) = (started.clone(), stopped.clone());
        let server = tidewire_demo::demo_builder()
            .tool(
                "hold",
                "Reports progress, then waits to be cancelled",
                move |_: NoArgs, ctx: Context| {
                    let (started, guard) = (s.clone(), Stopped(c.clone()));
                    async move {
                        let _guard = guard;
                        ctx.report_progress(1.0, None, None).await?;
                        started.notify_one();
                        ctx.cancelled().await;
                        Ok(CallToolResult::text("never sent"))
                    }
                },
            )
            .build();
        let (url, _mcp) = start_with(HttpConfig::default(), server).await;
        let raw = Raw::new(&url);
        let mut call = body(1, "tools/call", json!({"name": "hold", "arguments": {}}));
        call["params"]["_meta"]["progressToken"] = json!("p");
        let response = post(&raw, &call, &[]).send().await.expect("post");
        let mut events = response.bytes_stream().eventsource();
        let first = timeout(LIMIT, events.next())
            .await
            .expect("in time")
            .expect("event")
            .expect("SSE");
        assert!(
            first.data.contains("notifications/progress"),
            "{}",
            first.data
        );
        timeout(LIMIT, started.notified())
            .await
            .expect("the handler runs");
        drop(events);
        timeout(LIMIT, stopped.notified())
            .await
            .expect("closing the stream stops the handler");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_slow_reader_is_not_a_close() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let sent = Arc::new(Notify::new());
        let signal = sent.clone();
        let server = tidewire_demo::demo_builder()
            .tool(
                "chatty",
                "Reports 2,000 steps, then returns",
                move |_: NoArgs, ctx: Context| {
                    let sent = signal.clone();
                    async move {
                        for step in 1..=2000 {
                            ctx.report_progress(f64::from(step), Some(2000.0), None)
                                .await?;
                        }
                        sent.notify_one();
                        Ok(CallToolResult::text("all sent"))
                    }
                },
            )
            .build();
        let (url, _mcp) = start_with(HttpConfig::default(), server).await;
        let raw = Raw::new(&url);
        let mut call = body(1, "tools/call", json!({"name": "chatty", "arguments": {}}));
        call["params"]["_meta"]["progressToken"] = json!(1);
        let response = post(&raw, &call, &[]).send().await.expect("post");
        assert_eq!(response.status(), 200);
        // The client reads nothing until the handler has sent everything: the server must not take
        // that for a close (which would cancel the call).
        timeout(LIMIT, sent.notified())
            .await
            .expect("the handler runs to its end while nobody reads");
        let messages = read_messages(response).await;
        let progress = messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .count();
        assert_eq!(progress, 2000);
        let last = messages.last().expect("the response");
        assert_eq!(last["result"]["content"][0]["text"], "all sent");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn json_mode_answers_one_body_however_long_the_call() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        use tidewire_http::server::ResponseMode;
        let config = HttpConfig::default()
            .response_mode(ResponseMode::Json)
            .json_wait(std::time::Duration::from_millis(1));
        let (url, _mcp) = start(config).await;
        let raw = Raw::new(&url);
        // A crawl outlasts the wait many times over; the answer is still one JSON body.
        let call = body(
            1,
            "tools/call",
            json!({"name": "crawl", "arguments": {"urls": ["a", "b", "c"], "delay_ms": 20}}),
        );
        let response = post(&raw, &call, &[]).send().await.expect("post");
        let (status, kind, reply) = error_of(response).await;
        assert_eq!((status, kind.as_str()), (200, "application/json"));
        assert_eq!(reply["result"]["content"][0]["text"], "Crawled 3 URLs");
        let unknown = post(&raw, &body(2, "nope", json!({})), &[])
            .send()
            .await
            .expect("post");
        assert_eq!(unknown.status(), 404);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_modern_only_endpoint_refuses_sessions() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        // Set on the server only: the endpoint follows it (issue 27: the eras in one place).
        let server = tidewire_demo::demo_builder().eras(Eras::Modern).build();
        let (url, _mcp) = start_with(HttpConfig::default(), server).await;
        let mut raw = Raw::new(&url);
        let response = raw
            .post(&support::raw::init_body(1))
            .send()
            .await
            .expect("initialize");
        let (status, _, reply) = error_of(response).await;
        assert_eq!(
            (status, reply["error"]["code"].as_i64()),
            (400, Some(-32022))
        );
        assert_eq!(reply["error"]["data"]["supported"], json!(["2026-07-28"]));
        raw.session = Some("whatever".into());
        assert_eq!(raw.get(None).send().await.expect("get").status(), 405);
        let delete = raw
            .http
            .delete(&url)
            .header("mcp-session-id", "whatever")
            .send()
            .await;
        assert_eq!(delete.expect("delete").status(), 405);
        let response = post(&Raw::new(&url), &body(2, "tools/list", json!({})), &[])
            .send()
            .await;
        assert_eq!(response.expect("list").status(), 200);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_legacy_only_endpoint_serves_as_before() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        // Set on the server only: the endpoint follows it (issue 27: the eras in one place).
        let server = tidewire_demo::demo_builder().eras(Eras::Legacy).build();
        let (url, _mcp) = start_with(HttpConfig::default(), server).await;
        let raw = Raw::new(&url);
        let response = post(&raw, &body(1, "server/discover", json!({})), &[])
            .send()
            .await;
        let (status, _, reply) = error_of(response.expect("post")).await;
        assert_eq!(status, 400);
        assert!(
            reply["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Mcp-Session-Id"))
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// A stateless request holds its place among `max_stateless_requests` until its handler stops:
/// a call answered at once gives it back as it answers, and a cooperative crawl whose client
/// went away keeps it until the crawl returns after the URL in flight.
#[tokio::test]
async fn a_stateless_request_holds_its_place_until_its_handler_stops() {
    timeout(LIMIT, async {
        let config = HttpConfig::default()
            .max_stateless_requests(1)
            .json_wait(std::time::Duration::from_millis(1));
        let (url, _mcp) = start(config).await;
        let raw = Raw::new(&url);
        let echo = |id| {
            body(
                id,
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "x"}}),
            )
        };
        for id in 1..=3 {
            let response = post(&raw, &echo(id), &[]).send().await.expect("post");
            assert_eq!(
                response.status(),
                200,
                "call {id}: the one before it gave its place back"
            );
        }
        let crawl = body(
            10,
            "tools/call",
            json!({"name": "crawl", "arguments": {"urls": ["a"], "delay_ms": 3000}}),
        );
        let held = post(&raw, &crawl, &[]).send().await.expect("crawl");
        assert_eq!(held.status(), 200);
        // The client goes away; the crawl goes on to the end of its URL, and keeps its place.
        drop(held);
        let refused = post(&raw, &echo(11), &[]).send().await.expect("post");
        assert_eq!(refused.status(), 503, "the crawl still runs");
        let mut id = 12;
        loop {
            let response = post(&raw, &echo(id), &[]).send().await.expect("post");
            // Each try is a round trip: no sleep needed between them.
            if response.status() == 200 {
                break;
            }
            assert_eq!(response.status(), 503);
            id += 1;
        }
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn stateless_requests_are_bounded() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default().max_stateless_requests(1)).await;
        let raw = Raw::new(&url);
        let listen = body(
            1,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        );
        let held = post(&raw, &listen, &[]).send().await.expect("listen");
        assert_eq!(held.status(), 200);
        let response = post(&raw, &body(2, "tools/list", json!({})), &[])
            .send()
            .await;
        let response = response.expect("post");
        assert_eq!(response.status(), 503);
        assert!(response.headers().get("retry-after").is_some());
        drop(held);
        // The slot is freed once the listen's response is gone.
        timeout(LIMIT, async {
            loop {
                let response = post(&raw, &body(3, "tools/list", json!({})), &[])
                    .send()
                    .await;
                // Each try is a round trip: no sleep needed between them.
                if response.expect("post").status() == 200 {
                    break;
                }
            }
        })
        .await
        .expect("the slot is freed");
    })
    .await
    .expect("the test took longer than its limit");
}
