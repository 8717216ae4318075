//! Processes: starting the servers (pinned with `taskset` when there are two cores), and what
//! `/proc` says about them.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use anyhow::{Context as _, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use tidewire_bench::report::Peer;

use crate::http::Wire;

/// How the benchmark places processes on cores.
#[derive(Debug, Clone)]
pub struct Placement {
    /// `taskset` is there and the machine has at least two cores: servers on core 0, the load
    /// generator on core 1.
    pub pinned: bool,
    /// Where the server binaries are (beside this one).
    pub dir: PathBuf,
}

impl Placement {
    /// Pins this process (all its threads; call it before the runtime starts) to core 1 when
    /// possible.
    pub fn detect(no_pin: bool) -> anyhow::Result<Self> {
        let exe = std::env::current_exe()?;
        let dir = exe
            .parent()
            .context("the benchmark binary has no directory")?
            .to_path_buf();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut pinned = false;
        if !no_pin && cores >= 2 {
            let status = std::process::Command::new("taskset")
                .args(["-a", "-p", "-c", "1", &std::process::id().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            pinned = matches!(status, Ok(s) if s.success());
        }
        Ok(Self { pinned, dir })
    }

    fn binary(&self, peer: Peer) -> PathBuf {
        let name = match peer {
            Peer::Tidewire | Peer::TidewireOtel => "bench-server",
            Peer::Rmcp => "rmcp-bench-server",
            Peer::Ceiling => "ceiling-server",
        };
        self.dir.join(name)
    }

    /// The flags `peer`'s server gets besides its transport's.
    fn flags(&self, peer: Peer) -> &'static [&'static str] {
        match peer {
            // Telemetry on: the build must have the feature `otel`.
            Peer::TidewireOtel => &["--otel"],
            _ => &[],
        }
    }

    /// Checks that every server binary is there.
    pub fn check(&self) -> anyhow::Result<()> {
        for peer in Peer::ALL {
            let path = self.binary(peer);
            if !path.exists() {
                bail!(
                    "{} is missing: build the servers first (cargo build --release -p tidewire-bench)",
                    path.display()
                );
            }
        }
        Ok(())
    }

    /// `program`, pinned to the servers' core when the run is pinned; killed when dropped.
    pub fn command(&self, program: &Path) -> Command {
        let mut command = if self.pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        command.kill_on_drop(true).stderr(Stdio::inherit());
        command
    }

    /// Starts `peer` over HTTP on a free loopback port, configured for `wire`; returns the child
    /// and the URL it printed.
    pub async fn start_http(&self, peer: Peer, wire: Wire) -> anyhow::Result<(Child, String)> {
        let mut args = vec!["--bind".to_owned(), "127.0.0.1:0".to_owned()];
        args.extend(wire.server_flag().map(str::to_owned));
        self.start_with(peer, &args).await
    }

    /// Starts `peer`'s server with `args` (HTTP: `--bind` and the rest); returns the child and
    /// the URL it printed once listening.
    pub async fn start_with(&self, peer: Peer, args: &[String]) -> anyhow::Result<(Child, String)> {
        let mut child = self
            .command(&self.binary(peer))
            .args(args)
            .args(self.flags(peer))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", peer.name()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let url = BufReader::new(stdout)
            .lines()
            .next_line()
            .await?
            .with_context(|| format!("{} printed no address", peer.name()))?;
        Ok((child, url))
    }

    /// Starts `peer` over stdio.
    pub fn start_stdio(&self, peer: Peer) -> anyhow::Result<Child> {
        let mut command = self.command(&self.binary(peer));
        command.arg("--stdio").args(self.flags(peer));
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {} --stdio", peer.name()))
    }
}

/// Resident memory of `pid`, KiB.
pub fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

/// CPU time (user + system) `pid` has used, µs, from `/proc/PID/stat`; its resolution is one
/// clock tick (10 ms at the usual 100 Hz), so measure windows of a second or more.
pub fn cpu_micros(pid: u32) -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which is in parentheses and may hold spaces); utime and
    // stime are fields 14 and 15, i.e. the 12th and 13th after the closing parenthesis.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).context("bad stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields.get(i).context("short stat")?.parse::<u64>()?)
    };
    let total = ticks(11)? + ticks(12)?;
    Ok(total * 1_000_000 / clock_ticks())
}

fn clock_ticks() -> u64 {
    static TICKS: OnceLock<u64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        std::process::Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|&t| t > 0)
            .unwrap_or(100)
    })
}
