//! The scale-out rows (`bench --scale-out`): what the shared path costs. tidewire replicas
//! behind a real HAProxy (round robin, every request balanced on its own), in three setups
//! ([`Setup`]): one replica in memory, one on Redis, three on one Redis. Every setup goes
//! through the balancer, so the ratios are the cost of Redis (and of forwarding a session's
//! requests to the replica holding it), not of the proxy. The server CPU of a row is every
//! server-side process's: the replicas, HAProxy and Redis.
//!
//! The programs come from `TIDEWIRE_REDIS_SERVER` and `TIDEWIRE_HAPROXY` (or `--redis-server`
//! and `--haproxy`), as in the tests.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tidewire_bench::report::{Better, Peer, Row, Setup};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;

use crate::http::{self, Conn, Target, Wire};
use crate::proc::Placement;
use crate::{Options, echo_cell, loadavg, progress_cell, stop};

/// The outside programs a scale-out run needs.
#[derive(Debug, Clone)]
pub struct Outside {
    redis_server: PathBuf,
    haproxy: PathBuf,
}

impl Outside {
    /// From the flags, else from the environment; a clear error when either is missing.
    pub fn find(redis_server: Option<PathBuf>, haproxy: Option<PathBuf>) -> anyhow::Result<Self> {
        let named = |flag: Option<PathBuf>, var: &str, what: &str| {
            flag.or_else(|| {
                std::env::var_os(var)
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from)
            })
            .filter(|p| p.exists())
            .with_context(|| format!("--scale-out needs {what}: pass its path or set {var}"))
        };
        Ok(Self {
            redis_server: named(redis_server, "TIDEWIRE_REDIS_SERVER", "redis-server")?,
            haproxy: named(haproxy, "TIDEWIRE_HAPROXY", "haproxy")?,
        })
    }
}

/// A free loopback port (for the programs that cannot be told to pick one).
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// One setup, running: its Redis (none in memory), its replicas and the balancer in front.
struct Cluster {
    redis: Option<(Child, String)>,
    replicas: Vec<Child>,
    balancer: Child,
    front: Arc<Target>,
    config: PathBuf,
}

impl Cluster {
    async fn start(setup: Setup, placement: &Placement, outside: &Outside) -> anyhow::Result<Self> {
        let redis = if setup.on_redis() {
            Some(start_redis(placement, outside).await?)
        } else {
            None
        };
        let mut replicas = Vec::new();
        let mut addresses = Vec::new();
        for i in 0..setup.replicas() {
            let mut args = vec!["--bind".to_owned(), "127.0.0.1:0".to_owned()];
            if let Some((_, url)) = &redis {
                args.extend(["--redis".to_owned(), url.clone()]);
                args.extend(["--node-id".to_owned(), format!("r{i}")]);
            }
            let (child, url) = placement.start_with(Peer::Tidewire, &args).await?;
            replicas.push(child);
            let address = url
                .trim()
                .trim_start_matches("http://")
                .trim_end_matches("/mcp")
                .to_owned();
            addresses.push(address);
        }
        let port = free_port()?;
        let config = std::env::temp_dir().join(format!(
            "tidewire-bench-haproxy-{}-{port}.cfg",
            std::process::id()
        ));
        std::fs::write(&config, haproxy_config(port, &addresses))?;
        let mut balancer = placement
            .command(&outside.haproxy)
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .context("cannot start haproxy")?;
        // HAProxy says nothing when it listens: the port is the sign.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = balancer.try_wait()? {
                bail!("haproxy exited at startup ({status}); its log is above");
            }
            if tokio::time::Instant::now() >= deadline {
                bail!("haproxy did not listen on port {port} within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            redis,
            replicas,
            balancer,
            front: Target::from_url(&format!("http://127.0.0.1:{port}/mcp"))?,
            config,
        })
    }

    /// Every server-side process: replicas, balancer, Redis.
    fn pids(&self) -> Vec<u32> {
        let redis = self.redis.iter().map(|(child, _)| child);
        self.replicas
            .iter()
            .chain(std::iter::once(&self.balancer))
            .chain(redis)
            .filter_map(Child::id)
            .collect()
    }

    async fn stop(mut self) {
        stop(&mut self.balancer).await;
        for replica in &mut self.replicas {
            stop(replica).await;
        }
        if let Some((child, _)) = &mut self.redis {
            stop(child).await;
        }
        let _ = std::fs::remove_file(&self.config);
    }
}

/// HAProxy round robin over `backends` (`HOST:PORT` each). The server side closes after each
/// response, so every request is balanced on its own: a session's requests land anywhere.
pub fn haproxy_config(port: u16, backends: &[String]) -> String {
    // `maxconn` sets the file descriptors HAProxy asks for (about twice it, plus some): 1,024
    // fits under a shell's `ulimit -n 8192`, where 4,096 made it refuse to start.
    let mut config = format!(
        "global\n  maxconn 1024\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n\
         \x20 option http-server-close\n  option abortonclose\n  option http-no-delay\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n"
    );
    for (i, address) in backends.iter().enumerate() {
        config.push_str(&format!("  server r{i} {address}\n"));
    }
    config
}

/// A `redis-server` of the run's own on a free port, without persistence; returns it and its URL
/// once it says it is ready.
async fn start_redis(placement: &Placement, outside: &Outside) -> anyhow::Result<(Child, String)> {
    let port = free_port()?;
    let mut child = placement
        .command(&outside.redis_server)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start redis-server")?;
    let mut lines = BufReader::new(child.stdout.take().context("no stdout")?).lines();
    let ready = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(line) = lines.next_line().await? {
            if line.contains("Ready to accept connections") {
                return anyhow::Ok(());
            }
        }
        bail!("redis-server ended before it was ready")
    })
    .await
    .context("redis-server was not ready within 10 s")?;
    ready?;
    // Read on, so the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, format!("redis://127.0.0.1:{port}")))
}

/// Redis's `used_memory` (bytes) and its number of keys.
async fn redis_usage(url: &str) -> anyhow::Result<(u64, u64)> {
    let client = redis::Client::open(url)?;
    let mut connection = client.get_multiplexed_async_connection().await?;
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut connection)
        .await?;
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .context("INFO memory has no used_memory")?;
    let keys: u64 = redis::cmd("DBSIZE").query_async(&mut connection).await?;
    Ok((used, keys))
}

/// Redis memory and keys per idle session: the growth of `used_memory` (bytes) and of the key
/// count over `sessions` sessions opened through the balancer and left idle, divided by their
/// number. A session just opened holds its place and the copy of its `initialize` reply's
/// stream (kept for resumption until its grace ends, 30 s later).
async fn redis_per_session(cluster: &Cluster, sessions: usize) -> anyhow::Result<(f64, f64)> {
    let url = &cluster.redis.as_ref().context("no Redis in this setup")?.1;
    let mut conn = Conn::open(&cluster.front).await?;
    // One first, so what the first session brings (a replica's heartbeat key) is not counted.
    http::initialize(&mut conn, &cluster.front).await?;
    let (before, keys_before) = redis_usage(url).await?;
    for _ in 0..sessions {
        http::initialize(&mut conn, &cluster.front).await?;
    }
    let (after, keys_after) = redis_usage(url).await?;
    let n = sessions as f64;
    Ok((
        after.saturating_sub(before) as f64 / n,
        keys_after.saturating_sub(keys_before) as f64 / n,
    ))
}

/// Runs every setup, `options.rounds` times (alternating the order), into `rows`.
pub async fn run(
    options: &Options,
    placement: &Placement,
    outside: &Outside,
    rows: &mut Vec<Row<Setup>>,
) -> anyhow::Result<()> {
    let sessions = options.sessions.first().copied().unwrap_or(1_000);
    for round in 0..options.rounds {
        let mut order = Setup::ALL.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        eprintln!(
            "scale-out round {}/{} (load average {})",
            round + 1,
            options.rounds,
            loadavg()
        );
        for setup in order {
            let cluster = Cluster::start(setup, placement, outside).await?;
            let measured = measure(options, setup, &cluster, sessions, rows).await;
            cluster.stop().await;
            measured.with_context(|| format!("the {} setup", column(setup)))?;
        }
    }
    Ok(())
}

fn column(setup: Setup) -> &'static str {
    <Setup as tidewire_bench::report::Column>::name(setup)
}

fn row<'a>(
    rows: &'a mut Vec<Row<Setup>>,
    key: &str,
    label: &str,
    unit: &str,
    better: Better,
) -> &'a mut Row<Setup> {
    if let Some(i) = rows.iter().position(|r| r.key == key) {
        return &mut rows[i];
    }
    rows.push(Row::new(key, label, unit, better));
    let last = rows.len() - 1;
    &mut rows[last]
}

async fn measure(
    options: &Options,
    setup: Setup,
    cluster: &Cluster,
    sessions: usize,
    rows: &mut Vec<Row<Setup>>,
) -> anyhow::Result<()> {
    let pids = cluster.pids();
    let name = column(setup);
    for wire in [Wire::Modern, Wire::Sse] {
        for callers in [1, 32] {
            let e = echo_cell(
                &cluster.front,
                &pids,
                wire,
                callers,
                options.warm,
                options.window,
            )
            .await
            .with_context(|| format!("echo {} c{callers}", wire.name()))?;
            eprintln!(
                "  {name:8} echo {:6} c={callers:<2}: {:>9.0} req/s  p50 {:>7.1} µs  p99 {:>7.1} µs  cpu {:>5.1} µs/req",
                wire.name().to_uppercase(),
                e.rps,
                e.p50_us,
                e.p99_us,
                e.cpu_us
            );
            let key = format!("scale_echo_{}_c{callers}", wire.name());
            let label = format!(
                "echo through the balancer, {}, {}",
                wire.label(),
                wire.callers(callers)
            );
            let metrics = [
                ("rps", "throughput", "req/s", Better::Higher, e.rps),
                ("p50_us", "p50 latency", "µs", Better::Lower, e.p50_us),
                ("p99_us", "p99 latency", "µs", Better::Lower, e.p99_us),
                (
                    "cpu_us",
                    "server-side CPU per request",
                    "µs",
                    Better::Lower,
                    e.cpu_us,
                ),
            ];
            for (suffix, what, unit, better, value) in metrics {
                row(
                    rows,
                    &format!("{key}_{suffix}"),
                    &format!("{label}: {what}"),
                    unit,
                    better,
                )
                .push(setup, value);
            }
        }
        let rate = progress_cell(&cluster.front, wire, &[])
            .await
            .with_context(|| format!("progress {}", wire.name()))?;
        eprintln!(
            "  {name:8} progress({}) over {}: {rate:>9.0} notifications/s",
            crate::PROGRESS_N,
            wire.label()
        );
        row(
            rows,
            &format!("scale_progress_{}_per_s", wire.name()),
            &format!(
                "progress({}) through the balancer, {}: notifications",
                crate::PROGRESS_N,
                wire.label()
            ),
            "per s",
            Better::Higher,
        )
        .push(setup, rate);
    }
    if setup.on_redis() {
        let (bytes, keys) = redis_per_session(cluster, sessions).await?;
        eprintln!("  {name:8} Redis per idle session: {bytes:>6.0} B, {keys:.2} keys");
        row(
            rows,
            &format!("scale_redis_{sessions}_bytes"),
            &format!("a session just opened, {sessions} sessions: Redis memory"),
            "B/session",
            Better::Lower,
        )
        .push(setup, bytes);
        row(
            rows,
            &format!("scale_redis_{sessions}_keys"),
            &format!("a session just opened, {sessions} sessions: Redis keys"),
            "keys/session",
            Better::Lower,
        )
        .push(setup, keys);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_balancer_spreads_every_request_over_every_replica() {
        let config = haproxy_config(8080, &["127.0.0.1:1".to_owned(), "127.0.0.1:2".to_owned()]);
        assert!(config.contains("bind 127.0.0.1:8080\n"), "{config}");
        assert!(config.contains("balance roundrobin\n"), "{config}");
        assert!(config.contains("option http-server-close\n"), "{config}");
        assert!(config.ends_with("  server r0 127.0.0.1:1\n  server r1 127.0.0.1:2\n"));
    }

    #[test]
    fn outside_programs_named_by_flags_must_exist() {
        let missing = Outside::find(
            Some(PathBuf::from("/nonexistent/redis-server")),
            Some(PathBuf::from("/nonexistent/haproxy")),
        );
        let error = missing
            .expect_err("missing programs are refused")
            .to_string();
        assert!(error.contains("redis-server"), "{error}");
    }
}
