//! Allocations and tasks per request (`bench --counts`), for every peer `--peers` names: each
//! cell starts a fresh server of that peer with `--counts` (configured as for the timed cell of
//! the same name), opens its callers as that cell does, warms them up, reads `GET /counts` (the
//! server's running totals of heap allocations and spawned tasks), sends a fixed number of echo
//! calls (each caller one at a time), reads `GET /counts` again, and divides the differences by
//! the calls.
//!
//! The counts come from the servers' build (`tidewire_bench::counting`): allocations from
//! DHAT's allocator (the `count-allocs` feature), tasks from tokio's `spawned_tasks_count`
//! (`RUSTFLAGS="--cfg tokio_unstable"`). A counter the build lacks reads `null` and its rows are
//! left out; a build with neither fails the run. Such a build is for counting only: dhat's
//! allocator slows every allocation, so its timings mean nothing. rmcp's tasks are spawned on
//! the same runtime as everything else in its server, so they count the same way.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Deserialize;
use tidewire_bench::report::{Better, Peer};

use crate::http::{self, Caller, Conn, Target, Wire};
use crate::proc::Placement;
use crate::{
    Options, Rows, SHARED_CONNECTIONS, echo_key, echo_label, shared_key, shared_label, stop,
};

/// Echo calls each caller makes before the first reading: the first-time paths (lazily built
/// state, tables growing to their working size) are not counted.
const WARM_CALLS: usize = 20;

/// How long the server is left to finish what follows its last answer (a request's clean-up)
/// before a reading.
const SETTLE: Duration = Duration::from_millis(100);

/// What `GET /counts` answers: totals since the server started (`null` when not counted).
#[derive(Debug, Clone, Copy, Deserialize)]
struct Counts {
    allocations: Option<u64>,
    tasks: Option<u64>,
}

/// One cell's counts per request.
#[derive(Debug, Clone, Copy)]
struct PerRequest {
    allocations: Option<f64>,
    tasks: Option<f64>,
}

/// A counted cell: how its callers are opened, as in the timed cell with the same key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `n` callers on `wire`, each its own session (or stateless client) on its own connection.
    Own(Wire, usize),
    /// [`SHARED_CONNECTIONS`] connections on one session.
    Shared,
}

impl Shape {
    /// Every counted cell, in table order.
    const ALL: [Shape; 5] = [
        Shape::Own(Wire::Sse, 1),
        Shape::Own(Wire::Sse, 32),
        Shape::Own(Wire::Modern, 1),
        Shape::Own(Wire::Modern, 32),
        Shape::Shared,
    ];

    /// Whether `--only` keeps it: the group of its timed cell (`sse`, `modern`, `shared`).
    fn on(self, options: &Options) -> bool {
        match self {
            Shape::Own(wire, _) => options.echo_on(wire),
            Shape::Shared => options.has("shared"),
        }
    }

    fn key(self) -> String {
        match self {
            Shape::Own(wire, n) => echo_key(wire, n),
            Shape::Shared => shared_key(),
        }
    }

    fn label(self) -> String {
        match self {
            Shape::Own(wire, n) => echo_label(wire, n),
            Shape::Shared => shared_label(),
        }
    }

    async fn open(self, target: &Arc<Target>) -> anyhow::Result<Vec<Caller>> {
        match self {
            Shape::Own(wire, n) => {
                let mut callers = Vec::with_capacity(n);
                for _ in 0..n {
                    callers.push(Caller::open(target.clone(), wire).await?);
                }
                Ok(callers)
            }
            Shape::Shared => http::shared_session(target.clone(), SHARED_CONNECTIONS).await,
        }
    }
}

/// Every caller makes `calls` echo calls, one at a time, all callers at once; gives them back.
async fn drive(callers: Vec<Caller>, calls: usize) -> anyhow::Result<Vec<Caller>> {
    let mut tasks = Vec::with_capacity(callers.len());
    for mut caller in callers {
        tasks.push(tokio::spawn(async move {
            for _ in 0..calls {
                caller.echo().await?;
            }
            anyhow::Ok(caller)
        }));
    }
    let mut back = Vec::with_capacity(tasks.len());
    for task in tasks {
        back.push(task.await??);
    }
    Ok(back)
}

/// Reads the server's totals, after letting it settle.
async fn read_counts(conn: &mut Conn, target: &Target) -> anyhow::Result<Counts> {
    tokio::time::sleep(SETTLE).await;
    let reply = http::get(conn, target, "/counts").await?;
    if !reply.status.is_success() {
        bail!(
            "GET /counts failed: {} (is bench-server too old for --counts?)",
            reply.status
        );
    }
    serde_json::from_slice(&reply.body).with_context(|| {
        format!(
            "GET /counts answered {}",
            String::from_utf8_lossy(&reply.body)
        )
    })
}

/// `after - before` per request, when both were counted.
fn per_request(before: Option<u64>, after: Option<u64>, requests: usize) -> Option<f64> {
    Some(after?.saturating_sub(before?) as f64 / requests as f64)
}

/// The counts of one cell, on a fresh server of `peer`: about `requests` calls over the cell's
/// callers (each makes `requests / callers` rounded up; the division is by the calls made).
async fn count_cell(
    placement: &Placement,
    peer: Peer,
    shape: Shape,
    requests: usize,
) -> anyhow::Result<PerRequest> {
    let mut args = ["--bind", "127.0.0.1:0", "--counts"]
        .map(str::to_owned)
        .to_vec();
    if let Shape::Own(wire, _) = shape {
        args.extend(wire.server_flag().map(str::to_owned));
    }
    let (mut child, url) = placement.start_with(peer, &args).await?;
    let target = Target::from_url(&url)?;
    let measured = measure(&target, shape, requests).await;
    stop(&mut child).await;
    measured
}

async fn measure(
    target: &Arc<Target>,
    shape: Shape,
    requests: usize,
) -> anyhow::Result<PerRequest> {
    let callers = shape.open(target).await?;
    let each = requests.div_ceil(callers.len());
    let made = each * callers.len();
    let callers = drive(callers, WARM_CALLS).await?;
    // Opened before the first reading: the server's connection task is not counted.
    let mut conn = Conn::open(target).await?;
    let before = read_counts(&mut conn, target).await?;
    let callers = drive(callers, each).await?;
    let after = read_counts(&mut conn, target).await?;
    drop(callers);
    Ok(PerRequest {
        allocations: per_request(before.allocations, after.allocations, made),
        tasks: per_request(before.tasks, after.tasks, made),
    })
}

/// Runs the counted cells `--only` keeps, `options.rounds` times, into `rows`.
pub async fn run(options: &Options, placement: &Placement, rows: &mut Rows) -> anyhow::Result<()> {
    let shapes: Vec<Shape> = Shape::ALL.into_iter().filter(|s| s.on(options)).collect();
    if shapes.is_empty() {
        bail!("--counts counts the sse, modern and shared cells: --only names none of them");
    }
    let mut warned = false;
    for round in 0..options.rounds {
        eprintln!("counts, round {}/{}", round + 1, options.rounds);
        for &shape in &shapes {
            for &peer in &options.peers {
                let per = count_cell(placement, peer, shape, options.count_requests)
                    .await
                    .with_context(|| format!("counting {} on {}", shape.key(), peer.name()))?;
                if per.allocations.is_none() && per.tasks.is_none() {
                    bail!(
                        "the servers count nothing: build them with --features count-allocs \
                         (allocations) and/or RUSTFLAGS=\"--cfg tokio_unstable\" (tasks), in a \
                         separate CARGO_TARGET_DIR (see docs/performance.md)"
                    );
                }
                if !warned {
                    warned = true;
                    if per.allocations.is_none() {
                        eprintln!("  built without count-allocs: no allocation rows");
                    }
                    if per.tasks.is_none() {
                        eprintln!("  built without --cfg tokio_unstable: no task rows");
                    }
                }
                let show = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"));
                eprintln!(
                    "  {:8} {:34} {:>7} allocations/req  {:>5} tasks/req",
                    peer.name(),
                    shape.label(),
                    show(per.allocations),
                    show(per.tasks)
                );
                push(rows, peer, shape, per);
            }
        }
    }
    Ok(())
}

/// Records one cell's counts (the rows of the counters that were counted).
fn push(rows: &mut Rows, peer: Peer, shape: Shape, per: PerRequest) {
    let (key, label) = (shape.key(), shape.label());
    if let Some(allocations) = per.allocations {
        rows.row(
            &format!("{key}_allocs"),
            &format!("{label}: allocations per request"),
            "per request",
            Better::Lower,
        )
        .push(peer, allocations);
    }
    if let Some(tasks) = per.tasks {
        rows.row(
            &format!("{key}_tasks"),
            &format!("{label}: tasks spawned per request"),
            "per request",
            Better::Lower,
        )
        .push(peer, tasks);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_cells_share_the_timed_cells_keys() {
        let keys: Vec<String> = Shape::ALL.iter().map(|s| s.key()).collect();
        assert_eq!(
            keys,
            [
                "echo_sse_c1",
                "echo_sse_c32",
                "echo_modern_c1",
                "echo_modern_c32",
                "echo_shared_c32"
            ]
        );
        assert_eq!(
            Shape::Own(Wire::Modern, 1).label(),
            "echo, stateless 2026-07-28, 1 client"
        );
    }

    #[test]
    fn only_chooses_the_counted_cells() {
        let args = |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_owned).collect() };
        let options = Options::parse(&args("--counts --only modern,shared")).expect("options");
        let on: Vec<Shape> = Shape::ALL.into_iter().filter(|s| s.on(&options)).collect();
        assert_eq!(
            on,
            [
                Shape::Own(Wire::Modern, 1),
                Shape::Own(Wire::Modern, 32),
                Shape::Shared
            ]
        );
    }

    #[test]
    fn counts_divide_by_the_requests_when_both_readings_have_them() {
        assert_eq!(per_request(Some(100), Some(1_100), 10), Some(100.0));
        assert_eq!(per_request(None, Some(5), 10), None);
        assert_eq!(per_request(Some(5), None, 10), None);
        let counts: Counts =
            serde_json::from_str(r#"{"allocations":12,"tasks":null}"#).expect("counts");
        assert_eq!((counts.allocations, counts.tasks), (Some(12), None));
    }

    #[test]
    fn rows_are_pushed_only_for_what_was_counted() {
        let mut rows = Rows(Vec::new());
        let per = PerRequest {
            allocations: Some(75.0),
            tasks: None,
        };
        push(&mut rows, Peer::Tidewire, Shape::Shared, per);
        assert_eq!(rows.0.len(), 1);
        assert_eq!(rows.0[0].key, "echo_shared_c32_allocs");
        assert_eq!(
            rows.0[0].label,
            "echo, SSE, 32 connections sharing 1 session: allocations per request"
        );
        assert_eq!(rows.0[0].values[&Peer::Tidewire], [75.0]);
    }
}
