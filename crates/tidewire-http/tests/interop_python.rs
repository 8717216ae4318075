//! Interop with the official MCP Python SDK (`mcp` 2.3.0) over Streamable HTTP: our client,
//! through [`StreamableHttpClient`], runs the eight peer scenarios against the Python peer server
//! (`peer_server.py streamable-http`: stateful sessions, SSE replies, a GET stream).
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them the
//! test skips with a printed reason (`TIDEWIRE_REQUIRE_EXTERNAL=1` makes that a failure).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tidewire_http::client::StreamableHttpClient;
use tidewire_tests::external::{PythonPeers, python_peers};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::scenarios::{PEER_SCENARIOS, run_peer_scenario};
use tokio::process::{Child, Command};
use tokio::time::timeout;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);
const STARTUP_LIMIT: Duration = Duration::from_secs(30);

/// The Python peer server, killed when dropped.
struct PeerServer {
    child: Child,
    url: String,
}

/// A port nobody listens on right now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// Starts the peer server and waits, within [`STARTUP_LIMIT`], until its port accepts
/// connections.
async fn start(peers: &PythonPeers) -> PeerServer {
    let port = free_port();
    let mut child = Command::new(&peers.python)
        .arg(peers.server_script())
        .args(["streamable-http", "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("start the Python peer server");
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the Python peer server exited at startup: {status}");
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        assert!(
            started.elapsed() < STARTUP_LIMIT,
            "the Python peer server did not listen on port {port} within {STARTUP_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    PeerServer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Connects the standard peer client over Streamable HTTP and runs one scenario on a session of
/// its own.
async fn run_one(url: &str, scenario: &str) -> Result<String, String> {
    let transport = StreamableHttpClient::new(url)
        .connect()
        .map_err(|e| format!("transport: {e}"))?;
    let handle = transport.handle();
    let counters = Arc::new(Counters::default());
    let client = peer_client(&counters)
        .connect(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    if handle.session_id().is_none() {
        return Err("the Python server issued no session id".into());
    }
    let harness = Harness {
        client,
        transport: "streamable-http",
        counters,
        server: None,
        child: None,
        http: None,
    };
    let outcome = run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    if handle.reinitializations() != 0 {
        return Err("the session was re-initialized during the scenario".into());
    }
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_streamable_http() {
    let Some(peers) = python_peers() else { return };
    let mut server = timeout(STARTUP_LIMIT * 2, start(&peers))
        .await
        .expect("the Python peer server starts");
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        match timeout(SCENARIO_LIMIT, run_one(&server.url, scenario)).await {
            Ok(Ok(report)) => println!("[python server, streamable-http] PASS {scenario} {report}"),
            Ok(Err(e)) => failures.push(format!("{scenario}: {e}")),
            Err(_) => failures.push(format!("{scenario}: did not finish in {SCENARIO_LIMIT:?}")),
        }
    }
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}
