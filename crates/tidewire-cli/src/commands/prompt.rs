//! `tidewire prompt TARGET NAME [JSON-ARGS]`: a prompt's messages.

use std::path::PathBuf;

use clap::Args;

use super::{OutputArgs, TargetArgs, json_object};
use crate::connect::connect;
use crate::error::{CliError, Outcome, describe};
use crate::output::{self, Saver};
use crate::target::{Operands, looks_like_json_object};
use crate::ui::Ui;

const OPERANDS: Operands = Operands {
    required: 1,
    optional: Some(looks_like_json_object),
    usage: "NAME [JSON-ARGS]",
};

#[derive(Debug, Args)]
pub(crate) struct PromptArgs {
    #[command(flatten)]
    target: TargetArgs,

    #[command(flatten)]
    output: OutputArgs,

    /// Where images, audio and other binary content are saved, as new files (default: a new
    /// private directory under the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,
}

impl PromptArgs {
    /// How the command prints: `--json`, `--quiet`, `--raw`.
    pub(crate) fn output(&self) -> OutputArgs {
        self.output
    }
}

pub(crate) async fn run(args: PromptArgs, ui: Ui) -> Result<Outcome, CliError> {
    let (target, operands) = args.target.split(OPERANDS)?;
    let name = operands.first().cloned().unwrap_or_default();
    let arguments = json_object(operands.get(1), "JSON-ARGS")?;
    let connection = connect(&target, &args.target.connect, &ui).await?;
    let result = connection.client.get_prompt(name.clone(), arguments).await;
    connection.close().await;
    let result = result.map_err(|e| {
        CliError::new(format!(
            "getting the prompt `{name}` failed: {}",
            describe(&e)
        ))
    })?;
    if args.output.json {
        output::json(&result)?;
        return Ok(Outcome::Success);
    }
    if let Some(description) = &result.description {
        output::text(description);
    }
    let saver = Saver::new(args.save_dir, &name);
    for message in &result.messages {
        let role = serde_json::to_value(message.role)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        output::out(&format!("{}:", console::style(&role).bold()));
        output::content(std::slice::from_ref(&message.content), None, &saver)?;
    }
    Ok(Outcome::Success)
}
