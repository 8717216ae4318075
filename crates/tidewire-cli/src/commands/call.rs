//! `tidewire call TARGET TOOL [JSON-ARGS]`: one tool call with live progress, log notifications
//! above the bar, and Ctrl-C to cancel.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use futures::StreamExt;
use tidewire_client::schema::{
    CallToolResult, LoggingLevel, LoggingMessageParams, ServerNotification,
};
use tidewire_client::{ClientError, Era, NotificationStream, TaskStart, ToolCall, ToolProgress};
use tokio::signal::unix::{Signal, SignalKind, signal};

use super::task::{self, Following};
use super::{OutputArgs, TargetArgs, json_object};
use crate::connect::{Connection, connect};
use crate::duration::{self, Span};
use crate::error::{CANCELLED, CliError, Outcome, describe};
use crate::output;
use crate::sanitize;
use crate::target::{Operands, looks_like_json_object};
use crate::ui::{ProgressView, Ui, dim};

/// How long to wait for the server to stop after a Ctrl-C, before exiting anyway.
const STOP_WAIT: Duration = Duration::from_secs(2);

const OPERANDS: Operands = Operands {
    required: 1,
    optional: Some(looks_like_json_object),
    usage: "TOOL [JSON-ARGS]",
};

#[derive(Debug, Args)]
pub(crate) struct CallArgs {
    #[command(flatten)]
    target: TargetArgs,

    #[command(flatten)]
    output: OutputArgs,

    /// Give up when no result has come after this long (the server is told to stop): seconds
    /// (2.5) or a number with a unit (500ms, 90s, 30m, 2h), at most 365 days. By default the
    /// call waits as long as it takes.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration::parse,
        allow_hyphen_values = true
    )]
    timeout: Option<Span>,

    /// Where images, audio and other binary content are saved, as new files (default: a new
    /// private directory under the system's temporary directory).
    #[arg(long, value_name = "DIR")]
    save_dir: Option<PathBuf>,

    /// Ask for the call to run as a task, where the server runs the tool as one: the task's
    /// id is printed, its progress shows, and Ctrl-C asks whether to cancel it or leave it
    /// running (`tidewire task watch` picks it up again).
    #[arg(long)]
    task: bool,
}

impl CallArgs {
    /// How the command prints: `--json`, `--quiet`, `--raw`.
    pub(crate) fn output(&self) -> OutputArgs {
        self.output
    }
}

/// How the wait for the result ended.
enum Ending {
    Done(Result<CallToolResult, ClientError>),
    Interrupted,
}

pub(crate) async fn run(args: CallArgs, ui: Ui) -> Result<Outcome, CliError> {
    let (target, operands) = args.target.split(OPERANDS)?;
    let tool = operands.first().cloned().unwrap_or_default();
    let arguments = json_object(operands.get(1), "JSON-ARGS")?;
    let timeout = args.timeout.map(|Span(timeout)| timeout);
    // One listener for both presses: a second Ctrl-C that comes before the wait after the first
    // has started listening is still seen.
    let mut interrupts = signal(SignalKind::interrupt())
        .map_err(|e| CliError::new(format!("cannot listen for Ctrl-C: {e}")))?;
    let connection = tokio::select! {
        connection = connect(&target, &args.target.connect, &ui) => connection?,
        // Dropping the half-made connection stops a server process it started.
        _ = interrupts.recv() => {
            // On a terminal, `\r` writes over the `^C` the terminal echoed.
            let start = if ui.is_interactive() { "\r" } else { "" };
            ui.line(&format!("{start}tidewire: cancelled while connecting"));
            return Ok(Outcome::Cancelled);
        }
    };
    if args.task {
        return as_task(
            connection,
            &tool,
            arguments,
            timeout,
            &args,
            &ui,
            &mut interrupts,
        )
        .await;
    }
    // On a session the server sends logs unasked; on the stateless revision only when a
    // request asks (its `_meta` log level): the call shows them in both eras alike.
    if connection.client.era() == Era::Modern
        && connection.client.server_capabilities().logging.is_some()
    {
        let _ = connection
            .client
            .set_logging_level(LoggingLevel::Debug)
            .await;
    }
    // Subscribed before the call, so no log of the call is missed.
    let notifications = connection.client.notifications();
    let (builder, progress) = connection
        .client
        .call_tool(&tool, arguments)
        .progress_stream();
    let builder = match timeout {
        Some(timeout) => builder.timeout(timeout),
        None => builder.no_timeout(),
    };
    let call = match builder.send().await {
        Ok(call) => call,
        Err(e) => {
            connection.close().await;
            return Err(CliError::new(format!(
                "calling `{tool}` failed: {}",
                describe(&e)
            )));
        }
    };
    let mut view = ui.progress(&tool, 0);
    let started = Instant::now();
    let cancel = call.cancel_handle();
    let ending = wait(
        call,
        progress,
        notifications,
        &mut view,
        &ui,
        &mut interrupts,
    )
    .await;
    match ending {
        Ending::Interrupted => {
            cancel.cancel("the user pressed Ctrl-C");
            view.interrupted();
            let (at, after) = match view.position() {
                Some(position) => (format!("at {position}"), format!("after {position}")),
                None => (
                    "before any progress".to_owned(),
                    "before any progress".to_owned(),
                ),
            };
            view.finish(&format!("cancelled {at}"));
            stop(connection, &mut interrupts).await;
            ui.line(&format!(
                "tidewire: cancelled {after} ({:.1} s)",
                started.elapsed().as_secs_f64()
            ));
            Ok(Outcome::Cancelled)
        }
        Ending::Done(result) => {
            view.clear();
            let outcome = match result {
                Ok(result) => {
                    output::tool_result(&result, args.output.json, args.save_dir.clone(), &tool)
                }
                Err(e) if e.is_timeout() => Err(CliError::new(format!(
                    "`{tool}` gave no result in time ({}); the server was told to stop",
                    describe(&e)
                ))),
                Err(e) => Err(CliError::new(format!(
                    "calling `{tool}` failed: {}",
                    describe(&e)
                ))),
            };
            connection.close().await;
            outcome
        }
    }
}

/// Shows progress and logs until the result arrives or the user presses Ctrl-C.
async fn wait(
    mut call: ToolCall,
    mut progress: ToolProgress,
    mut notifications: NotificationStream,
    view: &mut ProgressView,
    ui: &Ui,
    interrupts: &mut Signal,
) -> Ending {
    let mut progress_open = true;
    let mut notifications_open = true;
    loop {
        tokio::select! {
            biased;
            _ = interrupts.recv() => return Ending::Interrupted,
            report = progress.next(), if progress_open => match report {
                Some(report) => view.update(&report),
                None => progress_open = false,
            },
            note = notifications.next(), if notifications_open => match note {
                Some(Ok(ServerNotification::LoggingMessage(log))) => ui.note(&log_line(&log)),
                Some(_) => {}
                None => notifications_open = false,
            },
            result = &mut call => {
                // Reports that came before the result are shown first.
                while let Some(Some(report)) = futures::FutureExt::now_or_never(progress.next()) {
                    view.update(&report);
                }
                return Ending::Done(result);
            }
        }
    }
}

/// After Ctrl-C: closes the connection and waits briefly for the server to stop; a second
/// Ctrl-C exits at once.
async fn stop(connection: Connection, interrupts: &mut Signal) {
    let kill = connection.kill_switch();
    tokio::select! {
        _ = tokio::time::timeout(STOP_WAIT, connection.close()) => {}
        _ = interrupts.recv() => {
            kill();
            eprintln!("tidewire: interrupted again; exiting at once");
            #[allow(clippy::exit, reason = "a second Ctrl-C must not wait for anything")]
            std::process::exit(i32::from(CANCELLED));
        }
    }
}

/// A log notification as one line: `[level logger] message`, the server's text escaped.
fn log_line(log: &LoggingMessageParams) -> String {
    let text = match &log.data {
        serde_json::Value::String(s) => sanitize::line(s).into_owned(),
        other => sanitize::line(&other.to_string()).into_owned(),
    };
    let source = match &log.logger {
        Some(logger) => format!("{} {}", log.level, sanitize::line(logger)),
        None => log.level.to_string(),
    };
    format!("{} {text}", dim(&format!("[{source}]")))
}

/// The call `tool` started as a task, where the server runs it as one.
async fn as_task(
    connection: Connection,
    tool: &str,
    arguments: serde_json::Value,
    timeout: Option<Duration>,
    args: &CallArgs,
    ui: &Ui,
    interrupts: &mut Signal,
) -> Result<Outcome, CliError> {
    let mut builder = connection.client.call_tool(tool, arguments);
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    let started = builder.as_task().await;
    let outcome = match started {
        Err(e) => Err(CliError::new(format!(
            "calling `{tool}` failed: {}",
            describe(&e)
        ))),
        Ok(TaskStart::Done(result)) => {
            output::tool_result(&result, args.output.json, args.save_dir.clone(), tool)
        }
        Ok(TaskStart::Task(task)) => {
            ui.line(&format!(
                "tidewire: `{tool}` runs as task {}",
                sanitize::line(task.id())
            ));
            match task::follow(&task, ui, interrupts, tool).await {
                Following::Ended(result) => {
                    task::print_ended(result, args.output.json, args.save_dir.clone(), tool)
                }
                Following::Interrupted => Ok(task::interrupted(&task, ui).await),
            }
        }
    };
    connection.close().await;
    outcome
}
