//! The session engine over the in-memory transport, with a raw JSON-RPC handler.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Notification, Request, RequestId};
use tidewire_core::session::{
    CancelPolicy, Handler, NoHandler, Peer, RequestContext, Session, SessionError, SessionOptions,
};
use tidewire_core::transport::memory::{self, MemoryReceiver, MemorySender, MemoryTransport};
use tidewire_core::transport::{
    Envelope, Transport, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;

const LIMIT: Duration = Duration::from_secs(10);

/// Serves a few raw methods used by the tests below.
#[derive(Clone, Default)]
struct TestHandler {
    notifications: Option<mpsc::UnboundedSender<Notification>>,
    finished: Arc<AtomicUsize>,
}

impl Handler for TestHandler {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        let params = request.params.unwrap_or(Value::Null);
        match request.method.as_str() {
            "echo" => Ok(params),
            "count" => {
                let n = params["n"].as_u64().unwrap_or(0);
                for i in 1..=n {
                    ctx.report_progress(i as f64, Some(n as f64), Some(format!("step {i}")))
                        .await
                        .map_err(ErrorObject::internal)?;
                }
                Ok(json!({"done": n}))
            }
            "two_reporters" => {
                // Odd values from one, even from the other, at once; a report that falls
                // behind the other's is refused, and counts as not admitted.
                let n = params["n"].as_u64().unwrap_or(0);
                let reporter = |first: u64| {
                    let ctx = ctx.clone();
                    async move {
                        let mut admitted = 0u64;
                        for i in (first..=n).step_by(2) {
                            if ctx.report_progress(i as f64, None, None).await.is_ok() {
                                admitted += 1;
                            }
                        }
                        admitted
                    }
                };
                let (odd, even) = futures::join!(reporter(1), reporter(2));
                Ok(json!({"admitted": odd + even}))
            }
            "hang" => {
                ctx.report_progress(1.0, None, None)
                    .await
                    .map_err(ErrorObject::internal)?;
                std::future::pending::<()>().await;
                Ok(Value::Null)
            }
            "slow_progress" => {
                // Reports every `every` ms, `n` times (paused clock in the tests).
                let every = params["every"].as_u64().unwrap_or(10);
                let n = params["n"].as_u64().unwrap_or(1);
                for i in 1..=n {
                    tokio::time::sleep(Duration::from_millis(every)).await;
                    ctx.report_progress(i as f64, None, None)
                        .await
                        .map_err(ErrorObject::internal)?;
                }
                self.finished.fetch_add(1, Ordering::SeqCst);
                Ok(json!({}))
            }
            "monotonic" => {
                ctx.report_progress(2.0, None, None)
                    .await
                    .map_err(ErrorObject::internal)?;
                let refused = ctx.report_progress(2.0, None, None).await.is_err();
                let refused_lower = ctx.report_progress(1.0, None, None).await.is_err();
                let tracker = ctx.progress_tracker(None);
                let bad_delta = tracker.advance(-1.0, None).await.is_err();
                Ok(
                    json!({"refused": refused, "refused_lower": refused_lower, "bad_delta": bad_delta}),
                )
            }
            "big_progress" => {
                // A report over the transport's limit, then a short one of the same value.
                let big = ctx.report_progress(1.0, None, Some("x".repeat(4096))).await;
                let short = ctx.report_progress(1.0, None, Some("ok".into())).await;
                Ok(json!({
                    "big": big.map_err(|e| format!("{e:?}")).err(),
                    "short": short.is_ok(),
                }))
            }
            "panic" => panic!("boom"),
            "thread" => Ok(json!(format!("{:?}", std::thread::current().id()))),
            "ask_back" => {
                let peer = ctx
                    .peer()
                    .ok_or_else(|| ErrorObject::internal("no session"))?;
                let answer: Value = peer
                    .request_raw("echo", Some(json!({"back": true})))
                    .await
                    .map_err(ErrorObject::internal)?;
                Ok(answer)
            }
            other => Err(ErrorObject::method_not_found(other)),
        }
    }

    fn handle_notification(&self, notification: Notification, _peer: &Peer) {
        if let Some(tx) = &self.notifications {
            let _ = tx.send(notification);
        }
    }
}

/// A server on a wire with one slot each way and `queue` slots in its outbound queue, so its
/// writes back up at once; and the wire's other end.
fn cramped_server(queue: usize) -> (Peer, MemoryTransport) {
    let (server_end, other_end) =
        memory::duplex_with(tidewire_core::transport::Codec::new(1 << 20), 1);
    let server = Session::spawn(
        server_end,
        TestHandler::default(),
        SessionOptions::default().outbound_queue(queue),
    );
    (server, other_end)
}

fn pair(server: TestHandler, options: SessionOptions) -> (Peer, Peer) {
    let (a, b) = memory::duplex();
    let server_peer = Session::spawn(a, server, options);
    let client = Session::spawn(b, TestHandler::default(), SessionOptions::default());
    (client, server_peer)
}

/// A driver awaited by `block_on` (the body of `#[tokio::main]`) moves onto the runtime's
/// worker: its reads, its handlers and its writes stay on one thread instead of crossing from
/// the awaiting thread to a worker and back for every request.
#[test]
fn a_driver_awaited_in_block_on_serves_on_a_worker() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let awaiting = format!("{:?}", std::thread::current().id());
    let served_on = runtime.block_on(async {
        let (a, b) = memory::duplex();
        let (_server, driver) = Session::new(a, TestHandler::default(), SessionOptions::default());
        let client = Session::spawn(b, TestHandler::default(), SessionOptions::default());
        let call = timeout(LIMIT, client.request_raw("thread", None));
        tokio::pin!(driver);
        tokio::select! {
            answer = call => answer.expect("in time").expect("answered"),
            ended = &mut driver => panic!("the driver ended first: {ended:?}"),
        }
    });
    assert_ne!(
        served_on,
        json!(awaiting),
        "the handler ran on the thread that awaits the driver"
    );
}

#[tokio::test]
async fn request_and_response_round_trip() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let value = timeout(
            LIMIT,
            client.request_raw("echo", Some(json!({"x": "ünï \"q\" \\"}))),
        )
        .await
        .expect("in time")
        .expect("ok");
        assert_eq!(value, json!({"x": "ünï \"q\" \\"}));
        let err = timeout(LIMIT, client.request_raw("nope", None))
            .await
            .expect("in time")
            .expect_err("unknown");
        assert_eq!(err.remote().map(|e| e.code), Some(-32601));
        let pong = timeout(LIMIT, client.request_raw("ping", None))
            .await
            .expect("in time")
            .expect("pong");
        assert_eq!(pong, json!({}));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn progress_arrives_in_order_before_the_result() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let (result, seen) = call_with_progress(&client, "count", json!({"n": 50})).await;
        assert_eq!(result, json!({"done": 50}));
        assert_eq!(seen.len(), 50);
        for (i, p) in seen.iter().enumerate() {
            assert_eq!(p.progress, (i + 1) as f64);
            assert_eq!(p.total, Some(50.0));
            assert_eq!(
                p.message.as_deref(),
                Some(format!("step {}", i + 1).as_str())
            );
        }
    })
    .await
    .expect("the test took longer than its limit");
}

/// Calls `method` with `params`, returning its result and the progress reports that came
/// before it, in order.
async fn call_with_progress(
    client: &Peer,
    method: &str,
    params: Value,
) -> (Value, Vec<tidewire_core::progress::Progress>) {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = seen.clone();
    let result = timeout(
        LIMIT,
        client
            .request_raw(method, Some(params))
            .on_progress(move |p| sink.lock().expect("lock").push(p)),
    )
    .await
    .expect("in time")
    .expect("ok");
    let seen = std::mem::take(&mut *seen.lock().expect("lock"));
    (result, seen)
}

/// Reports through a full outbound queue, from two reporters at once: the order lock is taken
/// in turn, and the queue waited on while holding it. Every report admitted arrives, in the
/// order admitted (so rising), before the result.
#[tokio::test]
async fn progress_from_two_reporters_through_a_full_queue_arrives_as_admitted() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        // One slot on the wire and one in the server's outbound queue: most reports find it
        // full.
        let (_server, wire) = cramped_server(1);
        let client = Session::spawn(wire, TestHandler::default(), SessionOptions::default());
        let (result, reports) =
            call_with_progress(&client, "two_reporters", json!({"n": 200})).await;
        let admitted = result["admitted"].as_u64().expect("a count");
        let seen: Vec<f64> = reports.iter().map(|p| p.progress).collect();
        assert!(admitted > 0, "{result}");
        assert_eq!(seen.len() as u64, admitted, "every admitted report arrived");
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "in the order admitted: {seen:?}"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn progress_stream_ends_with_the_request() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let (request, stream) = client
            .request_raw("count", Some(json!({"n": 5})))
            .progress_stream();
        let result = timeout(LIMIT, request).await.expect("in time").expect("ok");
        assert_eq!(result["done"], 5);
        let all: Vec<_> = timeout(LIMIT, stream.collect::<Vec<_>>())
            .await
            .expect("stream ends");
        assert_eq!(
            all.iter().map(|p| p.progress).collect::<Vec<_>>(),
            vec![1.0, 2.0, 3.0, 4.0, 5.0]
        );
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn dropping_the_future_cancels_the_request_on_the_server() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (tx, mut notes) = mpsc::unbounded_channel();
        let server = TestHandler {
            notifications: Some(tx),
            ..TestHandler::default()
        };
        let (client, server_peer) = pair(server, SessionOptions::default());
        let (request, mut progress) = client.request_raw("hang", None).progress_stream();
        let in_flight = timeout(LIMIT, request.send())
            .await
            .expect("in time")
            .expect("sent");
        let id = in_flight.id().clone();
        // Wait for the handler to start (its first progress), then drop the call.
        timeout(LIMIT, progress.next())
            .await
            .expect("in time")
            .expect("progress");
        assert_eq!(server_peer.inflight_requests(), 1);
        drop(in_flight);
        let cancelled = timeout(LIMIT, notes.recv())
            .await
            .expect("in time")
            .expect("notification");
        assert_eq!(cancelled.method, "notifications/cancelled");
        assert_eq!(
            cancelled
                .params
                .as_ref()
                .and_then(|p| RequestId::from_json(&p["requestId"])),
            Some(id)
        );
        // The slot is freed once the aborted task has been torn down, which the runtime does next.
        timeout(LIMIT, async {
            while server_peer.inflight_requests() != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the handler was removed");
        assert_eq!(client.pending_requests(), 0);
        // The connection still serves.
        let v = timeout(LIMIT, client.request_raw("echo", Some(json!([1]))))
            .await
            .expect("in time")
            .expect("ok");
        assert_eq!(v, json!([1]));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn explicit_cancel_resolves_the_future() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let in_flight = timeout(
            LIMIT,
            client.request_raw("hang", None).on_progress(|_| {}).send(),
        )
        .await
        .expect("in time")
        .expect("sent");
        let handle = in_flight.cancel_handle();
        assert!(handle.cancel("user asked"));
        let err = timeout(LIMIT, in_flight)
            .await
            .expect("in time")
            .expect_err("cancelled");
        assert!(err.is_cancelled(), "{err}");
        assert!(!handle.cancel("again"), "a second cancel finds nothing");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test(start_paused = true)]
async fn timeout_cancels_and_progress_resets_it_up_to_a_hard_maximum() {
    tokio::time::timeout(std::time::Duration::from_secs(3600), async {
        let server = TestHandler::default();
        let finished = server.finished.clone();
        let (client, _server) = pair(server, SessionOptions::default());
        // No reset: 10 steps of 50 ms against a 120 ms timeout.
        let err = client
            .request_raw("slow_progress", Some(json!({"every": 50, "n": 10})))
            .timeout(Duration::from_millis(120))
            .on_progress(|_| {})
            .await
            .expect_err("times out");
        assert!(err.is_timeout(), "{err}");
        // Reset on progress: each step comes within the timeout, so it completes.
        client
            .request_raw("slow_progress", Some(json!({"every": 50, "n": 10})))
            .timeout(Duration::from_millis(120))
            .reset_timeout_on_progress(Duration::from_secs(5))
            .await
            .expect("completes thanks to progress");
        assert_eq!(finished.load(Ordering::SeqCst), 1);
        // The hard maximum still applies.
        let err = client
            .request_raw("slow_progress", Some(json!({"every": 50, "n": 100})))
            .timeout(Duration::from_millis(120))
            .reset_timeout_on_progress(Duration::from_millis(400))
            .await
            .expect_err("hard maximum");
        assert!(err.is_timeout());
        if let SessionError::Timeout(after) = err {
            assert!(
                after >= Duration::from_millis(400) && after < Duration::from_millis(450),
                "{after:?}"
            );
        }
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn the_monotonic_guard_refuses_what_does_not_rise() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let v = timeout(
            LIMIT,
            client
                .request_raw("monotonic", None)
                .on_progress(move |p| sink.lock().expect("lock").push(p.progress)),
        )
        .await
        .expect("in time")
        .expect("ok");
        assert_eq!(
            v,
            json!({"refused": true, "refused_lower": true, "bad_delta": true})
        );
        assert_eq!(*seen.lock().expect("lock"), vec![2.0]);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn the_inflight_cap_answers_busy_at_once() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(
            TestHandler::default(),
            SessionOptions::default().max_inflight_inbound(2),
        );
        let mut hanging = Vec::new();
        for _ in 0..2 {
            let (req, mut progress) = client.request_raw("hang", None).progress_stream();
            let f = timeout(LIMIT, req.send())
                .await
                .expect("in time")
                .expect("sent");
            timeout(LIMIT, progress.next())
                .await
                .expect("in time")
                .expect("started");
            hanging.push(f);
        }
        let err = timeout(LIMIT, client.request_raw("echo", None))
            .await
            .expect("in time")
            .expect_err("busy");
        assert_eq!(err.remote().map(|e| e.code), Some(ErrorCode::SERVER_BUSY.0));
        drop(hanging);
        // Slots free up once the cancellations land.
        let mut ok = false;
        for _ in 0..100 {
            if timeout(LIMIT, client.request_raw("echo", Some(json!([2]))))
                .await
                .expect("in time")
                .is_ok()
            {
                ok = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(ok, "the server serves again after the cancels");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_panicking_handler_gets_an_internal_error() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let err = timeout(LIMIT, client.request_raw("panic", None))
            .await
            .expect("in time")
            .expect_err("panic");
        assert_eq!(err.remote().map(|e| e.code), Some(-32603));
        let v = timeout(LIMIT, client.request_raw("echo", Some(json!([3]))))
            .await
            .expect("in time")
            .expect("ok");
        assert_eq!(v, json!([3]));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn requests_back_to_the_peer_work_inside_a_handler() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, _server) = pair(TestHandler::default(), SessionOptions::default());
        let v = timeout(LIMIT, client.request_raw("ask_back", None))
            .await
            .expect("in time")
            .expect("ok");
        assert_eq!(v, json!({"back": true}));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn closing_fails_pending_requests() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (client, server_peer) = pair(TestHandler::default(), SessionOptions::default());
        let in_flight = timeout(LIMIT, client.request_raw("hang", None).send())
            .await
            .expect("in time")
            .expect("sent");
        server_peer.close();
        let err = timeout(LIMIT, in_flight)
            .await
            .expect("in time")
            .expect_err("closed");
        assert!(err.is_closed(), "{err}");
        timeout(LIMIT, client.closed())
            .await
            .expect("client notices");
        assert!(client.close_reason().is_some());
        let err = timeout(LIMIT, client.request_raw("echo", None))
            .await
            .expect("in time")
            .expect_err("closed");
        assert!(err.is_closed());
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn bad_input_is_answered_and_the_session_goes_on() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (mut raw, b) = memory::duplex();
        let _server = Session::spawn(b, TestHandler::default(), SessionOptions::default());
        raw.send_raw(b"{not json".to_vec()).await.expect("send");
        raw.send_raw(br#"{"jsonrpc":"1.0","id":9,"method":"echo"}"#.to_vec())
            .await
            .expect("send");
        raw.send_raw(br#"{"jsonrpc":"2.0","id":10,"method":"unknown/method"}"#.to_vec())
            .await
            .expect("send");
        raw.send_raw(br#"{"jsonrpc":"2.0","id":99,"result":{}}"#.to_vec())
            .await
            .expect("send");
        raw.send_raw(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}"#
                .to_vec(),
        )
        .await
        .expect("send");
        raw.send_raw(br#"{"jsonrpc":"2.0","id":11,"method":"echo","params":{"ok":true}}"#.to_vec())
            .await
            .expect("send");
        let (_tx, mut rx) = tidewire_core::transport::Transport::split(raw);
        let mut answers = Vec::new();
        for _ in 0..4 {
            let env = timeout(
                LIMIT,
                tidewire_core::transport::TransportReceiver::recv(&mut rx),
            )
            .await
            .expect("in time")
            .expect("open")
            .expect("valid");
            answers.push(serde_json::to_value(&env.message).expect("json"));
        }
        assert_eq!(answers[0]["error"]["code"], -32700);
        assert_eq!(answers[0]["id"], Value::Null);
        assert_eq!(answers[1]["error"]["code"], -32600);
        assert_eq!(answers[1]["id"], 9);
        assert_eq!(answers[2]["error"]["code"], -32601);
        assert_eq!(answers[2]["id"], 10);
        assert_eq!(answers[3]["result"], json!({"ok": true}));
        assert_eq!(answers[3]["id"], 11);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_side_that_only_sends_answers_method_not_found() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (a, b) = memory::duplex();
        let client = Session::spawn(a, NoHandler, SessionOptions::default());
        let _server = Session::spawn(b, NoHandler, SessionOptions::default());
        let err = timeout(LIMIT, client.request_raw("tools/list", None))
            .await
            .expect("in time")
            .expect_err("none");
        assert_eq!(err.remote().map(|e| e.code), Some(-32601));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn requests_running_when_the_peer_closes_its_side_still_get_answers() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (raw, b) = memory::duplex();
        let server = Session::spawn(b, TestHandler::default(), SessionOptions::default());
        let (mut tx, mut rx) = raw.split();
        tx.send_bytes(br#"{"jsonrpc":"2.0","id":1,"method":"count","params":{"n":3}}"#.to_vec())
            .await
            .expect("send");
        tx.send_bytes(br#"{"jsonrpc":"2.0","id":2,"method":"ask_back"}"#.to_vec())
            .await
            .expect("send");
        tx.close().await.expect("close our side");
        let mut answered = Vec::new();
        while let Some(Ok(env)) = timeout(LIMIT, rx.recv()).await.expect("in time") {
            let v = serde_json::to_value(&env.message).expect("json");
            if v.get("id").is_some() && v.get("method").is_none() {
                answered.push(v);
            }
        }
        let count = answered
            .iter()
            .find(|v| v["id"] == 1)
            .expect("count answered");
        assert_eq!(count["result"], json!({"done": 3}));
        // The handler that asked us something cannot get an answer any more: it fails at once
        // rather than waiting out the drain.
        let ask = answered
            .iter()
            .find(|v| v["id"] == 2)
            .expect("ask_back answered");
        assert_eq!(ask["error"]["code"], -32603, "{ask}");
        timeout(LIMIT, server.closed())
            .await
            .expect("the server session ends");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_peer_that_floods_while_not_reading_is_held_back_and_loses_nothing() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        // One slot each way on the wire and two in the server's outbound queue: the pongs back up
        // at once, and the server's reader must wait for room instead of queueing without bound.
        let (_server, raw) = cramped_server(2);
        let (mut tx, mut rx) = raw.split();
        const PINGS: i64 = 40;
        let flood = tokio::spawn(async move {
            for id in 1..=PINGS {
                let ping = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
                tx.send_bytes(ping.into_bytes()).await.expect("send");
            }
            tx
        });
        // Let the flood and the server run until everything is full and they wait.
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert!(
            !flood.is_finished(),
            "with nobody reading, the flood is held back"
        );
        for id in 1..=PINGS {
            let env = timeout(LIMIT, rx.recv())
                .await
                .expect("in time")
                .expect("open")
                .expect("valid");
            let v = serde_json::to_value(&env.message).expect("json");
            assert_eq!(v["id"], id, "every ping answered, in order");
            assert_eq!(v["result"], json!({}));
        }
        timeout(LIMIT, flood).await.expect("in time").expect("join");
    })
    .await
    .expect("the test took longer than its limit");
}

/// What a [`Stubborn`] handler reports.
#[derive(Debug)]
enum Event {
    /// A handler started, with its tag and its request's cancellation token.
    Started(String, CancellationToken),
    /// A handler returned.
    Ended(String),
}

/// Serves `stubborn` (params `{"tag": …}`): a handler that ignores cancellation and runs until
/// the test opens the gate of its tag, gauging how many run at once. Echoes anything else.
#[derive(Clone, Default)]
struct Stubborn {
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    gates: Arc<std::sync::Mutex<HashMap<String, CancellationToken>>>,
    events: Option<mpsc::UnboundedSender<Event>>,
}

impl Stubborn {
    fn with_events() -> (Self, mpsc::UnboundedReceiver<Event>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let handler = Self {
            events: Some(tx),
            ..Self::default()
        };
        (handler, rx)
    }

    /// The gate the handlers tagged `tag` wait for; cancel it to let them return.
    fn gate(&self, tag: &str) -> CancellationToken {
        self.gates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(tag.to_owned())
            .or_default()
            .clone()
    }

    fn report(&self, event: Event) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

impl Handler for Stubborn {
    async fn handle_request(
        &self,
        request: Request,
        ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        if request.method != "stubborn" {
            return Ok(request.params.unwrap_or(Value::Null));
        }
        let tag = request
            .params
            .as_ref()
            .and_then(|p| p["tag"].as_str())
            .unwrap_or("all")
            .to_owned();
        let gate = self.gate(&tag);
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        self.report(Event::Started(tag.clone(), ctx.cancellation_token()));
        // Deaf to `ctx.cancelled()`, as a handler busy with blocking work would be.
        gate.cancelled().await;
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.report(Event::Ended(tag));
        Ok(json!({}))
    }
}

async fn started(events: &mut mpsc::UnboundedReceiver<Event>, tag: &str) -> CancellationToken {
    match events.recv().await {
        Some(Event::Started(t, token)) if t == tag => token,
        other => panic!("expected {tag} to start, got {other:?}"),
    }
}

async fn ended(events: &mut mpsc::UnboundedReceiver<Event>, tag: &str) {
    match events.recv().await {
        Some(Event::Ended(t)) if t == tag => {}
        other => panic!("expected {tag} to end, got {other:?}"),
    }
}

/// A client that writes raw JSON-RPC and reads the answers as JSON.
struct Raw {
    tx: MemorySender,
    rx: MemoryReceiver,
}

impl Raw {
    fn new(transport: MemoryTransport) -> Self {
        let (tx, rx) = transport.split();
        Self { tx, rx }
    }

    async fn send(&mut self, message: Value) {
        self.tx
            .send_bytes(message.to_string().into_bytes())
            .await
            .expect("send");
    }

    async fn recv(&mut self) -> Value {
        let envelope = self.rx.recv().await.expect("open").expect("valid");
        serde_json::to_value(&envelope.message).expect("json")
    }
}

fn cancel_of(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}})
}

#[tokio::test]
async fn cancelling_handlers_that_keep_running_does_not_lift_the_inflight_cap() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        const CAP: usize = 2;
        let (handler, mut events) = Stubborn::with_events();
        let (raw, b) = memory::duplex();
        let options = SessionOptions::default()
            .max_inflight_inbound(CAP)
            .cancel_policy(CancelPolicy::Cooperative);
        let server = Session::spawn(b, handler.clone(), options);
        let mut raw = Raw::new(raw);
        timeout(LIMIT, async {
            let requests = 3 * CAP as i64;
            for id in 1..=requests {
                let request = json!({"jsonrpc": "2.0", "id": id, "method": "stubborn"});
                raw.send(request).await;
                raw.send(cancel_of(id)).await;
            }
            // The cancelled handlers go on running, so they keep their slots: every request past
            // the cap is refused at once, and the cancelled ones get no answer.
            let mut busy = Vec::new();
            for _ in CAP..3 * CAP {
                let answer = raw.recv().await;
                assert_eq!(
                    answer["error"]["code"],
                    ErrorCode::SERVER_BUSY.0,
                    "{answer}"
                );
                busy.push(answer["id"].as_i64().expect("an id"));
            }
            assert_eq!(busy, (CAP as i64 + 1..=requests).collect::<Vec<_>>());
            for _ in 0..CAP {
                started(&mut events, "all").await;
            }
            assert_eq!(handler.running.load(Ordering::SeqCst), CAP);
            assert_eq!(server.inflight_requests(), CAP, "cancelled but counted");
            // Once they have stopped, their slots are free again.
            handler.gate("all").cancel();
            for _ in 0..CAP {
                ended(&mut events, "all").await;
            }
            let echo = json!({"jsonrpc": "2.0", "id": 100, "method": "echo", "params": [1]});
            raw.send(echo).await;
            let answer = raw.recv().await;
            assert_eq!(answer["id"], 100, "none for cancelled ones: {answer}");
            assert_eq!(answer["result"], json!([1]));
        })
        .await
        .expect("in time");
        assert!(
            handler.peak.load(Ordering::SeqCst) <= CAP,
            "at most {CAP} handlers ran at once, not {}",
            handler.peak.load(Ordering::SeqCst)
        );
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_reused_id_stays_counted_and_cancellable_while_the_old_handler_finishes() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
    let (handler, mut events) = Stubborn::with_events();
    let (raw, b) = memory::duplex();
    let options = SessionOptions::default().cancel_policy(CancelPolicy::Cooperative);
    let server = Session::spawn(b, handler.clone(), options);
    let mut raw = Raw::new(raw);
    let request = |tag: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "stubborn", "params": {"tag": tag}});
    timeout(LIMIT, async {
        raw.send(request("old")).await;
        let old = started(&mut events, "old").await;
        raw.send(cancel_of(1)).await;
        old.cancelled().await;
        // The old handler goes on; its id is free again, and a new request takes it.
        raw.send(request("new")).await;
        let new = started(&mut events, "new").await;
        assert_eq!(server.inflight_requests(), 2, "both run, both are counted");
        // The old one's end frees its own slot, not the new request's.
        handler.gate("old").cancel();
        ended(&mut events, "old").await;
        assert_eq!(server.inflight_requests(), 1, "the new one still counts");
        assert!(!new.is_cancelled());
        // And the new request can still be cancelled.
        raw.send(cancel_of(1)).await;
        new.cancelled().await;
        handler.gate("new").cancel();
        ended(&mut events, "new").await;
        assert_eq!(server.inflight_requests(), 0);
        // Neither cancelled request was answered: the next answer is the next request's.
        let echo = json!({"jsonrpc": "2.0", "id": 2, "method": "echo", "params": [2]});
        raw.send(echo).await;
        let answer = raw.recv().await;
        assert_eq!(answer["id"], 2, "{answer}");
    })
    .await
    .expect("in time");
})
    .await
    .expect("the test took longer than its limit");
}

/// A sending half whose `send` never completes (a stdio child that stopped reading its stdin,
/// a legacy SSE server that holds each POST); it says when the writer first got stuck in it.
struct StuckSender {
    stuck: Option<oneshot::Sender<()>>,
}

impl TransportSender for StuckSender {
    async fn send(&mut self, _envelope: Envelope) -> Result<(), TransportError> {
        if let Some(stuck) = self.stuck.take() {
            let _ = stuck.send(());
        }
        std::future::pending().await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

/// A receiving half on which nothing ever arrives.
struct Silent;

impl TransportReceiver for Silent {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        std::future::pending().await
    }
}

#[tokio::test(start_paused = true)]
async fn the_timeout_covers_the_wait_for_room_in_the_outbound_queue() {
    tokio::time::timeout(std::time::Duration::from_secs(3600), async {
        let (stuck_tx, stuck) = oneshot::channel();
        let transport = (
            StuckSender {
                stuck: Some(stuck_tx),
            },
            Silent,
        );
        let peer = Session::spawn(
            transport,
            NoHandler,
            SessionOptions::default().outbound_queue(1),
        );
        timeout(LIMIT, async {
            // The writer takes the first request and never gets it out; the second fills the queue.
            let first = peer.request_raw("first", None).no_timeout().send().await;
            let first = first.expect("queued");
            stuck.await.expect("the writer is stuck");
            let second = peer.request_raw("second", None).no_timeout().send().await;
            let second = second.expect("queued");
            assert_eq!(peer.pending_requests(), 2);
            let err = peer
                .request_raw("third", None)
                .timeout(Duration::from_millis(100))
                .await
                .expect_err("no room in the queue, so no answer");
            assert!(err.is_timeout(), "{err}");
            if let SessionError::Timeout(after) = err {
                assert!(
                    after >= Duration::from_millis(100) && after < Duration::from_millis(150),
                    "{after:?}"
                );
            }
            assert_eq!(
                peer.pending_requests(),
                2,
                "the request that never left is forgotten"
            );
            // A send that does not wait says the queue is full instead.
            let full = peer
                .try_notify_raw("notifications/message", None)
                .expect_err("full");
            assert!(full.is_queue_full(), "{full}");
            drop((first, second));
        })
        .await
        .expect("in time: the timeout fired while the request waited for room");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn an_unknown_method_with_a_huge_name_gets_a_short_answer() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (a, b) = memory::duplex();
        let client = Session::spawn(a, NoHandler, SessionOptions::default());
        let _server = Session::spawn(b, NoHandler, SessionOptions::default());
        let method = "m".repeat(2 << 20);
        let err = timeout(LIMIT, client.request_raw(method, None))
            .await
            .expect("in time")
            .expect_err("unknown");
        let error = err.remote().expect("an error answer");
        assert_eq!(error.code, ErrorCode::METHOD_NOT_FOUND.0);
        assert!(
            error.message.len() < 1024,
            "{} bytes of message",
            error.message.len()
        );
        assert!(
            error.message.starts_with("Method not found: mmm"),
            "{error}"
        );
        assert!(error.message.ends_with('…'), "marked as cut");
    })
    .await
    .expect("the test took longer than its limit");
}

/// Toward a session's peer, a progress report over the transport's message limit is refused to
/// its handler (`ProgressError::TooLarge`), not lost in the writer; a shorter report of the same
/// value goes next.
#[tokio::test]
async fn a_report_over_the_peers_limit_is_refused_to_its_handler() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let (near, far) = tokio::io::duplex(1 << 16);
        let (near_read, near_write) = tokio::io::split(near);
        let (far_read, far_write) = tokio::io::split(far);
        let codec = tidewire_core::transport::Codec::new(1024);
        let server = Session::spawn(
            tidewire_core::transport::framed::transport(near_read, near_write, codec),
            TestHandler::default(),
            SessionOptions::default(),
        );
        let client = Session::spawn(
            tidewire_core::transport::framed::transport(far_read, far_write, codec),
            TestHandler::default(),
            SessionOptions::default(),
        );
        let (tx, mut seen) = mpsc::unbounded_channel();
        let answer: Value = client
            .request_raw("big_progress", Some(json!({})))
            .on_progress(move |p| {
                let _ = tx.send(p.message);
            })
            .await
            .expect("answered");
        let big = answer["big"].as_str().expect("the big report was refused");
        assert!(big.starts_with("TooLarge"), "{big}");
        assert_eq!(answer["short"], true, "{answer}");
        let message = seen.recv().await.expect("the short report arrived");
        assert_eq!(message.as_deref(), Some("ok"));
        drop(server);
    })
    .await
    .expect("in time");
}
