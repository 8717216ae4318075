//! Interop with the official MCP Python SDK (`mcp` 2.3.0), over stdio: our client runs the eight
//! peer scenarios against the Python peer server. (The Python peer client against
//! `tidewire serve --stdio` lives with the program, in `crates/tidewire-cli/tests`.)
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them
//! these tests skip with a printed reason (`.ci/run` sets them and makes them required).

use std::time::Duration;

use tidewire_tests::external::python_peers;
use tidewire_tests::scenarios;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_stdio() {
    let Some(peers) = python_peers() else { return };
    let command = scenarios::PeerCommand {
        program: peers.python.clone().into_os_string(),
        args: vec![peers.server_script().into_os_string(), "stdio".into()],
    };
    scenarios::run_all_peer_scenarios("python server, stdio", SCENARIO_LIMIT, |scenario| {
        scenarios::run_peer_scenario_over_stdio(&command, scenario)
    })
    .await;
}
