//! Interop with the official MCP Python SDK (`mcp` 2.3.0) over Streamable HTTP: our client,
//! through [`StreamableHttpClient`], runs the eight peer scenarios against the Python peer server
//! (`peer_server.py streamable-http`: stateful sessions, SSE replies, a GET stream).
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them the
//! test skips with a printed reason (`TIDEWIRE_REQUIRE_EXTERNAL=1` makes that a failure).

use std::sync::Arc;
use std::time::Duration;

use tidewire_http::client::StreamableHttpClient;
use tidewire_tests::external::{PythonPeerServer, python_peers};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::scenarios::{run_all_peer_scenarios, run_peer_scenario};

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);
/// Connects the standard peer client over Streamable HTTP and runs one scenario on a session of
/// its own.
async fn run_one(url: &str, scenario: &str) -> Result<String, String> {
    let transport = StreamableHttpClient::new(url)
        .connect()
        .await
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
    let harness = Harness::for_client(client, "streamable-http", counters);
    let outcome = run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    if handle.sessions_ended() != 0 {
        return Err("the session was re-initialized during the scenario".into());
    }
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_streamable_http() {
    let Some(peers) = python_peers() else { return };
    let server = PythonPeerServer::start(&peers, "streamable-http").await;
    let url = server.url("/mcp");
    run_all_peer_scenarios(
        "python server, streamable-http",
        SCENARIO_LIMIT,
        |scenario| run_one(&url, scenario),
    )
    .await;
}
