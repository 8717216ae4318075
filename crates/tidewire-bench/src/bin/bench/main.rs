//! The load generator: starts each peer server in turn (tidewire, rmcp, the ceiling; several
//! rounds, alternating), drives it over raw HTTP (with sessions, and on the stateless 2026-07-28
//! wire) and over a pipe, and prints a table of medians with min–max and the ratio of tidewire
//! to rmcp and to the ceiling.
//!
//! ```sh
//! cargo build --release -p tidewire-bench && target/release/bench --quick
//! ```
//!
//! Options: `--quick` (3 short rounds, memory at 1,000 sessions: under 2 minutes on 2 cores),
//! `--json` (machine-readable output), `--rounds N`, `--window SECS` (measured seconds per
//! cell), `--only sse,json,progress,modern,shared,stdio,memory`, `--sessions 1000,10000`,
//! `--no-pin`, `--protocol VERSION` (the session era's, default 2025-11-25; the `modern` rows
//! always speak 2026-07-28), `--peers tidewire,rmcp,ceiling` (a subset, e.g. to profile one
//! server). The `shared` group is echo on 32 connections sharing one session. Progress goes to
//! stderr, the table to stdout. See `docs/performance.md`.
//!
//! `--counts` runs the allocation and task counts instead (see [`counts`]): tidewire's
//! `bench-server --counts`, built with the `count-allocs` feature and/or
//! `RUSTFLAGS="--cfg tokio_unstable"`; `--count-requests N` requests per cell.
//!
//! `--scale-out` runs the scale-out rows instead (see [`scale`]): tidewire replicas behind
//! HAProxy, one in memory, one on Redis, three on Redis (`--redis-server PATH`,
//! `--haproxy PATH`, or `TIDEWIRE_REDIS_SERVER` and `TIDEWIRE_HAPROXY`). See
//! `docs/scale-out.md`.

mod counts;
mod http;
mod proc;
mod scale;
mod stdio;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tidewire_bench::report::{self, Better, Peer, Row, Setup};
use tidewire_bench::stats::percentile;
use tokio::process::Child;

use crate::http::{Caller, Conn, Target, Wire};
use crate::proc::{Placement, cpu_micros, rss_kib};

/// The size of the `progress` call.
const PROGRESS_N: u64 = 10_000;

/// How many `progress(PROGRESS_N)` bursts one progress cell times (the median counts): one
/// burst is over in about 10 ms, short enough for one scheduler tick or a migration to halve
/// its rate.
const PROGRESS_BURSTS: usize = 5;

/// The connections of the shared-session cell (group `shared`), all on one session.
const SHARED_CONNECTIONS: usize = 32;

#[derive(Debug, Clone)]
struct Options {
    quick: bool,
    json: bool,
    rounds: usize,
    warm: Duration,
    window: Duration,
    groups: Vec<String>,
    sessions: Vec<usize>,
    no_pin: bool,
    /// The peers to run, in the first round's order (tidewire, rmcp and the ceiling unless
    /// `--peers` says otherwise; `--otel` adds tidewire with telemetry on).
    peers: Vec<Peer>,
    /// Run the scale-out rows instead of the peer comparison.
    scale_out: bool,
    /// `redis-server` for the scale-out rows (else `TIDEWIRE_REDIS_SERVER`).
    redis_server: Option<PathBuf>,
    /// `haproxy` for the scale-out rows (else `TIDEWIRE_HAPROXY`).
    haproxy: Option<PathBuf>,
    /// Run the allocation and task counts instead of the peer comparison.
    counts: bool,
    /// Requests per counted cell.
    count_requests: usize,
    /// Also run tidewire's server with telemetry on (`bench-server --otel`), as the peer
    /// `tidewire+otel`, beside the one without.
    otel: bool,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let quick = args.iter().any(|a| a == "--quick");
        let mut options = Options {
            quick,
            json: false,
            rounds: if quick { 3 } else { 5 },
            warm: Duration::from_millis(if quick { 300 } else { 500 }),
            window: Duration::from_secs_f64(if quick { 1.0 } else { 3.0 }),
            groups: [
                "sse", "json", "progress", "modern", "shared", "stdio", "memory",
            ]
            .map(str::to_owned)
            .to_vec(),
            sessions: if quick {
                vec![1_000]
            } else {
                vec![1_000, 10_000]
            },
            no_pin: false,
            peers: Peer::DEFAULT.to_vec(),
            scale_out: false,
            redis_server: None,
            haproxy: None,
            counts: false,
            count_requests: if quick { 1_000 } else { 5_000 },
            otel: false,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let mut value = || it.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--quick" | "--full" => {}
                "--json" => options.json = true,
                "--no-pin" => options.no_pin = true,
                "--scale-out" => options.scale_out = true,
                "--counts" => options.counts = true,
                "--otel" => options.otel = true,
                "--count-requests" => options.count_requests = value()?.parse()?,
                "--redis-server" => options.redis_server = Some(value()?.into()),
                "--haproxy" => options.haproxy = Some(value()?.into()),
                "--protocol" => http::set_protocol_version(value()?),
                "--rounds" => options.rounds = value()?.parse()?,
                "--window" => options.window = Duration::from_secs_f64(value()?.parse()?),
                "--only" => {
                    options.groups = value()?.split(',').map(str::to_owned).collect();
                }
                "--peers" => {
                    options.peers = value()?
                        .split(',')
                        .map(|name| {
                            Peer::ALL
                                .into_iter()
                                .find(|p| p.name() == name)
                                .with_context(|| {
                                    format!(
                                        "unknown peer {name} (tidewire, rmcp, ceiling, \
                                         tidewire+otel)"
                                    )
                                })
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--sessions" => {
                    options.sessions = value()?
                        .split(',')
                        .map(str::parse)
                        .collect::<Result<_, _>>()?;
                }
                "-h" | "--help" => {
                    println!(
                        "usage: bench [--quick] [--json] [--rounds N] [--window SECS] \
                         [--only sse,json,progress,modern,shared,stdio,memory] [--sessions 1000,10000] [--no-pin] \
                         [--protocol VERSION] [--peers tidewire,rmcp,ceiling,tidewire+otel] \
                         [--scale-out [--redis-server PATH] [--haproxy PATH]] \
                         [--counts [--count-requests N]] [--otel]"
                    );
                    std::process::exit(0);
                }
                other => bail!("unknown argument {other} (try --help)"),
            }
        }
        if options.otel && !options.peers.contains(&Peer::TidewireOtel) {
            options.peers.push(Peer::TidewireOtel);
        }
        if options.peers.is_empty() {
            bail!("--peers needs at least one peer");
        }
        if options.rounds == 0 {
            bail!("--rounds must be at least 1");
        }
        if options.count_requests == 0 {
            bail!("--count-requests must be at least 1");
        }
        if options.counts && options.scale_out {
            bail!("--counts and --scale-out are separate runs");
        }
        Ok(options)
    }

    fn has(&self, group: &str) -> bool {
        self.groups.iter().any(|g| g == group)
    }

    /// Whether a round measures echo on `wire` (its group: `sse`, `json` or `modern`).
    fn echo_on(&self, wire: Wire) -> bool {
        self.has(wire.name())
    }

    /// Whether a round measures the progress burst on `wire`: over SSE with sessions (group
    /// `progress`) and on the stateless wire (group `modern`); JSON replies cannot stream it.
    fn progress_on(&self, wire: Wire) -> bool {
        match wire {
            Wire::Sse => self.has("progress"),
            Wire::Json => false,
            Wire::Modern => self.has("modern"),
        }
    }
}

/// The table being filled, in display order.
struct Rows(Vec<Row>);

impl Rows {
    fn row(&mut self, key: &str, label: &str, unit: &str, better: Better) -> &mut Row {
        if let Some(i) = self.0.iter().position(|r| r.key == key) {
            return &mut self.0[i];
        }
        self.0.push(Row::new(key, label, unit, better));
        let last = self.0.len() - 1;
        &mut self.0[last]
    }
}

/// What one echo cell measured.
struct Echo {
    rps: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_us: f64,
}

/// Echo round trips on `sessions` callers (one connection each; sessions, or stateless clients
/// on the modern wire), each keeping one call in flight: warm up, then measure for `window`.
/// The CPU per request is that of every process in `pids` (the server's, or a cluster's).
async fn echo_cell(
    target: &Arc<Target>,
    pids: &[u32],
    wire: Wire,
    sessions: usize,
    warm: Duration,
    window: Duration,
) -> anyhow::Result<Echo> {
    let mut opened = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        opened.push(Caller::open(target.clone(), wire).await?);
    }
    echo_load(opened, pids, warm, window).await
}

/// Echo round trips on callers already opened, each keeping one call in flight: warm up, then
/// measure for `window`. The CPU per request is that of every process in `pids`.
async fn echo_load(
    opened: Vec<Caller>,
    pids: &[u32],
    warm: Duration,
    window: Duration,
) -> anyhow::Result<Echo> {
    let start = Instant::now() + warm;
    let end = start + window;
    let mut tasks = Vec::with_capacity(opened.len());
    for mut caller in opened {
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let t = Instant::now();
                if t >= end {
                    break;
                }
                caller.echo().await?;
                let done = Instant::now();
                if t >= start && done <= end {
                    latencies.push((done - t).as_nanos() as u64);
                }
            }
            anyhow::Ok(latencies)
        }));
    }
    tokio::time::sleep_until(start.into()).await;
    let cpu = || -> anyhow::Result<u64> { pids.iter().map(|&pid| cpu_micros(pid)).sum() };
    let cpu0 = cpu()?;
    tokio::time::sleep_until(end.into()).await;
    let cpu1 = cpu()?;
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    if all.is_empty() {
        bail!("no echo round trip completed in the window");
    }
    all.sort_unstable();
    let us = |p| percentile(&all, p).map_or(f64::NAN, |ns| ns as f64 / 1000.0);
    Ok(Echo {
        rps: all.len() as f64 / window.as_secs_f64(),
        p50_us: us(50.0),
        p99_us: us(99.0),
        cpu_us: cpu1.saturating_sub(cpu0) as f64 / all.len() as f64,
    })
}

/// Notifications per second of a `progress(PROGRESS_N)` call on `wire`: the median of
/// [`PROGRESS_BURSTS`] calls on one connection, after a smaller warm-up call. Prints every
/// burst's rate and, given the server's processes (`pids`), its CPU per notification.
async fn progress_cell(target: &Arc<Target>, wire: Wire, pids: &[u32]) -> anyhow::Result<f64> {
    let mut caller = Caller::open(target.clone(), wire).await?;
    caller.progress(PROGRESS_N / 10).await?;
    let mut rates = Vec::with_capacity(PROGRESS_BURSTS);
    let cpu = || -> anyhow::Result<u64> { pids.iter().map(|&pid| cpu_micros(pid)).sum() };
    let cpu0 = cpu()?;
    for _ in 0..PROGRESS_BURSTS {
        let t = Instant::now();
        let got = caller.progress(PROGRESS_N).await?;
        let elapsed = t.elapsed();
        if got as u64 != PROGRESS_N {
            eprintln!("  warning: {got} of {PROGRESS_N} progress notifications arrived");
        }
        rates.push(got as f64 / elapsed.as_secs_f64());
    }
    let cpu1 = cpu()?;
    if !pids.is_empty() {
        // In clock ticks (10 ms): over the five bursts, within about 0.2 µs.
        eprintln!(
            "  (server CPU {:.2} µs per notification)",
            cpu1.saturating_sub(cpu0) as f64 / (PROGRESS_BURSTS as f64 * PROGRESS_N as f64)
        );
    }
    rates.sort_by(f64::total_cmp);
    eprintln!(
        "  (bursts: {})",
        rates
            .iter()
            .map(|r| format!("{r:.0}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(rates[rates.len() / 2])
}

/// Server memory per idle session with an open GET stream: RSS growth over `sessions`
/// sessions, after a warm-up session. The server is killed before the client lets go, so no
/// client socket lingers in TIME_WAIT.
async fn memory_cell(placement: &Placement, peer: Peer, sessions: usize) -> anyhow::Result<f64> {
    let (mut child, url) = placement.start_http(peer, Wire::Sse).await?;
    let pid = child.id().context("no pid")?;
    let target = Target::from_url(&url)?;
    let mut conn = Conn::open(&target).await?;
    let warm_id = http::initialize(&mut conn, &target).await?;
    let warm = http::open_get_stream(&target, warm_id.as_ref()).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib(pid)?;

    const WORKERS: usize = 8;
    let mut tasks = Vec::new();
    for w in 0..WORKERS {
        let target = target.clone();
        let count = sessions / WORKERS + usize::from(w < sessions % WORKERS);
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::open(&target).await?;
            let mut held = Vec::with_capacity(count);
            for _ in 0..count {
                let id = http::initialize(&mut conn, &target).await?;
                held.push(http::open_get_stream(&target, id.as_ref()).await?);
            }
            anyhow::Ok((conn, held))
        }));
    }
    let mut held = Vec::new();
    for task in tasks {
        held.push(task.await??);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kib(pid)?;
    stop(&mut child).await;
    drop(held);
    drop(warm);
    Ok(during.saturating_sub(before) as f64 / sessions as f64)
}

async fn stop(child: &mut Child) {
    let _ = child.start_kill();
    let _ = child.wait().await;
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Records one echo cell's rows for `peer`: throughput, p50, p99 and server CPU.
fn push_echo(rows: &mut Rows, peer: Peer, wire: Wire, sessions: usize, e: &Echo) {
    push_echo_rows(
        rows,
        peer,
        &echo_key(wire, sessions),
        &echo_label(wire, sessions),
        e,
    );
}

/// The key an echo cell's rows start with.
fn echo_key(wire: Wire, sessions: usize) -> String {
    format!("echo_{}_c{sessions}", wire.name())
}

/// The label an echo cell's rows start with.
fn echo_label(wire: Wire, sessions: usize) -> String {
    format!("echo, {}, {}", wire.label(), wire.callers(sessions))
}

/// The key the shared-session cell's rows start with.
fn shared_key() -> String {
    format!("echo_shared_c{SHARED_CONNECTIONS}")
}

/// The label the shared-session cell's rows start with.
fn shared_label() -> String {
    format!("echo, SSE, {SHARED_CONNECTIONS} connections sharing 1 session")
}

/// Records the shared-session cell's rows for `peer`.
fn push_shared(rows: &mut Rows, peer: Peer, e: &Echo) {
    push_echo_rows(rows, peer, &shared_key(), &shared_label(), e);
}

/// Records an echo measurement's four rows (`{key}_rps`, …) for `peer`.
fn push_echo_rows(rows: &mut Rows, peer: Peer, key: &str, label: &str, e: &Echo) {
    let metrics = [
        ("rps", "throughput", "req/s", Better::Higher, e.rps),
        ("p50_us", "p50 latency", "µs", Better::Lower, e.p50_us),
        ("p99_us", "p99 latency", "µs", Better::Lower, e.p99_us),
        (
            "cpu_us",
            "server CPU per request",
            "µs",
            Better::Lower,
            e.cpu_us,
        ),
    ];
    for (suffix, what, unit, better, value) in metrics {
        rows.row(
            &format!("{key}_{suffix}"),
            &format!("{label}: {what}"),
            unit,
            better,
        )
        .push(peer, value);
    }
}

/// Records one progress burst's rate for `peer`.
fn push_progress(rows: &mut Rows, peer: Peer, wire: Wire, rate: f64) {
    rows.row(
        &format!("progress_{}_per_s", wire.name()),
        &format!("progress({PROGRESS_N}), {}: notifications", wire.label()),
        "per s",
        Better::Higher,
    )
    .push(peer, rate);
}

/// Echo on one session shared by [`SHARED_CONNECTIONS`] keep-alive connections (one
/// `initialize`, then every connection sends its session id, one call at a time each), on a
/// fresh server for `peer` in its default mode (sessions, SSE replies).
async fn shared_cell(
    options: &Options,
    placement: &Placement,
    peer: Peer,
    rows: &mut Rows,
) -> anyhow::Result<()> {
    let (mut child, url) = placement.start_http(peer, Wire::Sse).await?;
    let pid = child.id().context("no pid")?;
    let target = Target::from_url(&url)?;
    let measured: anyhow::Result<Echo> = async {
        let callers = http::shared_session(target, SHARED_CONNECTIONS).await?;
        echo_load(callers, &[pid], options.warm, options.window).await
    }
    .await;
    stop(&mut child).await;
    let e =
        measured.with_context(|| format!("{} echo shared c{SHARED_CONNECTIONS}", peer.name()))?;
    eprintln!(
        "  {:8} echo SHARED c={SHARED_CONNECTIONS:<2}: {:>9.0} req/s  p50 {:>7.1} µs  p99 {:>7.1} µs  cpu {:>5.1} µs/req",
        peer.name(),
        e.rps,
        e.p50_us,
        e.p99_us,
        e.cpu_us
    );
    push_shared(rows, peer, &e);
    Ok(())
}

/// One peer's HTTP cells on `wire`, on a fresh server started for it: echo with 1 and 32
/// callers, then the progress burst, as `options` asks.
async fn http_cells(
    options: &Options,
    placement: &Placement,
    peer: Peer,
    wire: Wire,
    rows: &mut Rows,
) -> anyhow::Result<()> {
    let (mut child, url) = placement.start_http(peer, wire).await?;
    let pid = child.id().context("no pid")?;
    let target = Target::from_url(&url)?;
    let mode = wire.name();
    if options.echo_on(wire) {
        for sessions in [1, 32] {
            let e = echo_cell(
                &target,
                &[pid],
                wire,
                sessions,
                options.warm,
                options.window,
            )
            .await
            .with_context(|| format!("{} echo {mode} c{sessions}", peer.name()))?;
            eprintln!(
                "  {:8} echo {:6} c={sessions:<2}: {:>9.0} req/s  p50 {:>7.1} µs  p99 {:>7.1} µs  cpu {:>5.1} µs/req",
                peer.name(),
                mode.to_uppercase(),
                e.rps,
                e.p50_us,
                e.p99_us,
                e.cpu_us
            );
            push_echo(rows, peer, wire, sessions, &e);
        }
    }
    if options.progress_on(wire) {
        let pids: Vec<u32> = child.id().into_iter().collect();
        let rate = progress_cell(&target, wire, &pids)
            .await
            .with_context(|| format!("{} progress {mode}", peer.name()))?;
        eprintln!(
            "  {:8} progress({PROGRESS_N}) over {}: {rate:>9.0} notifications/s",
            peer.name(),
            wire.label()
        );
        push_progress(rows, peer, wire, rate);
    }
    stop(&mut child).await;
    Ok(())
}

async fn run(options: &Options, placement: &Placement, rows: &mut Rows) -> anyhow::Result<()> {
    let (warm, window) = (options.warm, options.window);
    for round in 0..options.rounds {
        // A B C, then C B A: no peer always runs first.
        let mut order = options.peers.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        eprintln!(
            "round {}/{} (load average {})",
            round + 1,
            options.rounds,
            loadavg()
        );
        for wire in Wire::ALL {
            if !options.echo_on(wire) && !options.progress_on(wire) {
                continue;
            }
            for &peer in &order {
                http_cells(options, placement, peer, wire, rows).await?;
            }
        }
        if options.has("shared") {
            for &peer in &order {
                shared_cell(options, placement, peer, rows).await?;
            }
        }
        if options.has("stdio") {
            for in_flight in [1, 32] {
                for &peer in &order {
                    let child = placement.start_stdio(peer)?;
                    let r = stdio::run(child, in_flight, warm, window)
                        .await
                        .with_context(|| format!("{} stdio c{in_flight}", peer.name()))?;
                    eprintln!(
                        "  {:8} stdio {in_flight:>2} in flight: {:>9.0} req/s  cpu {:>5.1} µs/req",
                        peer.name(),
                        r.rps,
                        r.cpu_us
                    );
                    rows.row(
                        &format!("stdio_c{in_flight}_rps"),
                        &format!("echo, stdio, {in_flight} in flight: throughput"),
                        "req/s",
                        Better::Higher,
                    )
                    .push(peer, r.rps);
                    rows.row(
                        &format!("stdio_c{in_flight}_cpu_us"),
                        &format!("echo, stdio, {in_flight} in flight: server CPU per request"),
                        "µs",
                        Better::Lower,
                    )
                    .push(peer, r.cpu_us);
                }
            }
        }
        if options.has("memory") {
            for &sessions in &options.sessions {
                for &peer in &order {
                    let kib = memory_cell(placement, peer, sessions)
                        .await
                        .with_context(|| format!("{} memory at {sessions}", peer.name()))?;
                    eprintln!(
                        "  {:8} memory, {sessions} idle sessions with a GET stream: {kib:>6.1} KiB/session",
                        peer.name()
                    );
                    rows.row(
                        &format!("memory_{sessions}_kib"),
                        &format!(
                            "idle session with a GET stream, {sessions} sessions: server memory"
                        ),
                        "KiB/session",
                        Better::Lower,
                    )
                    .push(peer, kib);
                }
            }
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = Options::parse(&args)?;
    // Pin before the runtime starts its threads, so they all inherit core 1.
    let placement = Placement::detect(options.no_pin)?;
    placement.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if options.scale_out {
        let outside = scale::Outside::find(options.redis_server.clone(), options.haproxy.clone())?;
        return scale_out(&options, &placement, &outside, &runtime);
    }
    if options.counts {
        return counts_mode(&options, &placement, &runtime);
    }
    let started = Instant::now();
    let load_before = loadavg();
    let mut rows = Rows(Vec::new());
    let result = runtime.block_on(run(&options, &placement, &mut rows));
    let elapsed = started.elapsed();
    let meta = serde_json::json!({
        "mode": if options.quick { "quick" } else { "full" },
        "rounds": options.rounds,
        "window_s": options.window.as_secs_f64(),
        "warm_s": options.warm.as_secs_f64(),
        "pinned": placement.pinned,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "load_average_before": load_before,
        "load_average_after": loadavg(),
        "elapsed_s": elapsed.as_secs_f64(),
        "protocol_version": http::protocol_version(),
        "modern_protocol_version": http::MODERN_VERSION,
        "progress_n": PROGRESS_N,
        "tidewire_otel": options.peers.contains(&Peer::TidewireOtel),
    });
    if options.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&rows.0, meta))?
        );
    } else {
        println!(
            "{} mode{}, {} rounds, {:.1} s per cell, {} (load average {} before, {} after), {:.0} s\n",
            if options.quick { "quick" } else { "full" },
            if options.peers.contains(&Peer::TidewireOtel) {
                ", tidewire also with telemetry on (tidewire+otel)"
            } else {
                ""
            },
            options.rounds,
            options.window.as_secs_f64(),
            if placement.pinned {
                "servers on core 0, load on core 1"
            } else {
                "not pinned"
            },
            load_before,
            loadavg(),
            elapsed.as_secs_f64()
        );
        print!("{}", report::markdown(&rows.0));
        println!(
            "\nMedian (min–max) over the rounds. Ratios are tidewire ÷ peer (and, with telemetry \
             on beside, tidewire+otel ÷ tidewire): above 1 is better for ↑ rows, below 1 for ↓ \
             rows."
        );
    }
    result
}

/// `bench --counts`: tidewire's allocations and tasks per request, and their table.
fn counts_mode(
    options: &Options,
    placement: &Placement,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut rows = Rows(Vec::new());
    let result = runtime.block_on(counts::run(options, placement, &mut rows));
    let elapsed = started.elapsed();
    if options.json {
        let meta = serde_json::json!({
            "mode": if options.quick { "quick" } else { "full" },
            "kind": "counts",
            "rounds": options.rounds,
            "requests_per_cell": options.count_requests,
            "elapsed_s": elapsed.as_secs_f64(),
            "protocol_version": http::protocol_version(),
            "modern_protocol_version": http::MODERN_VERSION,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&rows.0, meta))?
        );
    } else {
        println!(
            "counts, {} rounds, {} requests per cell, peers {}, {:.0} s\n",
            options.rounds,
            options.count_requests,
            options
                .peers
                .iter()
                .map(|p| p.name())
                .collect::<Vec<_>>()
                .join(", "),
            elapsed.as_secs_f64()
        );
        print!("{}", report::markdown(&rows.0));
        println!(
            "\nMedian (min–max) over the rounds, per request, counted in the server between two \
             readings of GET /counts around the requests (after a warm-up), each peer's in its \
             own fresh server. Allocations: dhat's blocks (every alloc and realloc); tasks: tokio's \
             spawned-task count."
        );
    }
    result
}

/// `bench --scale-out`: the scale-out rows and their table.
fn scale_out(
    options: &Options,
    placement: &Placement,
    outside: &scale::Outside,
    runtime: &tokio::runtime::Runtime,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let load_before = loadavg();
    let mut rows: Vec<Row<Setup>> = Vec::new();
    let result = runtime.block_on(scale::run(options, placement, outside, &mut rows));
    let elapsed = started.elapsed();
    if options.json {
        let meta = serde_json::json!({
            "mode": if options.quick { "quick" } else { "full" },
            "kind": "scale-out",
            "rounds": options.rounds,
            "window_s": options.window.as_secs_f64(),
            "pinned": placement.pinned,
            "load_average_before": load_before,
            "load_average_after": loadavg(),
            "elapsed_s": elapsed.as_secs_f64(),
            "protocol_version": http::protocol_version(),
            "progress_n": PROGRESS_N,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&report::json(&rows, meta))?
        );
    } else {
        println!(
            "scale-out, {} mode, {} rounds, {:.1} s per cell, {} (load average {} before, {} after), {:.0} s\n",
            if options.quick { "quick" } else { "full" },
            options.rounds,
            options.window.as_secs_f64(),
            if placement.pinned {
                "servers, HAProxy and Redis on core 0, load on core 1"
            } else {
                "not pinned"
            },
            load_before,
            loadavg(),
            elapsed.as_secs_f64()
        );
        print!("{}", report::markdown(&rows));
        println!(
            "\nMedian (min–max) over the rounds, every request through HAProxy. Ratios are \
             redis-N ÷ memory-1: above 1 is better for ↑ rows, below 1 for ↓ rows."
        );
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn quick_and_full_modes() {
        let quick = Options::parse(&args("--quick")).expect("quick");
        assert!(quick.quick && quick.rounds == 3 && quick.sessions == [1_000]);
        let full = Options::parse(&[]).expect("full");
        assert!(!full.quick && full.rounds == 5 && full.sessions == [1_000, 10_000]);
        assert!(full.has("memory") && full.has("stdio") && full.has("modern"));
        assert!(full.has("shared") && quick.has("shared"));
        assert!(!full.counts && (quick.count_requests, full.count_requests) == (1_000, 5_000));
        let counts = Options::parse(&args("--counts --count-requests 300")).expect("counts");
        assert!(counts.counts && counts.count_requests == 300);
        assert!(Options::parse(&args("--count-requests 0")).is_err());
        assert!(Options::parse(&args("--counts --scale-out")).is_err());
        assert!(quick.echo_on(Wire::Modern) && quick.progress_on(Wire::Modern));
        let some = Options::parse(&args("--only sse,stdio --rounds 2 --window 0.5 --json"))
            .expect("options");
        assert!(some.has("sse") && !some.has("memory") && some.json);
        assert_eq!((some.rounds, some.window), (2, Duration::from_millis(500)));
        assert!(Options::parse(&args("--rounds 0")).is_err());
        assert!(Options::parse(&args("--rounds")).is_err());
        assert!(Options::parse(&args("--bogus")).is_err());
        let scale =
            Options::parse(&args("--scale-out --quick --haproxy /x/haproxy")).expect("scale");
        assert!(scale.scale_out && scale.quick);
        assert_eq!(scale.haproxy, Some(PathBuf::from("/x/haproxy")));
        assert!(!full.scale_out && full.redis_server.is_none());
    }

    #[test]
    fn groups_choose_the_cells_of_each_wire() {
        let modern = Options::parse(&args("--only modern")).expect("options");
        assert!(modern.echo_on(Wire::Modern) && modern.progress_on(Wire::Modern));
        assert!(!modern.echo_on(Wire::Sse) && !modern.progress_on(Wire::Sse));
        let progress = Options::parse(&args("--only progress")).expect("options");
        assert!(progress.progress_on(Wire::Sse) && !progress.echo_on(Wire::Sse));
        assert!(!progress.progress_on(Wire::Modern) && !progress.progress_on(Wire::Json));
    }

    #[test]
    fn echo_rows_keep_their_keys_and_labels() {
        let e = Echo {
            rps: 1.0,
            p50_us: 2.0,
            p99_us: 3.0,
            cpu_us: 4.0,
        };
        let mut rows = Rows(Vec::new());
        push_echo(&mut rows, Peer::Tidewire, Wire::Sse, 1, &e);
        push_echo(&mut rows, Peer::Tidewire, Wire::Modern, 32, &e);
        push_progress(&mut rows, Peer::Ceiling, Wire::Modern, 5.0);
        let keys: Vec<&str> = rows.0.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "echo_sse_c1_rps",
                "echo_sse_c1_p50_us",
                "echo_sse_c1_p99_us",
                "echo_sse_c1_cpu_us",
                "echo_modern_c32_rps",
                "echo_modern_c32_p50_us",
                "echo_modern_c32_p99_us",
                "echo_modern_c32_cpu_us",
                "progress_modern_per_s",
            ]
        );
        assert_eq!(rows.0[0].label, "echo, SSE, 1 session: throughput");
        assert_eq!(
            rows.0[7].label,
            "echo, stateless 2026-07-28, 32 clients: server CPU per request"
        );
        assert_eq!(rows.0[7].values[&Peer::Tidewire], [4.0]);
        assert_eq!(
            rows.0[8].label,
            "progress(10000), stateless 2026-07-28: notifications"
        );
    }

    #[test]
    fn the_shared_cell_has_its_own_rows() {
        let e = Echo {
            rps: 1.0,
            p50_us: 2.0,
            p99_us: 3.0,
            cpu_us: 4.0,
        };
        let mut rows = Rows(Vec::new());
        push_shared(&mut rows, Peer::Rmcp, &e);
        let keys: Vec<&str> = rows.0.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "echo_shared_c32_rps",
                "echo_shared_c32_p50_us",
                "echo_shared_c32_p99_us",
                "echo_shared_c32_cpu_us",
            ]
        );
        assert_eq!(
            rows.0[0].label,
            "echo, SSE, 32 connections sharing 1 session: throughput"
        );
        assert_eq!(rows.0[3].values[&Peer::Rmcp], [4.0]);
    }

    #[test]
    fn rows_keep_their_first_order() {
        let mut rows = Rows(Vec::new());
        rows.row("b", "b", "u", Better::Higher)
            .push(Peer::Rmcp, 1.0);
        rows.row("a", "a", "u", Better::Higher)
            .push(Peer::Rmcp, 1.0);
        rows.row("b", "b", "u", Better::Higher)
            .push(Peer::Rmcp, 2.0);
        let keys: Vec<&str> = rows.0.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(rows.0[0].values[&Peer::Rmcp], [1.0, 2.0]);
    }
}
