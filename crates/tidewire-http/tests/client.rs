//! The Streamable HTTP client transport against a fake server, driven through the real session
//! engine and client: JSON and SSE replies, headers, the GET stream and its resumption, session
//! expiry, resumption of a POST stream, HTTP errors, closing; a body starting with a byte-order
//! mark, SSE replies to notifications, redirects.

mod support;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};
use support::fake_server::*;
use tidewire_client::ClientError;
use tidewire_core::jsonrpc::{Message, Notification};
use tidewire_core::schema::ServerNotification;
use tidewire_core::transport::{Envelope, Transport, TransportSender};
use tidewire_http::client::MAX_NOTIFICATION_STREAMS;
use tokio::sync::oneshot::error::TryRecvError;
use tokio::sync::{mpsc, oneshot};

/// The handshake part every fake shares: `initialize` gets a JSON result (with `Mcp-Session-Id:
/// session` when given), notifications and responses get 202, DELETE gets 200, GET gets 405.
fn handshake(req: &Incoming, session: Option<&str>) -> Option<Response> {
    if req.is_post("initialize") {
        let reply = json_reply(init_result(&req.id()?, "2025-11-25"));
        return Some(match session {
            Some(id) => with_session(reply, id),
            None => reply,
        });
    }
    if req.method == Method::POST && (req.id().is_none() || req.rpc_method().is_none()) {
        return Some(accepted());
    }
    if req.method == Method::DELETE {
        return Some(status(StatusCode::OK, ""));
    }
    if req.method == Method::GET {
        return Some(status(StatusCode::METHOD_NOT_ALLOWED, ""));
    }
    None
}

fn tools_list(id: &Value) -> Response {
    json_reply(result(
        id,
        json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
    ))
}

fn remote_message(error: &ClientError) -> (i64, String) {
    let remote = error
        .remote()
        .unwrap_or_else(|| panic!("expected an error answer, got {error:?}"));
    (remote.code, remote.message.clone())
}

#[tokio::test]
async fn json_replies_and_the_session_headers() {
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            let id = req.id().unwrap_or(Value::Null);
            match req.rpc_method() {
                Some("tools/list") => tools_list(&id),
                Some("tools/call") => json_reply(text_result(&id, "pong")),
                _ => status(StatusCode::BAD_REQUEST, "unexpected"),
            }
        })
        .await;
        let builder = transport_for(&fake)
            .bearer("secret-token")
            .header("x-tenant", "blue")
            .header("accept", "text/plain");
        let (client, handle) = connect(builder).await;
        assert_eq!(handle.session_id().as_deref(), Some("s-1"));
        assert_eq!(client.protocol_version().as_str(), "2025-11-25");

        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 1);
        // The engine told the transport the version before anything after the handshake went.
        assert_eq!(handle.protocol_version().as_deref(), Some("2025-11-25"));
        let result = client.call_tool("echo", json!({})).await.expect("call");
        assert_eq!(first_text(&result), "pong");
        client.close().await;

        let log = fake.log.all();
        let init = &log[0];
        assert!(init.is_post("initialize"));
        let accept = init.header("accept").expect("Accept");
        assert!(accept.contains("application/json") && accept.contains("text/event-stream"));
        assert_eq!(init.header("content-type"), Some("application/json"));
        assert_eq!(init.session(), None, "initialize carries no session id");
        assert_eq!(init.header("mcp-protocol-version"), None);

        // The user's headers go everywhere; the transport's own Accept replaces the user's.
        for req in &log {
            assert_eq!(req.header("authorization"), Some("Bearer secret-token"));
            assert_eq!(req.header("x-tenant"), Some("blue"));
            assert!(req.headers.get_all("accept").iter().count() <= 1);
        }
        // Every later request carries the session id and the negotiated version.
        for req in &log[1..] {
            assert_eq!(
                req.session(),
                Some("s-1"),
                "{:?} {:?}",
                req.method,
                req.body
            );
            assert_eq!(req.header("mcp-protocol-version"), Some("2025-11-25"));
        }
        // The order: initialized (answered 202), the GET stream, the calls, DELETE.
        assert!(log[1].is_post("notifications/initialized"));
        assert_eq!(log[2].method, Method::GET);
        assert_eq!(log[2].header("accept"), Some("text/event-stream"));
        assert!(log.iter().any(|r| r.is_post("tools/list")));
        assert!(log.iter().any(|r| r.is_post("tools/call")));
        assert_eq!(log.last().map(|r| r.method.clone()), Some(Method::DELETE));
    })
    .await;
}

#[tokio::test]
async fn a_405_on_get_is_tolerated() {
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            json_reply(text_result(&req.id().unwrap_or(Value::Null), "ok"))
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        for _ in 0..3 {
            let result = client.call_tool("echo", json!({})).await.expect("call");
            assert_eq!(first_text(&result), "ok");
        }
        assert_eq!(
            fake.log.with_method(&Method::GET).len(),
            1,
            "a 405 means no GET stream: no retries"
        );
        assert!(!client.is_closed());
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn sse_reply_with_notifications_before_the_response() {
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            let id = req.id().unwrap_or(Value::Null);
            let token = req
                .body
                .as_ref()
                .and_then(|b| b.pointer("/params/_meta/progressToken"))
                .cloned()
                .unwrap_or(Value::Null);
            sse_reply(vec![
                priming("e-1", None),
                ": a comment to ignore\n\n".to_owned(),
                message_event(
                    Some("e-2"),
                    &notification(
                        "notifications/message",
                        json!({"level": "info", "data": "step 1"}),
                    ),
                ),
                message_event(
                    Some("e-3"),
                    &notification(
                        "notifications/progress",
                        json!({"progressToken": token, "progress": 1, "total": 2}),
                    ),
                ),
                message_event(Some("e-4"), &text_result(&id, "done")),
            ])
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        let mut notes = client.notifications();
        let progress = Arc::new(Mutex::new(Vec::new()));
        let sink = progress.clone();
        let result = client
            .call_tool("work", json!({}))
            .on_progress(move |p| sink.lock().expect("lock").push(p.progress))
            .await
            .expect("call");
        assert_eq!(first_text(&result), "done");
        assert_eq!(*progress.lock().expect("lock"), vec![1.0]);
        match notes.next().await {
            Some(Ok(ServerNotification::LoggingMessage(m))) => assert_eq!(m.data, json!("step 1")),
            other => panic!("expected the log message first, got {other:?}"),
        }
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn the_get_stream_delivers_server_notifications() {
    within(async {
        let (streams_tx, mut streams) = mpsc::unbounded_channel();
        let fake = serve(move |req| {
            let streams_tx = streams_tx.clone();
            async move {
                if req.method == Method::GET {
                    let (tx, reply) = sse_open();
                    let _ = streams_tx.send(tx);
                    return reply;
                }
                handshake(&req, Some("s-1"))
                    .unwrap_or_else(|| tools_list(&req.id().unwrap_or(Value::Null)))
            }
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        let mut notes = client.notifications();
        let stream = streams
            .recv()
            .await
            .expect("the GET stream opens after the handshake");
        let get = &fake.log.with_method(&Method::GET)[0];
        assert_eq!(get.session(), Some("s-1"));
        assert_eq!(get.header("mcp-protocol-version"), Some("2025-11-25"));
        assert_eq!(get.header("last-event-id"), None);

        stream
            .send(message_event(
                Some("g-1"),
                &notification("notifications/resources/list_changed", json!({})),
            ))
            .expect("send");
        match notes.next().await {
            Some(Ok(ServerNotification::ResourceListChanged(_))) => {}
            other => panic!("expected list_changed, got {other:?}"),
        }
        client.close().await;
    })
    .await;
}

/// The events the fake's GET stream holds, as a resumable server keeps them.
#[derive(Default)]
struct EventStore {
    events: Vec<(String, Value)>,
    gets: usize,
}

fn log_note(text: &str) -> Value {
    notification(
        "notifications/message",
        json!({"level": "info", "data": text}),
    )
}

#[tokio::test]
async fn the_get_stream_resumes_with_last_event_id_without_loss_or_duplicates() {
    within(async {
        let store = Arc::new(Mutex::new(EventStore::default()));
        let (live_tx, mut live) = mpsc::unbounded_channel();
        let fake = {
            let store = store.clone();
            serve(move |req| {
                let store = store.clone();
                let live_tx = live_tx.clone();
                async move {
                    if req.method != Method::GET {
                        return handshake(&req, Some("s-1"))
                            .unwrap_or_else(|| tools_list(&req.id().unwrap_or(Value::Null)));
                    }
                    let mut store = store.lock().expect("lock");
                    store.gets += 1;
                    if store.gets == 1 {
                        // Two events, then the connection drops; a third is sent meanwhile.
                        for (i, text) in ["n1", "n2", "n3"].iter().enumerate() {
                            store.events.push((format!("g-{}", i + 1), log_note(text)));
                        }
                        let mut events = vec![priming("g-0", Some(50))];
                        for (id, note) in &store.events[..2] {
                            events.push(message_event(Some(id), note));
                        }
                        return sse_reply(events);
                    }
                    // Resumption: replay what came after Last-Event-ID, then stay open.
                    let last = req.header("last-event-id").unwrap_or_default().to_owned();
                    let start = store
                        .events
                        .iter()
                        .position(|(id, _)| *id == last)
                        .map_or(0, |i| i + 1);
                    let (tx, reply) = sse_open();
                    for (id, note) in &store.events[start..] {
                        let _ = tx.send(message_event(Some(id), note));
                    }
                    let _ = live_tx.send(tx);
                    reply
                }
            })
            .await
        };
        let (client, _handle) = connect(transport_for(&fake)).await;
        let mut notes = client.notifications();
        let live = live.recv().await.expect("the GET stream reconnects");
        live.send(message_event(Some("g-4"), &log_note("n4")))
            .expect("send");

        let mut seen = Vec::new();
        while seen.len() < 4 {
            match notes.next().await {
                Some(Ok(ServerNotification::LoggingMessage(m))) => seen.push(m.data),
                Some(Ok(_)) => {}
                other => panic!("the notification stream ended: {other:?}"),
            }
        }
        assert_eq!(
            seen,
            vec![json!("n1"), json!("n2"), json!("n3"), json!("n4")]
        );

        let gets = fake.log.with_method(&Method::GET);
        assert_eq!(gets.len(), 2);
        assert_eq!(gets[1].header("last-event-id"), Some("g-2"));
        assert_eq!(gets[1].session(), Some("s-1"));
        assert!(
            gets[1].at.duration_since(gets[0].at) >= Duration::from_millis(50),
            "the client waited the retry time"
        );
        client.close().await;
    })
    .await;
}

/// Session state of the fake used for the expiry test.
#[derive(Default)]
struct Sessions {
    current: usize,
    expired: HashSet<String>,
    /// Open streams of calls that never answer (kept so they stay open).
    held: Vec<mpsc::UnboundedSender<String>>,
}

/// A fake that forgets sessions on demand: a request naming one in `expired` gets 404; every
/// other is answered by `answer`, with the sessions at hand.
async fn expiring_fake(
    sessions: &Arc<Mutex<Sessions>>,
    answer: impl Fn(&Incoming, &mut Sessions) -> Response + Send + Sync + 'static,
) -> Fake {
    let sessions = sessions.clone();
    let answer = Arc::new(answer);
    serve(move |req| {
        let (sessions, answer) = (sessions.clone(), answer.clone());
        async move {
            let mut s = sessions.lock().expect("lock");
            s.refuses(&req).unwrap_or_else(|| answer(&req, &mut s))
        }
    })
    .await
}

impl Sessions {
    /// 404 for a request naming a session the fake has forgotten.
    fn refuses(&self, req: &Incoming) -> Option<Response> {
        let id = req.session()?;
        self.expired
            .contains(id)
            .then(|| status(StatusCode::NOT_FOUND, "no such session"))
    }

    /// The id of a new session, `s-1`, `s-2`, …
    fn open(&mut self) -> String {
        self.current += 1;
        format!("s-{}", self.current)
    }
}

#[tokio::test]
async fn a_404_fails_what_is_in_flight_and_starts_a_new_session() {
    within(async {
        let sessions = Arc::new(Mutex::new(Sessions::default()));
        let fake = expiring_fake(&sessions, |req, s| {
            if req.is_post("initialize") {
                let session = s.open();
                if s.current == 1 {
                    return handshake(req, Some(&session)).expect("initialize");
                }
                // The server came back with another configuration.
                let id = req.id().unwrap_or(Value::Null);
                let restarted = json!({
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "restarted", "version": "2"}
                });
                return with_session(json_reply(result(&id, restarted)), &session);
            }
            if let Some(reply) = handshake(req, None) {
                return reply;
            }
            let id = req.id().unwrap_or(Value::Null);
            let tool = req.tool().to_owned();
            if tool == "slow" {
                let (tx, reply) = sse_open();
                s.held.push(tx);
                return reply;
            }
            json_reply(text_result(&id, &format!("echo from {:?}", req.session())))
        })
        .await;
        let (client, handle) = connect(transport_for(&fake)).await;
        assert_eq!(handle.session_id().as_deref(), Some("s-1"));

        // A call stays in flight on session s-1 ...
        let slow = call_in_flight(&client, &fake, "slow").await;
        // ... when the server forgets the session.
        sessions
            .lock()
            .expect("lock")
            .expired
            .insert("s-1".to_owned());

        let error = client
            .call_tool("echo", json!({}))
            .await
            .expect_err("the call that met the 404 fails");
        let (code, message) = remote_message(&error);
        assert_eq!(code, -32000);
        assert!(message.contains("ended the MCP session"), "{message}");
        let slow = slow
            .await
            .expect("join")
            .expect_err("the call in flight fails");
        let (_, message) = remote_message(&slow);
        assert!(message.contains("ended the MCP session"), "{message}");

        // The next call goes out on the new session and works.
        let result = client
            .call_tool("echo", json!({}))
            .await
            .expect("works after re-initializing");
        assert_eq!(first_text(&result), "echo from Some(\"s-2\")");
        assert_eq!(handle.session_id().as_deref(), Some("s-2"));
        assert_eq!(handle.sessions_ended(), 1);
        assert_eq!(client.reinitializations(), 1);
        // What the client knows of the server is the new session's, and the version header the
        // one the new handshake negotiated.
        assert_eq!(client.server_info().name, "restarted");
        assert!(client.server_capabilities().logging.is_some());
        assert_eq!(client.protocol_version().as_str(), "2025-06-18");
        assert_eq!(handle.protocol_version().as_deref(), Some("2025-06-18"));
        assert!(!client.is_closed());

        let log = fake.log.all();
        let inits: Vec<&Incoming> = log.iter().filter(|r| r.is_post("initialize")).collect();
        assert_eq!(inits.len(), 2);
        assert_eq!(
            inits[1].session(),
            None,
            "a new initialize has no session id"
        );
        assert_eq!(
            inits[1].body.as_ref().map(|b| &b["params"]),
            inits[0].body.as_ref().map(|b| &b["params"]),
            "the client offers the same as at first"
        );
        assert_ne!(
            inits[1].id(),
            inits[0].id(),
            "a new request of the engine's"
        );
        let initialized: Vec<&Incoming> = log
            .iter()
            .filter(|r| r.is_post("notifications/initialized"))
            .collect();
        assert_eq!(initialized.len(), 2);
        assert_eq!(initialized[1].session(), Some("s-2"));
        let gets: Vec<&Incoming> = log.iter().filter(|r| r.method == Method::GET).collect();
        assert_eq!(gets.len(), 2, "the GET stream is reopened");
        assert_eq!(gets[1].session(), Some("s-2"));
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_call_resuming_its_stream_when_the_session_ends_still_gets_the_replayed_response() {
    within(async {
        let expired = Arc::new(AtomicBool::new(false));
        let call: Arc<Mutex<Option<Value>>> = Arc::default();
        let fake = {
            let (expired, call) = (expired.clone(), call.clone());
            serve(move |req| {
                let (expired, call) = (expired.clone(), call.clone());
                async move {
                    let ended = expired.load(Ordering::SeqCst);
                    if req.method == Method::GET && req.header("last-event-id") == Some("p-1") {
                        // What the ended session wrote, replayed (as a replica on Redis does
                        // for a session whose replica died).
                        let id = call.lock().expect("lock").clone().unwrap_or(Value::Null);
                        return sse_reply(vec![message_event(
                            Some("p-2"),
                            &text_result(&id, "replayed"),
                        )]);
                    }
                    if ended && req.session() == Some("s-1") {
                        return status(StatusCode::NOT_FOUND, "no such session");
                    }
                    if let Some(reply) = handshake(&req, Some(if ended { "s-2" } else { "s-1" })) {
                        return reply;
                    }
                    let id = req.id().unwrap_or(Value::Null);
                    let tool = req.tool().to_owned();
                    if tool == "long" {
                        // The stream ends before the response; the client resumes in 500 ms.
                        *call.lock().expect("lock") = Some(id);
                        return sse_reply(vec![priming("p-1", Some(500))]);
                    }
                    json_reply(text_result(&id, "echo"))
                }
            })
            .await
        };
        let (client, handle) = connect(transport_for(&fake)).await;
        let long = call_in_flight(&client, &fake, "long").await;
        // The session ends while the long call waits to resume.
        expired.store(true, Ordering::SeqCst);
        let error = client
            .call_tool("echo", json!({}))
            .await
            .expect_err("the call that met the 404 fails");
        assert!(remote_message(&error).1.contains("ended the MCP session"));
        let result = long
            .await
            .expect("join")
            .expect("the resumed call gets the replayed response");
        assert_eq!(first_text(&result), "replayed");
        let resume = fake
            .log
            .with_method(&Method::GET)
            .into_iter()
            .find(|r| r.header("last-event-id").is_some())
            .expect("a resuming GET");
        assert_eq!(
            resume.session(),
            Some("s-1"),
            "the stream is resumed in the session it belongs to"
        );
        assert_eq!(handle.sessions_ended(), 1);
        client.close().await;
    })
    .await;
}

/// A caller that retries the moment its call failed on an ended session is held until the new
/// session is open: the retry never goes out with the dead id (which would meet a second 404).
/// Many rounds on two worker threads, where the caller runs beside the task that met the 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_right_after_a_404_waits_for_the_new_session() {
    const ROUNDS: usize = 40;
    within(async {
        let sessions = Arc::new(Mutex::new(Sessions::default()));
        let fake = expiring_fake(&sessions, |req, s| {
            if req.is_post("initialize") {
                let session = s.open();
                return handshake(req, Some(&session)).expect("initialize");
            }
            if let Some(reply) = handshake(req, None) {
                return reply;
            }
            let id = req.id().unwrap_or(Value::Null);
            json_reply(text_result(&id, req.session().unwrap_or("none")))
        })
        .await;
        let (client, handle) = connect(transport_for(&fake)).await;
        for round in 1..=ROUNDS {
            let dead = format!("s-{round}");
            // The handshake is over once the session's GET stream is asked for (the last step).
            fake.log
                .wait_for(|all| {
                    let asked =
                        |r: &Incoming| r.method == Method::GET && r.session() == Some(&dead);
                    all.iter().any(asked).then_some(())
                })
                .await;
            assert_eq!(handle.session_id().as_deref(), Some(dead.as_str()));
            sessions.lock().expect("lock").expired.insert(dead.clone());
            let error = client
                .call_tool("echo", json!({}))
                .await
                .err()
                .unwrap_or_else(|| panic!("round {round}: the call that met the 404 succeeded"));
            assert!(remote_message(&error).1.contains("ended the MCP session"));
            let retried = client
                .call_tool("echo", json!({}))
                .await
                .unwrap_or_else(|e| panic!("round {round}: the retry failed: {e}"));
            assert_eq!(first_text(&retried), format!("s-{}", round + 1));
        }
        // Nothing was sent twice: per round, the call that met the 404 and its retry.
        let calls = fake
            .log
            .all()
            .iter()
            .filter(|r| r.is_post("tools/call"))
            .count();
        assert_eq!(calls, 2 * ROUNDS);
        assert_eq!(handle.sessions_ended(), ROUNDS as u64);
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn with_reinitialize_off_a_404_closes_the_connection() {
    within(async {
        let fake = serve(|req| async move {
            if req.session() == Some("s-1") && req.is_post("tools/call") {
                return status(StatusCode::NOT_FOUND, "no such session");
            }
            handshake(&req, Some("s-1"))
                .unwrap_or_else(|| status(StatusCode::BAD_REQUEST, "unexpected"))
        })
        .await;
        let transport = transport_for(&fake).connect().await.expect("a transport");
        let client = tidewire_client::Client::builder(tidewire_core::schema::Implementation::new(
            "http-test-client",
            "0.1.0",
        ))
        .reinitialize(false)
        .era(tidewire_client::Era::Legacy)
        .connect(transport)
        .await
        .expect("connects");
        let error = client
            .call_tool("echo", json!({}))
            .await
            .expect_err("the session is gone");
        let (_, message) = remote_message(&error);
        assert!(message.contains("ended the MCP session"), "{message}");
        client.closed().await;
        assert_eq!(client.reinitializations(), 0);
        let inits = fake
            .log
            .all()
            .iter()
            .filter(|r| r.is_post("initialize"))
            .count();
        assert_eq!(inits, 1, "no new session is started");
    })
    .await;
}

#[tokio::test]
async fn a_post_stream_closed_before_the_response_is_resumed_after_retry() {
    within(async {
        let closed_at: Arc<Mutex<Option<(Instant, Value)>>> = Arc::default();
        let fake = {
            let closed_at = closed_at.clone();
            serve(move |req| {
                let closed_at = closed_at.clone();
                async move {
                    if req.method == Method::GET && req.header("last-event-id").is_some() {
                        let id = closed_at
                            .lock()
                            .expect("lock")
                            .as_ref()
                            .map(|(_, id)| id.clone())
                            .unwrap_or(Value::Null);
                        return sse_reply(vec![
                            priming("p-2", None),
                            message_event(Some("p-3"), &text_result(&id, "resumed")),
                        ]);
                    }
                    if let Some(reply) = handshake(&req, Some("s-1")) {
                        return reply;
                    }
                    let id = req.id().unwrap_or(Value::Null);
                    // Prime the stream with an id and retry, then end it without the response.
                    *closed_at.lock().expect("lock") = Some((Instant::now(), id));
                    sse_reply(vec![priming("p-1", Some(300))])
                }
            })
            .await
        };
        let (client, _handle) = connect(transport_for(&fake)).await;
        let result = client.call_tool("poll", json!({})).await.expect("call");
        assert_eq!(first_text(&result), "resumed");

        let resume = fake
            .log
            .with_method(&Method::GET)
            .into_iter()
            .find(|r| r.header("last-event-id").is_some())
            .expect("a resuming GET");
        assert_eq!(resume.header("last-event-id"), Some("p-1"));
        assert_eq!(resume.session(), Some("s-1"));
        assert_eq!(resume.header("accept"), Some("text/event-stream"));
        let (closed, _) = closed_at.lock().expect("lock").clone().expect("closed");
        let waited = resume.at.duration_since(closed);
        assert!(
            waited >= Duration::from_millis(300),
            "resumed after {waited:?}, before the retry time"
        );
        assert!(
            waited < Duration::from_secs(3),
            "resumed only after {waited:?}"
        );
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_stream_without_event_ids_cannot_be_resumed() {
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            sse_reply(vec![message_event(None, &log_note("working"))])
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        let error = client
            .call_tool("work", json!({}))
            .await
            .expect_err("no response came");
        let (code, message) = remote_message(&error);
        assert_eq!(code, -32000);
        assert!(message.contains("no event id"), "{message}");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn http_errors_fail_the_request_with_their_status() {
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            let tool = req.tool().to_owned();
            match tool.as_str() {
                "crash" => status(StatusCode::INTERNAL_SERVER_ERROR, "database on fire"),
                "bad" => {
                    let mut reply = json_reply(json!({
                        "jsonrpc": "2.0", "id": null,
                        "error": {"code": -32602, "message": "bad arguments"}
                    }));
                    *reply.status_mut() = StatusCode::BAD_REQUEST;
                    reply
                }
                _ => json_reply(text_result(&req.id().unwrap_or(Value::Null), "fine")),
            }
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;

        let started = Instant::now();
        let error = client
            .call_tool("crash", json!({}))
            .await
            .expect_err("HTTP 500");
        assert!(started.elapsed() < Duration::from_secs(5), "no hang");
        // A transport error with the response's status, not an answer made up from the body.
        assert_eq!(error.http_status(), Some(500));
        assert!(error.remote().is_none(), "{error:?}");
        assert_eq!(
            error.to_string(),
            "HTTP 500 Internal Server Error: database on fire"
        );

        let error = client
            .call_tool("bad", json!({}))
            .await
            .expect_err("HTTP 400");
        assert_eq!(error.http_status(), Some(400));
        let (code, message) = remote_message(&error);
        assert_eq!(code, -32602, "the JSON-RPC error in the body is kept");
        assert_eq!(message, "bad arguments");
        assert_eq!(error.to_string(), "HTTP 400 Bad Request: bad arguments");

        // The connection goes on.
        let result = client.call_tool("ok", json!({})).await.expect("call");
        assert_eq!(first_text(&result), "fine");
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn an_unreachable_server_fails_the_handshake_clearly() {
    within(async {
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let transport = tidewire_http::client::StreamableHttpConnector::new(format!(
            "http://127.0.0.1:{port}/mcp"
        ))
        .connect()
        .await
        .expect("valid configuration");
        let error =
            tidewire_client::Client::builder(tidewire_core::schema::Implementation::new("c", "1"))
                .era(tidewire_client::Era::Legacy)
                .connect(transport)
                .await
                .expect_err("nobody listens");
        let (code, message) = remote_message(&error);
        assert_eq!(code, -32000);
        assert!(message.contains("failed"), "{message}");
    })
    .await;
}

#[tokio::test]
async fn notifications_answered_with_200_and_a_body_are_tolerated() {
    // As the conformance suite's `initialize` mock does: no session, notifications answered
    // with 200 and an id-less result, GET and DELETE answered with 400.
    within(async {
        let fake = serve(|req| async move {
            if req.method != Method::POST {
                return status(StatusCode::BAD_REQUEST, "Invalid or missing session ID");
            }
            let id = req.id();
            match req.rpc_method() {
                Some("initialize") => {
                    json_reply(init_result(&id.unwrap_or(Value::Null), "2025-11-25"))
                }
                Some("tools/list") => tools_list(&id.unwrap_or(Value::Null)),
                _ => json_reply(json!({"jsonrpc": "2.0", "result": {}})),
            }
        })
        .await;
        let (client, handle) = connect(transport_for(&fake)).await;
        assert_eq!(handle.session_id(), None);
        let tools = client.list_all_tools().await.expect("tools/list");
        assert_eq!(tools.len(), 1);
        // A request answered the same way fails clearly instead of hanging.
        let error = client
            .ping()
            .await
            .expect_err("an id-less result answers nothing");
        let (_, message) = remote_message(&error);
        assert!(message.contains("unusable"), "{message}");
        client.close().await;
        assert!(handle.is_closed());
        let log = fake.log.all();
        assert_eq!(
            log.iter().filter(|r| r.method == Method::GET).count(),
            1,
            "a 400 on GET means no GET stream"
        );
        assert!(
            log.iter().all(|r| r.method != Method::DELETE),
            "no session, nothing to DELETE"
        );
    })
    .await;
}

/// An SSE stream that stays open, with a keep-alive comment every 25 ms so the server notices
/// when the client goes away; `gone` fires then.
fn watched_stream() -> (
    mpsc::UnboundedSender<String>,
    Response,
    oneshot::Receiver<()>,
) {
    let (tx, reply) = sse_open();
    let (gone_tx, gone) = oneshot::channel();
    let keepalive = tx.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(25));
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    if keepalive.send(": keep-alive\n\n".to_owned()).is_err() {
                        break;
                    }
                }
                () = keepalive.closed() => break,
            }
        }
        let _ = gone_tx.send(());
    });
    (tx, reply, gone)
}

#[tokio::test]
async fn cancelling_drops_the_call_stream_and_close_sends_delete_and_ends_the_get_stream() {
    within(async {
        let (gone_tx, mut gone) =
            mpsc::unbounded_channel::<(&'static str, oneshot::Receiver<()>)>();
        let held = Arc::new(Mutex::new(Vec::new()));
        let fake = {
            let held = held.clone();
            serve(move |req| {
                let gone_tx = gone_tx.clone();
                let held = held.clone();
                async move {
                    let which = if req.method == Method::GET {
                        "get"
                    } else if req.is_post("tools/call") {
                        "call"
                    } else {
                        return handshake(&req, Some("s-1"))
                            .unwrap_or_else(|| status(StatusCode::BAD_REQUEST, "unexpected"));
                    };
                    let (tx, reply, watch) = watched_stream();
                    held.lock().expect("lock").push(tx);
                    let _ = gone_tx.send((which, watch));
                    reply
                }
            })
            .await
        };
        let (client, handle) = connect(transport_for(&fake)).await;
        let (which, get_gone) = gone.recv().await.expect("the GET stream");
        assert_eq!(which, "get");

        let call = client
            .call_tool("slow", json!({}))
            .send()
            .await
            .expect("sent");
        let (which, call_gone) = gone.recv().await.expect("the call's stream");
        assert_eq!(which, "call");
        assert!(call.cancel("the test cancels"));
        assert!(call.await.expect_err("cancelled").is_cancelled());
        call_gone
            .await
            .expect("the call's stream is dropped once cancelled");
        // The stream is dropped as the call ends; the notification follows on its own POST.
        fake.log
            .wait_for(|all| {
                all.iter()
                    .any(|r| r.is_post("notifications/cancelled"))
                    .then_some(())
            })
            .await;

        client.close().await;
        assert!(handle.is_closed());
        get_gone.await.expect("the GET stream is dropped on close");
        let delete = fake
            .log
            .with_method(&Method::DELETE)
            .pop()
            .expect("a DELETE on close");
        assert_eq!(delete.session(), Some("s-1"));
        assert_eq!(delete.header("mcp-protocol-version"), Some("2025-11-25"));
    })
    .await;
}

#[tokio::test]
async fn dropping_the_transport_without_close_stops_its_streams() {
    within(async {
        let (gone_tx, mut gone) = mpsc::unbounded_channel::<oneshot::Receiver<()>>();
        let held = Arc::new(Mutex::new(Vec::new()));
        let fake = {
            let held = held.clone();
            serve(move |req| {
                let gone_tx = gone_tx.clone();
                let held = held.clone();
                async move {
                    if req.method != Method::GET {
                        return handshake(&req, Some("s-1"))
                            .unwrap_or_else(|| status(StatusCode::BAD_REQUEST, "unexpected"));
                    }
                    let (tx, reply, watch) = watched_stream();
                    held.lock().expect("lock").push(tx);
                    let _ = gone_tx.send(watch);
                    reply
                }
            })
            .await
        };
        let transport = transport_for(&fake).connect().await.expect("transport");
        let handle = transport.handle();
        let (connecting, driver) =
            tidewire_client::Client::builder(tidewire_core::schema::Implementation::new("c", "1"))
                .era(tidewire_client::Era::Legacy)
                .connect_with_driver(transport);
        let driver = tokio::spawn(driver);
        let client = connecting.await.expect("connected");
        let get_gone = gone.recv().await.expect("the GET stream");

        // Abort the connection's driver: the transport halves are dropped, never closed.
        driver.abort();
        let _ = driver.await;
        assert!(handle.is_closed());
        get_gone
            .await
            .expect("the GET stream ends when the transport is dropped");
        assert!(
            fake.log.with_method(&Method::DELETE).is_empty(),
            "dropping does not send DELETE"
        );
        drop(client);
    })
    .await;
}

/// An SSE reply whose body is exactly these chunks, each sent as an HTTP chunk of its own (so the
/// client reads them apart).
fn sse_chunks(chunks: Vec<Vec<u8>>) -> Response {
    let stream = futures::stream::iter(
        chunks
            .into_iter()
            .map(|chunk| Ok::<_, Infallible>(Bytes::from(chunk))),
    );
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        "content-type",
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

#[tokio::test]
async fn an_sse_reply_starting_with_a_byte_order_mark_is_read() {
    // eventsource-stream 0.2.3 panics on such a body; the call must be answered all the same,
    // whether the BOM comes whole or cut across chunks.
    within(async {
        let fake = serve(|req| async move {
            if let Some(reply) = handshake(&req, Some("s-1")) {
                return reply;
            }
            let id = req.id().unwrap_or(Value::Null);
            let cut = req
                .body
                .as_ref()
                .and_then(|b| b.pointer("/params/arguments/cut"))
                .and_then(Value::as_u64)
                .and_then(|cut| usize::try_from(cut).ok())
                .unwrap_or(0);
            let event = message_event(Some("e-1"), &text_result(&id, "done"));
            let mut body = b"\xEF\xBB\xBF".to_vec();
            body.extend_from_slice(event.as_bytes());
            let tail = body.split_off(cut.min(body.len()));
            sse_chunks(vec![body, tail])
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        // Cut before the BOM (it arrives whole), after its first byte, after its second.
        for cut in [0, 1, 2] {
            let result = client
                .call_tool("echo", json!({ "cut": cut }))
                .await
                .unwrap_or_else(|e| panic!("cut at {cut}: {e:?}"));
            assert_eq!(first_text(&result), "done", "cut at {cut}");
        }
        client.close().await;
    })
    .await;
}

#[tokio::test]
async fn sse_replies_to_notifications_are_capped_and_end_when_the_transport_closes() {
    within(async {
        // Every notification is answered with an SSE stream that never ends; `gone` fires when
        // the client has dropped it (the server notices at its next keep-alive).
        let (gone_tx, mut gone) = mpsc::unbounded_channel::<oneshot::Receiver<()>>();
        let held = Arc::new(Mutex::new(Vec::new()));
        let fake = {
            let held = held.clone();
            serve(move |req| {
                let gone_tx = gone_tx.clone();
                let held = held.clone();
                async move {
                    if req.method != Method::POST || req.id().is_some() {
                        return status(StatusCode::BAD_REQUEST, "unexpected");
                    }
                    let (tx, reply, watch) = watched_stream();
                    held.lock().expect("lock").push(tx);
                    let _ = gone_tx.send(watch);
                    reply
                }
            })
            .await
        };
        let transport = transport_for(&fake)
            .get_stream(false)
            .connect()
            .await
            .expect("transport");
        // Driven without the engine: only notifications go out. The receiver is kept, since
        // dropping it would stop the transport.
        let (mut sender, receiver) = transport.split();
        let sent = 3 * MAX_NOTIFICATION_STREAMS;
        for n in 0..sent {
            let note = Notification::new("notifications/roots/list_changed", Some(json!({"n": n})));
            sender
                .send(Envelope::new(Message::Notification(note)))
                .await
                .expect("sent");
        }
        let mut streams = Vec::new();
        for _ in 0..sent {
            streams.push(gone.recv().await.expect("a stream per notification"));
        }
        // Each `send` returns once its reply's head is read, in order: the first ones are read,
        // every one past the cap is closed unread.
        let (read, excess) = streams.split_at_mut(MAX_NOTIFICATION_STREAMS);
        for stream in excess {
            stream.await.expect("a stream past the cap is closed");
        }
        for stream in read.iter_mut() {
            assert!(
                matches!(stream.try_recv(), Err(TryRecvError::Empty)),
                "a stream within the cap stays open while the server keeps it"
            );
        }
        sender.close().await.expect("close");
        for stream in read {
            stream
                .await
                .expect("closing the transport ends every stream");
        }
        drop(receiver);
    })
    .await;
}

/// A 307 to `target`.
fn redirect_to(target: &str) -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [("location", target.to_owned())],
    )
        .into_response()
}

#[tokio::test]
async fn a_redirect_to_another_origin_is_refused_and_named() {
    within(async {
        let elsewhere = serve(|req| async move {
            handshake(&req, Some("stolen"))
                .unwrap_or_else(|| status(StatusCode::BAD_REQUEST, "unexpected"))
        })
        .await;
        let target = elsewhere.url.clone();
        let fake = serve(move |_req| {
            let reply = redirect_to(&target);
            async move { reply }
        })
        .await;
        let transport = transport_for(&fake)
            .header("x-api-key", "secret-key")
            .connect()
            .await
            .expect("transport");
        let error =
            tidewire_client::Client::builder(tidewire_core::schema::Implementation::new("c", "1"))
                .era(tidewire_client::Era::Legacy)
                .connect(transport)
                .await
                .expect_err("the redirect is refused");
        let (code, message) = remote_message(&error);
        assert_eq!(code, -32000);
        assert!(message.contains(&elsewhere.url), "{message}");
        assert!(message.contains("another origin"), "{message}");
        assert!(!message.contains("secret-key"), "{message}");
        assert!(
            elsewhere.log.all().is_empty(),
            "the other origin got {:?}",
            elsewhere.log.all()
        );
        let asked = fake.log.all();
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0].header("x-api-key"), Some("secret-key"));
    })
    .await;
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed() {
    within(async {
        let redirected = Arc::new(AtomicBool::new(false));
        let fake = serve(move |req| {
            let first = !redirected.swap(true, Ordering::SeqCst);
            async move {
                if first {
                    return redirect_to("/mcp");
                }
                let id = req.id().unwrap_or(Value::Null);
                handshake(&req, Some("s-1")).unwrap_or_else(|| json_reply(result(&id, json!({}))))
            }
        })
        .await;
        let (client, _handle) = connect(transport_for(&fake)).await;
        client.ping().await.expect("ping");
        let initializes = fake
            .log
            .all()
            .iter()
            .filter(|r| r.is_post("initialize"))
            .count();
        assert_eq!(
            initializes, 2,
            "the initialize POST is sent again, body and all"
        );
        client.close().await;
    })
    .await;
}
