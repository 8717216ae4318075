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

async fn tidewire_client_against_python_server_stdio_in(era: tidewire_client::Era) {
    let Some(peers) = python_peers() else { return };
    let command = scenarios::PeerCommand {
        program: peers.python.clone().into_os_string(),
        args: vec![peers.server_script().into_os_string(), "stdio".into()],
    };
    let mut failures = Vec::new();
    for scenario in scenarios::PEER_SCENARIOS {
        let outcome = tokio::time::timeout(
            SCENARIO_LIMIT,
            scenarios::run_peer_scenario_over_stdio_in(&command, scenario, era),
        )
        .await;
        match outcome {
            Ok(Ok(report)) => println!("[python server, stdio, {era:?}] PASS {scenario} {report}"),
            Ok(Err(e)) => failures.push(format!("{scenario}: {e}")),
            Err(_) => failures.push(format!("{scenario}: did not finish in {SCENARIO_LIMIT:?}")),
        }
    }
    assert!(failures.is_empty(), "{era:?}:\n{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_stdio_era_modern() {
    tidewire_client_against_python_server_stdio_in(tidewire_client::Era::Modern).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_stdio_era_auto() {
    tidewire_client_against_python_server_stdio_in(tidewire_client::Era::Auto).await;
}
