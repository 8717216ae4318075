//! The client commands (`call`, `list`, `read`, `prompt`, `task`, `auth`) and `demo`.

pub(crate) mod auth;
pub(crate) mod call;
pub(crate) mod demo;
pub(crate) mod list;
pub(crate) mod prompt;
pub(crate) mod read;
pub(crate) mod task;

use std::future::Future;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use crate::connect::ConnectArgs;
use crate::error::{CliError, Outcome};
use crate::sanitize;
use crate::target::{Operands, Target, split};
use crate::ui::Ui;

/// What a client command was given on its command line: the target with the command's operands,
/// and how to connect.
#[derive(Debug, Args)]
pub(crate) struct TargetArgs {
    /// The target (an http(s):// or ws(s):// URL) followed by the command's operands. For a
    /// server started over stdio, give its command line after `--` instead of a URL.
    #[arg(value_name = "TARGET")]
    pub(crate) operands: Vec<String>,

    /// The server to start and talk to over its stdin and stdout: `-- COMMAND ARGS…`. The
    /// command's operands may follow it at the end.
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,

    #[command(flatten)]
    pub(crate) connect: ConnectArgs,
}

impl TargetArgs {
    pub(crate) fn split(&self, operands: Operands) -> Result<(Target, Vec<String>), CliError> {
        split(self.operands.clone(), self.command.clone(), operands)
    }
}

/// `--json`, `--quiet` and `--raw`.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct OutputArgs {
    /// Print the raw JSON result, for scripts.
    #[arg(long)]
    pub(crate) json: bool,

    /// Show no progress and no server logs; errors are still printed.
    #[arg(long, short)]
    pub(crate) quiet: bool,

    /// Print the server's text on stdout exactly as it came, even on a terminal. Without it,
    /// control characters and escape sequences in that text show as escapes (`\x1b[2J`) when
    /// stdout is a terminal; into a pipe or a file the text goes as it came either way. On
    /// stderr (progress, logs, errors, the server's stderr) they always show as escapes.
    #[arg(long)]
    pub(crate) raw: bool,
}

/// Parses a JSON-object argument (`{…}`); `None` stands for no arguments.
pub(crate) fn json_object(text: Option<&String>, what: &str) -> Result<Value, CliError> {
    let Some(text) = text else {
        return Ok(Value::Null);
    };
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(CliError::new(format!(
            "{what} must be a JSON object like '{{\"key\": \"value\"}}', not {other}"
        ))),
        Err(e) => Err(CliError::new(format!("{what} is not valid JSON: {e}"))),
    }
}

/// Runs `body` on a fresh Tokio runtime, and turns its outcome into an exit code, printing an
/// error as one line.
pub(crate) fn run<F>(ui: &Ui, body: F) -> ExitCode
where
    F: Future<Output = Result<Outcome, CliError>>,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tidewire: cannot start the async runtime: {error}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(body);
    // A server process or stream task still winding down must not hold up the exit.
    runtime.shutdown_background();
    match result {
        Ok(outcome) => outcome.exit_code(),
        Err(error) => {
            // The line may quote the server (an error message, an HTTP body, its stderr).
            ui.line(&format!("tidewire: {}", sanitize::line(&error.to_string())));
            error.exit_code()
        }
    }
}
