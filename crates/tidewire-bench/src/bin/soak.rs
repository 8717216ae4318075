//! `soak`: holds thousands of Streamable HTTP sessions with GET streams against one
//! `tidewire serve`, runs hostile loops beside them for a while, and reports the server's
//! resident memory as it goes. Memory must settle, not climb.
//!
//! The loops, each on its own task until the time is up:
//! - **request + cancel**: a slow `crawl`, cancelled after its first progress report, its POST
//!   connection then dropped;
//! - **vanish**: a new session that starts a call and disappears (no DELETE, no cancel), left
//!   for idle expiry;
//! - **flood**: bursts of `echo` calls on one session;
//! - **slow reader**: `notify` calls on sessions whose GET stream is never read, so their
//!   unrelated notifications pile up on the server side.
//!
//! ```text
//! cargo build --release -p tidewire-cli -p tidewire-bench
//! ulimit -n 16384
//! target/release/soak --sessions 2000 --minutes 5
//! ```
//!
//! Every request is written by hand over its own TCP connection (`Connection: close`), so a
//! connection can be cut at any point, as a vanishing client cuts it.
//!
//! It fails when any call fails or stalls (30 s), a cancellation or a call to vanish from is
//! answered with another status than the protocol's, a GET stream ends early, or a load loop
//! panics; when resident memory at the end is above the start by more than the event store's
//! budget (32 MiB, given to the server), a quarter of the start and 32 MiB; and, for runs of a
//! minute or more, when it is more than 10% (plus 8 MiB) above the middle (bounded stores fill
//! in the first half by design; a leak goes on rising in the second). CI runs a short smoke
//! (`--sessions 200 --seconds 20`), which checks all but the second-half verdict.

use std::future::Future;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// The server's event store budget, in bytes, set explicitly: the largest store that fills
/// under load by design, and so the bulk of what memory may rise by from the start.
const EVENT_STORE_BYTES: u64 = 32 * 1024 * 1024;

/// The longest a call may take before it counts as stalled (the server must answer every one).
const CALL_LIMIT: Duration = Duration::from_secs(30);

/// What the run is asked to do.
struct Options {
    server: String,
    sessions: usize,
    duration: Duration,
    idle_timeout_secs: u64,
}

/// The options, or `None` when only the usage was asked for.
fn options() -> anyhow::Result<Option<Options>> {
    let mut options = Options {
        server: "target/release/tidewire".to_owned(),
        sessions: 2000,
        duration: Duration::from_secs(120),
        idle_timeout_secs: 5,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => options.server = value()?,
            "--sessions" => options.sessions = value()?.parse()?,
            "--minutes" => {
                options.duration = Duration::from_secs_f64(
                    value()?.parse::<f64>()?.clamp(0.05, 24.0 * 60.0) * 60.0,
                )
            }
            "--seconds" => {
                options.duration = Duration::from_secs(value()?.parse::<u64>()?.clamp(1, 86_400))
            }
            "--idle-timeout-secs" => options.idle_timeout_secs = value()?.parse()?,
            "--help" | "-h" => {
                println!(
                    "soak [--server PATH] [--sessions N] [--minutes M | --seconds S] [--idle-timeout-secs S]"
                );
                return Ok(None);
            }
            other => bail!("unknown flag {other} (see --help)"),
        }
    }
    Ok(Some(options))
}

/// Counts of what the loops did.
#[derive(Default)]
struct Tally {
    calls: AtomicU64,
    cancels: AtomicU64,
    vanished: AtomicU64,
    notifies: AtomicU64,
    errors: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts what one loop turn came to: a success in `counter`, or an error.
    fn record(&self, counter: &AtomicU64, outcome: anyhow::Result<()>) {
        match outcome {
            Ok(()) => Self::add(counter),
            Err(error) => self.error(&error),
        }
    }

    /// Counts an error and prints the first few.
    fn error(&self, error: &anyhow::Error) {
        if self.errors.fetch_add(1, Ordering::Relaxed) < 5 {
            eprintln!("soak: {error:#}");
        }
    }
}

/// Where the server listens, as `127.0.0.1:PORT`.
#[derive(Clone)]
struct Target(Arc<str>);

/// The head of an answer: its status and its session header, if any.
struct Head {
    status: u16,
    session: Option<String>,
}

impl Target {
    /// Sends one POST on a fresh connection and reads the answer's head; the connection is
    /// returned positioned at the body.
    async fn post(
        &self,
        session: Option<&str>,
        body: &str,
    ) -> anyhow::Result<(Head, BufReader<TcpStream>)> {
        let mut tcp = TcpStream::connect(&*self.0).await?;
        tcp.set_nodelay(true)?;
        let session = session.map_or(String::new(), |s| format!("mcp-session-id: {s}\r\n"));
        let request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\naccept: application/json, text/event-stream\r\n\
             content-type: application/json\r\nmcp-protocol-version: 2025-11-25\r\n{session}\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            self.0,
            body.len()
        );
        tcp.write_all(request.as_bytes()).await?;
        let mut reader = BufReader::new(tcp);
        let head = read_head(&mut reader).await?;
        Ok((head, reader))
    }

    /// Opens a session's GET stream and returns it positioned at its events.
    async fn get(&self, session: &str) -> anyhow::Result<BufReader<TcpStream>> {
        let mut tcp = TcpStream::connect(&*self.0).await?;
        let request = format!(
            "GET /mcp HTTP/1.1\r\nhost: {}\r\naccept: text/event-stream\r\n\
             mcp-protocol-version: 2025-11-25\r\nmcp-session-id: {session}\r\n\r\n",
            self.0
        );
        tcp.write_all(request.as_bytes()).await?;
        let mut reader = BufReader::new(tcp);
        let head = read_head(&mut reader).await?;
        ensure!(head.status == 200, "GET answered {}", head.status);
        Ok(reader)
    }

    /// `initialize` + `initialized`: a new session's id.
    async fn session(&self) -> anyhow::Result<String> {
        let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"soak","version":"1"}}}"#;
        let (head, mut body) = self.post(None, init).await?;
        ensure!(head.status == 200, "initialize answered {}", head.status);
        let session = head.session.context("no session id")?;
        drain(&mut body).await?;
        let (head, _) = self
            .post(
                Some(&session),
                r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            )
            .await?;
        ensure!(head.status == 202, "initialized answered {}", head.status);
        Ok(session)
    }

    /// A tool call, read to its end (within [`CALL_LIMIT`]).
    async fn call(
        &self,
        session: &str,
        id: u64,
        tool: &str,
        arguments: &str,
    ) -> anyhow::Result<()> {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        );
        let call = async {
            let (head, mut reply) = self.post(Some(session), &body).await?;
            ensure!(head.status == 200, "{tool} answered {}", head.status);
            let mut text = String::new();
            reply.read_to_string(&mut text).await?;
            ensure!(
                text.contains(&format!(r#""id":{id}"#)),
                "{tool} (id {id}) ended without its response"
            );
            anyhow::Ok(())
        };
        within(&format!("{tool} (id {id})"), call).await
    }
}

async fn read_head(reader: &mut BufReader<TcpStream>) -> anyhow::Result<Head> {
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an HTTP status line: {line:?}"))?;
    let mut session = None;
    loop {
        line.clear();
        if reader.read_line(&mut line).await? == 0 || line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("mcp-session-id")
        {
            session = Some(value.trim().to_owned());
        }
    }
    Ok(Head { status, session })
}

/// Reads a body to its end (the server closes the connection after it).
async fn drain(reader: &mut BufReader<TcpStream>) -> anyhow::Result<()> {
    let mut sink = vec![0u8; 16 << 10];
    while reader.read(&mut sink).await? > 0 {}
    Ok(())
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS")
}

/// `work` within [`CALL_LIMIT`]; past it, an error saying that `what` stalled.
async fn within(what: &str, work: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    match tokio::time::timeout(CALL_LIMIT, work).await {
        Ok(outcome) => outcome,
        Err(_) => bail!("{what} stalled ({} s)", CALL_LIMIT.as_secs()),
    }
}

async fn cancel_loop(
    target: Target,
    sessions: Arc<Vec<String>>,
    ids: Arc<AtomicU64>,
    tally: Arc<Tally>,
    until: Instant,
) {
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let session = &sessions[n % sessions.len()];
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"crawl","arguments":{{"urls":["a","b","c","d"],"delay_ms":50}},"_meta":{{"progressToken":{id}}}}}}}"#
        );
        let outcome = async {
            let (head, mut reply) = target.post(Some(session), &body).await?;
            ensure!(head.status == 200, "crawl answered {}", head.status);
            let mut line = String::new();
            while reply.read_line(&mut line).await? > 0 && !line.contains("notifications/progress")
            {
                line.clear();
            }
            let cancel = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{id}}}}}"#
            );
            let (head, _) = target.post(Some(session), &cancel).await?;
            ensure!(
                head.status == 202,
                "the cancellation answered {}",
                head.status
            );
            anyhow::Ok(())
        };
        tally.record(&tally.cancels, within("a crawl to cancel", outcome).await);
    }
}

async fn vanish_loop(target: Target, tally: Arc<Tally>, until: Instant) {
    while Instant::now() < until {
        let outcome = async {
            let session = target.session().await?;
            let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crawl","arguments":{"urls":["a","b"],"delay_ms":100}}}"#;
            // The head is read, then the connection is dropped: the client is gone.
            let (head, _) = target.post(Some(&session), body).await?;
            ensure!(
                head.status == 200,
                "the call to vanish from answered {}",
                head.status
            );
            anyhow::Ok(())
        };
        tally.record(
            &tally.vanished,
            within("a session to vanish from", outcome).await,
        );
    }
}

async fn flood_loop(
    target: Target,
    sessions: Arc<Vec<String>>,
    ids: Arc<AtomicU64>,
    tally: Arc<Tally>,
    until: Instant,
) {
    let mut n = 0usize;
    while Instant::now() < until {
        n += 7;
        let session = &sessions[n % sessions.len()];
        let burst = (0..32).map(|_| {
            let id = ids.fetch_add(1, Ordering::Relaxed);
            target.call(session, id, "echo", r#"{"text":"flood"}"#)
        });
        for outcome in futures::future::join_all(burst).await {
            tally.record(&tally.calls, outcome);
        }
    }
}

async fn slow_reader_loop(
    target: Target,
    sessions: Arc<Vec<String>>,
    ids: Arc<AtomicU64>,
    tally: Arc<Tally>,
    until: Instant,
) {
    let mut n = 0usize;
    while Instant::now() < until {
        n += 1;
        let session = &sessions[n % sessions.len()];
        let id = ids.fetch_add(1, Ordering::Relaxed);
        let outcome = target.call(session, id, "notify", r#"{"count":20}"#).await;
        tally.record(&tally.notifies, outcome);
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(options) = options()? else {
        return Ok(());
    };
    let mut child = tokio::process::Command::new(&options.server)
        .args([
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--max-sessions",
            "100000",
            "--session-idle-timeout",
            &format!("{}s", options.idle_timeout_secs),
            "--event-store-bytes",
            &EVENT_STORE_BYTES.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (build it with cargo build --release -p tidewire-cli)",
                options.server
            )
        })?;
    let pid = child.id().context("the server has no pid")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut url = String::new();
    BufReader::new(stdout).read_line(&mut url).await?;
    let authority = url
        .trim()
        .strip_prefix("http://")
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("the server printed {url:?}, not its URL"))?;
    let target = Target(authority.into());
    println!(
        "soak: tidewire serve at {} (pid {pid}), {} sessions, {} s",
        url.trim(),
        options.sessions,
        options.duration.as_secs()
    );
    let baseline = rss_kib(pid)?;

    // The held sessions, each with a GET stream: most read theirs, every tenth never does. A
    // stream that ends or fails before the run does is an error.
    let tally = Arc::new(Tally::default());
    let finishing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut sessions = Vec::with_capacity(options.sessions);
    let mut slow = Vec::new();
    let mut streams = Vec::with_capacity(options.sessions);
    for i in 0..options.sessions {
        let session = target.session().await?;
        let mut stream = target.get(&session).await?;
        if i % 10 == 0 {
            slow.push(session.clone());
            streams.push(tokio::spawn(async move {
                // Held open, never read.
                std::future::pending::<()>().await;
                drop(stream);
            }));
        } else {
            let (tally, finishing) = (tally.clone(), finishing.clone());
            streams.push(tokio::spawn(async move {
                let outcome = drain(&mut stream).await;
                if !finishing.load(Ordering::Acquire) {
                    let why = match outcome {
                        Ok(()) => anyhow::anyhow!("a GET stream ended before the run did"),
                        Err(error) => error.context("a GET stream failed"),
                    };
                    tally.error(&why);
                }
            }));
        }
        sessions.push(session);
    }
    let sessions = Arc::new(sessions);
    let slow = Arc::new(slow);
    let start = rss_kib(pid)?;
    println!(
        "soak: baseline {} KiB; with {} sessions held: {} KiB",
        baseline,
        sessions.len(),
        start
    );

    let ids = Arc::new(AtomicU64::new(1000));
    let begun = Instant::now();
    let until = begun + options.duration;
    let mut loops = Vec::new();
    for _ in 0..4 {
        loops.push(tokio::spawn(cancel_loop(
            target.clone(),
            sessions.clone(),
            ids.clone(),
            tally.clone(),
            until,
        )));
    }
    for _ in 0..2 {
        loops.push(tokio::spawn(vanish_loop(
            target.clone(),
            tally.clone(),
            until,
        )));
    }
    loops.push(tokio::spawn(flood_loop(
        target.clone(),
        sessions.clone(),
        ids.clone(),
        tally.clone(),
        until,
    )));
    loops.push(tokio::spawn(slow_reader_loop(
        target.clone(),
        slow.clone(),
        ids.clone(),
        tally.clone(),
        until,
    )));

    let mut samples = Vec::new();
    let every = (options.duration / 10).max(Duration::from_secs(1));
    while Instant::now() < until {
        tokio::time::sleep(every.min(until.saturating_duration_since(Instant::now()))).await;
        let rss = rss_kib(pid)?;
        samples.push(rss);
        println!(
            "soak: {:>5.0} s  {:>8} KiB  calls {}  cancels {}  vanished {}  notify {}  errors {}",
            begun.elapsed().as_secs_f64(),
            rss,
            tally.calls.load(Ordering::Relaxed),
            tally.cancels.load(Ordering::Relaxed),
            tally.vanished.load(Ordering::Relaxed),
            tally.notifies.load(Ordering::Relaxed),
            tally.errors.load(Ordering::Relaxed),
        );
    }
    for l in loops {
        if let Err(panicked) = l.await {
            tally.error(&anyhow::anyhow!("a load loop panicked: {panicked}"));
        }
    }
    // Vanished sessions expire after the idle timeout; the reaper checks a few times per timeout.
    tokio::time::sleep(Duration::from_secs(options.idle_timeout_secs * 2 + 1)).await;
    let end = rss_kib(pid)?;
    let middle = samples.get(samples.len() / 2).copied().unwrap_or(start);
    println!(
        "soak: resident memory: start {start} KiB, middle {middle} KiB, end {end} KiB (after {} s of expiry)",
        options.idle_timeout_secs * 2 + 1
    );
    finishing.store(true, Ordering::Release);
    for s in streams {
        s.abort();
    }
    let _ = child.kill().await;
    // Every call must have been answered: a stalled or failed one is a defect.
    let errors = tally.errors.load(Ordering::Relaxed);
    ensure!(
        errors == 0,
        "{errors} calls failed or stalled (the first are printed above)"
    );
    memory_verdict(
        start,
        middle,
        end,
        options.duration >= Duration::from_secs(60),
    )
}

/// Whether memory held, in KiB: against the start, the end may be above it by no more than
/// the event store's budget (which fills under load by design) plus a quarter of the start and
/// 32 MiB (the sessions' bounded queues, the allocator's slack), on every run; and, on a run of
/// a minute or more, no more than 10% and 8 MiB above the middle (a leak goes on rising in the
/// second half, while bounded stores fill in the first).
fn memory_verdict(start: u64, middle: u64, end: u64, long: bool) -> anyhow::Result<()> {
    let allowed = start + EVENT_STORE_BYTES / 1024 + start / 4 + 32 * 1024;
    ensure!(
        end <= allowed,
        "resident memory grew from the start past its bounds: start {start} KiB, end {end} KiB \
         (at most {allowed} KiB)"
    );
    println!("soak: the end is within the bounds of the start ({end} ≤ {allowed} KiB)");
    if !long {
        println!("soak: no second-half verdict for a run under 60 s (a smoke run)");
        return Ok(());
    }
    let settled = end <= middle + middle / 10 + 8 * 1024;
    ensure!(
        settled,
        "resident memory climbed in the second half: middle {middle} KiB, end {end} KiB \
         (start {start} KiB)"
    );
    println!("soak: settled (end within 10% + 8 MiB of the middle)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_held_to_the_start_on_every_run_and_to_the_middle_on_long_ones() {
        let start = 100 * 1024;
        // Filled to the event store's budget and a little more: held.
        assert!(memory_verdict(start, start + 20_000, start + 40_000, true).is_ok());
        // Far past what the bounded stores can hold: a leak, smoke run or not.
        let leaked = start + 200 * 1024;
        assert!(memory_verdict(start, leaked, leaked, false).is_err());
        // Within the start's bounds but still rising in the second half of a long run.
        assert!(memory_verdict(start, start, start + 30_000, true).is_err());
        assert!(memory_verdict(start, start, start + 30_000, false).is_ok());
    }
}
