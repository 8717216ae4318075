//! The server the cross-transport suite runs against: the demo server plus test-only tools.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitParams, ElicitationSchema, PrimitiveSchema,
    SamplingMessage,
};

use tidewire_core::session::CancelPolicy;
use tidewire_server::{Context, NoArgs, Server, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Held {
    /// Names this call in `hold_status` (tests in one process run side by side).
    key: String,
}

/// What became of each `hold_*` call, by key.
#[derive(Debug, Default, Clone, Copy, Serialize)]
struct HoldRecord {
    /// Its `on_cancel` guard ran.
    on_cancel: bool,
    /// The handler ran on after the cancellation, to its own return.
    returned: bool,
    /// A progress report after the cancellation was refused (nothing more is sent).
    send_refused: bool,
}

static HOLDS: Mutex<BTreeMap<String, HoldRecord>> = Mutex::new(BTreeMap::new());

fn note_hold(key: &str, change: impl FnOnce(&mut HoldRecord)) {
    let mut holds = HOLDS.lock().unwrap_or_else(PoisonError::into_inner);
    change(holds.entry(key.to_owned()).or_default());
}

/// `hold_abort` and `hold_cooperative`: report progress 1, wait to be cancelled, then (if
/// still running) try to report again, wait 50 ms and return, noting each step by `key`.
async fn hold(args: Held, ctx: Context) -> Result<CallToolResult, ToolError> {
    let key = args.key;
    note_hold(&key, |_| {});
    let _cleanup = ctx.on_cancel({
        let key = key.clone();
        move || note_hold(&key, |r| r.on_cancel = true)
    });
    ctx.report_progress(1.0, None, None).await?;
    ctx.cancelled().await;
    let refused = ctx.report_progress(2.0, None, None).await.is_err();
    note_hold(&key, |r| r.send_refused = refused);
    // Under Abort the task is dropped here at the latest.
    tokio::time::sleep(Duration::from_millis(50)).await;
    note_hold(&key, |r| r.returned = true);
    Ok(CallToolResult::text("returned after the cancel"))
}

#[derive(Deserialize, JsonSchema)]
struct Slow {
    /// Milliseconds between two progress reports.
    every_ms: u64,
    /// How many reports.
    n: u64,
}

/// The demo server, plus:
/// - `progress_rules`: reports 1, then tries 1 again and 0.5 (both must be refused), then 2 and a
///   tracker delta; returns which attempts were refused;
/// - `slow_progress {every_ms, n}`: a report every `every_ms` ms, `n` times (timeout tests);
/// - `sample_with_progress`: asks the client to sample with a progress token and returns how many
///   progress reports the client sent back during it;
/// - `elicit_with_progress`: the same for an elicitation;
/// - `hold_abort {key}` / `hold_cooperative {key}`: wait to be cancelled under each cancel
///   policy, and `hold_status {key}` says what became of them.
pub fn suite_server() -> Server {
    tidewire_demo::demo_builder()
        .tool("hold_abort", "Waits to be cancelled (Abort)", hold)
        .tool(
            "hold_cooperative",
            "Waits to be cancelled (Cooperative)",
            hold,
        )
        .cancel_policy_for("hold_cooperative", CancelPolicy::Cooperative)
        .tool(
            "hold_status",
            "What became of a hold_* call",
            |args: Held, _ctx: Context| async move {
                let record = HOLDS
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get(&args.key)
                    .copied();
                Ok(CallToolResult::text(serde_json::to_string(&record)?))
            },
        )
        // Tasks are watched by polling: tests poll often, so they see each progress report.
        .task_poll_interval(std::time::Duration::from_millis(50))
        .tool(
            "progress_rules",
            "Checks the monotonic progress guard",
            |_: NoArgs, ctx: Context| async move {
                ctx.report_progress(1.0, None, None).await?;
                let same = ctx.report_progress(1.0, None, None).await.is_err();
                let lower = ctx.report_progress(0.5, None, None).await.is_err();
                ctx.report_progress(2.0, None, None).await?;
                let tracker = ctx.progress_tracker(None);
                let bad_delta = tracker.advance(0.0, None).await.is_err();
                Ok(CallToolResult::text(format!(
                    "same={same} lower={lower} bad_delta={bad_delta}"
                )))
            },
        )
        .tool(
            "slow_progress",
            "Reports progress slowly",
            |args: Slow, ctx: Context| async move {
                for i in 1..=args.n {
                    tokio::time::sleep(std::time::Duration::from_millis(args.every_ms)).await;
                    ctx.report_progress(i as f64, Some(args.n as f64), None)
                        .await?;
                }
                Ok(CallToolResult::text("done"))
            },
        )
        .tool(
            "sample_with_progress",
            "Samples and counts the client's progress reports",
            |_: NoArgs, ctx: Context| async move {
                let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let sink = seen.clone();
                let params =
                    CreateMessageParams::new(vec![SamplingMessage::user_text("count")], 16);
                let reply = ctx
                    .create_message_request(params)
                    .on_progress(move |p| {
                        if let Ok(mut v) = sink.lock() {
                            v.push(p.progress);
                        }
                    })
                    .await?;
                let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
                Ok(CallToolResult::text(format!("{}:{seen:?}", reply.model)))
            },
        )
        .tool(
            "elicit_with_progress",
            "Elicits and counts the client's progress reports",
            |_: NoArgs, ctx: Context| async move {
                let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
                let sink = seen.clone();
                let schema =
                    ElicitationSchema::new().property("name", PrimitiveSchema::string(), true);
                let answer = ctx
                    .elicit_request(ElicitParams::form("Who?", schema))
                    .on_progress(move |p| {
                        if let Ok(mut v) = sink.lock() {
                            v.push(p.progress);
                        }
                    })
                    .await?;
                let seen = seen.lock().map(|v| v.clone()).unwrap_or_default();
                Ok(CallToolResult::text(format!(
                    "{:?}:{seen:?}",
                    answer.action
                )))
            },
        )
        .build()
}
