//! Tasks from the command line: `tidewire call --task` follows the task it starts, and
//! `tidewire task get|watch|cancel TARGET TASK-ID` work on a task from a later process.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use futures::StreamExt;
use tidewire_client::schema::{CallToolResult, TaskState};
use tidewire_client::{ClientError, TaskHandle};
use tidewire_core::progress::Progress;
use tokio::io::AsyncBufReadExt;
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::{OutputArgs, TargetArgs};
use crate::connect::connect;
use crate::error::{CliError, Outcome, describe};
use crate::output;
use crate::sanitize;
use crate::target::Operands;
use crate::ui::Ui;

const OPERANDS: Operands = Operands {
    required: 1,
    optional: None,
    usage: "TASK-ID",
};

/// `tidewire task …`.
#[derive(Debug, Args)]
pub(crate) struct TaskArgs {
    #[command(subcommand)]
    action: TaskAction,
}

#[derive(Debug, Subcommand)]
enum TaskAction {
    /// Print the task's state: status, message, times.
    Get(OneTask),
    /// Follow the task to its end, with its progress, then print its result; Ctrl-C leaves
    /// it running (or cancels it, if you say so).
    Watch(OneTask),
    /// Ask the server to cancel the task.
    Cancel(OneTask),
}

#[derive(Debug, Args)]
struct OneTask {
    #[command(flatten)]
    target: TargetArgs,

    #[command(flatten)]
    output: OutputArgs,

    /// Where binary contents of the result are saved (`watch`), as new files.
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,
}

impl TaskArgs {
    /// How the command prints: `--json`, `--quiet`, `--raw`.
    pub(crate) fn output(&self) -> OutputArgs {
        match &self.action {
            TaskAction::Get(one) | TaskAction::Watch(one) | TaskAction::Cancel(one) => one.output,
        }
    }
}

pub(crate) async fn run(args: TaskArgs, ui: Ui) -> Result<Outcome, CliError> {
    let (action, one) = match args.action {
        TaskAction::Get(one) => ("get", one),
        TaskAction::Watch(one) => ("watch", one),
        TaskAction::Cancel(one) => ("cancel", one),
    };
    let (target, operands) = one.target.split(OPERANDS)?;
    let id = operands.first().cloned().unwrap_or_default();
    let mut interrupts = signal(SignalKind::interrupt())
        .map_err(|e| CliError::new(format!("cannot listen for Ctrl-C: {e}")))?;
    let connection = connect(&target, &one.target.connect, &ui).await?;
    let task = connection.client.task(id.clone());
    let shown = sanitize::line(&id).into_owned();
    let outcome = match action {
        "get" => match task.state().await {
            Ok(state) => print_state(&state, one.output.json),
            Err(e) => Err(CliError::new(format!("task {shown}: {}", describe(&e)))),
        },
        "cancel" => match task.cancel().await {
            Ok(()) => {
                ui.line(&format!("tidewire: task {shown} cancelled"));
                Ok(Outcome::Success)
            }
            Err(e) => Err(CliError::new(format!(
                "cancelling task {shown} failed: {}",
                describe(&e)
            ))),
        },
        _ => {
            let label = format!("task {shown}");
            match follow(&task, &ui, &mut interrupts, &label).await {
                Following::Ended(result) => {
                    print_ended(result, one.output.json, one.save_dir, &label)
                }
                Following::Interrupted => Ok(interrupted(&task, &ui).await),
            }
        }
    };
    connection.close().await;
    outcome
}

/// How following a task ended.
pub(crate) enum Following {
    /// The task ended: its result, or why there is none.
    Ended(Result<CallToolResult, ClientError>),
    /// The user pressed Ctrl-C.
    Interrupted,
}

/// Shows the task's progress (its status message) until it ends or the user presses Ctrl-C.
pub(crate) async fn follow(
    task: &TaskHandle,
    ui: &Ui,
    interrupts: &mut Signal,
    label: &str,
) -> Following {
    let mut view = ui.progress(label, 0);
    let mut states = Box::pin(task.watch());
    let mut seen = 0u32;
    loop {
        tokio::select! {
            biased;
            _ = interrupts.recv() => {
                view.interrupted();
                view.finish("left running");
                return Following::Interrupted;
            }
            state = states.next() => match state {
                Some(Ok(details)) => {
                    seen += 1;
                    // A tidewire server gives the numbers; others only words (the bar spins).
                    let mut report = details
                        .progress()
                        .unwrap_or_else(|| Progress::new(f64::from(seen)));
                    let words = details.task.status_message.unwrap_or_default();
                    report.message = Some(format!("{} {words}", details.task.status));
                    view.update(&report);
                }
                Some(Err(e)) => {
                    view.clear();
                    return Following::Ended(Err(e));
                }
                None => break,
            },
        }
    }
    view.clear();
    Following::Ended(task.result().await)
}

/// After Ctrl-C on a task: on a terminal, asks whether to cancel it; otherwise (or when told
/// no) leaves it running and says how to pick it up again.
pub(crate) async fn interrupted(task: &TaskHandle, ui: &Ui) -> Outcome {
    let shown = sanitize::line(task.id()).into_owned();
    if ui.is_interactive() && ask("Cancel the task on the server? [y/N] ").await {
        return match task.cancel().await {
            Ok(()) => {
                ui.line(&format!("tidewire: task {shown} cancelled"));
                Outcome::Cancelled
            }
            Err(e) => {
                ui.line(&format!(
                    "tidewire: cancelling task {shown} failed: {}",
                    describe(&e)
                ));
                Outcome::Cancelled
            }
        };
    }
    ui.line(&format!(
        "tidewire: task {shown} goes on; follow it with `tidewire task watch <TARGET> {shown}`"
    ));
    Outcome::Cancelled
}

/// Asks a yes/no question on the terminal: yes only for an answer starting with `y`.
async fn ask(question: &str) -> bool {
    eprint!("{question}");
    let mut line = String::new();
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin());
    match stdin.read_line(&mut line).await {
        Ok(_) => line.trim_start().to_ascii_lowercase().starts_with('y'),
        Err(_) => false,
    }
}

/// Prints how a followed task ended.
pub(crate) fn print_ended(
    result: Result<CallToolResult, ClientError>,
    json: bool,
    save_dir: Option<PathBuf>,
    label: &str,
) -> Result<Outcome, CliError> {
    let result = result.map_err(|e| CliError::new(format!("{label}: {}", describe(&e))))?;
    output::tool_result(&result, json, save_dir, label)
}

fn print_state(state: &TaskState, json: bool) -> Result<Outcome, CliError> {
    if json {
        output::json(state)?;
        return Ok(Outcome::Success);
    }
    println!("task     {}", sanitize::line(&state.task_id));
    println!("status   {}", state.status);
    if let Some(message) = &state.status_message {
        println!("message  {}", sanitize::line(message));
    }
    println!("created  {}", sanitize::line(&state.created_at));
    println!("updated  {}", sanitize::line(&state.last_updated_at));
    Ok(Outcome::Success)
}
