//! MCP over a pipe: newline-delimited JSON-RPC to a child's stdin, from its stdout.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;
use tokio::sync::Semaphore;

use crate::http::{contains, protocol_version};
use crate::proc::cpu_micros;

/// What one stdio cell measured.
pub struct StdioResult {
    /// Round trips per second in the window.
    pub rps: f64,
    /// Server CPU per round trip, µs.
    pub cpu_us: f64,
}

/// Initializes over `child`'s pipes, then keeps `in_flight` echo calls outstanding: warms up for
/// `warm`, then counts the answers in `window`.
pub async fn run(
    mut child: Child,
    in_flight: usize,
    warm: Duration,
    window: Duration,
) -> anyhow::Result<StdioResult> {
    let pid = child.id().context("no child pid")?;
    let mut stdin = child.stdin.take().context("no stdin")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::with_capacity(64 * 1024, stdout).lines();

    let version = protocol_version();
    let init = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{{\"protocolVersion\":\"{version}\",\"capabilities\":{{}},\"clientInfo\":{{\"name\":\"bench\",\"version\":\"1\"}}}}}}\n"
    );
    stdin.write_all(init.as_bytes()).await?;
    let first = lines.next_line().await?.context("no initialize answer")?;
    ensure!(
        contains(first.as_bytes(), b"\"result\""),
        "initialize failed: {first}"
    );
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await?;

    let answered = Arc::new(AtomicU64::new(0));
    let permits = Arc::new(Semaphore::new(in_flight));
    let stop = Arc::new(AtomicBool::new(false));

    let reader = {
        let answered = answered.clone();
        let permits = permits.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if contains(line.as_bytes(), b"\"result\"") {
                    answered.fetch_add(1, Ordering::Relaxed);
                    permits.add_permits(1);
                }
            }
        })
    };
    let writer = {
        let permits = permits.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut id: u64 = 1;
            while !stop.load(Ordering::Relaxed) {
                let Ok(permit) = permits.acquire().await else {
                    break;
                };
                permit.forget();
                let line = format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo\",\"arguments\":{{\"text\":\"hello\"}}}}}}\n"
                );
                id += 1;
                if stdin.write_all(line.as_bytes()).await.is_err() {
                    break;
                }
            }
            stdin
        })
    };

    tokio::time::sleep(warm).await;
    let (n0, cpu0, t0) = (
        answered.load(Ordering::Relaxed),
        cpu_micros(pid)?,
        std::time::Instant::now(),
    );
    tokio::time::sleep(window).await;
    let (n1, cpu1, elapsed) = (
        answered.load(Ordering::Relaxed),
        cpu_micros(pid)?,
        t0.elapsed(),
    );
    stop.store(true, Ordering::Relaxed);
    permits.close();
    let _ = child.start_kill();
    let _ = child.wait().await;
    writer.abort();
    reader.abort();

    let done = n1.saturating_sub(n0);
    ensure!(done > 0, "no stdio round trip completed in the window");
    Ok(StdioResult {
        rps: done as f64 / elapsed.as_secs_f64(),
        cpu_us: cpu1.saturating_sub(cpu0) as f64 / done as f64,
    })
}
