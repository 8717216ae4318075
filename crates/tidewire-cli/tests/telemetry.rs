//! `tidewire serve`'s telemetry, from outside the process:
//! - `--otlp-endpoint`: over stdio, a request whose `_meta` carries `traceparent` with trace id
//!   T (in both eras) reaches an OTLP/HTTP receiver in the test as a server span of trace T,
//!   named `tools/call echo`;
//! - `--metrics-bind`: `/metrics` holds `mcp_server_operation_duration_seconds` by
//!   `mcp_method_name`, `mcp_server_session_duration_seconds` once a session ended, and the
//!   in-flight and session gauges; Debian's Prometheus
//!   (`TIDEWIRE_PROMETHEUS`) scrapes it and answers a query for the series;
//! - interop: a trace started in the official Python SDK's client (`tests/py/otel_peer.py`)
//!   continues in the server's span.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::{BIN, LIMIT, http_client};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::time::timeout;

/// An OTLP/HTTP receiver: every JSON body POSTed to `/v1/traces`, kept (and watched: a test
/// waits for the export it expects instead of polling).
async fn receiver() -> (String, tokio::sync::watch::Receiver<Vec<Value>>) {
    let (kept, traces) = tokio::sync::watch::channel(Vec::new());
    let kept = Arc::new(kept);
    let app = axum::Router::new()
        .route(
            "/v1/traces",
            axum::routing::post(move |body: axum::body::Bytes| {
                let kept = kept.clone();
                async move {
                    if let Ok(value) = serde_json::from_slice::<Value>(&body) {
                        kept.send_modify(|all| all.push(value));
                    }
                    ([("content-type", "application/json")], "{}")
                }
            }),
        )
        .route(
            "/v1/metrics",
            axum::routing::post(|| async { ([("content-type", "application/json")], "{}") }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), traces)
}

/// Every span of the exported bodies, flattened.
fn spans(bodies: &[Value]) -> Vec<Value> {
    let mut all = Vec::new();
    for body in bodies {
        for resource in body["resourceSpans"].as_array().into_iter().flatten() {
            for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
                all.extend(scope["spans"].as_array().into_iter().flatten().cloned());
            }
        }
    }
    all
}

#[tokio::test]
async fn a_traceparent_over_stdio_reaches_the_otlp_receiver_as_the_servers_parent() {
    timeout(Duration::from_secs(120), async {
        let (endpoint, traces) = receiver().await;
        let mut child = Command::new(BIN)
            .args(["serve", "--stdio", "--otlp-endpoint", &endpoint])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start tidewire serve --stdio");
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let session_trace = "0af7651916cd43dd8448eb211c80319c";
        let stateless_trace = "0af7651916cd43dd8448eb211c80319d";
        let parent = "b7ad6b7169203331";
        let lines = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "otel-test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": "traced"},
                "_meta": {"traceparent": format!("00-{session_trace}-{parent}-01")}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": "traced"},
                "_meta": {
                    "traceparent": format!("00-{stateless_trace}-{parent}-01"),
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "otel-test", "version": "1"}}}}),
        ];
        for line in &lines {
            stdin
                .write_all(format!("{line}\n").as_bytes())
                .await
                .unwrap();
        }
        let mut answered = 0;
        while answered < 3 {
            let line = timeout(LIMIT, stdout.next_line())
                .await
                .expect("answers in time")
                .unwrap()
                .expect("the server answers before it exits");
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                assert!(message.get("error").is_none(), "{message}");
                answered += 1;
            }
        }
        // The end of stdin stops the server, which exports what it batched before it exits.
        drop(stdin);
        let status = timeout(LIMIT, child.wait()).await.expect("exits").unwrap();
        assert!(status.success(), "{status}");
        let exported = spans(&traces.borrow());
        for trace in [session_trace, stateless_trace] {
            let span = exported
                .iter()
                .find(|s| s["traceId"] == trace && s["name"] == "tools/call echo")
                .unwrap_or_else(|| panic!("no server span of trace {trace} in {exported:#?}"));
            assert_eq!(span["parentSpanId"], parent);
            assert_eq!(span["kind"], 2, "SPAN_KIND_SERVER: {span}");
        }
    })
    .await
    .expect("the test ends in time");
}

/// The text of `url`.
async fn text(http: &reqwest::Client, url: &str) -> String {
    http.get(url)
        .send()
        .await
        .expect("get")
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn metrics_are_served_for_prometheus_and_scraped() {
    timeout(Duration::from_secs(180), async {
        let mut child = Command::new(BIN)
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--metrics-bind",
                "127.0.0.1:0",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start tidewire serve --bind");
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let url = timeout(LIMIT, stdout.next_line())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let metrics = loop {
            let line = timeout(LIMIT, stderr.next_line())
                .await
                .expect("stderr in time")
                .unwrap()
                .expect("the metrics address is named");
            if let Some(at) = line.split("metrics (Prometheus text format) at ").nth(1) {
                break at.trim().to_owned();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = stderr.next_line().await {} });
        let http = http_client();
        // One stateless tool call.
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "echo", "arguments": {"text": "counted"}, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "metrics-test", "version": "1"}}}});
        let answer = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", "echo")
            .body(call.to_string())
            .send()
            .await
            .expect("call");
        assert_eq!(answer.status(), 200);
        drop(answer.text().await);

        // A session that begins and ends (DELETE): its duration.
        let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "metrics-test", "version": "1"}}});
        let opened = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize.to_string())
            .send()
            .await
            .expect("initialize");
        let session = opened.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned();
        drop(opened.text().await);
        let deleted = http
            .delete(&url)
            .header("mcp-session-id", &session)
            .header("mcp-protocol-version", "2025-11-25")
            .send()
            .await
            .expect("delete");
        assert_eq!(deleted.status(), 200);
        // The session's engine stops a moment after the DELETE is answered.
        let started = Instant::now();
        let exposition = loop {
            let exposition = text(&http, &metrics).await;
            if exposition.contains("mcp_server_session_duration_seconds_count") {
                break exposition;
            }
            assert!(
                started.elapsed() < LIMIT,
                "no session duration in:\n{exposition}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(exposition.contains("mcp_protocol_version=\"2025-11-25\""));
        // A refused request (no session id on a session-era call): counted by its status.
        let refused = http
            .post(&url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2025-11-25")
            .body(json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}).to_string())
            .send()
            .await
            .expect("post");
        assert_eq!(refused.status(), 400);
        drop(refused.text().await);
        let exposition = text(&http, &metrics).await;
        assert!(
            exposition.contains("tidewire_http_refusals_total{http_response_status_code=\"400\""),
            "{exposition}"
        );
        for expected in [
            "mcp_server_operation_duration_seconds_bucket{",
            "mcp_method_name=\"tools/call\"",
            "gen_ai_tool_name=\"echo\"",
            "tidewire_server_requests_in_flight",
            "tidewire_http_sessions",
            "tidewire_http_event_store_usage",
            "tidewire_ws_connections",
            "tidewire_server_tasks{",
            "tidewire_task_status=\"input_required\"",
            "tidewire_server_tasks_ended_total{",
            "tidewire_task_status=\"cancelled\"",
            "tidewire_server_refusals_total{",
            "tidewire_refusal_reason=\"draining\"",
        ] {
            assert!(
                exposition.contains(expected),
                "no {expected} in:\n{exposition}"
            );
        }

        let Some(prometheus) = tidewire_tests::external::prometheus() else {
            return;
        };
        let target = metrics
            .trim_start_matches("http://")
            .trim_end_matches("/metrics")
            .to_owned();
        let dir = std::env::temp_dir().join(format!("tidewire-prometheus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: tidewire\n    \
                 static_configs:\n      - targets: ['{target}']\n"
            ),
        )
        .unwrap();
        let port = tidewire_tests::external::free_port();
        let mut scraper = Command::new(prometheus)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start prometheus");
        let query = format!(
            "http://127.0.0.1:{port}/api/v1/query?query=\
             mcp_server_operation_duration_seconds_count%7Bmcp_method_name%3D%22tools%2Fcall%22%7D"
        );
        let started = Instant::now();
        let found = loop {
            // Prometheus says nothing when it has scraped: its query API is the sign.
            if let Ok(response) = http.get(&query).send().await
                && let Ok(body) = response.text().await
                && let Ok(answer) = serde_json::from_str::<Value>(&body)
                && let Some(first) = answer["data"]["result"].as_array().and_then(|r| r.first())
            {
                break first.clone();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Prometheus did not return the series within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        assert_eq!(found["metric"]["gen_ai_tool_name"], "echo", "{found}");
        assert_eq!(found["value"][1], "1", "one call counted: {found}");
        let _ = scraper.kill().await;
        let _ = child.kill().await;
        let _ = std::fs::remove_dir_all(&dir);
    })
    .await
    .expect("the test ends in time");
}

/// A trace started in the official Python SDK's client continues in tidewire's server span:
/// `tests/py/otel_peer.py client` calls `echo` over stdio inside a parent span context (the SDK
/// writes it into `_meta`), and the server's span reaches the OTLP receiver as its child.
#[tokio::test]
async fn a_trace_started_in_the_python_sdks_client_continues_in_the_servers_span() {
    let Some(peers) = tidewire_tests::external::python_peers() else {
        return;
    };
    timeout(Duration::from_secs(120), async {
        let (endpoint, traces) = receiver().await;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/py/otel_peer.py");
        let (trace, parent) = ("5b8efff798038103d269b633813fc60c", "eee19b7ec3c1b174");
        let output = timeout(
            LIMIT,
            Command::new(&peers.python)
                .args([
                    script, "client", trace, parent, "--", BIN, "serve", "--stdio",
                ])
                .args(["--otlp-endpoint", &endpoint])
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("the Python client ends in time")
        .expect("run the Python client");
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && said.contains("traced from Python"),
            "{}\n{said}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // The server exported its spans as it exited, when the client closed its stdin.
        let is_it = |s: &Value| s["traceId"] == trace && s["name"] == "tools/call echo";
        let mut traces = traces;
        let span = match timeout(LIMIT, traces.wait_for(|all| spans(all).iter().any(is_it))).await {
            Ok(Ok(all)) => spans(&all).into_iter().find(is_it),
            _ => None,
        };
        let span = span.unwrap_or_else(|| {
            panic!("no span of trace {trace} in {:#?}", spans(&traces.borrow()))
        });
        // The SDK's own span is non-recording with only the OpenTelemetry API installed: it
        // carries its parent's context, so the server's parent is the span the test set.
        assert_eq!(span["parentSpanId"], parent, "{span}");
    })
    .await
    .expect("the test ends in time");
}
