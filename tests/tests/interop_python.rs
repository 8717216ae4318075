//! Interop with the official MCP Python SDK (`mcp` 2.3.0), over stdio.
//!
//! - The Python peer client runs each of the eight peer scenarios against our demo server, in
//!   `--mode auto` (it probes `server/discover` first and must fall back at once) and
//!   `--mode legacy`.
//! - Our client runs the same eight scenarios against the Python peer server.
//!
//! The peers are found through `TIDEWIRE_PY_PYTHON` and `TIDEWIRE_PY_PEERS_DIR`; without them
//! these tests skip with a printed reason (`.ci/run` sets them and makes them required).

use std::process::Stdio;
use std::time::{Duration, Instant};

use tidewire_tests::external::python_peers;
use tidewire_tests::scenarios::{self, PEER_SCENARIOS};
use tokio::process::Command;
use tokio::time::timeout;

const SCENARIO_LIMIT: Duration = Duration::from_secs(60);

async fn python_client_against_our_server(mode: &str) {
    let Some(peers) = python_peers() else { return };
    let server = env!("CARGO_BIN_EXE_tidewire-demo-stdio");
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        let started = Instant::now();
        let output = timeout(
            SCENARIO_LIMIT,
            Command::new(&peers.python)
                .arg(peers.client_script())
                .args(["stdio", server, scenario, "--mode", mode])
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
            println!("[{mode} {scenario}] {line}");
        }
        println!("[{mode} {scenario}] {last} in {:?}", started.elapsed());
        if !(output.status.success() && last == format!("PASS {scenario}")) {
            failures.push(format!(
                "{scenario} ({mode}): {last}\nstderr:\n{}",
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
async fn python_client_mode_auto_against_tidewire_stdio() {
    python_client_against_our_server("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_mode_legacy_against_tidewire_stdio() {
    python_client_against_our_server("legacy").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tidewire_client_against_python_server_stdio() {
    let Some(peers) = python_peers() else { return };
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        let command = scenarios::PeerCommand {
            program: peers.python.clone().into_os_string(),
            args: vec![peers.server_script().into_os_string(), "stdio".into()],
        };
        let outcome = timeout(
            SCENARIO_LIMIT,
            scenarios::run_peer_scenario_over_stdio(&command, scenario),
        )
        .await;
        match outcome {
            Ok(Ok(report)) => println!("[python server] PASS {scenario} {report}"),
            Ok(Err(e)) => failures.push(format!("{scenario}: {e}")),
            Err(_) => failures.push(format!("{scenario}: did not finish in {SCENARIO_LIMIT:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "failed scenarios:\n{}",
        failures.join("\n")
    );
}
