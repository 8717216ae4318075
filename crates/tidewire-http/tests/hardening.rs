//! The Streamable HTTP server against a hostile or vanishing client: cancelled requests, cut
//! streams, oversized and slow bodies, stream and byte limits. Each test names the defect of the
//! hardening issue it keeps fixed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tidewire_core::schema::CallToolResult;
use tidewire_http::server::{
    EventStoreLimits, HttpConfig, MemoryEventStore, ResponseMode, StreamableHttp,
};
use tidewire_server::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::timeout;

mod support;

use support::raw::{LIMIT, Raw, json_of, read_messages, tool_call};

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

#[derive(Deserialize, JsonSchema)]
struct Chatter {
    /// How many progress reports to send before answering.
    n: u64,
    /// Bytes of message text per report.
    size: usize,
}

/// Handlers running now, and a signal each time one starts or stops.
#[derive(Default)]
struct Gauge {
    live: AtomicUsize,
    changed: Notify,
}

impl Gauge {
    fn enter(self: &Arc<Self>) -> Live {
        self.live.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        Live(self.clone())
    }

    fn now(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Waits until `n` handlers run.
    async fn reaches(&self, n: usize) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.now() == n {
                return;
            }
            changed.await;
        }
    }
}

struct Live(Arc<Gauge>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

/// The demo server plus `hang` (runs until cancelled, counted by `gauge`) and `chatter` (`n`
/// progress reports of `size` bytes, then an answer).
fn server(gauge: Arc<Gauge>) -> tidewire_server::Server {
    tidewire_demo::demo_builder()
        .tool(
            "hang",
            "Runs until cancelled",
            move |_: Nothing, ctx: Context| {
                let live = gauge.enter();
                async move {
                    let _live = live;
                    ctx.cancelled().await;
                    Ok(CallToolResult::text("cancelled"))
                }
            },
        )
        .tool(
            "chatter",
            "Reports progress n times",
            |args: Chatter, ctx: Context| async move {
                let text = "x".repeat(args.size);
                for i in 1..=args.n {
                    #[allow(clippy::cast_precision_loss)]
                    let _ = ctx
                        .report_progress(i as f64, None, Some(text.clone()))
                        .await;
                }
                Ok(CallToolResult::text(format!("reported {}", args.n)))
            },
        )
        .build()
}

async fn start(config: HttpConfig) -> (String, StreamableHttp, Arc<Gauge>) {
    let gauge = Arc::new(Gauge::default());
    let (url, mcp) = support::raw::start_with(config, server(gauge.clone())).await;
    (url, mcp, gauge)
}

fn cancel(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
}

fn with_progress(mut body: Value) -> Value {
    let token = body["id"].clone();
    body["params"]["_meta"] = json!({ "progressToken": token });
    body
}

/// Waits, polling `check` each time the session table might have changed, for at most `limit`.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    timeout(limit, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .is_ok()
}

/// Defect 1: a cancelled request's route kept its session alive for ever.
#[tokio::test]
async fn a_cancelled_request_ends_its_stream_and_lets_its_session_expire() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default().idle_timeout(Duration::from_millis(200));
        let (url, mcp, gauge) = start(config).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let call = raw.post(&tool_call(5, "hang", json!({}))).send();
        let reply = tokio::spawn(async move {
            let response = call.await.expect("post");
            read_messages(response).await
        });
        timeout(LIMIT, gauge.reaches(1))
            .await
            .expect("the handler runs");
        let ack = raw.post(&cancel(5)).send().await.expect("cancel");
        assert_eq!(ack.status(), 202);
        let messages = timeout(LIMIT, reply)
            .await
            .expect("the POST stream ends after the cancel")
            .expect("reader");
        assert!(
            messages.is_empty(),
            "no response after a cancellation: {messages:?}"
        );
        timeout(LIMIT, gauge.reaches(0))
            .await
            .expect("the handler stops");
        assert!(
            eventually(Duration::from_secs(5), || mcp.session_count() == 0).await,
            "the session went idle and expired"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

/// A quick answer leaves with its response head; a slow one must not hold the head back. The
/// POST waits for the first event without a timer until the engine says the handler did not
/// answer at once (`ReplyTarget::deferred`), then within `first_event_wait`: the head of a
/// handler that never answers arrives while it still runs, in the session era and on a
/// one-shot session.
#[tokio::test]
async fn a_slow_handlers_post_gets_its_response_head_while_it_runs() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        for one_shot in [false, true] {
            let config = HttpConfig::default().one_shot_sessions(one_shot);
            let (url, _mcp, gauge) = start(config).await;
            let mut raw = Raw::new(&url);
            if !one_shot {
                raw.initialize().await;
            }
            let response = timeout(LIMIT, raw.post(&tool_call(3, "hang", json!({}))).send())
                .await
                .unwrap_or_else(|_| panic!("the head arrives (one-shot: {one_shot})"))
                .expect("post");
            assert_eq!(response.status(), 200);
            assert_eq!(
                response.headers()["content-type"],
                "text/event-stream",
                "one-shot: {one_shot}"
            );
            assert_eq!(
                gauge.now(),
                1,
                "the handler still runs (one-shot: {one_shot})"
            );
        }
    })
    .await
    .expect("the test took longer than its limit");
}

/// One reply path: a request carries its reply slot into the engine, so a request id already in
/// flight is refused by the engine itself, on the duplicate's own reply (`-32600`, where the
/// transport once kept a table of ids and answered 409), and the first request goes on.
#[tokio::test]
async fn a_request_id_in_flight_is_refused_on_the_duplicates_own_reply() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp, gauge) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let first = raw.post(&tool_call(7, "hang", json!({}))).send();
        let first = tokio::spawn(async move { read_messages(first.await.expect("post")).await });
        timeout(LIMIT, gauge.reaches(1))
            .await
            .expect("the first runs");
        let second = raw
            .post(&tool_call(7, "hang", json!({})))
            .send()
            .await
            .expect("post");
        assert_eq!(second.status(), 200);
        let messages = timeout(LIMIT, read_messages(second))
            .await
            .expect("the duplicate's reply ends");
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert_eq!(messages[0]["id"], 7);
        assert_eq!(messages[0]["error"]["code"], -32600, "{messages:?}");
        assert_eq!(
            gauge.now(),
            1,
            "the duplicate never ran; the first still runs"
        );
        raw.post(&cancel(7)).send().await.expect("cancel");
        let rest = timeout(LIMIT, first)
            .await
            .expect("the first's stream ends at its cancel")
            .expect("reader");
        assert!(rest.is_empty(), "nothing after a cancel: {rest:?}");
    })
    .await
    .expect("the test took longer than its limit");
}

/// A receiver that never reads: the engine it feeds sees nothing of what clients POST.
struct Stalled<R>(R);

impl<R: tidewire_core::transport::TransportReceiver> tidewire_core::transport::TransportReceiver
    for Stalled<R>
{
    async fn recv(
        &mut self,
    ) -> Option<Result<tidewire_core::transport::Envelope, tidewire_core::transport::TransportError>>
    {
        std::future::pending().await
    }
}

/// One reply path: a request's reply slot travels in its envelope, so a session that ends
/// while a request still waits in its inbox (its engine never read it) must drop that envelope,
/// or the POST waiting for its JSON reply would wait for ever on a sender the closed inbox
/// holds. It is answered 404 at once.
#[tokio::test]
async fn a_session_that_ends_answers_the_json_posts_its_engine_never_read() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use tidewire_core::session::{NoHandler, Session, SessionOptions};
        use tidewire_http::server::HttpTransport;

        let config = HttpConfig::default().response_mode(ResponseMode::Json);
        let mcp = StreamableHttp::new(config, |(sender, receiver): HttpTransport| {
            Session::new(
                (sender, Stalled(receiver)),
                NoHandler,
                SessionOptions::default(),
            )
            .1
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        tokio::spawn(axum::serve(listener, mcp.router("/mcp")).into_future());
        let raw = Raw::new(&url);
        let waiting = tokio::spawn(raw.post(&support::raw::init_body(1)).send());
        assert!(
            eventually(LIMIT, || mcp.session_count() == 1).await,
            "the session opened"
        );
        mcp.close_all();
        let answered = timeout(LIMIT, waiting)
            .await
            .expect("the waiting POST is answered once its session ends")
            .expect("task")
            .expect("post");
        assert_eq!(answered.status(), 404);
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 1, JSON replies: the waiting POST learns of the cancellation and is answered 202.
#[tokio::test]
async fn a_cancelled_request_in_json_mode_gets_202_and_frees_its_session() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default()
            .response_mode(ResponseMode::Json)
            .idle_timeout(Duration::from_millis(200));
        let (url, mcp, gauge) = start(config).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let call = raw.post(&tool_call(5, "hang", json!({}))).send();
        let reply = tokio::spawn(call);
        timeout(LIMIT, gauge.reaches(1))
            .await
            .expect("the handler runs");
        raw.post(&cancel(5)).send().await.expect("cancel");
        let answered = timeout(LIMIT, reply)
            .await
            .expect("answered")
            .expect("task")
            .expect("post");
        assert_eq!(answered.status(), 202);
        assert!(
            eventually(Duration::from_secs(5), || mcp.session_count() == 0).await,
            "the session went idle and expired"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 3: a stateless POST dropped before its SSE reply began left its one-shot engine
/// (and the handler in it) running for ever.
#[tokio::test]
async fn a_stateless_post_dropped_before_its_reply_ends_its_engine() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        // The reply's head waits up to 10 s for a first event: the client goes before that.
        let config = HttpConfig::default()
            .one_shot_sessions(true)
            .first_event_wait(Duration::from_secs(10));
        let (url, _mcp, gauge) = start(config).await;
        let raw = Raw::new(&url);
        let call = tokio::spawn(raw.post(&tool_call(1, "hang", json!({}))).send());
        timeout(LIMIT, gauge.reaches(1))
            .await
            .expect("the handler runs");
        call.abort(); // the connection closes with no reply read
        timeout(Duration::from_secs(5), gauge.reaches(0))
            .await
            .expect("the one-shot session ended with its request, stopping the handler");
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 12: a POST stream cut after its reader handed everything to the connection — taken
/// is not received: what sat in socket buffers is lost with the connection — is resumed by
/// GET with everything after the last event the client got, then the response. (The server
/// used to forget the stream as soon as its reader had taken the response, and attached such a
/// resume to the standalone stream instead.)
#[tokio::test]
async fn a_cut_post_stream_resumes_with_the_rest_and_its_response() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp, _gauge) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let body = with_progress(tool_call(3, "chatter", json!({"n": 5000, "size": 100})));
        let response = raw.post(&body).send().await.expect("post");
        let mut chunks = response.bytes_stream();
        let mut text = String::new();
        let mut kept_id = None;
        let mut seen = 0;
        let mut answered = false;
        // The server sends it all, response included; the client "loses" what came after 1,500.
        while !answered {
            let chunk = timeout(LIMIT, chunks.next())
                .await
                .expect("in time")
                .expect("chunk")
                .expect("bytes");
            text.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = text.find("\n\n") {
                let block: String = text.drain(..end + 2).collect();
                if block.contains("notifications/progress") {
                    seen += 1;
                    if seen == 1500 {
                        kept_id = block
                            .lines()
                            .find_map(|l| l.strip_prefix("id:").map(|v| v.trim().to_owned()));
                    }
                }
                answered |= block.contains("\"result\"");
            }
        }
        drop(chunks);
        let kept_id = kept_id.expect("an event id");
        let resumed = raw.get(Some(&kept_id)).send().await.expect("resume");
        assert_eq!(resumed.status(), 200, "the POST stream can be resumed");
        let messages = read_messages(resumed).await;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let progress: Vec<u64> = messages
            .iter()
            .filter_map(|m| m["params"]["progress"].as_f64())
            .map(|p| p as u64)
            .collect();
        assert!(
            progress.iter().copied().eq(1501..=5000),
            "exactly the reports after the last one received: {} of them, from {:?} to {:?}",
            progress.len(),
            progress.first(),
            progress.last()
        );
        assert_eq!(
            messages.last().expect("response")["result"]["content"][0]["text"],
            "reported 5000"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 12: a `Last-Event-ID` naming no stream the session can replay gets 404, not the
/// standalone stream.
#[tokio::test]
async fn a_last_event_id_naming_no_stream_gets_404() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp, _gauge) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        // Finished POST streams stay resumable a while, the newest few of them: ten calls push the
        // first ones out.
        for id in 1..=10 {
            let replies = raw
                .call(&tool_call(id, "echo", json!({"text": "done"})))
                .await;
            assert_eq!(replies.len(), 1);
        }
        let recent = raw.get(Some("10-1")).send().await.expect("get");
        assert_eq!(recent.status(), 200, "a recent finished stream resumes");
        for id in ["1-1", "999-3", "not-an-id", "7"] {
            let response = raw.get(Some(id)).send().await.expect("get");
            assert_eq!(response.status(), 404, "Last-Event-ID {id}");
            let body = json_of(response).await.expect("a JSON-RPC error");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("Last-Event-ID")),
                "{body}"
            );
        }
        // The standalone stream still resumes.
        let standalone = raw.get(Some("0-0")).send().await.expect("get");
        assert_eq!(standalone.status(), 200);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// Defect 2: a session may hold only so many streams; ones kept for resumption make room,
/// ones with a request in flight do not.
#[tokio::test]
async fn streams_per_session_are_capped_with_a_clear_error() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default().max_streams_per_session(3);
        let (url, _mcp, gauge) = start(config).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let mut held = Vec::new();
        for id in 1..=3 {
            let response = raw
                .post(&tool_call(id, "hang", json!({})))
                .send()
                .await
                .expect("post");
            assert_eq!(response.status(), 200);
            held.push(response);
        }
        timeout(LIMIT, gauge.reaches(3)).await.expect("three run");
        let refused = raw
            .post(&tool_call(4, "echo", json!({"text": "x"})))
            .send()
            .await
            .expect("post");
        assert_eq!(refused.status(), 429);
        assert!(refused.headers().contains_key("retry-after"));
        let body = json_of(refused).await.expect("JSON-RPC error");
        assert_eq!(body["id"], 4);
        assert_eq!(body["error"]["code"], -32001);
        // Cancel them all and let their readers go without reading: the streams are kept for
        // resumption, and new ones push them out instead of being refused.
        for id in 1..=3 {
            raw.post(&cancel(id)).send().await.expect("cancel");
        }
        drop(held);
        timeout(LIMIT, gauge.reaches(0)).await.expect("all stopped");
        for id in 10..20 {
            let replies = raw
                .call(&tool_call(id, "echo", json!({"text": "room"})))
                .await;
            assert_eq!(
                replies.last().expect("reply")["result"]["content"][0]["text"],
                "room"
            );
        }
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 2: 2 MB method names in requests whose replies nobody reads pin no memory: the
/// error does not echo them whole, and the event store stays within its byte budgets.
#[tokio::test]
async fn unread_replies_to_huge_requests_pin_no_memory() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let store = Arc::new(MemoryEventStore::with_limits(
            EventStoreLimits::default()
                .bytes_per_session(256 << 10)
                .total_bytes(1 << 20),
        ));
        let config = HttpConfig::default()
            .event_store(store.clone())
            .max_streams_per_session(8);
        let (url, _mcp, _gauge) = start(config).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let huge = "m".repeat(2 << 20);
        for id in 0..20 {
            let body = json!({"jsonrpc": "2.0", "id": id, "method": huge});
            // Sent, then dropped before a byte of the reply is read.
            let response = raw.post(&body).send().await.expect("post");
            assert_eq!(response.status(), 200);
            drop(response);
        }
        let answer = raw
            .call(&json!({"jsonrpc": "2.0", "id": 99, "method": huge}))
            .await;
        let message = answer[0]["error"]["message"].as_str().expect("an error");
        assert_eq!(answer[0]["error"]["code"], -32601);
        assert!(
            message.len() < 1024,
            "the error echoes at most an excerpt ({} bytes)",
            message.len()
        );
        assert!(
            store.bytes() <= 256 << 10,
            "the store keeps {} bytes for the session",
            store.bytes()
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

async fn raw_connection(url: &str) -> tokio::net::TcpStream {
    let address = url
        .trim_start_matches("http://")
        .split('/')
        .next()
        .expect("an address")
        .to_owned();
    tokio::net::TcpStream::connect(address)
        .await
        .expect("connect")
}

fn post_head(session: Option<&str>, length: usize) -> String {
    let session = session.map_or(String::new(), |s| format!("mcp-session-id: {s}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\nmcp-protocol-version: 2025-11-25\r\n{session}\
         content-length: {length}\r\n\r\n"
    )
}

/// Reads an HTTP/1.1 answer's status line.
async fn status_of(connection: &mut tokio::net::TcpStream) -> u16 {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n") {
        let n = connection.read(&mut byte).await.expect("read");
        assert_eq!(n, 1, "the connection ended before a status line");
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head);
    line.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status code")
}

/// Defect 10: an unknown session is refused before its body is read.
#[tokio::test]
async fn an_unknown_session_is_refused_before_its_body_is_read() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp, _gauge) = start(HttpConfig::default()).await;
        let mut connection = raw_connection(&url).await;
        // The head promises 1 MB that never comes.
        connection
            .write_all(post_head(Some("0123456789abcdef"), 1 << 20).as_bytes())
            .await
            .expect("write");
        let status = timeout(Duration::from_secs(5), status_of(&mut connection))
            .await
            .expect("answered without waiting for the body");
        assert_eq!(status, 404);
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 10: bodies read at once are bounded per session; one past the budget waits for
/// room.
#[tokio::test]
async fn concurrent_body_reads_are_bounded_per_session() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default().body_budget(2048, 1 << 20);
        let (url, mcp, _gauge) = start(config).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let session = raw.session.clone().expect("a session");
        // A takes the session's whole budget with a body that arrives in two parts.
        let mut a_body = tool_call(1, "echo", json!({"text": "a"})).to_string();
        a_body.push_str(&" ".repeat(1900 - a_body.len()));
        let mut a = raw_connection(&url).await;
        a.write_all(post_head(Some(&session), a_body.len()).as_bytes())
            .await
            .expect("write");
        a.write_all(&a_body.as_bytes()[..10]).await.expect("write");
        assert!(
            eventually(Duration::from_secs(5), || mcp.body_bytes_reading() >= 1900).await,
            "A's body is being read"
        );
        // B's body is complete, but the session's budget is taken: B waits.
        let mut b = raw_connection(&url).await;
        let b_body = tool_call(2, "echo", json!({"text": "b"})).to_string();
        let head = post_head(Some(&session), b_body.len());
        b.write_all(format!("{head}{b_body}").as_bytes())
            .await
            .expect("write");
        let early = timeout(Duration::from_millis(300), status_of(&mut b)).await;
        assert!(early.is_err(), "B was answered while A held the budget");
        // A's body completes: A is answered, then B gets its turn.
        a.write_all(&a_body.as_bytes()[10..]).await.expect("write");
        let a_status = timeout(LIMIT, status_of(&mut a)).await.expect("A answered");
        let b_status = timeout(LIMIT, status_of(&mut b)).await.expect("B answered");
        assert_eq!((a_status, b_status), (200, 200));
        assert_eq!(mcp.body_bytes_reading(), 0, "the budget is whole again");
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 10: a body that does not arrive in time gets 408, and its budget comes back.
#[tokio::test]
async fn a_body_that_trickles_past_the_read_timeout_gets_408() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default().body_read_timeout(Duration::from_millis(200));
        let (url, mcp, _gauge) = start(config).await;
        let mut connection = raw_connection(&url).await;
        connection
            .write_all(post_head(None, 100).as_bytes())
            .await
            .expect("write");
        connection.write_all(b"{").await.expect("write");
        let status = timeout(LIMIT, status_of(&mut connection))
            .await
            .expect("answered");
        assert_eq!(status, 408);
        assert_eq!(mcp.body_bytes_reading(), 0);
    })
    .await
    .expect("the test took longer than its limit");
}

/// Defect 13: a client that writes a 64 MiB body before reading gets the 413, not a reset.
#[tokio::test]
async fn an_oversized_body_gets_413_that_the_client_can_read() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp, _gauge) = start(HttpConfig::default()).await;
        let connection = raw_connection(&url).await;
        let (mut reader, mut writer) = connection.into_split();
        let size = 64 << 20;
        let writing = tokio::spawn(async move {
            writer
                .write_all(post_head(None, size).as_bytes())
                .await
                .expect("head");
            let block = vec![b' '; 1 << 20];
            for _ in 0..64 {
                writer.write_all(&block).await?;
            }
            writer.flush().await
        });
        let written = timeout(LIMIT, writing)
            .await
            .expect("in time")
            .expect("task");
        assert!(
            written.is_ok(),
            "the whole body was written without a reset: {written:?}"
        );
        let mut answer = Vec::new();
        timeout(LIMIT, reader.read_to_end(&mut answer))
            .await
            .expect("in time")
            .expect("read the answer");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 413"), "{text}");
        assert!(
            text.to_ascii_lowercase().contains("connection: close"),
            "{text}"
        );
    })
    .await
    .expect("the test took longer than its limit");
}
