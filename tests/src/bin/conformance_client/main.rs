//! The client program for the official MCP conformance suite (client mode).
//!
//! The suite starts a mock server for each scenario and runs this program with the server's URL
//! as the last argument and the scenario's name in `MCP_CONFORMANCE_SCENARIO`. It exits 0 when
//! the scenario's steps succeed, non-zero with a one-line reason on stderr otherwise (including
//! an unknown scenario). Logs go to stderr (`RUST_LOG`).
//!
//! Scenarios: `initialize`, `tools_call`, `sse-retry`, `elicitation-sep1034-client-defaults`;
//! and when `MCP_CONFORMANCE_PROTOCOL_VERSION` is 2026-07-28 (the stateless wire, over
//! `StatelessHttpConnector` with `Era::Modern`): `tools_call`, `request-metadata`,
//! `sep-2322-client-request-state`, `http-standard-headers`, `http-custom-headers`,
//! `json-schema-ref-no-deref`; and the skills extension's `sep-2640-client-*` in either era.
//! The `auth/*` scenarios run through `tidewire_auth`'s OAuth client (see `auth.rs`); those it
//! does not pass yet are listed in `tests/conformance/client-*expected-failures*.yml`.

mod auth;

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Value, json};
use tidewire_client::{Client, Era, RequestContext, SkillsError};
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, ElicitValue,
    Implementation, Root,
};
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!(
            "usage: tidewire-conformance-client <server url> (scenario in MCP_CONFORMANCE_SCENARIO)"
        );
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    match run(&scenario, &url).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(reason) => {
            eprintln!("conformance client: scenario {scenario:?}: {reason}");
            ExitCode::FAILURE
        }
    }
}

async fn run(scenario: &str, url: &str) -> Result<(), String> {
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    if scenario.starts_with("auth/") {
        let client = auth::connect(url, version == "2026-07-28").await?;
        let outcome = list_then_call_first(&client).await;
        client.close().await;
        return outcome;
    }
    if version == "2026-07-28" {
        return run_stateless(scenario, url).await;
    }
    if !matches!(
        scenario,
        "initialize"
            | "tools_call"
            | "sse-retry"
            | "elicitation-sep1034-client-defaults"
            | "json-schema-2020-12-preservation"
    ) && !scenario.starts_with(SKILLS_SCENARIOS)
    {
        return Err(format!("unknown scenario {scenario:?}"));
    }
    let transport = StreamableHttpConnector::new(url)
        .connect()
        .await
        .map_err(|e| format!("cannot use {url}: {e}"))?;
    let client = Client::builder(Implementation::new(
        "tidewire-conformance-client",
        env!("CARGO_PKG_VERSION"),
    ))
    .elicitation_handler(accept_with_defaults)
    // These scenarios test a client of the session era: no `server/discover` probe first.
    .era(Era::Legacy)
    .connect(transport)
    .await
    .map_err(|e| format!("initialize failed: {e}"))?;
    let outcome = match scenario {
        "initialize" => initialize(&client).await,
        "tools_call" => tools_call(&client).await,
        "sse-retry" => sse_retry(&client).await,
        "json-schema-2020-12-preservation" => echo_schema(&client).await,
        "elicitation-sep1034-client-defaults" => elicitation_defaults(&client).await,
        skills => skills_scenario(&client, skills).await,
    };
    client.close().await;
    outcome
}

/// The stateless wire: no `initialize`; every request carries its `_meta` and headers.
async fn run_stateless(scenario: &str, url: &str) -> Result<(), String> {
    if !matches!(
        scenario,
        "tools_call"
            | "request-metadata"
            | "sep-2322-client-request-state"
            | "http-standard-headers"
            | "http-custom-headers"
            | "http-invalid-tool-headers"
            | "json-schema-ref-no-deref"
            | "json-schema-2020-12-preservation"
    ) && !scenario.starts_with(SKILLS_SCENARIOS)
    {
        return Err(format!(
            "unknown scenario {scenario:?} on the 2026-07-28 wire"
        ));
    }
    let transport = StatelessHttpConnector::new(url)
        .connect()
        .await
        .map_err(|e| format!("cannot use {url}: {e}"))?;
    let client = Client::builder(Implementation::new(
        "tidewire-conformance-client",
        env!("CARGO_PKG_VERSION"),
    ))
    .era(Era::Modern)
    .elicitation_handler(accept_with_defaults)
    .sampling_handler(|_: CreateMessageParams, _: RequestContext| async {
        Ok::<_, ErrorObject>(CreateMessageResult::text("tidewire-conformance", "ok"))
    })
    .roots([Root::new("file:///conformance")])
    .connect(transport)
    .await
    .map_err(|e| format!("connecting failed: {e}"))?;
    let outcome = match scenario {
        "tools_call" => tools_call(&client).await,
        "sep-2322-client-request-state" => call_every_tool(&client).await,
        "http-custom-headers" => context_tool_calls(&client).await,
        "http-invalid-tool-headers" => call_valid_tool(&client).await,
        "json-schema-2020-12-preservation" => echo_schema(&client).await,
        skills if skills.starts_with(SKILLS_SCENARIOS) => skills_scenario(&client, skills).await,
        // request-metadata, http-standard-headers, json-schema-ref-no-deref: list, then call
        // the first tool (the mock checks what every request carries).
        _ => list_then_call_first(&client).await,
    };
    client.close().await;
    outcome
}

/// The prefix of the skills extension's client scenarios.
const SKILLS_SCENARIOS: &str = "sep-2640-client-";

/// The skills extension, as a host uses it. `no-prefetch`: list the skills and read nothing
/// (listing must not fetch). `verify-*`: load the first skill, then read every file it lists;
/// the mock serves a SKILL.md that fails one check, so the load must refuse it and no other
/// file may be read. A refusal for that reason is the scenario's success.
async fn skills_scenario(client: &Client, scenario: &str) -> Result<(), String> {
    let skills = client
        .list_skills()
        .await
        .map_err(|e| format!("skills/list: {e}"))?;
    if scenario == "sep-2640-client-no-prefetch" {
        return Ok(());
    }
    let entry = skills.first().ok_or("the server lists no skill")?;
    match client.load_skill(entry).await {
        Ok(skill) => {
            for file in skill.files() {
                skill
                    .read(&file.uri)
                    .await
                    .map_err(|e| format!("reading {}: {e}", file.uri))?;
            }
            Ok(())
        }
        Err(SkillsError::Verify(refused)) => {
            eprintln!(
                "conformance client: refused the skill {}: {refused}",
                entry.uri
            );
            Ok(())
        }
        Err(other) => Err(format!("loading {}: {other}", entry.uri)),
    }
}

/// Lists the tools (those with invalid `x-mcp-header` annotations are dropped) and calls
/// `valid_tool`.
async fn call_valid_tool(client: &Client) -> Result<(), String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let valid = tools
        .iter()
        .find(|t| t.name == "valid_tool")
        .ok_or("valid_tool is not listed")?;
    let mut arguments = serde_json::Map::new();
    let properties = valid
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (name, schema) in properties {
        let value = match schema.get("type").and_then(Value::as_str) {
            Some("integer" | "number") => json!(1),
            Some("boolean") => json!(true),
            _ => json!("value"),
        };
        arguments.insert(name, value);
    }
    client
        .call_tool("valid_tool", Value::Object(arguments))
        .await
        .map(drop)
        .map_err(|e| format!("tools/call valid_tool: {e}"))
}

/// Lists the tools and sends `json_schema_2020_12_tool`'s input schema back, as received, to
/// `json_schema_echo`.
async fn echo_schema(client: &Client) -> Result<(), String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let tool = tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .ok_or("json_schema_2020_12_tool is not listed")?;
    client
        .call_tool("json_schema_echo", json!({"schema": tool.input_schema}))
        .await
        .map(drop)
        .map_err(|e| format!("tools/call json_schema_echo: {e}"))
}

/// Lists the tools and calls each, without arguments.
async fn call_every_tool(client: &Client) -> Result<(), String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    for tool in tools {
        client
            .call_tool(tool.name.clone(), json!({}))
            .await
            .map_err(|e| format!("tools/call {}: {e}", tool.name))?;
    }
    Ok(())
}

/// Lists the tools, then calls the first one without arguments (if there is one).
async fn list_then_call_first(client: &Client) -> Result<(), String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    if let Some(tool) = tools.first() {
        client
            .call_tool(tool.name.clone(), json!({}))
            .await
            .map_err(|e| format!("tools/call {}: {e}", tool.name))?;
    }
    Ok(())
}

/// Lists the tools (which teaches the transport their `x-mcp-header` parameters), then makes the
/// calls `MCP_CONFORMANCE_CONTEXT` names in `toolCalls`.
async fn context_tool_calls(client: &Client) -> Result<(), String> {
    client
        .list_all_tools()
        .await
        .map_err(|e| format!("tools/list: {e}"))?;
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let calls = context
        .get("toolCalls")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for call in calls {
        let name = call
            .get("name")
            .and_then(Value::as_str)
            .ok_or("a toolCall without a name")?;
        let arguments = call.get("arguments").cloned().unwrap_or_else(|| json!({}));
        client
            .call_tool(name, arguments)
            .await
            .map_err(|e| format!("tools/call {name}: {e}"))?;
    }
    Ok(())
}

/// `initialize` (done by connecting), then `tools/list`.
async fn initialize(client: &Client) -> Result<(), String> {
    client
        .list_all_tools()
        .await
        .map(drop)
        .map_err(|e| format!("tools/list: {e}"))
}

/// `add_numbers {a: 5, b: 3}`.
async fn tools_call(client: &Client) -> Result<(), String> {
    let result = client
        .call_tool("add_numbers", json!({"a": 5, "b": 3}))
        .await
        .map_err(|e| format!("tools/call: {e}"))?;
    if result.is_error() {
        return Err(format!("add_numbers returned an error result: {result:?}"));
    }
    Ok(())
}

/// The server closes the POST stream before answering; the transport waits `retry` and resumes
/// with GET + `Last-Event-ID` to read the result.
async fn sse_retry(client: &Client) -> Result<(), String> {
    client
        .call_tool("test_reconnection", json!({}))
        .await
        .map(drop)
        .map_err(|e| format!("test_reconnection: {e}"))
}

/// The server elicits with defaults; we accept with the defaults filled in.
async fn elicitation_defaults(client: &Client) -> Result<(), String> {
    client
        .call_tool("test_client_elicitation_defaults", json!({}))
        .await
        .map(drop)
        .map_err(|e| format!("test_client_elicitation_defaults: {e}"))
}

/// Accepts a form elicitation, answering each field with its schema default.
async fn accept_with_defaults(
    params: ElicitParams,
    _ctx: RequestContext,
) -> Result<ElicitResult, ErrorObject> {
    let schema = serde_json::to_value(&params).map_err(ErrorObject::internal)?;
    let mut content: BTreeMap<String, ElicitValue> = BTreeMap::new();
    if let Some(properties) = schema
        .pointer("/requestedSchema/properties")
        .and_then(Value::as_object)
    {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                let value =
                    serde_json::from_value(default.clone()).map_err(ErrorObject::internal)?;
                content.insert(name.clone(), value);
            }
        }
    }
    Ok(ElicitResult::accept(content))
}
