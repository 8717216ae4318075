//! The task fixtures of the conformance contract (the tasks extension of 2026-07-28, SEP-2663),
//! which serve as the demo of tasks too: tools that run as tasks when the client allows it,
//! ask questions as tasks, fail, and start their task after asking in the call.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CallToolResult, ElicitParams, ElicitResult, ElicitationSchema, PrimitiveSchema, TaskSupport,
};
use tidewire_server::{Context, NoArgs, ServerBuilder, ToolError};

#[derive(Deserialize, JsonSchema)]
struct Greet {
    /// Who to greet.
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct SlowCompute {
    /// How long the computation takes, in seconds (at most an hour).
    seconds: u64,
    /// A label to tell runs apart.
    #[serde(default)]
    label: String,
}

#[derive(Deserialize, JsonSchema)]
struct ConfirmDelete {
    /// The file to delete (nothing is deleted: the demo only asks).
    filename: String,
}

/// Adds the task fixtures.
pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool(
            "greet",
            "Greets by name, at once (never a task).",
            |args: Greet, _ctx| async move {
                Ok(CallToolResult::text(format!("Hello, {}!", args.name)))
            },
        )
        .tool(
            "slow_compute",
            "Computes for the given number of seconds: a task when the client allows it, a \
             plain call otherwise. Cancelling the task stops it.",
            |args: SlowCompute, ctx: Context| async move {
                let seconds = args.seconds.min(3600);
                for second in 0..seconds {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let _ = ctx
                        .progress((second + 1) as f64)
                        .of(seconds as f64)
                        .message(format!("{} computing", args.label))
                        .await;
                }
                Ok(CallToolResult::text(format!(
                    "{}: computed for {seconds} s",
                    args.label
                )))
            },
        )
        .task_support("slow_compute", TaskSupport::Optional)
        .tool(
            "failing_job",
            "Runs only as a task, and ends with a tool error (the task completes, isError).",
            |_: NoArgs, _ctx| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Err::<CallToolResult, _>(ToolError::new("the job failed, as it always does"))
            },
        )
        .task_support("failing_job", TaskSupport::Required)
        .tool(
            "protocol_error_job",
            "Runs only as a task, and ends with a protocol error (the task fails).",
            |_: NoArgs, _ctx| async move {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Err::<CallToolResult, _>(ToolError::protocol(ErrorObject::internal(
                    "the job hit an internal error, as it always does",
                )))
            },
        )
        .task_support("protocol_error_job", TaskSupport::Required)
        .tool(
            "confirm_delete",
            "Asks the user to confirm deleting a file (nothing is deleted); as a task, it waits \
             in input_required for the answer.",
            |args: ConfirmDelete, ctx: Context| async move {
                let answer = ctx
                    .elicit(confirm(&format!("Delete {}?", args.filename)))
                    .await?;
                let yes = flag(&answer, "confirm");
                Ok(CallToolResult::text(if yes {
                    format!("{} deleted", args.filename)
                } else {
                    format!("{} kept", args.filename)
                }))
            },
        )
        .task_support("confirm_delete", TaskSupport::Optional)
        .tool(
            "multi_input",
            "Asks two questions at once; as a task, both wait in input_required together.",
            |_: NoArgs, ctx: Context| async move {
                let (first, second) = tokio::join!(
                    ctx.elicit(named("First answer?")),
                    ctx.elicit(named("Second answer?")),
                );
                let (first, second) = (first?, second?);
                Ok(CallToolResult::text(format!(
                    "got {} and {}",
                    text(&first, "name"),
                    text(&second, "name")
                )))
            },
        )
        .task_support("multi_input", TaskSupport::Optional)
        .tool(
            "test_tool_with_task",
            "Asks for a name in the call, then goes on as a task that greets it.",
            |_: NoArgs, ctx: Context| async move {
                let answer = ctx
                    .with_input_key("user_name")
                    .elicit(named("What is your name?"))
                    .await?;
                ctx.continue_as_task().await?;
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(CallToolResult::text(format!(
                    "Hello, {}!",
                    text(&answer, "name")
                )))
            },
        )
        .deferred_task("test_tool_with_task")
        .task_support("test_tool_with_task", TaskSupport::Required)
}

fn confirm(message: &str) -> ElicitParams {
    let schema = ElicitationSchema::new().property("confirm", PrimitiveSchema::boolean(), true);
    ElicitParams::form(message, schema)
}

fn named(message: &str) -> ElicitParams {
    let schema = ElicitationSchema::new()
        .property("name", PrimitiveSchema::string(), true)
        .property("confirm", PrimitiveSchema::boolean(), false);
    ElicitParams::form(message, schema)
}

fn value(answer: &ElicitResult, name: &str) -> Option<serde_json::Value> {
    answer
        .content
        .as_ref()
        .and_then(|c| c.get(name))
        .and_then(|v| serde_json::to_value(v).ok())
}

fn flag(answer: &ElicitResult, name: &str) -> bool {
    value(answer, name)
        .and_then(|v| v.as_bool())
        .unwrap_or(false)
}

fn text(answer: &ElicitResult, name: &str) -> String {
    value(answer, name)
        .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
