//! The Streamable HTTP server, driven with raw HTTP: every status and header rule, the streams,
//! sessions, resumption, and the JSON and stateless modes.

use std::time::Duration;

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};
use tidewire_http::server::{HttpConfig, ResponseMode};
use tokio::time::timeout;

mod support;

use support::raw::*;

#[tokio::test]
async fn a_session_is_issued_at_initialize_and_required_after() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        // Keep-alive comments far apart: the GET stream below must end because its session did,
        // not because a keep-alive tick happened to look.
        let (url, mcp) = start(HttpConfig::default().keep_alive(Duration::from_secs(3600))).await;
        let mut raw = Raw::new(&url);
        let init = timeout(LIMIT, raw.initialize()).await.expect("in time");
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        let session = raw.session.clone().expect("a session id");
        assert_eq!(session.len(), 32);
        assert!(session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
        assert_eq!(mcp.session_count(), 1);

        let echo = tool_call(1, "echo", json!({"text": "hi"}));
        let replies = timeout(LIMIT, raw.call(&echo)).await.expect("in time");
        assert_eq!(
            replies.last().expect("reply")["result"]["content"][0]["text"],
            "hi"
        );
        // The answer's event is kept a while for resumption, and counted as its buffer.
        let kept = mcp.event_store_bytes();
        assert!(
            (128..tidewire_http::server::EventStoreLimits::DEFAULT_TOTAL_BYTES).contains(&kept),
            "{kept} bytes kept"
        );

        let anonymous = Raw::new(&url);
        let response = anonymous.post(&echo).send().await.expect("post");
        assert_eq!(response.status(), 400, "no session id");
        let mut stranger = Raw::new(&url);
        stranger.session = Some("0".repeat(32));
        let response = stranger.post(&echo).send().await.expect("post");
        assert_eq!(response.status(), 404, "unknown session");
        let body: Value = json_of(response).await.expect("json error");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Session not found"))
        );

        // DELETE ends it, and its open GET stream with it; afterwards the id is unknown.
        let standalone = timeout(LIMIT, raw.get(None).send())
            .await
            .expect("in time")
            .expect("get");
        assert_eq!(standalone.status(), 200);
        let mut standalone = standalone.bytes_stream();
        let deleted = raw
            .http
            .delete(&url)
            .header("mcp-session-id", &session)
            .send()
            .await
            .expect("delete");
        assert_eq!(deleted.status(), 200);
        let ended = timeout(LIMIT, async {
            while let Some(chunk) = standalone.next().await {
                if chunk.is_err() {
                    break;
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the GET stream ends with its session");
        let response = raw.post(&echo).send().await.expect("post");
        assert_eq!(response.status(), 404);
        assert_eq!(mcp.session_count(), 0);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn every_check_has_its_status_and_a_json_rpc_body() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default().max_body(4096)).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let echo = tool_call(1, "echo", json!({"text": "x"}));
        let status = |r: &reqwest::Response| r.status().as_u16();

        let r = raw
            .post_with(&echo, &[("host", "evil.example")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 403, "foreign Host");
        let r = raw
            .post_with(&echo, &[("origin", "https://evil.example")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 403, "foreign Origin");
        let body: Value = json_of(r).await.expect("json");
        assert_eq!(body["jsonrpc"], "2.0");
        let r = raw
            .post_with(&echo, &[("origin", "http://localhost:5173")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 200, "a loopback Origin is fine");
        let _ = r.bytes().await;

        let r = raw
            .post_with(&echo, &[("accept", "application/json")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 406, "Accept without text/event-stream");
        let r = raw
            .post_with(&echo, &[("content-type", "text/plain")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 415);
        let r = raw
            .post_with(&echo, &[("mcp-protocol-version", "2099-01-01")])
            .send()
            .await
            .expect("post");
        assert_eq!(status(&r), 400, "unsupported protocol version");
        let big = tool_call(2, "echo", json!({"text": "y".repeat(10_000)}));
        let r = raw.post(&big).send().await.expect("post");
        assert_eq!(status(&r), 413);

        let mut malformed = raw.post(&echo).build().expect("request");
        *malformed.body_mut() = Some("{not json".into());
        let r = raw.http.execute(malformed).await.expect("post");
        assert_eq!(status(&r), 400);
        let body: Value = json_of(r).await.expect("json");
        assert_eq!(body["error"]["code"], -32700);
        let r = raw.post(&json!([echo.clone()])).send().await.expect("post");
        assert_eq!(status(&r), 400, "batches are refused");
        let r = raw.http.put(&url).send().await.expect("put");
        assert_eq!(status(&r), 405);
        let mut wrong = raw.get(None).build().expect("request");
        wrong.headers_mut().insert(
            "accept",
            reqwest::header::HeaderValue::from_static("application/json"),
        );
        let r = raw.http.execute(wrong).await.expect("get");
        assert_eq!(status(&r), 406, "GET must accept text/event-stream");
        // After all that, the session still serves.
        let replies = raw.call(&echo).await;
        assert_eq!(
            replies.last().expect("reply")["result"]["content"][0]["text"],
            "x"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn related_messages_ride_the_post_and_unrelated_ones_the_get_stream() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        // list_changed sent before any GET stream waits in the session's buffer.
        let replies = timeout(
            LIMIT,
            raw.call(&tool_call(1, "notify", json!({"count": 3}))),
        )
        .await
        .expect("in time");
        let methods: Vec<&str> = replies
            .iter()
            .filter_map(|m| m["method"].as_str())
            .collect();
        assert_eq!(
            methods,
            vec!["notifications/message"; 3],
            "logs travel with their request"
        );
        assert!(replies.last().expect("reply")["result"].is_object());
        let get = raw.get(None).send().await.expect("get");
        assert_eq!(get.status(), 200);
        let mut events = get.bytes_stream().eventsource();
        let event = timeout(LIMIT, events.next())
            .await
            .expect("in time")
            .expect("event")
            .expect("sse");
        let message: Value = serde_json::from_str(&event.data).expect("json");
        assert_eq!(message["method"], "notifications/resources/list_changed");
        assert!(
            event.id.starts_with("0-"),
            "standalone stream ids start with 0-: {}",
            event.id
        );
        // A second reader of the same stream is refused.
        let second = raw.get(None).send().await.expect("get");
        assert_eq!(second.status(), 409);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_get_stream_cut_mid_burst_resumes_without_loss_or_duplicates() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let get = raw.get(None).send().await.expect("get");
        let mut events = get.bytes_stream().eventsource();
        let burst = {
            let raw = raw.clone();
            tokio::spawn(
                async move { raw.call(&tool_call(1, "burst", json!({"n": 10_000}))).await },
            )
        };
        let mut seqs = Vec::new();
        let mut last_id = String::new();
        while seqs.len() < 2_500 {
            let event = timeout(LIMIT, events.next())
                .await
                .expect("in time")
                .expect("event")
                .expect("sse");
            seqs.push(event.id.clone());
            last_id = event.id;
        }
        drop(events); // the connection is cut mid-burst
        let resumed = raw.get(Some(&last_id)).send().await.expect("resume");
        assert_eq!(resumed.status(), 200);
        let mut events = resumed.bytes_stream().eventsource();
        while seqs.len() < 10_000 {
            let event = timeout(LIMIT, events.next())
                .await
                .expect("in time")
                .expect("event")
                .expect("sse");
            seqs.push(event.id);
        }
        let replies = timeout(LIMIT, burst).await.expect("in time").expect("task");
        assert_eq!(
            replies.last().expect("reply")["result"]["content"][0]["text"],
            "sent 10000"
        );
        let numbers: Vec<u64> = seqs
            .iter()
            .map(|id| {
                id.split_once('-')
                    .and_then(|(_, n)| n.parse().ok())
                    .expect("id")
            })
            .collect();
        let expected: Vec<u64> = (1..=10_000).collect();
        assert_eq!(numbers, expected, "every event exactly once, in order");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_post_stream_can_be_resumed_by_get() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let crawl = tool_call(
            1,
            "crawl",
            json!({"urls": ["https://a", "https://b", "https://c"], "delay_ms": 50}),
        );
        let mut body = crawl.clone();
        body["params"]["_meta"] = json!({"progressToken": "t"});
        let response = raw.post(&body).send().await.expect("post");
        // Read the raw stream until the first progress event is complete.
        let mut chunks = response.bytes_stream();
        let mut text = String::new();
        while !(text.contains("notifications/progress") && text.ends_with("\n\n")) {
            let chunk = timeout(LIMIT, chunks.next())
                .await
                .expect("in time")
                .expect("chunk")
                .expect("bytes");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        let blocks: Vec<&str> = text
            .split("\n\n")
            .filter(|b| !b.trim().is_empty())
            .collect();
        let field = |block: &str, name: &str| {
            block.lines().find_map(|l| {
                l.strip_prefix(&format!("{name}:"))
                    .map(|v| v.trim().to_owned())
            })
        };
        let priming = blocks[0];
        assert!(
            field(priming, "id").is_some_and(|id| id.ends_with("-0")),
            "a priming event comes first: {text}"
        );
        assert!(field(priming, "retry").is_some(), "with retry: {text}");
        assert_eq!(
            field(priming, "data").as_deref(),
            Some(""),
            "and empty data: {text}"
        );
        let first_id = field(blocks[1], "id").expect("the progress event's id");
        drop(chunks); // the client loses the POST stream after one progress report
        let resumed = raw.get(Some(&first_id)).send().await.expect("resume");
        let messages = read_messages(resumed).await;
        let progress: Vec<f64> = messages
            .iter()
            .filter_map(|m| m["params"]["progress"].as_f64())
            .collect();
        assert_eq!(
            progress,
            vec![2.0, 3.0],
            "only what came after, on that stream"
        );
        assert_eq!(
            messages.last().expect("response")["result"]["content"][0]["text"],
            "Crawled 3 URLs"
        );
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn colliding_ids_of_two_sessions_never_meet() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default()).await;
        let mut a = Raw::new(&url);
        let mut b = Raw::new(&url);
        a.initialize().await;
        b.initialize().await;
        let slow_a = tool_call(7, "crawl", json!({"urls": ["https://a"], "delay_ms": 100}));
        let fast_b = tool_call(7, "echo", json!({"text": "b's answer"}));
        let (ra, rb) = tokio::join!(a.call(&slow_a), b.call(&fast_b));
        assert_eq!(
            ra.last().expect("a")["result"]["content"][0]["text"],
            "Crawled 1 URLs"
        );
        assert_eq!(
            rb.last().expect("b")["result"]["content"][0]["text"],
            "b's answer"
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn the_session_table_is_bounded_and_idle_sessions_expire() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let config = HttpConfig::default()
            .max_sessions(2)
            .idle_timeout(Duration::from_millis(200));
        let (url, mcp) = start(config).await;
        let mut a = Raw::new(&url);
        let mut b = Raw::new(&url);
        a.initialize().await;
        b.initialize().await;
        let c = Raw::new(&url);
        let full = c.post(&init_body(0)).send().await.expect("post");
        assert_eq!(full.status(), 503);
        assert_eq!(
            full.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("5")
        );
        let replies = a
            .call(&tool_call(1, "echo", json!({"text": "still fine"})))
            .await;
        assert_eq!(
            replies.last().expect("reply")["result"]["content"][0]["text"],
            "still fine"
        );
        // Both go idle and expire; the reaper runs every 50 ms here.
        let expired = timeout(LIMIT, async {
            loop {
                if mcp.session_count() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert!(expired.is_ok(), "idle sessions expire");
        let gone = a
            .post(&tool_call(2, "echo", json!({"text": "x"})))
            .send()
            .await
            .expect("post");
        assert_eq!(gone.status(), 404);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn json_mode_answers_with_json_and_refuses_streaming_clearly() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default().response_mode(ResponseMode::Json)).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let response = raw
            .post(&tool_call(1, "echo", json!({"text": "json"})))
            .send()
            .await
            .expect("post");
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        let body: Value = json_of(response).await.expect("json");
        assert_eq!(body["result"]["content"][0]["text"], "json");
        let mut crawl = tool_call(2, "crawl", json!({"urls": ["https://a"], "delay_ms": 1}));
        crawl["params"]["_meta"] = json!({"progressToken": 1});
        let replies = raw.call(&crawl).await;
        let text = replies[0]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(replies[0]["result"]["isError"], true, "{replies:?}");
        assert!(text.contains("JSON response mode"), "{text}");
        let sample = raw
            .call(&tool_call(3, "sample", json!({"prompt": "p"})))
            .await;
        assert_eq!(sample[0]["result"]["isError"], true);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn one_shot_sessions_have_no_session_ids_and_no_requests_to_the_client() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, mcp) = start(HttpConfig::default().one_shot_sessions(true)).await;
        let raw = Raw::new(&url);
        let init = raw.post(&init_body(0)).send().await.expect("post");
        assert!(init.headers().get("mcp-session-id").is_none());
        let _ = read_messages(init).await;
        let replies = raw
            .call(&tool_call(1, "echo", json!({"text": "no session"})))
            .await;
        assert_eq!(
            replies.last().expect("reply")["result"]["content"][0]["text"],
            "no session"
        );
        let elicit = raw
            .call(&tool_call(2, "elicit", json!({"message": "m"})))
            .await;
        let result = &elicit.last().expect("reply")["result"];
        assert_eq!(result["isError"], true);
        assert!(
            result["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("one-shot sessions")),
            "{result}"
        );
        assert_eq!(raw.get(None).send().await.expect("get").status(), 405);
        assert_eq!(
            raw.http.delete(&url).send().await.expect("delete").status(),
            405
        );
        assert_eq!(mcp.session_count(), 0);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn concurrent_stateless_requests_keep_their_streams_apart() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default().one_shot_sessions(true)).await;
        let raw = Raw::new(&url);
        let mut crawl = tool_call(
            1,
            "crawl",
            json!({"urls": ["https://a", "https://b", "https://c"], "delay_ms": 20}),
        );
        crawl["params"]["_meta"] = json!({"progressToken": "p"});
        let echoes = (0..5).map(|i| {
            let raw = raw.clone();
            async move {
                raw.call(&tool_call(
                    10 + i,
                    "echo",
                    json!({"text": format!("echo {i}")}),
                ))
                .await
            }
        });
        let (crawled, echoed) = tokio::join!(raw.call(&crawl), futures::future::join_all(echoes));
        // Every one-shot session numbers its streams from 1; none may read another's events.
        for (i, reply) in (10..).zip(&echoed) {
            assert_eq!(reply.len(), 1, "only its own response: {reply:?}");
            assert_eq!(reply[0]["id"], i);
        }
        let (progress, rest): (Vec<_>, Vec<_>) = crawled
            .iter()
            .partition(|m| m["method"] == "notifications/progress");
        assert_eq!(progress.len(), 3, "{crawled:?}");
        assert_eq!(rest.len(), 1, "{crawled:?}");
        assert_eq!(rest[0]["id"], 1);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn batches_are_served_on_2025_03_26_only() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        for mode in [ResponseMode::Sse, ResponseMode::Json] {
            let (url, _mcp) = start(HttpConfig::default().response_mode(mode)).await;
            let mut raw = Raw::new(&url);
            raw.initialize().await;
            let batch = json!([
                tool_call(10, "echo", json!({"text": "one"})),
                {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"},
                tool_call(11, "echo", json!({"text": "two"})),
            ]);
            let response = raw
                .post_with(&batch, &[("mcp-protocol-version", "2025-03-26")])
                .send()
                .await
                .expect("post");
            assert_eq!(response.status(), 200, "{mode:?}");
            let mut messages = read_messages(response).await;
            if let [Value::Array(array)] = messages.as_slice() {
                messages = array.clone();
            }
            let mut answers: Vec<(i64, String)> = messages
                .iter()
                .map(|m| {
                    (
                        m["id"].as_i64().expect("id"),
                        m["result"]["content"][0]["text"]
                            .as_str()
                            .expect("text")
                            .to_owned(),
                    )
                })
                .collect();
            answers.sort();
            assert_eq!(
                answers,
                vec![(10, "one".to_owned()), (11, "two".to_owned())],
                "{mode:?}"
            );
            let refused = raw.post(&batch).send().await.expect("post");
            assert_eq!(refused.status(), 400, "2025-11-25 has no batches");
            let with_init = json!([init_body(99)]);
            let refused = raw
                .post_with(&with_init, &[("mcp-protocol-version", "2025-03-26")])
                .send()
                .await
                .expect("post");
            assert_eq!(refused.status(), 400, "initialize cannot be batched");
        }
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn idle_streams_get_keep_alive_comments() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let (url, _mcp) = start(HttpConfig::default().keep_alive(Duration::from_millis(50))).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let get = raw.get(None).send().await.expect("get");
        assert_eq!(
            get.headers()
                .get("x-accel-buffering")
                .and_then(|v| v.to_str().ok()),
            Some("no")
        );
        assert_eq!(
            get.headers()
                .get("cache-control")
                .and_then(|v| v.to_str().ok()),
            Some("no-cache")
        );
        let mut chunks = get.bytes_stream();
        let chunk = timeout(LIMIT, chunks.next())
            .await
            .expect("in time")
            .expect("chunk")
            .expect("bytes");
        assert_eq!(&chunk[..], b":\n\n", "a comment, which clients ignore");
    })
    .await
    .expect("the test took longer than its limit");
}

/// SSE polling (SEP-1699): a handler ends its POST stream after the priming event; the client
/// waits `retry`, resumes with GET and `Last-Event-ID`, and gets the response there.
#[tokio::test]
async fn a_handler_can_close_its_stream_and_the_client_resumes() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let (url, _mcp) = start(HttpConfig::default().retry(Duration::from_millis(50))).await;
        let mut raw = Raw::new(&url);
        raw.initialize().await;
        let response = raw
            .post(&tool_call(1, "test_reconnection", json!({})))
            .send()
            .await
            .expect("post");
        let text =
            String::from_utf8_lossy(&response.bytes().await.expect("the stream ends")).into_owned();
        assert!(text.contains("retry: 50"), "{text}");
        assert!(
            !text.contains("\"result\""),
            "the stream closed before the response: {text}"
        );
        let priming_id = text
            .lines()
            .find_map(|l| l.strip_prefix("id: "))
            .expect("the priming event's id")
            .to_owned();
        let resumed = raw.get(Some(&priming_id)).send().await.expect("resume");
        let messages = read_messages(resumed).await;
        let text = messages.last().expect("the response")["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            text.starts_with("Reconnection test completed"),
            "{messages:?}"
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// Issue 26, item 12: the session era's stateless mode (a one-shot session per POST) had no
/// cap on the requests running at once; only the 2026-07-28 path had one. Now both share
/// `max_stateless_requests`.
#[tokio::test]
async fn stateless_mode_is_bounded_like_the_stateless_wire() {
    timeout(LIMIT, async {
        let config = HttpConfig::default()
            .one_shot_sessions(true)
            .max_stateless_requests(1);
        let (url, _mcp) = start(config).await;
        let raw = Raw::new(&url);
        let slow = tool_call(
            1,
            "crawl",
            json!({"urls": ["https://a"], "delay_ms": 600_000}),
        );
        let held = raw.post(&slow).send().await.expect("the slow call");
        assert_eq!(held.status(), 200);
        let refused = raw
            .post(&tool_call(2, "echo", json!({"text": "x"})))
            .send()
            .await
            .expect("answered");
        assert_eq!(refused.status(), 503);
        assert!(refused.headers().get("retry-after").is_some());
        drop(held);
        // The place is given back once the slow call's one-shot session ends.
        loop {
            let again = raw
                .post(&tool_call(3, "echo", json!({"text": "x"})))
                .send()
                .await
                .expect("answered");
            // Each try is a round trip: no sleep needed between them.
            if again.status() == 200 {
                break;
            }
        }
    })
    .await
    .expect("within the limit");
}
