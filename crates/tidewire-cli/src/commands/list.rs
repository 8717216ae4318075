//! `tidewire list TARGET [tools|resources|prompts]`: every page, as a table or as JSON.
//!
//! Every cell is the server's text: [`cell`] and [`description`] keep each on one line, its
//! control characters escaped on a terminal (see `output.rs`).

use clap::Args;
use serde_json::{Value, json};
use tidewire_client::Client;
use tidewire_client::schema::{Prompt, Resource, ResourceTemplate, Tool};

use super::{OutputArgs, TargetArgs};
use crate::connect::connect;
use crate::error::{CliError, Outcome, describe};
use crate::output::{self, cut, first_line, one_line, table, terminal_width};
use crate::target::Operands;
use crate::ui::Ui;

const KINDS: [&str; 3] = ["tools", "resources", "prompts"];

const OPERANDS: Operands = Operands {
    required: 0,
    optional: Some(is_kind),
    usage: "[tools|resources|prompts]",
};

fn is_kind(text: &str) -> bool {
    KINDS.contains(&text)
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    target: TargetArgs,

    #[command(flatten)]
    output: OutputArgs,
}

impl ListArgs {
    /// How the command prints: `--json`, `--quiet`, `--raw`.
    pub(crate) fn output(&self) -> OutputArgs {
        self.output
    }
}

pub(crate) async fn run(args: ListArgs, ui: Ui) -> Result<Outcome, CliError> {
    let (target, operands) = args.target.split(OPERANDS)?;
    let kind = operands.first().map_or("tools", String::as_str);
    if !is_kind(kind) {
        return Err(CliError::new(format!(
            "cannot list `{kind}`: choose tools, resources or prompts"
        )));
    }
    let connection = connect(&target, &args.target.connect, &ui).await?;
    let result = list(&connection.client, kind, args.output.json).await;
    connection.close().await;
    result.map(|()| Outcome::Success)
}

async fn list(client: &Client, kind: &str, as_json: bool) -> Result<(), CliError> {
    let failed = |e: tidewire_client::ClientError| {
        CliError::new(format!("listing {kind} failed: {}", describe(&e)))
    };
    let width = terminal_width();
    match kind {
        "resources" => {
            let resources = client.list_all_resources().await.map_err(failed)?;
            // A server without templates may refuse the method; that is not an error here.
            let templates = if client.server_capabilities().resources.is_some() {
                client
                    .list_all_resource_templates()
                    .await
                    .unwrap_or_default()
            } else {
                Vec::new()
            };
            if as_json {
                return output::json(&json!({
                    "resources": resources,
                    "resourceTemplates": templates,
                }));
            }
            print_resources(&resources, &templates, width);
        }
        "prompts" => {
            let prompts = client.list_all_prompts().await.map_err(failed)?;
            if as_json {
                return output::json(&json!({ "prompts": prompts }));
            }
            print_prompts(&prompts, width);
        }
        _ => {
            let tools = client.list_all_tools().await.map_err(failed)?;
            if as_json {
                return output::json(&json!({ "tools": tools }));
            }
            print_tools(&tools, width);
        }
    }
    Ok(())
}

/// The input arguments of a tool, from its schema: `name*` for a required one.
fn tool_arguments(tool: &Tool) -> String {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    else {
        return String::new();
    };
    let names = properties
        .keys()
        .map(|name| {
            if required.contains(&name.as_str()) {
                format!("{name}*")
            } else {
                name.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(", ");
    cell(&names)
}

const DESCRIPTION_WIDTH: usize = 60;

/// A cell of the server's text, on one line.
fn cell(text: &str) -> String {
    one_line(text).into_owned()
}

/// The first line of a description, on one line and cut to [`DESCRIPTION_WIDTH`].
fn description(text: Option<&str>) -> String {
    cut(&one_line(&first_line(text)), DESCRIPTION_WIDTH)
}

fn print_tools(tools: &[Tool], width: Option<usize>) {
    let rows: Vec<Vec<String>> = tools
        .iter()
        .map(|t| {
            vec![
                cell(&t.name),
                cell(t.title.as_deref().unwrap_or_default()),
                description(t.description.as_deref()),
                tool_arguments(t),
            ]
        })
        .collect();
    output::block(&table(
        &["NAME", "TITLE", "DESCRIPTION", "ARGUMENTS (* required)"],
        &rows,
        width,
    ));
    output::out(&format!("{} tools", tools.len()));
}

fn print_resources(resources: &[Resource], templates: &[ResourceTemplate], width: Option<usize>) {
    let mut rows: Vec<Vec<String>> = resources
        .iter()
        .map(|r| {
            vec![
                cell(&r.uri),
                cell(&r.name),
                cell(r.mime_type.as_deref().unwrap_or_default()),
                description(r.description.as_deref()),
            ]
        })
        .collect();
    rows.extend(templates.iter().map(|t| {
        vec![
            cell(&t.uri_template),
            format!("{} (template)", one_line(&t.name)),
            cell(t.mime_type.as_deref().unwrap_or_default()),
            description(t.description.as_deref()),
        ]
    }));
    output::block(&table(
        &["URI", "NAME", "MIME TYPE", "DESCRIPTION"],
        &rows,
        width,
    ));
    output::out(&format!(
        "{} resources, {} templates",
        resources.len(),
        templates.len()
    ));
}

fn print_prompts(prompts: &[Prompt], width: Option<usize>) {
    let rows: Vec<Vec<String>> = prompts
        .iter()
        .map(|p| {
            let arguments = p
                .arguments
                .iter()
                .map(|a| {
                    if a.required == Some(true) {
                        format!("{}*", a.name)
                    } else {
                        a.name.clone()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ");
            vec![
                cell(&p.name),
                cell(p.title.as_deref().unwrap_or_default()),
                description(p.description.as_deref()),
                cell(&arguments),
            ]
        })
        .collect();
    output::block(&table(
        &["NAME", "TITLE", "DESCRIPTION", "ARGUMENTS (* required)"],
        &rows,
        width,
    ));
    output::out(&format!("{} prompts", prompts.len()));
}
