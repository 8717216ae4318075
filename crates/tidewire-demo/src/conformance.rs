//! The server contract of the official MCP conformance suite: its `test_*` tools, resources,
//! resource template, prompts and completion, with the exact texts the suite looks for.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tidewire_core::schema::{
    BlobResourceContents, BooleanSchema, CallToolResult, CompleteParams, CompleteResult,
    CompletionReference, ContentBlock, CreateMessageParams, ElicitAction, ElicitParams,
    ElicitResult, ElicitValue, ElicitationSchema, EnumOption, GetPromptResult,
    LegacyTitledEnumSchema, LoggingLevel, NumberKind, NumberSchema, PrimitiveSchema, Prompt,
    PromptArgument, PromptMessage, ReadResourceResult, Resource, ResourceTemplate, Role,
    SamplingContent, SamplingMessage, StringSchema, TextResourceContents,
    TitledMultiSelectEnumSchema, TitledSingleSelectEnumSchema, Tool, UntitledMultiSelectEnumSchema,
    UntitledSingleSelectEnumSchema,
};
use tidewire_server::{Context, NoArgs, ServerBuilder, ToolError};

use crate::{PNG_BASE64, WAV_BASE64};

/// The text of `test_simple_text`.
const SIMPLE_TEXT: &str = "This is a simple text response for testing.";
/// The text of `test_error_handling`'s error result.
const ERROR_TEXT: &str = "This tool intentionally returns an error for testing";
/// The text of `test_reconnection`.
const RECONNECTION_TEXT: &str = "Reconnection test completed successfully. If you received this, \
                                 the client properly reconnected after stream closure.";
/// The URI template of the template resource.
const TEMPLATE_URI: &str = "test://template/{id}/data";

/// Arguments of `test_sampling`.
#[derive(Debug, Deserialize, JsonSchema)]
struct SamplingArgs {
    /// The prompt to send to the client's model.
    prompt: String,
}

/// Arguments of `test_elicitation`.
#[derive(Debug, Deserialize, JsonSchema)]
struct ElicitationArgs {
    /// The message to show the user.
    message: String,
}

/// Adds the conformance tools, resources, prompts and completion.
pub(crate) fn register(builder: ServerBuilder) -> ServerBuilder {
    let builder = register_tools(builder);
    let builder = register_resources(builder);
    let builder = register_prompts(builder);
    builder.completion(|params, _ctx| async move { Ok(complete(&params)) })
}

fn register_tools(builder: ServerBuilder) -> ServerBuilder {
    builder
        .tool(
            "test_simple_text",
            "Returns one fixed text block.",
            |_: NoArgs, _ctx| async { Ok(CallToolResult::text(SIMPLE_TEXT)) },
        )
        .tool(
            "test_image_content",
            "Returns one image block (a 1x1 red PNG).",
            |_: NoArgs, _ctx| async {
                Ok(CallToolResult::success(vec![ContentBlock::image(
                    PNG_BASE64,
                    "image/png",
                )]))
            },
        )
        .tool(
            "test_audio_content",
            "Returns one audio block (a tiny WAV file).",
            |_: NoArgs, _ctx| async {
                Ok(CallToolResult::success(vec![ContentBlock::audio(
                    WAV_BASE64,
                    "audio/wav",
                )]))
            },
        )
        .tool(
            "test_embedded_resource",
            "Returns one embedded text resource.",
            |_: NoArgs, _ctx| async {
                Ok(CallToolResult::success(vec![ContentBlock::resource(
                    TextResourceContents::new(
                        "test://embedded-resource",
                        "This is an embedded resource content.",
                    )
                    .with_mime_type("text/plain"),
                )]))
            },
        )
        .tool(
            "test_multiple_content_types",
            "Returns a text block, an image block and an embedded JSON resource.",
            |_: NoArgs, _ctx| async {
                Ok(CallToolResult::success(vec![
                    ContentBlock::text("Multiple content types test:"),
                    ContentBlock::image(PNG_BASE64, "image/png"),
                    ContentBlock::resource(
                        TextResourceContents::new(
                            "test://mixed-content-resource",
                            r#"{"test":"data","value":123}"#,
                        )
                        .with_mime_type("application/json"),
                    ),
                ]))
            },
        )
        .tool(
            "test_tool_with_logging",
            "Sends three info log messages about 50 ms apart while it runs.",
            |_: NoArgs, ctx| with_logging(ctx),
        )
        .tool(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100 about 50 ms apart (when the call asks for \
             progress).",
            |_: NoArgs, ctx| with_progress(ctx),
        )
        .tool(
            "test_error_handling",
            "Always fails: returns a result with isError set.",
            |_: NoArgs, _ctx| async { Ok(CallToolResult::error_text(ERROR_TEXT)) },
        )
        .tool(
            "test_sampling",
            "Asks the client's model to answer the prompt (at most 100 tokens) and returns \
             \"LLM response: <reply>\".",
            |args: SamplingArgs, ctx| sampling(args, ctx),
        )
        .tool(
            "test_elicitation",
            "Asks the user, through the client, for a username and an email address.",
            |args: ElicitationArgs, ctx| elicitation(args, ctx),
        )
        .tool(
            "test_elicitation_sep1034_defaults",
            "Asks the user for a form whose string, integer, number, enum and boolean fields all \
             have default values (SEP-1034).",
            |_: NoArgs, ctx| elicit_and_report(ctx, defaults_form()),
        )
        .tool(
            "test_elicitation_sep1330_enums",
            "Asks the user for a form with every enum field style: untitled and titled single \
             select, legacy enumNames, untitled and titled multi select (SEP-1330).",
            |_: NoArgs, ctx| elicit_and_report(ctx, enums_form()),
        )
        .tool_raw(
            Tool::new(
                "json_schema_2020_12_tool",
                "Takes a name, an address and a way to be contacted; its input schema uses \
                 JSON Schema 2020-12 features ($schema, $defs, $anchor, $ref, allOf/anyOf, \
                 if/then/else, additionalProperties) and is returned exactly as written.",
                json_schema_2020_12(),
            ),
            |args: Value, _ctx| async move {
                Ok(CallToolResult::text(format!(
                    "JSON Schema 2020-12 tool called with: {args}"
                )))
            },
        )
        .tool(
            "test_reconnection",
            "Closes its response stream mid-call where the transport allows it (Streamable \
             HTTP, 2025-11-25: the client reconnects and resumes), then returns a fixed text.",
            |_: NoArgs, ctx: Context| async move {
                ctx.close_stream();
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok(CallToolResult::text(RECONNECTION_TEXT))
            },
        )
}

async fn with_logging(ctx: Context) -> Result<CallToolResult, ToolError> {
    let steps = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (i, step) in steps.into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ctx.log(LoggingLevel::Info, step).await?;
    }
    Ok(CallToolResult::text(
        "Tool with logging executed successfully",
    ))
}

async fn with_progress(ctx: Context) -> Result<CallToolResult, ToolError> {
    for (i, value) in [0_u32, 50, 100].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        ctx.report_progress(
            f64::from(value),
            Some(100.0),
            Some(format!("{value} of 100 done")),
        )
        .await?;
    }
    Ok(CallToolResult::text(
        "Tool with progress executed successfully",
    ))
}

async fn sampling(args: SamplingArgs, ctx: Context) -> Result<CallToolResult, ToolError> {
    let params = CreateMessageParams::new(vec![SamplingMessage::user_text(args.prompt)], 100);
    let result = ctx.create_message(params).await?;
    let reply: String = result
        .content
        .iter()
        .filter_map(SamplingContent::as_text)
        .collect();
    Ok(CallToolResult::text(format!("LLM response: {reply}")))
}

async fn elicitation(args: ElicitationArgs, ctx: Context) -> Result<CallToolResult, ToolError> {
    let schema = ElicitationSchema::new()
        .property(
            "username",
            PrimitiveSchema::string().with_description("Your user name"),
            true,
        )
        .property(
            "email",
            PrimitiveSchema::string().with_description("Your email address"),
            true,
        );
    let result = ctx.elicit(ElicitParams::form(args.message, schema)).await?;
    Ok(CallToolResult::text(format!(
        "User response: {}",
        describe_answer(&result)?
    )))
}

async fn elicit_and_report(
    ctx: Context,
    params: ElicitParams,
) -> Result<CallToolResult, ToolError> {
    let result = ctx.elicit(params).await?;
    Ok(CallToolResult::text(format!(
        "Elicitation completed: {}",
        describe_answer(&result)?
    )))
}

/// `action=<action>, content=<JSON of the answers, {} when none>`.
fn describe_answer(result: &ElicitResult) -> Result<String, serde_json::Error> {
    let action = match result.action {
        ElicitAction::Accept => "accept",
        ElicitAction::Decline => "decline",
        ElicitAction::Cancel => "cancel",
    };
    let empty = BTreeMap::<String, ElicitValue>::new();
    let content = serde_json::to_string(result.content.as_ref().unwrap_or(&empty))?;
    Ok(format!("action={action}, content={content}"))
}

/// The SEP-1034 form: one field of each primitive type, each with a default.
fn defaults_form() -> ElicitParams {
    let schema = ElicitationSchema::new()
        .property(
            "name",
            PrimitiveSchema::String(StringSchema {
                description: Some("User name".to_owned()),
                default: Some("John Doe".to_owned()),
                ..StringSchema::default()
            }),
            false,
        )
        .property(
            "age",
            PrimitiveSchema::Number(NumberSchema {
                kind: NumberKind::Integer,
                description: Some("User age".to_owned()),
                default: Some(30.0),
                ..NumberSchema::default()
            }),
            false,
        )
        .property(
            "score",
            PrimitiveSchema::Number(NumberSchema {
                kind: NumberKind::Number,
                description: Some("User score".to_owned()),
                default: Some(95.5),
                ..NumberSchema::default()
            }),
            false,
        )
        .property(
            "status",
            PrimitiveSchema::SingleSelect(UntitledSingleSelectEnumSchema {
                description: Some("User status".to_owned()),
                values: strings(["active", "inactive", "pending"]),
                default: Some("active".to_owned()),
                ..UntitledSingleSelectEnumSchema::default()
            }),
            false,
        )
        .property(
            "verified",
            PrimitiveSchema::Boolean(BooleanSchema {
                description: Some("Whether the user is verified".to_owned()),
                default: Some(true),
                ..BooleanSchema::default()
            }),
            false,
        );
    ElicitParams::form("Please check these fields; each one has a default", schema)
}

/// The SEP-1330 form: the five ways to offer choices.
fn enums_form() -> ElicitParams {
    let options = ["option1", "option2", "option3"];
    let schema = ElicitationSchema::new()
        .property(
            "untitledSingle",
            PrimitiveSchema::SingleSelect(UntitledSingleSelectEnumSchema {
                description: Some("Pick one option".to_owned()),
                values: strings(options),
                ..UntitledSingleSelectEnumSchema::default()
            }),
            false,
        )
        .property(
            "titledSingle",
            PrimitiveSchema::TitledSingleSelect(TitledSingleSelectEnumSchema {
                description: Some("Pick one labelled option".to_owned()),
                one_of: vec![
                    EnumOption::new("value1", "First Option"),
                    EnumOption::new("value2", "Second Option"),
                    EnumOption::new("value3", "Third Option"),
                ],
                ..TitledSingleSelectEnumSchema::default()
            }),
            false,
        )
        .property(
            "legacyEnum",
            PrimitiveSchema::LegacyTitledEnum(LegacyTitledEnumSchema {
                description: Some("Pick one option (enumNames style)".to_owned()),
                values: strings(["opt1", "opt2", "opt3"]),
                enum_names: strings(["Option One", "Option Two", "Option Three"]),
                ..LegacyTitledEnumSchema::default()
            }),
            false,
        )
        .property(
            "untitledMulti",
            PrimitiveSchema::MultiSelect(UntitledMultiSelectEnumSchema {
                description: Some("Pick one or more options".to_owned()),
                min_items: Some(1),
                max_items: Some(3),
                items: tidewire_core::schema::UntitledEnumItems {
                    values: strings(options),
                },
                ..UntitledMultiSelectEnumSchema::default()
            }),
            false,
        )
        .property(
            "titledMulti",
            PrimitiveSchema::TitledMultiSelect(TitledMultiSelectEnumSchema {
                description: Some("Pick one or more labelled options".to_owned()),
                min_items: Some(1),
                max_items: Some(3),
                items: tidewire_core::schema::TitledEnumItems {
                    any_of: vec![
                        EnumOption::new("value1", "First Choice"),
                        EnumOption::new("value2", "Second Choice"),
                        EnumOption::new("value3", "Third Choice"),
                    ],
                },
                ..TitledMultiSelectEnumSchema::default()
            }),
            false,
        );
    ElicitParams::form("Please choose from these lists", schema)
}

fn strings<const N: usize>(items: [&str; N]) -> Vec<String> {
    items.into_iter().map(str::to_owned).collect()
}

/// The input schema of `json_schema_2020_12_tool`, kept exactly as written.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": {"type": "string"},
                    "city": {"type": "string"}
                }
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {
            "properties": {"contactMethod": {"const": "phone"}},
            "required": ["contactMethod"]
        },
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

fn resource(uri: &str, name: &str, title: &str, description: &str, mime_type: &str) -> Resource {
    let mut resource = Resource::new(uri, name)
        .with_description(description)
        .with_mime_type(mime_type);
    resource.title = Some(title.to_owned());
    resource
}

fn register_resources(builder: ServerBuilder) -> ServerBuilder {
    let mut template = ResourceTemplate::new(TEMPLATE_URI, "template");
    template.title = Some("Template resource".to_owned());
    template.description = Some("JSON data for any id".to_owned());
    template.mime_type = Some("application/json".to_owned());

    builder
        .resource(
            resource(
                "test://static-text",
                "static-text",
                "Static text",
                "A fixed text resource",
                "text/plain",
            ),
            |uri, _ctx| async move {
                Ok(ReadResourceResult::new(vec![
                    TextResourceContents::new(
                        uri,
                        "This is the content of the static text resource.",
                    )
                    .with_mime_type("text/plain")
                    .into(),
                ]))
            },
        )
        .resource(
            resource(
                "test://static-binary",
                "static-binary",
                "Static binary",
                "A fixed binary resource (a PNG image)",
                "image/png",
            ),
            |uri, _ctx| async move {
                Ok(ReadResourceResult::new(vec![
                    BlobResourceContents::new(uri, PNG_BASE64)
                        .with_mime_type("image/png")
                        .into(),
                ]))
            },
        )
        .resource(
            resource(
                "test://watched-resource",
                "watched-resource",
                "Watched resource",
                "A text resource clients may subscribe to",
                "text/plain",
            ),
            |uri, _ctx| async move {
                Ok(ReadResourceResult::new(vec![
                    TextResourceContents::new(uri, "Watched resource content")
                        .with_mime_type("text/plain")
                        .into(),
                ]))
            },
        )
        .resource_template(template, |uri, vars, _ctx| async move {
            let id = vars.get("id").map_or("", String::as_str);
            Ok(ReadResourceResult::new(vec![
                TextResourceContents::new(uri, template_text(id))
                    .with_mime_type("application/json")
                    .into(),
            ]))
        })
}

/// `{"id":"<id>","templateTest":true,"data":"Data for ID: <id>"}`, with the keys in this order.
fn template_text(id: &str) -> String {
    let quoted = Value::from(id).to_string();
    let data = Value::from(format!("Data for ID: {id}")).to_string();
    format!(r#"{{"id":{quoted},"templateTest":true,"data":{data}}}"#)
}

fn prompt(name: &str, title: &str, description: &str, arguments: &[(&str, &str)]) -> Prompt {
    let mut prompt = Prompt::new(name, description);
    prompt.title = Some(title.to_owned());
    for (arg, about) in arguments {
        let mut argument = PromptArgument::new(*arg, true);
        argument.description = Some((*about).to_owned());
        prompt = prompt.with_argument(argument);
    }
    prompt
}

fn arg<'a>(args: &'a HashMap<String, String>, name: &str) -> &'a str {
    args.get(name).map_or("", String::as_str)
}

fn register_prompts(builder: ServerBuilder) -> ServerBuilder {
    builder
        .prompt(
            prompt(
                "test_simple_prompt",
                "Simple prompt",
                "A prompt without arguments",
                &[],
            ),
            |_args, _ctx| async {
                Ok(GetPromptResult::new(vec![PromptMessage::user_text(
                    "This is a simple prompt for testing.",
                )]))
            },
        )
        .prompt(
            prompt(
                "test_prompt_with_arguments",
                "Prompt with arguments",
                "A prompt with two required arguments",
                &[
                    ("arg1", "The first argument"),
                    ("arg2", "The second argument"),
                ],
            ),
            |args, _ctx| async move {
                let text = format!(
                    "Prompt with arguments: arg1='{}', arg2='{}'",
                    arg(&args, "arg1"),
                    arg(&args, "arg2")
                );
                Ok(GetPromptResult::new(vec![PromptMessage::user_text(text)]))
            },
        )
        .prompt(
            prompt(
                "test_prompt_with_embedded_resource",
                "Prompt with an embedded resource",
                "A prompt that embeds a text resource at the given URI",
                &[("resourceUri", "The URI to give the embedded resource")],
            ),
            |args, _ctx| async move {
                let embedded = TextResourceContents::new(
                    arg(&args, "resourceUri"),
                    "Embedded resource content for testing.",
                )
                .with_mime_type("text/plain");
                Ok(GetPromptResult::new(vec![
                    PromptMessage::new(Role::User, ContentBlock::resource(embedded)),
                    PromptMessage::user_text("Please process the embedded resource above."),
                ]))
            },
        )
        .prompt(
            prompt(
                "test_prompt_with_image",
                "Prompt with an image",
                "A prompt that includes an image",
                &[],
            ),
            |_args, _ctx| async {
                Ok(GetPromptResult::new(vec![
                    PromptMessage::new(Role::User, ContentBlock::image(PNG_BASE64, "image/png")),
                    PromptMessage::user_text("Please analyze the image above."),
                ]))
            },
        )
}

/// Suggestions for the prompt arguments and the template's `id`, filtered by what was typed;
/// nothing for anything else. `total` and `hasMore` are always given.
fn complete(params: &CompleteParams) -> CompleteResult {
    let candidates: &[&str] = match (&params.reference, params.argument.name.as_str()) {
        (CompletionReference::Prompt(p), "arg1" | "arg2")
            if p.name == "test_prompt_with_arguments" =>
        {
            &["alpha", "beta", "gamma", "paris", "park", "party"]
        }
        (CompletionReference::Prompt(p), "resourceUri")
            if p.name == "test_prompt_with_embedded_resource" =>
        {
            &[
                "test://static-text",
                "test://watched-resource",
                "test://counter",
            ]
        }
        (CompletionReference::Resource(r), "id") if r.uri == TEMPLATE_URI => &["1", "2", "3", "42"],
        _ => &[],
    };
    let typed = params.argument.value.as_str();
    let values: Vec<String> = candidates
        .iter()
        .filter(|c| c.starts_with(typed))
        .map(|c| (*c).to_owned())
        .collect();
    let total = values.len() as u64;
    let mut result = CompleteResult::new(values);
    result.completion.total = Some(total);
    result.completion.has_more = Some(false);
    result
}
