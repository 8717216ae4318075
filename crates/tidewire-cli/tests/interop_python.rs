//! The official MCP Python SDK's peer client (`mcp` 2.3.0) against `tidewire serve`: the eight
//! peer scenarios in `--mode modern` (2026-07-28 only), `--mode auto` (it probes
//! `server/discover`, which the dual server answers, so it speaks 2026-07-28 too) and
//! `--mode legacy` (`initialize`), on stdio, Streamable HTTP and WebSocket; on legacy HTTP+SSE,
//! which carries sessions only, `auto` falls back and `legacy` is used. On HTTP, the wire dump
//! shows each message on its stream: logs on their POST, and `list_changed` /
//! `resources/updated` on the GET stream (sessions) or on the listen POST (2026-07-28).
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them
//! these tests skip with a printed reason (`.ci/run` sets them and makes them required).

use std::process::Stdio;
use std::time::{Duration, Instant};

use tidewire_tests::external::python_peers;
use tidewire_tests::scenarios::PEER_SCENARIOS;
use tokio::process::Command;
use tokio::time::timeout;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

/// `tidewire serve --bind 127.0.0.1:0`, stopped when dropped.
struct HttpServer {
    child: tokio::process::Child,
    url: String,
}

impl HttpServer {
    async fn start(extra: &[&str]) -> Self {
        use tokio::io::AsyncBufReadExt;
        let mut child = Command::new(env!("CARGO_BIN_EXE_tidewire"))
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("start tidewire serve --bind");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let url = timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("the server prints its URL in time")
            .expect("read")
            .expect("a URL line");
        assert!(url.starts_with("http://127.0.0.1:"), "{url}");
        Self { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn python_client_against_tidewire_serve(mode: &str) {
    let Some(peers) = python_peers() else { return };
    // The peer client splits this command line with shlex.
    let server = format!("'{}' serve --stdio", env!("CARGO_BIN_EXE_tidewire"));
    run_scenarios(&peers, "stdio", &server, mode).await;
}

async fn run_scenarios(
    peers: &tidewire_tests::external::PythonPeers,
    transport: &str,
    target: &str,
    mode: &str,
) {
    let server = target;
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        let started = Instant::now();
        let output = timeout(
            SCENARIO_LIMIT,
            Command::new(&peers.python)
                .arg(peers.client_script())
                .args([transport, server, scenario, "--mode", mode])
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .unwrap_or_else(|_| panic!("{scenario} ({mode}) did not finish in {SCENARIO_LIMIT:?}"))
        .expect("the Python peer client runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let last = stdout.lines().last().unwrap_or("").to_owned();
        for line in stdout.lines().filter(|l| l.starts_with("# ")) {
            println!("[{transport} {mode} {scenario}] {line}");
        }
        println!(
            "[{transport} {mode} {scenario}] {last} in {:?}",
            started.elapsed()
        );
        if !(output.status.success() && last == format!("PASS {scenario}")) {
            failures.push(format!(
                "{scenario} ({transport}, {mode}): {last}\nstderr:\n{}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_mode_modern() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        python_client_against_tidewire_serve("modern").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_mode_auto() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        python_client_against_tidewire_serve("auto").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_mode_legacy() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        python_client_against_tidewire_serve("legacy").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_streamable_http_mode_auto() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        run_scenarios(&peers, "streamable-http", &server.url, "auto").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_streamable_http_mode_modern() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        run_scenarios(&peers, "streamable-http", &server.url, "modern").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_streamable_http_mode_legacy() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        run_scenarios(&peers, "streamable-http", &server.url, "legacy").await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// The wire dump says which HTTP stream each message came on: with a session, unrelated
/// notifications on the GET stream; on the stateless wire, on the listen request's POST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_sees_each_message_on_its_stream() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        for (mode, unrelated) in [("legacy", "GET"), ("modern", "POST")] {
            messages_on_their_streams(&peers, &server, mode, unrelated).await;
        }
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

async fn messages_on_their_streams(
    peers: &tidewire_tests::external::PythonPeers,
    server: &HttpServer,
    mode: &str,
    unrelated: &'static str,
) {
    for scenario in ["notifications", "subscribe"] {
        let output = timeout(
            SCENARIO_LIMIT,
            Command::new(&peers.python)
                .arg(peers.client_script())
                .args(["streamable-http", &server.url, scenario, "--dump-wire"])
                .args(["--mode", mode])
                .stdin(Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .expect("in time")
        .expect("the Python peer client runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stdout.lines().last() == Some(&format!("PASS {scenario}")[..]),
            "{stdout}"
        );
        let wire = String::from_utf8_lossy(&output.stderr);
        let inbound: Vec<&str> = wire.lines().filter(|l| l.contains("<<[")).collect();
        let on = |method: &str| -> Vec<&str> {
            inbound
                .iter()
                .filter(|l| l.contains(&format!("\"method\": \"{method}\"")))
                .map(|l| {
                    // `<<[POST]`, or `<<[POST 3]` naming the request (newer peers).
                    if l.contains("<<[POST]") || l.contains("<<[POST ") {
                        "POST"
                    } else if l.contains("<<[GET]") {
                        "GET"
                    } else {
                        "?"
                    }
                })
                .collect()
        };
        match scenario {
            "notifications" => {
                let logs = on("notifications/message");
                assert_eq!(
                    logs,
                    vec!["POST"; 5],
                    "logs travel with their request:\n{wire}"
                );
                // One per `notify` call the scenario makes while it listens.
                let changes = on("notifications/resources/list_changed");
                assert!(
                    !changes.is_empty() && changes.iter().all(|s| *s == unrelated),
                    "{mode}: {wire}"
                );
            }
            _ => {
                let updates = on("notifications/resources/updated");
                assert!(
                    !updates.is_empty() && updates.iter().all(|s| *s == unrelated),
                    "{mode}: {wire}"
                );
            }
        }
    }
}

/// The same server's legacy HTTP+SSE and WebSocket endpoints, next to `/mcp`.
fn sibling(mcp_url: &str, scheme: &str, path: &str) -> String {
    let base = mcp_url
        .strip_suffix("/mcp")
        .expect("the first line names the /mcp endpoint");
    let authority = base.strip_prefix("http://").expect("an http URL");
    format!("{scheme}://{authority}{path}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_legacy_sse() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        let url = sibling(&server.url, "http", "/sse");
        for mode in ["auto", "legacy"] {
            run_scenarios(&peers, "sse", &url, mode).await;
        }
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_over_websocket() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let Some(peers) = python_peers() else { return };
        let server = HttpServer::start(&[]).await;
        let url = sibling(&server.url, "ws", "/ws");
        for mode in ["modern", "auto", "legacy"] {
            run_scenarios(&peers, "websocket", &url, mode).await;
        }
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}
