//! The part of the conformance contract that only the 2026-07-28 scenarios use: the
//! `Mcp-Param-*` tool, capability and stream probes, list-change triggers, and the multi
//! round-trip (`input_required`) tools and prompt with the keys the suite expects.
//!
//! Every tool is written once, with the era-neutral [`Context`] calls: on a session the same
//! questions go to the client as requests.

use std::collections::HashMap;

use serde_json::{Value, json};
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitAction, ElicitParams, ElicitResult,
    ElicitationSchema, GetPromptResult, LoggingLevel, PrimitiveSchema, Prompt, PromptMessage,
    SamplingContent, SamplingMessage, Tool,
};
use tidewire_server::{Context, NoArgs, ServerBuilder, ToolError};

/// Adds the 2026-07-28 fixtures.
pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool_raw(
            Tool::new(
                "test_x_mcp_header",
                "Echoes its region; on Streamable HTTP (2026-07-28) the region also travels in \
                 the Mcp-Param-Region header, which must match.",
                json!({
                    "type": "object",
                    "properties": {
                        "region": {
                            "type": "string",
                            "description": "Any region name.",
                            "x-mcp-header": "Region",
                        }
                    },
                    "required": ["region"],
                }),
            ),
            |args: Value, _ctx| async move {
                let region = args.get("region").and_then(Value::as_str).unwrap_or("");
                Ok(CallToolResult::text(format!("region: {region}")))
            },
        )
        .tool(
            "test_missing_capability",
            "Asks the client's model a question, so it needs the sampling capability: without \
             it the call fails with -32021 (2026-07-28).",
            |_: NoArgs, ctx: Context| async move { sample_text(&ctx, None, "Say hello.").await },
        )
        .tool(
            "test_streaming_elicitation",
            "Asks the user for a name and greets them. On 2026-07-28 the question travels in an \
             input_required result, never as a request on the stream.",
            |_: NoArgs, ctx: Context| async move {
                let answer = ctx.elicit(name_form("What is your name?")).await?;
                Ok(CallToolResult::text(format!(
                    "Hello, {}!",
                    field(&answer, "name")
                )))
            },
        )
        .tool(
            "test_logging_tool",
            "Logs three info messages, then returns. On 2026-07-28 they are sent only when the \
             request's _meta asks for a log level.",
            |_: NoArgs, ctx: Context| async move {
                for step in ["started", "working", "done"] {
                    ctx.log_as(
                        LoggingLevel::Info,
                        Some("conformance"),
                        format!("logging tool {step}"),
                    )
                    .await?;
                }
                Ok(CallToolResult::text("Logged three messages"))
            },
        )
        .tool(
            "test_trigger_tool_change",
            "Announces that the tool list changed (to sessions and listen streams); the list \
             itself stays the same.",
            |_: NoArgs, ctx: Context| async move {
                ctx.server().notify_tools_changed().await;
                Ok(CallToolResult::text("tools/list_changed sent"))
            },
        )
        .tool(
            "test_trigger_prompt_change",
            "Announces that the prompt list changed (to sessions and listen streams); the list \
             itself stays the same.",
            |_: NoArgs, ctx: Context| async move {
                ctx.server().notify_prompts_changed().await;
                Ok(CallToolResult::text("prompts/list_changed sent"))
            },
        )
        .tool(
            "test_input_required_result_elicitation",
            "Asks the user's name (key user_name) and greets them.",
            |_: NoArgs, ctx: Context| async move {
                let answer = ctx
                    .with_input_key("user_name")
                    .elicit(name_form("What is your name?"))
                    .await?;
                Ok(CallToolResult::text(format!(
                    "Hello, {}!",
                    field(&answer, "name")
                )))
            },
        )
        .tool(
            "test_input_required_result_sampling",
            "Asks the client's model for the capital of France (key capital_question).",
            |_: NoArgs, ctx: Context| async move {
                sample_text(
                    &ctx,
                    Some("capital_question"),
                    "What is the capital of France?",
                )
                .await
            },
        )
        .tool(
            "test_input_required_result_list_roots",
            "Asks the client for its roots (key client_roots) and lists them.",
            |_: NoArgs, ctx: Context| async move {
                let roots = ctx.with_input_key("client_roots").list_roots().await?;
                let uris: Vec<&str> = roots.roots.iter().map(|r| r.uri.as_str()).collect();
                Ok(CallToolResult::text(format!("Roots: {}", uris.join(", "))))
            },
        )
        .tool(
            "test_input_required_result_request_state",
            "Asks for a confirmation; the answer comes back with the sealed requestState, and \
             the result says state-ok.",
            |_: NoArgs, ctx: Context| async move {
                let answer = ctx
                    .with_input_key("confirmation")
                    .elicit(confirm_form("Go on?"))
                    .await?;
                Ok(CallToolResult::text(format!(
                    "state-ok: the request state was verified ({})",
                    action(&answer)
                )))
            },
        )
        .tool(
            "test_input_required_result_multiple_inputs",
            "Asks three questions at once (keys user_name, greeting, client_roots): a name, a \
             greeting from the model, and the roots.",
            |_: NoArgs, ctx: Context| async move {
                let (name, greeting, roots) = tokio::join!(
                    ctx.with_input_key("user_name")
                        .elicit(name_form("What is your name?")),
                    ctx.with_input_key("greeting")
                        .create_message(CreateMessageParams::new(
                            vec![SamplingMessage::user_text("Write a short greeting.")],
                            50,
                        )),
                    ctx.with_input_key("client_roots").list_roots(),
                );
                let (name, greeting, roots) = (name?, greeting?, roots?);
                let greeting: String = greeting
                    .content
                    .iter()
                    .filter_map(SamplingContent::as_text)
                    .collect();
                Ok(CallToolResult::text(format!(
                    "{greeting} {} ({} roots)",
                    field(&name, "name"),
                    roots.roots.len()
                )))
            },
        )
        .tool(
            "test_input_required_result_multi_round",
            "Asks for a name (key step1), then in a second round for a colour (key step2).",
            |_: NoArgs, ctx: Context| async move {
                let name = ctx
                    .with_input_key("step1")
                    .elicit(name_form("What is your name?"))
                    .await?;
                let schema =
                    ElicitationSchema::new().property("color", PrimitiveSchema::string(), true);
                let color = ctx
                    .with_input_key("step2")
                    .elicit(ElicitParams::form("What is your favourite colour?", schema))
                    .await?;
                Ok(CallToolResult::text(format!(
                    "{} likes {}",
                    field(&name, "name"),
                    field(&color, "color")
                )))
            },
        )
        .tool(
            "test_input_required_result_tampered_state",
            "Asks for a confirmation; its requestState is sealed, so an altered one is refused \
             with -32602.",
            |_: NoArgs, ctx: Context| async move {
                let answer = ctx
                    .with_input_key("confirmation")
                    .elicit(confirm_form("Go on?"))
                    .await?;
                Ok(CallToolResult::text(format!(
                    "confirmed: {}",
                    action(&answer)
                )))
            },
        )
        .tool(
            "test_input_required_result_capabilities",
            "Asks the client something it declared it can answer: the user (elicitation), else \
             the model (sampling), else the roots.",
            |_: NoArgs, ctx: Context| async move {
                let caps = ctx.client_capabilities().unwrap_or_default();
                if caps.elicitation.is_some() {
                    let answer = ctx.elicit(name_form("What is your name?")).await?;
                    Ok(CallToolResult::text(format!(
                        "Hello, {}!",
                        field(&answer, "name")
                    )))
                } else if caps.sampling.is_some() {
                    sample_text(&ctx, None, "Say hello.").await
                } else {
                    let roots = ctx.list_roots().await?;
                    Ok(CallToolResult::text(format!("{} roots", roots.roots.len())))
                }
            },
        )
        .prompt(
            Prompt::new(
                "test_input_required_result_prompt",
                "A prompt that first asks the user for some context (key user_context).",
            ),
            |_args: HashMap<String, String>, ctx: Context| async move {
                let schema =
                    ElicitationSchema::new().property("context", PrimitiveSchema::string(), true);
                let answer = ctx
                    .with_input_key("user_context")
                    .elicit(ElicitParams::form(
                        "What should the prompt be about?",
                        schema,
                    ))
                    .await?;
                Ok(GetPromptResult::new(vec![PromptMessage::user_text(
                    format!("Write about: {}", field(&answer, "context")),
                )]))
            },
        )
}

fn name_form(message: &str) -> ElicitParams {
    let schema = ElicitationSchema::new().property("name", PrimitiveSchema::string(), true);
    ElicitParams::form(message, schema)
}

fn confirm_form(message: &str) -> ElicitParams {
    let schema = ElicitationSchema::new().property("ok", PrimitiveSchema::boolean(), false);
    ElicitParams::form(message, schema)
}

/// One answered field as text (`?` when missing).
fn field(answer: &ElicitResult, name: &str) -> String {
    answer
        .content
        .as_ref()
        .and_then(|c| c.get(name))
        .and_then(|v| serde_json::to_value(v).ok())
        .map_or_else(
            || "?".to_owned(),
            |v| v.as_str().map_or_else(|| v.to_string(), str::to_owned),
        )
}

fn action(answer: &ElicitResult) -> &'static str {
    match answer.action {
        ElicitAction::Accept => "accepted",
        ElicitAction::Decline => "declined",
        ElicitAction::Cancel => "cancelled",
    }
}

/// Asks the client's model `prompt` (under `key`, if given) and returns its text.
async fn sample_text(
    ctx: &Context,
    key: Option<&str>,
    prompt: &str,
) -> Result<CallToolResult, ToolError> {
    let params = CreateMessageParams::new(vec![SamplingMessage::user_text(prompt)], 100);
    let result = match key {
        Some(key) => ctx.with_input_key(key).create_message(params).await?,
        None => ctx.create_message(params).await?,
    };
    let reply: String = result
        .content
        .iter()
        .filter_map(SamplingContent::as_text)
        .collect();
    Ok(CallToolResult::text(format!("{}: {reply}", result.model)))
}
