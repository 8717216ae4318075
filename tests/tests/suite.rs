//! The suite that runs on every transport: each scenario is written once, against a
//! [`Harness`], and the `suite!` macro expands it per transport: in-memory, stdio, Streamable
//! HTTP in its three modes, legacy HTTP+SSE and WebSocket; and again on the stateless revision
//! (2026-07-28) over in-memory, stdio, Streamable HTTP and WebSocket (`*_2026`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::ErrorCode;
use tidewire_tests::harness::{
    self, Counters, Harness, HttpMode, Needs, TransportUnderTest, peer_client,
};
use tidewire_tests::scenarios::{self, text_of};

/// Every scenario gets this long, start to finish.
use tidewire_tests::LIMIT;

fn stdio() -> TransportUnderTest {
    TransportUnderTest::Stdio {
        program: env!("CARGO_BIN_EXE_tidewire-demo-stdio").into(),
        args: Vec::new(),
    }
}

/// `transport` on the stateless revision (2026-07-28).
fn stateless(transport: TransportUnderTest) -> TransportUnderTest {
    TransportUnderTest::Stateless(Box::new(transport))
}

/// Runs `scenario` on `transport` under the time limit, then closes the harness; or, when the
/// transport cannot carry what the scenario needs, says why it skips.
async fn run<F, Fut>(transport: TransportUnderTest, needs: Needs, scenario: F)
where
    F: FnOnce(Harness) -> Fut,
    Fut: std::future::Future<Output = Harness>,
{
    let name = transport.name();
    if let Some(reason) = transport.cannot(needs) {
        println!("skipped on {name}: {reason}");
        return;
    }
    let h = tokio::time::timeout(LIMIT, harness::connect(&transport))
        .await
        .unwrap_or_else(|_| panic!("connecting over {name} took longer than {LIMIT:?}"));
    let h = tokio::time::timeout(LIMIT, scenario(h))
        .await
        .unwrap_or_else(|_| panic!("the scenario over {name} took longer than {LIMIT:?}"));
    tokio::time::timeout(LIMIT, h.finish())
        .await
        .unwrap_or_else(|_| panic!("closing over {name} took longer than {LIMIT:?}"));
}

/// Expands every scenario for every transport: `memory::echo`, `stdio::echo`,
/// `http_sse::echo`, … A scenario names what it needs; a transport that cannot carry it skips
/// it with the reason printed (see `TransportUnderTest::cannot`).
macro_rules! suite {
    ($($scenario:ident: $needs:ident),* $(,)?) => {
        suite!(@transport memory, TransportUnderTest::Memory; $($scenario: $needs),*);
        suite!(@transport stdio, super::stdio(); $($scenario: $needs),*);
        suite!(@transport http_sse, TransportUnderTest::Http(HttpMode::Sse); $($scenario: $needs),*);
        suite!(@transport http_json, TransportUnderTest::Http(HttpMode::Json); $($scenario: $needs),*);
        suite!(@transport http_one_shot, TransportUnderTest::Http(HttpMode::OneShot); $($scenario: $needs),*);
        suite!(@transport legacy_sse, TransportUnderTest::LegacySse; $($scenario: $needs),*);
        suite!(@transport websocket, TransportUnderTest::WebSocket; $($scenario: $needs),*);
        suite!(@transport memory_2026, stateless(TransportUnderTest::Memory); $($scenario: $needs),*);
        suite!(@transport stdio_2026, stateless(super::stdio()); $($scenario: $needs),*);
        suite!(@transport http_2026, stateless(TransportUnderTest::Http(HttpMode::Sse)); $($scenario: $needs),*);
        suite!(@transport websocket_2026, stateless(TransportUnderTest::WebSocket); $($scenario: $needs),*);
    };
    (@transport $module:ident, $transport:expr; $($scenario:ident: $needs:ident),*) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::run($transport, Needs::$needs, super::$scenario).await;
                }
            )*
        }
    };
}

suite!(
    peer_echo: Nothing,
    peer_progress: Streaming,
    peer_cancel: Streaming,
    peer_notifications: Streaming,
    peer_subscribe: Session,
    peer_sampling: ServerRequests,
    peer_elicitation: ServerRequests,
    peer_roots: ServerRequests,
    ping: Ping,
    timeouts_and_reset_on_progress: Streaming,
    monotonic_guard: Streaming,
    progress_back_from_client_during_sampling: ProgressFromClient,
    progress_back_from_client_during_elicitation: ProgressFromClient,
    cancel_crossing_the_response: Nothing,
    cancel_under_abort: Streaming,
    cancel_under_cooperative: Streaming,
    cancel_of_unknown_id_is_ignored: Nothing,
    hundred_concurrent_calls_keep_their_progress: Streaming,
    one_mebibyte_argument: Nothing,
    error_mapping: Nothing,
    listing_and_reading: Nothing,
    skills_listed_loaded_and_verified: Nothing,
);

async fn peer(h: Harness, scenario: &str) -> Harness {
    match scenarios::run_peer_scenario(&h, scenario).await {
        Ok(report) => println!("[{}] PASS {scenario} {report}", h.transport),
        Err(failure) => panic!("[{}] FAIL {scenario}: {failure}", h.transport),
    }
    h
}

async fn peer_echo(h: Harness) -> Harness {
    peer(h, "echo").await
}
async fn peer_progress(h: Harness) -> Harness {
    peer(h, "progress").await
}
async fn peer_cancel(h: Harness) -> Harness {
    peer(h, "cancel").await
}
async fn peer_notifications(h: Harness) -> Harness {
    peer(h, "notifications").await
}
async fn peer_subscribe(h: Harness) -> Harness {
    peer(h, "subscribe").await
}
async fn peer_sampling(h: Harness) -> Harness {
    peer(h, "sampling").await
}
async fn peer_elicitation(h: Harness) -> Harness {
    peer(h, "elicitation").await
}
async fn peer_roots(h: Harness) -> Harness {
    peer(h, "roots").await
}

async fn ping(h: Harness) -> Harness {
    h.client.ping().await.expect("ping");
    h
}

async fn timeouts_and_reset_on_progress(h: Harness) -> Harness {
    let c = &h.client;
    let slow = json!({"every_ms": 40, "n": 8});
    let err = c
        .call_tool("slow_progress", slow.clone())
        .timeout(Duration::from_millis(100))
        .await
        .expect_err("8 × 40 ms cannot fit in 100 ms");
    assert!(err.is_timeout(), "{err}");
    let done = c
        .call_tool("slow_progress", slow.clone())
        .timeout(Duration::from_millis(250))
        .reset_timeout_on_progress(Duration::from_secs(20))
        .await
        .expect("each report restarts the 250 ms timeout");
    assert!(!done.is_error());
    let started = Instant::now();
    let err = c
        .call_tool("slow_progress", json!({"every_ms": 40, "n": 100}))
        .timeout(Duration::from_millis(250))
        .reset_timeout_on_progress(Duration::from_millis(600))
        .await
        .expect_err("the hard maximum applies");
    assert!(err.is_timeout(), "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(600),
        "stopped before the hard maximum"
    );
    // The connection still serves after the timeouts (which sent cancellations).
    text_of(c, "echo", json!({"text": "after"}))
        .await
        .expect("echo");
    h
}

async fn monotonic_guard(h: Harness) -> Harness {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let result = h
        .client
        .call_tool("progress_rules", json!({}))
        .on_progress(move |p| sink.lock().expect("lock").push(p.progress))
        .await
        .expect("call");
    let text = result
        .content
        .first()
        .and_then(|b| b.as_text())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(text, "same=true lower=true bad_delta=true");
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![1.0, 2.0],
        "only rising values reach the wire"
    );
    h
}

async fn progress_back_from_client_during_sampling(h: Harness) -> Harness {
    let text = text_of(&h.client, "sample_with_progress", json!({}))
        .await
        .expect("call");
    assert_eq!(
        text, "peer-canned-model:[1.0, 2.0, 3.0]",
        "the server saw the client's progress"
    );
    h
}

async fn progress_back_from_client_during_elicitation(h: Harness) -> Harness {
    let text = text_of(&h.client, "elicit_with_progress", json!({}))
        .await
        .expect("call");
    assert_eq!(
        text, "Accept:[1.0, 2.0]",
        "the server saw the client's progress"
    );
    h
}

/// Calls `tool` (a `hold_*` of the suite server), cancels it once it reports progress, and
/// returns its key and what the server says became of it once its `on_cancel` guard has run.
async fn cancel_held(h: &Harness, tool: &str) -> (String, serde_json::Value) {
    static KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let key = format!("{}-{tool}-{n}", h.transport);
    let (call, mut progress) = h
        .client
        .call_tool(tool, json!({"key": key}))
        .progress_stream();
    let call = call.send().await.expect("send");
    progress.next().await.expect("the first progress report");
    assert!(call.cancel("the test cancels"), "the call ended by itself");
    let outcome = call.await;
    assert!(
        matches!(&outcome, Err(e) if e.is_cancelled()),
        "a cancelled call ends cancelled: {outcome:?}"
    );
    // The server notes each step as it happens: poll until the guard has run (and, for a
    // handler that goes on, until it has returned).
    let cooperative = tool.ends_with("cooperative");
    let mut record = serde_json::Value::Null;
    for _ in 0..200 {
        record = hold_status(h, &key).await;
        if record["on_cancel"] == json!(true) && (!cooperative || record["returned"] == json!(true))
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        progress.next().await.is_none(),
        "no progress after the cancel"
    );
    (key, record)
}

async fn hold_status(h: &Harness, key: &str) -> serde_json::Value {
    let text = text_of(&h.client, "hold_status", json!({"key": key}))
        .await
        .expect("hold_status");
    serde_json::from_str(&text).expect("hold_status is JSON")
}

async fn cancel_under_abort(h: Harness) -> Harness {
    let (key, record) = cancel_held(&h, "hold_abort").await;
    assert_eq!(record["on_cancel"], json!(true), "{record}");
    // An aborted handler is dropped at its next `.await` (at the latest the 50 ms wait before
    // it would note its return): give it longer than that to show it did not go on.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let record = hold_status(&h, &key).await;
    assert_eq!(
        record["returned"],
        json!(false),
        "an aborted handler does not run on: {record}"
    );
    h
}

async fn cancel_under_cooperative(h: Harness) -> Harness {
    let (_, record) = cancel_held(&h, "hold_cooperative").await;
    assert_eq!(
        record,
        json!({"on_cancel": true, "returned": true, "send_refused": true}),
        "a cooperative handler runs to its own return, sends nothing more, and its guard runs"
    );
    h
}

async fn cancel_crossing_the_response(h: Harness) -> Harness {
    // Cancel calls that are answered at once: sometimes the cancel wins, sometimes the response;
    // either way nothing breaks and no late response leaks into another call.
    let mut cancelled = 0;
    let mut answered = 0;
    for i in 0..50 {
        let text = format!("race {i}");
        let call = h
            .client
            .call_tool("echo", json!({"text": text}))
            .send()
            .await
            .expect("send");
        let won = call.cancel("racing the response");
        match call.await {
            Ok(result) => {
                assert!(!won, "a cancelled call must not complete");
                assert_eq!(
                    result.content.first().and_then(|b| b.as_text()),
                    Some(text.as_str())
                );
                answered += 1;
            }
            Err(e) => {
                assert!(e.is_cancelled(), "{e}");
                cancelled += 1;
            }
        }
    }
    println!(
        "[{}] race: {cancelled} cancelled, {answered} answered",
        h.transport
    );
    assert_eq!(
        text_of(&h.client, "echo", json!({"text": "after the race"}))
            .await
            .expect("echo"),
        "after the race"
    );
    h
}

async fn cancel_of_unknown_id_is_ignored(h: Harness) -> Harness {
    h.client
        .peer()
        .notify_raw(
            "notifications/cancelled",
            Some(json!({"requestId": 987_654, "reason": "nothing"})),
        )
        .await
        .expect("send");
    h.client
        .peer()
        .notify_raw(
            "notifications/cancelled",
            Some(json!({"requestId": "not-a-request"})),
        )
        .await
        .expect("send");
    assert_eq!(
        text_of(&h.client, "echo", json!({"text": "fine"}))
            .await
            .expect("echo"),
        "fine"
    );
    h
}

async fn hundred_concurrent_calls_keep_their_progress(h: Harness) -> Harness {
    let calls = (0..100).map(|i| {
        let client = h.client.clone();
        async move {
            let urls: Vec<String> = (1..=3)
                .map(|u| format!("https://call-{i}.example/{u}"))
                .collect();
            let seen = Arc::new(Mutex::new(Vec::new()));
            let sink = seen.clone();
            let result = client
                .call_tool("crawl", json!({"urls": urls, "delay_ms": 5}))
                .on_progress(move |p| {
                    sink.lock()
                        .expect("lock")
                        .push(p.message.unwrap_or_default())
                })
                .await
                .expect("crawl");
            assert!(!result.is_error());
            let seen = seen.lock().expect("lock").clone();
            assert_eq!(seen.len(), 3, "call {i} got {seen:?}");
            for message in &seen {
                assert!(
                    message.contains(&format!("https://call-{i}.example/")),
                    "call {i} got another call's progress: {message}"
                );
            }
        }
    });
    futures::future::join_all(calls).await;
    h
}

async fn one_mebibyte_argument(h: Harness) -> Harness {
    let text: String = "tidewire ✓ ".chars().cycle().take(1024 * 1024).collect();
    let back = text_of(&h.client, "echo", json!({"text": text}))
        .await
        .expect("echo");
    assert_eq!(back.len(), text.len());
    assert!(back == text, "the 1 MiB text came back changed");
    h
}

async fn error_mapping(h: Harness) -> Harness {
    let c = &h.client;
    let err = c
        .call_tool("no_such_tool", json!({}))
        .await
        .expect_err("unknown tool");
    assert_eq!(
        err.remote().map(|e| e.code),
        Some(ErrorCode::INVALID_PARAMS.0),
        "{err}"
    );
    let result = c
        .call_tool("test_error_handling", json!({}))
        .await
        .expect("an error result is a result");
    assert!(result.is_error());
    let bad_args = c
        .call_tool("echo", json!({"text": 42}))
        .await
        .expect("bad arguments are a result");
    assert!(bad_args.is_error(), "invalid arguments give isError");
    let err = c
        .request_raw("no/such/method", json!({}))
        .await
        .expect_err("unknown method");
    assert_eq!(
        err.remote().map(|e| e.code),
        Some(ErrorCode::METHOD_NOT_FOUND.0)
    );
    let err = c
        .read_resource("test://does-not-exist")
        .await
        .expect_err("unknown resource");
    // 2026-07-28 names a missing resource -32602 (the session era -32002).
    let missing = if c.era() == tidewire_client::Era::Modern {
        ErrorCode::INVALID_PARAMS.0
    } else {
        ErrorCode::RESOURCE_NOT_FOUND.0
    };
    assert_eq!(err.remote().map(|e| e.code), Some(missing));
    h
}

async fn listing_and_reading(h: Harness) -> Harness {
    let c = &h.client;
    let tools = c.list_all_tools().await.expect("tools");
    for name in [
        "echo",
        "crawl",
        "crawl_status",
        "notify",
        "bump",
        "sample",
        "elicit",
        "roots",
        "test_simple_text",
    ] {
        assert!(tools.iter().any(|t| t.name == name), "tool {name} missing");
    }
    assert!(
        tools
            .iter()
            .all(|t| t.description.as_deref().is_some_and(|d| !d.is_empty()))
    );
    let resources = c.list_all_resources().await.expect("resources");
    assert!(resources.iter().any(|r| r.uri == "test://counter"));
    let templates = c.list_all_resource_templates().await.expect("templates");
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template == "test://template/{id}/data")
    );
    let prompts = c.list_all_prompts().await.expect("prompts");
    assert!(prompts.iter().any(|p| p.name == "test_simple_prompt"));
    let read = c
        .read_resource("test://template/42/data")
        .await
        .expect("template read");
    assert_eq!(read.contents.len(), 1);
    h
}

/// Each handshake revision is negotiated on every transport, and the older ones get what they
/// understand (2024-11-05 has no progress `message`).
mod negotiation {
    use super::*;

    async fn negotiate(transport: TransportUnderTest) {
        for version in ProtocolVersion::HANDSHAKE {
            let counters = Arc::new(Counters::default());
            let builder = peer_client(&counters).protocol_version(version);
            let h =
                tokio::time::timeout(LIMIT, harness::connect_with(&transport, builder, counters))
                    .await
                    .expect("connect in time");
            assert_eq!(h.client.protocol_version(), version, "over {}", h.transport);
            let messages = Arc::new(Mutex::new(Vec::new()));
            let sink = messages.clone();
            tokio::time::timeout(
                LIMIT,
                h.client
                    .call_tool(
                        "crawl",
                        json!({"urls": ["https://a.example"], "delay_ms": 1}),
                    )
                    .on_progress(move |p| sink.lock().expect("lock").push(p.message)),
            )
            .await
            .expect("in time")
            .expect("crawl");
            let messages = messages.lock().expect("lock").clone();
            assert_eq!(messages.len(), 1);
            assert_eq!(
                messages[0].is_some(),
                version.has_progress_message(),
                "{version}: {messages:?}"
            );
            h.finish().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            negotiate(TransportUnderTest::Memory).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stdio() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            negotiate(super::stdio()).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn http_sse() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            negotiate(TransportUnderTest::Http(HttpMode::Sse)).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn legacy_sse() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            negotiate(TransportUnderTest::LegacySse).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn websocket() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            negotiate(TransportUnderTest::WebSocket).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}

/// The progress stream form: every report of a call, in order, ends when the call ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_stream_over_stdio() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        run(stdio(), Needs::Nothing, |h| async move {
            let (call, stream) = h
                .client
                .call_tool(
                    "crawl",
                    json!({"urls": ["https://a.example", "https://b.example"], "delay_ms": 1}),
                )
                .progress_stream();
            let result = call.await.expect("crawl");
            assert!(!result.is_error());
            let reports: Vec<_> = stream.collect().await;
            assert_eq!(
                reports.iter().map(|p| p.progress).collect::<Vec<_>>(),
                vec![1.0, 2.0]
            );
            h
        })
        .await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// Scenarios about Streamable HTTP itself, on its session modes.
mod http {
    use super::*;
    use tidewire_core::schema::Implementation;

    fn sse() -> TransportUnderTest {
        TransportUnderTest::Http(HttpMode::Sse)
    }

    /// The server ends the session while a call is in flight: that call fails clearly, the
    /// client starts a new session by itself, and the next call works.
    async fn expiry_and_reinitialization(h: Harness) -> Harness {
        let (http, _) = h.http.clone().expect("an HTTP harness");
        assert_eq!(http.session_count(), 1);
        let slow = json!({"urls": ["https://a.example", "https://b.example"], "delay_ms": 200});
        let call = h
            .client
            .call_tool("crawl", slow)
            .send()
            .await
            .expect("sent");
        // Wait until the server has the call, then end the session under it.
        tokio::time::timeout(LIMIT, async {
            loop {
                let status = text_of(&h.client, "crawl_status", json!({}))
                    .await
                    .expect("status");
                if status.contains("\"finished\":false") {
                    break;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the crawl started");
        http.close_all();
        let err = tokio::time::timeout(LIMIT, call)
            .await
            .expect("no hang")
            .expect_err("the session is gone");
        let text = err.to_string();
        assert!(
            text.contains("404") || text.contains("session"),
            "a clear error: {text}"
        );
        // A call that raced the re-initialization is told to retry; one retry is enough.
        let mut again = text_of(&h.client, "echo", json!({"text": "again"})).await;
        if again
            .as_ref()
            .is_err_and(|e| e.contains("retry the request"))
        {
            again = text_of(&h.client, "echo", json!({"text": "again"})).await;
        }
        assert_eq!(again.expect("echo on the new session"), "again");
        assert_eq!(http.session_count(), 1, "a new session");
        h
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sse_expiry_and_reinitialization() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            run(sse(), Needs::Session, expiry_and_reinitialization).await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn json_expiry_and_reinitialization() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            run(
                TransportUnderTest::Http(HttpMode::Json),
                Needs::Session,
                expiry_and_reinitialization,
            )
            .await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// Closing the client sends DELETE, which ends the session on the server.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn close_sends_delete() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            run(sse(), Needs::Session, |h| async move {
                let (http, _) = h.http.clone().expect("an HTTP harness");
                assert_eq!(http.session_count(), 1);
                // The client waits for the DELETE's answer, and the server ends the session
                // before it answers.
                h.client.close().await;
                assert_eq!(
                    http.session_count(),
                    0,
                    "the DELETE ended the session (the client closed: {:?})",
                    h.client.close_reason()
                );
                h
            })
            .await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// Two clients whose JSON-RPC ids collide (both count from 1) never see each other's replies.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn colliding_ids_across_clients() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            run(sse(), Needs::Session, |h| async move {
                let (_, url) = h.http.clone().expect("an HTTP harness");
                let transport = tidewire_http::client::StreamableHttpConnector::new(url)
                    .connect()
                    .await
                    .expect("transport");
                let other = tidewire_client::Client::builder(Implementation::new("second", "1"))
                    .connect(transport)
                    .await
                    .expect("second client");
                let calls = (0..20).map(|i| {
                    let (a, b) = (h.client.clone(), other.clone());
                    async move {
                        let (ra, rb) = tokio::join!(
                            text_of(&a, "echo", json!({"text": format!("a{i}")})),
                            text_of(&b, "echo", json!({"text": format!("b{i}")})),
                        );
                        assert_eq!(ra.expect("a"), format!("a{i}"));
                        assert_eq!(rb.expect("b"), format!("b{i}"));
                    }
                });
                futures::future::join_all(calls).await;
                other.close().await;
                h
            })
            .await;
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}

/// SSE polling end to end: the server closes the POST stream mid-call, our client waits the
/// `retry` it was told, resumes with `Last-Event-ID`, and gets the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sse_polling_round_trip() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        run(
            TransportUnderTest::Http(HttpMode::Sse),
            Needs::Session,
            |h| async move {
                let text = text_of(&h.client, "test_reconnection", json!({}))
                    .await
                    .expect("resumed");
                assert!(text.starts_with("Reconnection test completed"), "{text}");
                h
            },
        )
        .await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// Polls the demo's `crawl_status` until the latest crawl has stopped; returns it.
async fn crawl_stopped(client: &tidewire_client::Client) -> serde_json::Value {
    tokio::time::timeout(LIMIT, async {
        loop {
            let text = text_of(client, "crawl_status", json!({}))
                .await
                .expect("crawl_status");
            let status: serde_json::Value = serde_json::from_str(&text).expect("JSON status");
            if status["finished"] == json!(true) {
                return status;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the crawl stopped in time")
}

/// Legacy HTTP+SSE: the stream is the session.
mod legacy_sse_cases {
    use super::*;
    use tidewire_core::schema::Implementation;
    use tidewire_sse::client::LegacySseConnector;
    use tidewire_sse::server::SseConfig;

    /// The server drops the stream under a running call: the call fails with an error that says
    /// so, the old session is gone (404), and connecting again gives a new session.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropped_stream_fails_clearly_and_a_reconnect_gets_a_new_session() {
        tokio::time::timeout(LIMIT, async {
            let (url, _server, sse) = harness::start_sse(SseConfig::default()).await;
            let transport = LegacySseConnector::new(&url)
                .connect()
                .await
                .expect("stream");
            let old_endpoint = transport.endpoint().to_owned();
            let client = tidewire_client::Client::builder(Implementation::new("t", "1"))
                .connect(transport)
                .await
                .expect("connect");
            let slow =
                json!({"urls": ["https://a.example", "https://b.example"], "delay_ms": 10_000});
            let call = client.call_tool("crawl", slow).send().await.expect("sent");
            let status = text_of(&client, "crawl_status", json!({}))
                .await
                .expect("status");
            assert!(status.contains("\"finished\":false"), "{status}");
            assert_eq!(sse.session_count(), 1);
            sse.close_all();
            let err = call.await.expect_err("the stream is gone");
            let text = err.to_string();
            assert!(text.contains("SSE stream"), "a clear error: {text}");
            // The old session is gone on the server.
            let answer = tidewire_tests::http_client()
                .post(&old_endpoint)
                .header("content-type", "application/json")
                .body(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
                .send()
                .await
                .expect("POST");
            assert_eq!(answer.status().as_u16(), 404);
            // Connecting again opens a new session.
            let transport = LegacySseConnector::new(&url)
                .connect()
                .await
                .expect("stream again");
            assert_ne!(transport.endpoint(), old_endpoint);
            let again = tidewire_client::Client::builder(Implementation::new("t", "1"))
                .connect(transport)
                .await
                .expect("reconnect");
            let echo = text_of(&again, "echo", json!({"text": "back"}))
                .await
                .expect("echo");
            assert_eq!(echo, "back");
            assert_eq!(sse.session_count(), 1);
            again.close().await;
        })
        .await
        .expect("in time");
    }

    /// A client that goes away mid-call ends its session, and the server cancels the call (the
    /// demo's crawl, cooperative, stops after the URL in flight).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn client_gone_mid_call_cancels_its_work() {
        tokio::time::timeout(LIMIT, async {
            let (url, _server, sse) = harness::start_sse(SseConfig::default()).await;
            let connect = || async {
                let transport = LegacySseConnector::new(&url)
                    .connect()
                    .await
                    .expect("stream");
                tidewire_client::Client::builder(Implementation::new("t", "1"))
                    .connect(transport)
                    .await
                    .expect("connect")
            };
            let leaving = connect().await;
            let slow = json!({"urls": ["https://a.example", "https://b.example"], "delay_ms": 300});
            let call = leaving.call_tool("crawl", slow).send().await.expect("sent");
            let status = text_of(&leaving, "crawl_status", json!({}))
                .await
                .expect("status");
            assert!(status.contains("\"finished\":false"), "{status}");
            leaving.close().await;
            drop(call);
            let observer = connect().await;
            // The crawl is cooperative: it finishes the URL in flight, then stops.
            let status = crawl_stopped(&observer).await;
            assert_eq!(status["cancelled"], json!(true), "{status}");
            assert_eq!(status["stopped"], json!("cooperative"), "{status}");
            assert_eq!(status["completed"], json!(1), "{status}");
            assert_eq!(
                sse.session_count(),
                1,
                "only the observer's session is left"
            );
            observer.close().await;
        })
        .await
        .expect("in time");
    }
}

/// WebSocket: bad frames, and peers that vanish.
mod websocket_cases {
    use super::*;
    use futures::SinkExt;
    use tidewire_core::schema::Implementation;
    use tidewire_ws::client::WebSocketConnector;
    use tidewire_ws::server::WsConfig;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;

    type Raw = tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >;

    /// A raw WebSocket peer, subprotocol `mcp`, already past `initialize`.
    async fn raw_peer(url: &str) -> Raw {
        let mut request = url.into_client_request().expect("request");
        request
            .headers_mut()
            .insert("sec-websocket-protocol", "mcp".parse().expect("value"));
        let (mut socket, response) = tokio_tungstenite::connect_async(request)
            .await
            .expect("upgrade");
        assert_eq!(
            response
                .headers()
                .get("sec-websocket-protocol")
                .and_then(|v| v.to_str().ok()),
            Some("mcp")
        );
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        socket
            .send(Message::text(init.to_string()))
            .await
            .expect("send");
        let answer = next_json(&mut socket).await;
        assert_eq!(answer["id"], json!(0), "{answer}");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        socket
            .send(Message::text(initialized.to_string()))
            .await
            .expect("send");
        socket
    }

    /// The next text frame, as JSON.
    async fn next_json(socket: &mut Raw) -> serde_json::Value {
        loop {
            match socket.next().await.expect("a frame").expect("a good frame") {
                Message::Text(text) => return serde_json::from_str(text.as_str()).expect("JSON"),
                Message::Close(frame) => panic!("closed: {frame:?}"),
                _ => {}
            }
        }
    }

    /// The close frame the server ends with: (code, reason).
    async fn close_frame(socket: &mut Raw) -> (u16, String) {
        while let Some(frame) = socket.next().await {
            if let Ok(Message::Close(Some(frame))) = frame {
                return (u16::from(frame.code), frame.reason.as_str().to_owned());
            }
        }
        panic!("the connection ended without a close frame");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn garbage_is_answered_and_the_connection_goes_on() {
        tokio::time::timeout(LIMIT, async {
            let (url, _server, _ws) = harness::start_ws(WsConfig::default()).await;
            let mut socket = raw_peer(&url).await;
            socket
                .send(Message::text("this is not JSON"))
                .await
                .expect("send");
            let answer = next_json(&mut socket).await;
            assert_eq!(answer["error"]["code"], json!(-32700), "{answer}");
            socket
                .send(Message::text(r#"{"jsonrpc":"2.0","id":"x","nope":1}"#))
                .await
                .expect("send");
            let answer = next_json(&mut socket).await;
            assert_eq!(answer["error"]["code"], json!(-32600), "{answer}");
            let ping = json!({"jsonrpc": "2.0", "id": 7, "method": "ping"});
            socket
                .send(Message::text(ping.to_string()))
                .await
                .expect("send");
            let answer = next_json(&mut socket).await;
            assert_eq!(answer["id"], json!(7), "{answer}");
            assert!(answer.get("result").is_some(), "{answer}");
        })
        .await
        .expect("in time");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_binary_frame_closes_with_1003() {
        tokio::time::timeout(LIMIT, async {
            let (url, _server, _ws) = harness::start_ws(WsConfig::default()).await;
            let mut socket = raw_peer(&url).await;
            socket
                .send(Message::binary(b"{\"jsonrpc\":\"2.0\"}".to_vec()))
                .await
                .expect("send");
            let (code, reason) = close_frame(&mut socket).await;
            assert_eq!(code, tidewire_ws::close_code::UNSUPPORTED_DATA);
            assert!(reason.contains("binary"), "{reason}");
        })
        .await
        .expect("in time");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_oversized_message_closes_with_1009() {
        tokio::time::timeout(LIMIT, async {
            let config = WsConfig::default().max_message_size(4096);
            let (url, _server, _ws) = harness::start_ws(config).await;
            let mut socket = raw_peer(&url).await;
            let big = json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "y".repeat(10_000)}});
            socket.send(Message::text(big.to_string())).await.expect("send");
            let (code, reason) = close_frame(&mut socket).await;
            assert_eq!(code, tidewire_ws::close_code::TOO_BIG);
            assert!(reason.contains("4096"), "{reason}");
        })
        .await
        .expect("in time");
    }

    /// A peer that vanishes mid-call (no close frame, the TCP connection just ends): the server
    /// cancels the call's work and forgets the connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_vanishes_mid_call_has_its_work_cancelled() {
        tokio::time::timeout(LIMIT, async {
            let (url, _server, ws) = harness::start_ws(WsConfig::default()).await;
            let mut socket = raw_peer(&url).await;
            let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "crawl",
                "arguments": {"urls": ["https://a.example", "https://b.example", "https://c.example"], "delay_ms": 300},
                "_meta": {"progressToken": "p"}}});
            socket.send(Message::text(call.to_string())).await.expect("send");
            let progress = next_json(&mut socket).await;
            assert_eq!(progress["method"], json!("notifications/progress"), "{progress}");
            drop(socket);
            let observer = tidewire_client::Client::builder(Implementation::new("t", "1"))
                .connect(WebSocketConnector::new(&url).connect().await.expect("ws"))
                .await
                .expect("connect");
            let status = crawl_stopped(&observer).await;
            assert_eq!(status["cancelled"], json!(true), "{status}");
            assert!(status["completed"].as_u64().is_some_and(|n| n < 3), "{status}");
            tokio::time::timeout(LIMIT, async {
                while ws.connection_count() != 1 {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("the vanished connection is dropped");
            observer.close().await;
        })
        .await
        .expect("in time");
    }

    /// A peer that stops answering pings is dropped; a client whose server went silent fails its
    /// calls with a clear error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_silent_peer_is_dropped() {
        tokio::time::timeout(LIMIT, async {
            let config = WsConfig::default()
                .ping_interval(Duration::from_millis(50))
                .pong_timeout(Duration::from_millis(50));
            let (url, _server, ws) = harness::start_ws(config).await;
            // Never read: pings stay unanswered.
            let _socket = raw_peer(&url).await;
            assert_eq!(ws.connection_count(), 1);
            tokio::time::timeout(LIMIT, async {
                while ws.connection_count() != 0 {
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("the silent peer is dropped");
        })
        .await
        .expect("in time");
    }

    /// A peer that sends nothing but answers every ping is kept: the keep-alive looks at the
    /// ping it sent, not at silence alone (which dropped such a peer within a few intervals).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_peer_that_only_answers_pings_is_kept() {
        tokio::time::timeout(LIMIT, async {
            let config = WsConfig::default()
                .ping_interval(Duration::from_millis(50))
                .pong_timeout(Duration::from_millis(50));
            let (url, _server, ws) = harness::start_ws(config).await;
            let mut socket = raw_peer(&url).await;
            // Reading answers each ping (tungstenite queues the pong and sends it as it reads).
            let reader = tokio::spawn(async move {
                let mut pings = 0usize;
                while let Some(Ok(frame)) = socket.next().await {
                    match frame {
                        tokio_tungstenite::tungstenite::Message::Ping(_) => pings += 1,
                        tokio_tungstenite::tungstenite::Message::Close(close) => {
                            return (pings, Some(format!("{close:?}")));
                        }
                        _ => {}
                    }
                }
                (pings, None)
            });
            // Twenty intervals: a silence rule alone drops this peer within three or four.
            tokio::time::sleep(Duration::from_millis(1_000)).await;
            assert!(!reader.is_finished(), "{:?}", reader.await);
            assert_eq!(ws.connection_count(), 1);
            reader.abort();
        })
        .await
        .expect("in time");
    }

    /// The server closes the connection under a call: the call fails with an error naming why.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_connection_fails_calls_in_flight() {
        tokio::time::timeout(LIMIT, async {
            let config = WsConfig::default().max_message_size(64 * 1024);
            let (url, _server, _ws) = harness::start_ws(config).await;
            let client = tidewire_client::Client::builder(Implementation::new("t", "1"))
                .connect(WebSocketConnector::new(&url).connect().await.expect("ws"))
                .await
                .expect("connect");
            let slow = json!({"urls": ["https://a.example"], "delay_ms": 10_000});
            let call = client.call_tool("crawl", slow).send().await.expect("sent");
            // A message over the server's limit makes it close the connection (1009).
            let big = "z".repeat(100 * 1024);
            let err = text_of(&client, "echo", json!({"text": big}))
                .await
                .expect_err("the connection closes");
            let err2 = call.await.expect_err("the connection is gone");
            for text in [err.clone(), err2.to_string()] {
                assert!(text.contains("WebSocket"), "a clear error: {text}");
            }
        })
        .await
        .expect("in time");
    }
}

/// The demo's skills: listed without reading a file, the first one loaded and checked, a
/// listed file read and checked, an unlisted one refused before any request, `skills/get` and
/// `resources/directory/read` answering as the extension says.
async fn skills_listed_loaded_and_verified(h: Harness) -> Harness {
    use tidewire_client::SkillsError;
    use tidewire_core::schema::{DIRECTORY_MIME_TYPE, ReadDirectory, ReadDirectoryParams};
    use tidewire_server::skill::verify::VerifyError;

    let c = &h.client;
    assert!(c.offers_skills(), "the demo declares the skills extension");
    let skills = c.list_skills().await.expect("skills/list");
    let names: Vec<&str> = skills.iter().filter_map(|s| s.name()).collect();
    assert_eq!(names, ["pdf-processing", "refunds"]);
    let pdf = c.load_skill(&skills[0]).await.expect("load pdf-processing");
    assert_eq!(pdf.text(), tidewire_demo::PDF_SKILL_MD);
    assert!(
        pdf.instructions().starts_with("\n# PDF processing"),
        "{:?}",
        pdf.instructions()
    );
    assert_eq!(
        pdf.read_text("references/FORMS.md")
            .await
            .expect("a listed file"),
        tidewire_demo::PDF_FORMS_MD
    );
    let unlisted = pdf.read("references/OTHER.md").await.expect_err("unlisted");
    assert!(
        matches!(unlisted, SkillsError::Verify(VerifyError::Unlisted { .. })),
        "{unlisted}"
    );
    let refunds = c
        .get_skill(skills[1].uri.clone())
        .await
        .expect("skills/get");
    assert_eq!(refunds, skills[1]);
    let unknown = c
        .get_skill("skill://no-such-skill/SKILL.md")
        .await
        .expect_err("an unknown skill");
    let SkillsError::Request(unknown) = unknown else {
        panic!("a remote error, not {unknown}");
    };
    assert_eq!(
        unknown.remote().map(|e| e.code),
        Some(ErrorCode::INVALID_PARAMS.0)
    );
    let root = c
        .request::<ReadDirectory>(ReadDirectoryParams::new("skill://pdf-processing"))
        .await
        .expect("resources/directory/read");
    let children: Vec<(&str, Option<&str>)> = root
        .resources
        .iter()
        .map(|r| (r.uri.as_str(), r.mime_type.as_deref()))
        .collect();
    assert_eq!(
        children,
        [
            ("skill://pdf-processing/SKILL.md", Some("text/markdown")),
            (
                "skill://pdf-processing/references",
                Some(DIRECTORY_MIME_TYPE)
            ),
        ]
    );
    h
}
