//! The official MCP Python SDK's peer client (`mcp` 2.3.0) against `tidewire serve --stdio`: the
//! eight peer scenarios, in `--mode auto` (it probes `server/discover` first and must fall back
//! to `initialize` at once) and in `--mode legacy`.
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

async fn python_client_against_tidewire_serve(mode: &str) {
    let Some(peers) = python_peers() else { return };
    // The peer client splits this command line with shlex.
    let server = format!("'{}' serve --stdio", env!("CARGO_BIN_EXE_tidewire"));
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        let started = Instant::now();
        let output = timeout(
            SCENARIO_LIMIT,
            Command::new(&peers.python)
                .arg(peers.client_script())
                .args(["stdio", &server, scenario, "--mode", mode])
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
async fn python_client_mode_auto() {
    python_client_against_tidewire_serve("auto").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_mode_legacy() {
    python_client_against_tidewire_serve("legacy").await;
}
