//! The eight peer scenarios of the interop contract, written against our client so that they run
//! against any server implementing the contract: the demo server on every transport, and the
//! official Python SDK's peer server.
//!
//! Each returns `Ok(report)` (measurements worth printing) or `Err(what failed)`.

use std::ffi::OsString;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::{Value, json};
use tidewire_client::Client;
use tidewire_core::schema::{
    LoggingLevel, ResourceContents, ServerNotification, SubscriptionFilter,
};

use crate::harness::{Counters, Harness, TransportUnderTest, connect_with, peer_client};

/// The scenario names, as the Python peer client spells them.
pub const PEER_SCENARIOS: [&str; 8] = [
    "echo",
    "progress",
    "cancel",
    "notifications",
    "subscribe",
    "sampling",
    "elicitation",
    "roots",
];

/// A server command line, for the stdio runs.
#[derive(Debug, Clone)]
pub struct PeerCommand {
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

/// Spawns the server `command` over stdio and runs one peer scenario against it.
///
/// # Errors
/// What failed.
pub async fn run_peer_scenario_over_stdio(
    command: &PeerCommand,
    scenario: &str,
) -> Result<String, String> {
    run_peer_scenario_over_stdio_in(command, scenario, tidewire_client::Era::Legacy).await
}

/// As [`run_peer_scenario_over_stdio`], with the client asking for `era`.
///
/// # Errors
/// What failed.
pub async fn run_peer_scenario_over_stdio_in(
    command: &PeerCommand,
    scenario: &str,
    era: tidewire_client::Era,
) -> Result<String, String> {
    let transport = TransportUnderTest::Stdio {
        program: command.program.clone(),
        args: command.args.clone(),
    };
    let counters = Arc::new(Counters::default());
    let harness = connect_with(&transport, peer_client(&counters).era(era), counters).await;
    let outcome = run_peer_scenario(&harness, scenario).await;
    harness.finish().await;
    outcome
}

/// Runs one peer scenario on a connected harness.
///
/// # Errors
/// What failed.
pub async fn run_peer_scenario(h: &Harness, scenario: &str) -> Result<String, String> {
    let c = &h.client;
    match scenario {
        "echo" => echo(c).await,
        "progress" => progress(c).await,
        "cancel" => cancel(c).await,
        "notifications" => notifications(c).await,
        "subscribe" => subscribe(c).await,
        "sampling" => {
            let r = text_of(c, "sample", json!({"prompt": "What is MCP?"})).await?;
            ensure!(
                r.contains("canned answer to: What is MCP?"),
                "sample returned {r:?}"
            );
            ensure!(
                h.counters.sampling.load(Ordering::SeqCst) == 1,
                "the client saw {} sampling requests",
                h.counters.sampling.load(Ordering::SeqCst)
            );
            Ok(r)
        }
        "elicitation" => {
            let r = text_of(c, "elicit", json!({"message": "Who are you?"})).await?;
            ensure!(
                r.contains("peer-canned-name") && r.contains("accept"),
                "elicit returned {r:?}"
            );
            ensure!(
                h.counters.elicitation.load(Ordering::SeqCst) == 1,
                "the client saw {} elicitations",
                h.counters.elicitation.load(Ordering::SeqCst)
            );
            Ok(r)
        }
        "roots" => {
            let r = text_of(c, "roots", json!({})).await?;
            ensure!(
                r.contains("file:///tmp/peer-root-a") && r.contains("file:///tmp/peer-root-b"),
                "roots returned {r:?}"
            );
            ensure!(
                h.counters.roots.load(Ordering::SeqCst) == 1,
                "the client saw {} roots requests",
                h.counters.roots.load(Ordering::SeqCst)
            );
            Ok(r)
        }
        other => Err(format!("unknown scenario {other}")),
    }
}

/// Calls a tool and returns its first text block.
///
/// # Errors
/// A failed call, an `isError` result, or a result without text.
pub async fn text_of(c: &Client, tool: &str, args: Value) -> Result<String, String> {
    let result = c
        .call_tool(tool, args)
        .await
        .map_err(|e| format!("{tool}: {e}"))?;
    ensure!(
        !result.is_error(),
        "{tool} returned an error result: {result:?}"
    );
    result
        .content
        .iter()
        .find_map(|b| b.as_text().map(str::to_owned))
        .ok_or_else(|| format!("{tool} returned no text: {result:?}"))
}

async fn echo(c: &Client) -> Result<String, String> {
    let text = "héllo «wörld» 🌊 \"quoted\" back\\slash\nnew line";
    let back = text_of(c, "echo", json!({"text": text})).await?;
    ensure!(back == text, "echo changed the text: {back:?}");
    Ok(String::new())
}

fn urls(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("https://example.com/page/{i}"))
        .collect()
}

async fn progress(c: &Client) -> Result<String, String> {
    let urls = urls(5);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let result = c
        .call_tool("crawl", json!({"urls": urls, "delay_ms": 100}))
        .on_progress(move |p| {
            if let Ok(mut v) = sink.lock() {
                v.push(p);
            }
        })
        .await
        .map_err(|e| format!("crawl: {e}"))?;
    let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
    ensure!(
        seen.len() == 5,
        "expected 5 progress reports before the result, got {}",
        seen.len()
    );
    for (i, p) in seen.iter().enumerate() {
        ensure!(
            p.progress == (i + 1) as f64,
            "report {i} has progress {}",
            p.progress
        );
        ensure!(p.total == Some(5.0), "report {i} has total {:?}", p.total);
        let want = format!("Fetching {} ({}/5)", urls[i], i + 1);
        ensure!(
            p.message.as_deref() == Some(want.as_str()),
            "report {i} says {:?}, want {want:?}",
            p.message
        );
    }
    let text = result
        .content
        .first()
        .and_then(|b| b.as_text())
        .unwrap_or_default();
    ensure!(text == "Crawled 5 URLs", "crawl returned {text:?}");
    Ok(String::new())
}

fn now_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// Crawls 10 URLs at 300 ms, cancels after the 3rd progress report, and checks the server
/// stopped within one unit of work, sent no response and at most one more report.
///
/// # Errors
/// What failed.
pub async fn cancel(c: &Client) -> Result<String, String> {
    let mut notes = c.notifications();
    let (call, mut progress) = c
        .call_tool("crawl", json!({"urls": urls(10), "delay_ms": 300}))
        .progress_stream();
    let call = call.send().await.map_err(|e| format!("crawl: {e}"))?;
    let token = call.id().clone();
    for _ in 0..3 {
        progress
            .next()
            .await
            .ok_or("the crawl ended before 3 progress reports")?;
    }
    let cancelled_at = now_ms();
    let cancel_clock = Instant::now();
    ensure!(
        call.cancel("the test cancels after 3 reports"),
        "the call had already completed"
    );
    let outcome = call.await;
    ensure!(
        matches!(&outcome, Err(e) if e.is_cancelled()),
        "the call completed anyway: {outcome:?}"
    );
    // The server records the stop; poll its status (a few round trips; it stops within one unit).
    let mut status = Value::Null;
    for _ in 0..100 {
        let text = text_of(c, "crawl_status", json!({})).await?;
        status = serde_json::from_str(&text)
            .map_err(|e| format!("crawl_status is not JSON: {e}: {text}"))?;
        if status["finished"] == json!(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    ensure!(
        status["finished"] == json!(true),
        "the crawl never finished: {status}"
    );
    ensure!(
        status["cancelled"] == json!(true),
        "the crawl was not marked cancelled: {status}"
    );
    // tidewire's demo says how it stopped: its crawl is cooperative (it finishes the URL in
    // flight, then returns). Other servers' crawls may not say.
    if let Some(stopped) = status.get("stopped") {
        ensure!(
            stopped == "cooperative",
            "the crawl did not stop cooperatively: {status}"
        );
    }
    let completed = status["completed"].as_u64().unwrap_or(99);
    ensure!(
        completed <= 4,
        "the crawl did {completed} units, more than one after the cancel"
    );
    let stopped_at = status["stopped_at_ms"].as_f64().unwrap_or(f64::NAN);
    let stop_ms = stopped_at - cancelled_at;
    // Progress for the cancelled call that arrived after the cancel (all of it arrived before the
    // status answer, on the same connection).
    let mut late = 0;
    while let Some(Some(Ok(note))) = futures::FutureExt::now_or_never(notes.next()) {
        if let ServerNotification::Progress(p) = note
            && p.progress_token == token
            && p.progress > 3.0
        {
            late += 1;
        }
    }
    ensure!(
        late <= 1,
        "{late} progress reports arrived after the cancel"
    );
    text_of(c, "echo", json!({"text": "still here"})).await?;
    // The server's clock is read in whole milliseconds: a stop within the same millisecond can
    // come out slightly negative.
    let stop = if stop_ms < 1.0 {
        "within 1 ms".to_owned()
    } else {
        format!("{stop_ms:.0} ms")
    };
    Ok(format!(
        "server stopped {stop} after the cancel (client saw the cancel resolve in {:?}); units done {completed}; late progress {late}",
        cancel_clock.elapsed()
    ))
}

async fn notifications(c: &Client) -> Result<String, String> {
    // One loop for both eras: logs at the level asked for (`logging/setLevel`, or the stateless
    // `logLevel`), list changes through `listen` (the session's stream, or subscriptions/listen).
    c.set_logging_level(LoggingLevel::Info)
        .await
        .map_err(|e| format!("set_logging_level: {e}"))?;
    let mut notes = c.notifications();
    let filter = SubscriptionFilter {
        resources_list_changed: Some(true),
        ..SubscriptionFilter::default()
    };
    let mut changes = c.listen(filter).await.map_err(|e| format!("listen: {e}"))?;
    ensure!(
        changes.honoured().resources_list_changed == Some(true),
        "the server does not send resources/list_changed: {:?}",
        changes.honoured()
    );
    let r = text_of(c, "notify", json!({"count": 5})).await?;
    ensure!(r == "Sent 5 log messages", "notify returned {r:?}");
    let mut logs = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while logs.len() < 5 && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(10), notes.next()).await {
            Ok(Some(Ok(ServerNotification::LoggingMessage(m)))) => logs.push(m.data),
            Ok(Some(Ok(_))) => {}
            Ok(Some(Err(lag))) => return Err(format!("the notification stream lagged: {lag:?}")),
            Ok(None) | Err(_) => break,
        }
    }
    let want: Vec<Value> = (1..=5).map(|i| json!(format!("log {i}/5"))).collect();
    ensure!(logs == want, "log messages {logs:?}, want {want:?}");
    let changed = tokio::time::timeout(Duration::from_secs(10), changes.next()).await;
    ensure!(
        matches!(
            changed,
            Ok(Some(Ok(ServerNotification::ResourceListChanged(_))))
        ),
        "no resources/list_changed arrived: {changed:?}"
    );
    Ok(String::new())
}

async fn read_counter(c: &Client) -> Result<i64, String> {
    let read = c
        .read_resource("test://counter")
        .await
        .map_err(|e| format!("read: {e}"))?;
    match read.contents.first() {
        Some(ResourceContents::Text(t)) => t
            .text
            .trim()
            .parse()
            .map_err(|e| format!("counter {:?}: {e}", t.text)),
        other => Err(format!("test://counter read as {other:?}")),
    }
}

async fn subscribe(c: &Client) -> Result<String, String> {
    let subscribable = c
        .server_capabilities()
        .resources
        .as_ref()
        .and_then(|r| r.subscribe)
        == Some(true);
    ensure!(
        subscribable,
        "the server does not advertise resources.subscribe"
    );
    let mut notes = c.notifications();
    // One loop for both eras: resources/subscribe on a session, subscriptions/listen otherwise.
    let filter = SubscriptionFilter {
        resource_subscriptions: Some(vec!["test://counter".to_owned()]),
        ..SubscriptionFilter::default()
    };
    let mut changes = c.listen(filter).await.map_err(|e| format!("listen: {e}"))?;
    ensure!(
        changes.honoured().resource_subscriptions.as_deref()
            == Some(&["test://counter".to_owned()][..]),
        "the subscription was not honoured: {:?}",
        changes.honoured()
    );
    let before = read_counter(c).await?;
    text_of(c, "bump", json!({})).await?;
    let updated = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(note) = changes.next().await {
            if let Ok(ServerNotification::ResourceUpdated(u)) = note {
                return Some(u.uri);
            }
        }
        None
    })
    .await
    .ok()
    .flatten();
    ensure!(
        updated.as_deref() == Some("test://counter"),
        "no resources/updated for test://counter"
    );
    let after = read_counter(c).await?;
    ensure!(
        after == before + 1,
        "the counter went from {before} to {after}"
    );
    changes
        .end()
        .await
        .map_err(|e| format!("ending the listen: {e}"))?;
    // What came before the end is not counted.
    while futures::FutureExt::now_or_never(notes.next())
        .flatten()
        .is_some()
    {}
    text_of(c, "bump", json!({})).await?;
    // A round trip after the bump: an update, had one been sent, would have come before its answer.
    text_of(c, "echo", json!({"text": "sync"})).await?;
    let mut extra = 0;
    while let Some(Some(note)) = futures::FutureExt::now_or_never(notes.next()) {
        if matches!(note, Ok(ServerNotification::ResourceUpdated(_))) {
            extra += 1;
        }
    }
    ensure!(
        extra == 0,
        "{extra} resources/updated arrived after the listen ended"
    );
    Ok(String::new())
}

/// Runs every peer scenario through `one` (which connects, runs one scenario and reports),
/// each within `limit`, printing what passed; then fails with every failure listed together.
///
/// # Panics
/// When any scenario failed or did not finish in time.
pub async fn run_all_peer_scenarios<F, Fut>(label: &str, limit: Duration, mut one: F)
where
    F: FnMut(&'static str) -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    let mut failures = Vec::new();
    for scenario in PEER_SCENARIOS {
        match tokio::time::timeout(limit, one(scenario)).await {
            Ok(Ok(report)) => println!("[{label}] PASS {scenario} {report}"),
            Ok(Err(e)) => failures.push(format!("{scenario}: {e}")),
            Err(_) => failures.push(format!("{scenario}: did not finish in {limit:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "[{label}] failed scenarios:\n{}",
        failures.join("\n")
    );
}
