//! Interop with the official MCP Python SDK (`mcp` 2.3.0): our client runs the eight peer
//! scenarios against the Python peer server, on every transport and in every era the server
//! speaks there. One driver ([`run_over`]) serves them all; a transport differs only in how its
//! connection is opened ([`Wire`]). (The Python peer client against `tidewire serve` lives with
//! the program, in `crates/tidewire-cli/tests`.)
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them
//! these tests skip with a printed reason (`.ci/run` sets them and makes them required).

use std::sync::Arc;
use std::time::Duration;

use tidewire_client::{Client, Era};
use tidewire_core::transport::Transport;
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire_sse::client::LegacySseConnector;
use tidewire_tests::external::{PythonPeerServer, python_peers};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::scenarios;
use tidewire_ws::client::WebSocketConnector;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

/// How our client reaches the Python peer server.
#[derive(Debug, Clone, Copy)]
enum Wire {
    /// Streamable HTTP sessions (`StreamableHttpConnector`).
    StreamableHttp,
    /// The stateless revision over Streamable HTTP (`StatelessHttpConnector`, `Era::Modern`).
    StatelessHttp,
    /// `tidewire::connect::auto`: whichever era the HTTP server speaks.
    HttpAuto,
    /// Legacy HTTP+SSE.
    LegacySse,
    /// WebSocket, in an era.
    WebSocket(Era),
}

impl Wire {
    /// The era our client should end up speaking: the Python server speaks 2026-07-28 to a
    /// client that asks, everywhere but on legacy HTTP+SSE.
    fn expected(self) -> Era {
        match self {
            Wire::StreamableHttp | Wire::LegacySse | Wire::WebSocket(Era::Legacy) => Era::Legacy,
            _ => Era::Modern,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Wire::StreamableHttp => "streamable-http",
            Wire::StatelessHttp => "streamable-http, Modern",
            Wire::HttpAuto => "streamable-http, Auto",
            Wire::LegacySse => "legacy-sse",
            Wire::WebSocket(Era::Legacy) => "websocket, Legacy",
            Wire::WebSocket(Era::Modern) => "websocket, Modern",
            Wire::WebSocket(_) => "websocket, Auto",
        }
    }
}

/// Connects our peer client in `era` over `transport`.
async fn connect<T: Transport>(
    transport: T,
    era: Era,
    counters: &Arc<Counters>,
) -> Result<Client, String> {
    peer_client(counters)
        .era(era)
        .connect(transport)
        .await
        .map_err(|e| format!("connect: {e}"))
}

/// One peer scenario over `wire` against the Python peer server at `url`.
async fn run_over(wire: Wire, url: &str, scenario: &str) -> Result<String, String> {
    let counters = Arc::new(Counters::default());
    let mut sessions = None;
    let client = match wire {
        Wire::StreamableHttp => {
            let transport = StreamableHttpConnector::new(url)
                .connect()
                .await
                .map_err(|e| format!("transport: {e}"))?;
            let handle = transport.handle();
            let client = connect(transport, Era::Legacy, &counters).await?;
            if handle.session_id().is_none() {
                return Err("the Python server issued no session id".into());
            }
            sessions = Some(handle);
            client
        }
        Wire::StatelessHttp => {
            let transport = StatelessHttpConnector::new(url)
                .connect()
                .await
                .map_err(|e| format!("transport: {e}"))?;
            connect(transport, Era::Modern, &counters).await?
        }
        Wire::HttpAuto => {
            let (client, how) = tidewire::connect::auto(url, || peer_client(&counters))
                .await
                .map_err(|e| format!("connect::auto: {e}"))?;
            if !matches!(how, tidewire::connect::Fallback::Stateless) {
                return Err(format!(
                    "Auto did not reach the stateless revision: {how:?}"
                ));
            }
            client
        }
        Wire::LegacySse => {
            let transport = LegacySseConnector::new(url)
                .connect()
                .await
                .map_err(|e| format!("open the stream: {e}"))?;
            if !transport.endpoint().contains("session_id=") {
                return Err(format!("unexpected endpoint {}", transport.endpoint()));
            }
            connect(transport, Era::Legacy, &counters).await?
        }
        Wire::WebSocket(era) => {
            let transport = WebSocketConnector::new(url)
                .connect()
                .await
                .map_err(|e| format!("open the WebSocket: {e}"))?;
            connect(transport, era, &counters).await?
        }
    };
    if client.era() != wire.expected() {
        return Err(format!("{wire:?} spoke the {:?} era", client.era()));
    }
    let harness = Harness::for_client(client, wire.label(), counters);
    let outcome = scenarios::run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    if sessions.is_some_and(|handle| handle.sessions_ended() != 0) {
        return Err("the server ended the session during the scenario".into());
    }
    outcome
}

/// Starts the Python peer server on `transport` and runs every scenario over each wire.
async fn against_python_server(transport: &str, path: &str, wires: &[Wire]) {
    let Some(peers) = python_peers() else { return };
    let server = PythonPeerServer::start(&peers, transport).await;
    let url = if transport == "websocket" {
        format!("ws://127.0.0.1:{}{path}", server.port)
    } else {
        server.url(path)
    };
    for &wire in wires {
        let label = format!("python server, {}", wire.label());
        scenarios::run_all_peer_scenarios(&label, SCENARIO_LIMIT, |scenario| {
            run_over(wire, &url, scenario)
        })
        .await;
    }
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_streamable_http() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        against_python_server(
            "streamable-http",
            "/mcp",
            &[Wire::StreamableHttp, Wire::StatelessHttp, Wire::HttpAuto],
        )
        .await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_legacy_sse() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        against_python_server("sse", "/sse", &[Wire::LegacySse]).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_websocket() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let eras = [Era::Legacy, Era::Modern, Era::Auto].map(Wire::WebSocket);
        against_python_server("websocket", "/ws", &eras).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_stdio() {
    let Some(peers) = python_peers() else { return };
    let command = scenarios::PeerCommand {
        program: peers.python.clone().into_os_string(),
        args: vec![peers.server_script().into_os_string(), "stdio".into()],
    };
    for era in [Era::Legacy, Era::Modern, Era::Auto] {
        let label = format!("python server, stdio, {era:?}");
        scenarios::run_all_peer_scenarios(&label, SCENARIO_LIMIT, |scenario| {
            scenarios::run_peer_scenario_over_stdio_in(&command, scenario, era)
        })
        .await;
    }
}
