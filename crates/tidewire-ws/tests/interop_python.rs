//! Interop with the official MCP Python SDK (`mcp` 2.3.0) over WebSocket: our client,
//! through [`WsClient`], runs the eight peer scenarios against the Python peer server
//! (`peer_server.py websocket`: `ws://127.0.0.1:P/ws`, framed by the peers' `ws_adapter.py`).
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them the
//! test skips with a printed reason (`TIDEWIRE_REQUIRE_EXTERNAL=1` makes that a failure).

use std::sync::Arc;
use std::time::Duration;

use tidewire_tests::external::{PythonPeerServer, python_peers};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::scenarios::{run_all_peer_scenarios, run_peer_scenario};
use tidewire_ws::client::WsClient;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

async fn run_one(url: &str, scenario: &str) -> Result<String, String> {
    let transport = WsClient::new(url)
        .connect()
        .await
        .map_err(|e| format!("open the WebSocket: {e}"))?;
    let counters = Arc::new(Counters::default());
    let client = peer_client(&counters)
        .connect(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let harness = Harness::for_client(client, "websocket", counters);
    let outcome = run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_websocket() {
    let Some(peers) = python_peers() else { return };
    let server = PythonPeerServer::start(&peers, "websocket").await;
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    run_all_peer_scenarios("python server, websocket", SCENARIO_LIMIT, |scenario| {
        run_one(&url, scenario)
    })
    .await;
    drop(server);
}
