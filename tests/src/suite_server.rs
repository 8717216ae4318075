//! The server the cross-transport suite runs against: the demo server plus test-only tools.

use schemars::JsonSchema;
use serde::Deserialize;
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitParams, ElicitationSchema, PrimitiveSchema,
    SamplingMessage,
};
use tidewire_server::{Context, NoArgs, Server};

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
/// - `elicit_with_progress`: the same for an elicitation.
pub fn suite_server() -> Server {
    tidewire_demo::demo_builder()
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
