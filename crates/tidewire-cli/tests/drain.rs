//! `tidewire serve` drains at SIGTERM: during a 3-second crawl over HTTP, `/readyz` turns 503
//! and a new `initialize` gets 503 with `Retry-After`, the crawl completes with its result, and
//! the process exits 0 well within `--drain-timeout`.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use futures::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use support::{BIN, LIMIT, crawl_args, http_client};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

const VERSION: &str = "2025-11-25";

fn post(
    http: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let mut request = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .header("mcp-protocol-version", VERSION)
        .body(body.to_string());
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request
}

fn initialize(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {},
        "clientInfo": {"name": "drain-test", "version": "1"}}})
}

#[tokio::test]
async fn sigterm_drains_a_crawl_in_flight_then_exits_0() {
    timeout(Duration::from_secs(120), async {
        let mut child = Command::new(BIN)
            .args(["serve", "--bind", "127.0.0.1:0", "--drain-timeout", "10"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start tidewire serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let url = timeout(LIMIT, stdout.next_line())
            .await
            .expect("the URL in time")
            .expect("read stdout")
            .expect("a first line");
        let base = url.trim_end_matches("/mcp").to_owned();
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr")).lines();
        let http = http_client();

        // A session, and a crawl of 6 URLs × 500 ms on it, reporting progress.
        let init = post(&http, &url, None, &initialize(0))
            .send()
            .await
            .expect("initialize");
        assert_eq!(init.status(), 200);
        let session = init.headers()["mcp-session-id"]
            .to_str()
            .expect("ascii")
            .to_owned();
        drop(init.bytes().await);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = post(&http, &url, Some(&session), &initialized)
            .send()
            .await
            .expect("initialized");
        assert_eq!(ack.status(), 202);
        let arguments: Value = serde_json::from_str(&crawl_args(6, 500)).expect("arguments");
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "crawl", "arguments": arguments, "_meta": {"progressToken": "crawl"}}});
        let response = post(&http, &url, Some(&session), &call)
            .send()
            .await
            .expect("call");
        assert_eq!(response.status(), 200);
        let mut body = response.bytes_stream();
        let mut seen = String::new();
        // The crawl runs once its first progress report arrives.
        while !seen.contains("notifications/progress") {
            let chunk = timeout(LIMIT, body.next()).await.expect("progress in time");
            seen.push_str(&String::from_utf8_lossy(
                &chunk.expect("a chunk").expect("bytes"),
            ));
        }
        let crawl = tokio::spawn(async move {
            while let Some(chunk) = body.next().await {
                seen.push_str(&String::from_utf8_lossy(&chunk.expect("bytes")));
            }
            seen
        });

        let pid = Pid::from_raw(i32::try_from(child.id().expect("running")).expect("a pid"));
        let signalled = Instant::now();
        kill(pid, Signal::SIGTERM).expect("SIGTERM");
        // The server says when the drain has started.
        loop {
            let line = timeout(LIMIT, stderr.next_line())
                .await
                .expect("stderr in time")
                .expect("read stderr")
                .expect("the server says it drains before it exits");
            if line.contains("SIGTERM: draining") {
                break;
            }
        }
        // Keep reading stderr, so the server never blocks writing to it.
        let rest_of_stderr = tokio::spawn(async move {
            let mut lines = Vec::new();
            while let Ok(Some(line)) = stderr.next_line().await {
                lines.push(line);
            }
            lines
        });

        let ready = http
            .get(format!("{base}/readyz"))
            .send()
            .await
            .expect("readyz");
        assert_eq!(ready.status(), 503, "/readyz while draining");
        let healthy = http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .expect("healthz");
        assert_eq!(healthy.status(), 200, "/healthz while draining");
        let refused = post(&http, &url, None, &initialize(2))
            .send()
            .await
            .expect("initialize");
        assert_eq!(refused.status(), 503, "a new session while draining");
        assert!(refused.headers().contains_key("retry-after"));

        let crawl = timeout(LIMIT, crawl)
            .await
            .expect("the crawl ends in time")
            .expect("ran");
        assert!(
            crawl.contains("Crawled 6 URLs"),
            "the crawl completes with its result: {crawl}"
        );
        let status = timeout(Duration::from_secs(10), child.wait())
            .await
            .expect("the process exits within the drain timeout")
            .expect("wait");
        assert!(status.success(), "exit status {status}");
        assert!(signalled.elapsed() < Duration::from_secs(10));
        let said = rest_of_stderr.await.expect("stderr read").join("\n");
        assert!(said.contains("drained in"), "{said}");
    })
    .await
    .expect("the test ends in time");
}
