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

/// One peer scenario with our client in `era` against the Python peer server's WebSocket.
async fn websocket_scenario(
    url: &str,
    scenario: &str,
    era: tidewire_client::Era,
) -> Result<String, String> {
    let transport = tidewire_ws::client::WsClient::new(url)
        .connect()
        .await
        .map_err(|e| format!("open the WebSocket: {e}"))?;
    let counters = std::sync::Arc::new(tidewire_tests::harness::Counters::default());
    let client = tidewire_tests::harness::peer_client(&counters)
        .era(era)
        .connect(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    if client.era() != tidewire_client::Spoken::Stateless {
        return Err(format!("{era:?} did not reach the stateless revision"));
    }
    let harness = tidewire_tests::harness::Harness::for_client(client, "websocket", counters);
    let outcome = scenarios::run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    outcome
}

/// One peer scenario with our client on the stateless wire against the Python peer server's
/// Streamable HTTP endpoint.
async fn http_scenario(url: &str, scenario: &str) -> Result<String, String> {
    let transport = tidewire_http::client::StatelessHttpClient::new(url)
        .connect()
        .await
        .map_err(|e| format!("a stateless HTTP transport: {e}"))?;
    let counters = std::sync::Arc::new(tidewire_tests::harness::Counters::default());
    let client = tidewire_tests::harness::peer_client(&counters)
        .era(tidewire_client::Era::Modern)
        .connect(transport)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let harness = tidewire_tests::harness::Harness::for_client(client, "http-stateless", counters);
    let outcome = scenarios::run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    outcome
}

/// One peer scenario with our client in `Era::Auto` on HTTP (`connect_auto`: the stateless
/// revision first, sessions otherwise) against the Python peer server, which speaks 2026-07-28.
async fn http_auto_scenario(url: &str, scenario: &str) -> Result<String, String> {
    let counters = std::sync::Arc::new(tidewire_tests::harness::Counters::default());
    let (client, fallback) =
        tidewire::connect::auto(url, || tidewire_tests::harness::peer_client(&counters))
            .await
            .map_err(|e| format!("connect_auto: {e}"))?;
    if !matches!(fallback, tidewire::connect::Fallback::Stateless) {
        return Err(format!(
            "Auto did not reach the stateless revision: {fallback:?}"
        ));
    }
    let harness = tidewire_tests::harness::Harness::for_client(client, "http-auto", counters);
    let outcome = scenarios::run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    outcome
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_websocket_stateless() {
    let Some(peers) = python_peers() else { return };
    let server = tidewire_tests::external::PythonPeerServer::start(&peers, "websocket").await;
    let url = format!("ws://127.0.0.1:{}/ws", server.port);
    for era in [tidewire_client::Era::Modern, tidewire_client::Era::Auto] {
        let label = format!("python server, websocket, {era:?}");
        scenarios::run_all_peer_scenarios(&label, SCENARIO_LIMIT, |scenario| {
            websocket_scenario(&url, scenario, era)
        })
        .await;
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_streamable_http_stateless() {
    let Some(peers) = python_peers() else { return };
    let server = tidewire_tests::external::PythonPeerServer::start(&peers, "streamable-http").await;
    let url = server.url("/mcp");
    scenarios::run_all_peer_scenarios(
        "python server, streamable-http, Modern",
        SCENARIO_LIMIT,
        |scenario| http_scenario(&url, scenario),
    )
    .await;
    scenarios::run_all_peer_scenarios(
        "python server, streamable-http, Auto",
        SCENARIO_LIMIT,
        |scenario| http_auto_scenario(&url, scenario),
    )
    .await;
    drop(server);
}
