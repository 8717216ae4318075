//! `tidewire`: the command-line program of the tidewire MCP SDK.
//!
//! - `tidewire call TARGET TOOL [JSON-ARGS]` calls a tool on any MCP server, with a live progress
//!   bar and Ctrl-C to cancel; `list`, `read` and `prompt` show what the server offers.
//! - `tidewire auth login|logout|status URL` keeps OAuth logins (a browser and a loopback
//!   redirect); the client commands use and refresh them, and log in on `--oauth`.
//! - `tidewire serve` serves the tidewire demo server (the interop peer tools and the
//!   conformance-suite server contract, see `tidewire-demo`) over stdio or HTTP.
//! - `tidewire demo` runs the crawl-and-cancel walkthrough on every transport in this build.
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default `warn`); with `serve --stdio`, stdout
//! carries JSON-RPC messages only.

mod commands;
mod connect;
mod demo_store;
mod duration;
mod error;
mod http;
mod oauth;
mod output;
mod sanitize;
mod save;
mod serve;
mod serve_args;
mod serve_auth;
mod serve_redis;
mod shutdown;
mod target;
mod telemetry;
mod ui;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use tracing_subscriber::EnvFilter;

pub(crate) use serve_args::ServeArgs;

use crate::commands::OutputArgs;
use crate::commands::auth::AuthArgs as AuthCommandArgs;
use crate::commands::call::CallArgs;
use crate::commands::demo::DemoArgs;
use crate::commands::list::ListArgs;
use crate::commands::prompt::PromptArgs;
use crate::commands::read::ReadArgs;
use crate::commands::task::TaskArgs;
use crate::ui::Ui;

const TARGETS: &str = "TARGET is an http(s):// URL (Streamable HTTP, falling back to legacy \
                       HTTP+SSE when the server refuses it; https:// needs a build with \
                       `--features tls`), a ws:// URL (WebSocket, subprotocol mcp; no wss:// \
                       yet), or `-- COMMAND ARGS…`: a server program to start and \
                       talk to over its stdin and stdout. With `--`, put the command's own \
                       arguments before `--` or at the very end. Options go before `--`.";

#[derive(Debug, Parser)]
#[command(
    name = "tidewire",
    version,
    about = "tidewire: call any MCP server, serve the tidewire demo server, or run the demo",
    long_about = "tidewire: tools around the tidewire Model Context Protocol (MCP) SDK.\n\n\
                  Start with `tidewire demo`. `tidewire call TARGET TOOL [JSON-ARGS]` calls a \
                  tool with a live progress bar (Ctrl-C cancels it); `list`, `read` and \
                  `prompt` show what a server offers. `tidewire serve --stdio` runs the tidewire \
                  demo MCP server for one client over stdin and stdout; `tidewire serve --bind \
                  127.0.0.1:3000` serves it over HTTP. Logs go to stderr; set RUST_LOG (for \
                  example RUST_LOG=debug) to see more than warnings."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a tool, with live progress; Ctrl-C cancels it.
    #[command(
        override_usage = "tidewire call [OPTIONS] <TARGET> <TOOL> [JSON-ARGS]\n       \
                          tidewire call [OPTIONS] -- <COMMAND>... <TOOL> [JSON-ARGS]",
        after_help = TARGETS,
        long_about = "Call a tool on an MCP server and print its result.\n\n\
                      While the call runs, its progress shows as a bar (position and ETA when \
                      the server gives a total, a spinner otherwise) with the server's message \
                      beside it; the server's log messages print above it. Without a terminal, \
                      progress prints as plain lines (none with --quiet). Ctrl-C tells the server \
                      to stop (notifications/cancelled), waits briefly for it, and exits 130; a \
                      second Ctrl-C exits at once.\n\n\
                      The result: text as it is, structured content as pretty JSON, images and \
                      audio saved to new files whose paths are printed; --json prints the raw \
                      result. The server's text shows its control characters as escapes \
                      (\\x1b[2J) on a terminal, and always on stderr; --raw prints stdout as it \
                      came.\n\n\
                      Exit status: 0 success, 1 the tool reported an error (isError), 2 a \
                      protocol, transport or usage error (one line on stderr), 130 cancelled."
    )]
    Call(CallArgs),
    /// List a server's tools, resources or prompts (every page).
    #[command(
        override_usage = "tidewire list [OPTIONS] <TARGET> [tools|resources|prompts]\n       \
                          tidewire list [OPTIONS] -- <COMMAND>... [tools|resources|prompts]",
        after_help = TARGETS
    )]
    List(ListArgs),
    /// Read a resource.
    #[command(
        override_usage = "tidewire read [OPTIONS] <TARGET> <URI>\n       \
                          tidewire read [OPTIONS] -- <COMMAND>... <URI>",
        after_help = TARGETS
    )]
    Read(ReadArgs),
    /// Get a prompt, filled with arguments.
    #[command(
        override_usage = "tidewire prompt [OPTIONS] <TARGET> <NAME> [JSON-ARGS]\n       \
                          tidewire prompt [OPTIONS] -- <COMMAND>... <NAME> [JSON-ARGS]",
        after_help = TARGETS
    )]
    Prompt(PromptArgs),
    /// Work on a task started earlier (`tidewire call --task`, or any client): get its state,
    /// watch it to its end, or cancel it.
    #[command(
        override_usage = "tidewire task get|watch|cancel [OPTIONS] <TARGET> <TASK-ID>\n       \
                          tidewire task get|watch|cancel [OPTIONS] -- <COMMAND>... <TASK-ID>",
        after_help = TARGETS
    )]
    Task(TaskArgs),
    /// Log in to an MCP server with OAuth, log out, or show the kept logins.
    #[command(
        long_about = "Log in to an MCP server with OAuth, log out, or show the kept logins.\n\n\
                  `tidewire auth login URL` finds the server's authorization server (its \
                  protected-resource metadata), registers tidewire there if needed, prints the \
                  authorization URL and opens a browser on it (--no-browser: print only), and \
                  waits for the browser's return on a loopback port. The tokens go to the token \
                  file (mode 0600), where `call`, `list`, `read` and `prompt` find them and \
                  refresh them. `logout URL` forgets a login; `status` lists them, never \
                  showing a token."
    )]
    Auth(AuthCommandArgs),
    /// Serve the tidewire demo MCP server over stdio or HTTP.
    #[command(long_about = "Serve the tidewire demo MCP server.\n\n\
                  The demo server offers, in one server:\n  \
                  - the interop peer tools: echo, crawl, crawl_status, notify, bump, sample, \
                  elicit, roots, and the subscribable resource test://counter;\n  \
                  - the conformance-suite server contract: the test_* tools, \
                  json_schema_2020_12_tool, the test:// resources and template, the test_* \
                  prompts, and argument completion.\n\n\
                  Where it serves:\n  \
                  --stdio      one client over this process's stdin and stdout (stdout carries \
                  JSON-RPC only; logs go to stderr); it exits when stdin ends.\n  \
                  --bind ADDR  any number of clients on one HTTP port: Streamable HTTP at \
                  http://ADDR/mcp (sessions, SSE or JSON replies, a resumable GET stream), \
                  legacy HTTP+SSE at http://ADDR/sse (messages POSTed to /messages), and \
                  WebSocket at ws://ADDR/ws (subprotocol mcp). It prints the Streamable HTTP URL \
                  on stdout once it listens (with port 0, the port it got), names every \
                  endpoint on stderr, and stops on Ctrl-C.\n\n\
                  Try it: `tidewire call -- tidewire serve --stdio echo '{\"text\":\"hi\"}'`.")]
    Serve(Box<ServeArgs>),
    /// Run the crawl-and-cancel walkthrough on every transport in this build.
    #[command(
        long_about = "Run the crawl-and-cancel walkthrough on every transport in this \
                  build.\n\n\
                  The demo server runs on each transport: stdio (this program started as \
                  `tidewire serve --stdio`), and Streamable HTTP, legacy HTTP+SSE and WebSocket \
                  (each in this process on a free loopback port). On each, the client asks it to crawl 10 slow URLs, showing its progress, \
                  cancels after the 3rd progress notification, and asks the server (crawl_status) \
                  where it stopped. A table ends the run: progress notifications received, where \
                  the crawl stopped, the time from the cancel to the server's stop, and whether \
                  anything arrived after the cancel. Exit status 0 only if every transport \
                  behaved."
    )]
    Demo(DemoArgs),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) if error.kind() == ErrorKind::ValueValidation => return bad_value(&error),
        Err(error) => error.exit(),
    };
    // `serve` sets up its own (its log format, its telemetry).
    if !matches!(cli.command, Command::Serve(_)) {
        init_logging();
    }
    match cli.command {
        Command::Serve(args) => serve::serve(&args),
        Command::Call(args) => {
            let ui = start(args.output());
            commands::run(&ui, commands::call::run(args, ui.clone()))
        }
        Command::List(args) => {
            let ui = start(args.output());
            commands::run(&ui, commands::list::run(args, ui.clone()))
        }
        Command::Read(args) => {
            let ui = start(args.output());
            commands::run(&ui, commands::read::run(args, ui.clone()))
        }
        Command::Prompt(args) => {
            let ui = start(args.output());
            commands::run(&ui, commands::prompt::run(args, ui.clone()))
        }
        Command::Task(args) => {
            let ui = start(args.output());
            commands::run(&ui, commands::task::run(args, ui.clone()))
        }
        Command::Auth(args) => {
            output::init(false);
            let ui = Ui::new(false);
            commands::run(&ui, commands::auth::run(args, ui.clone()))
        }
        Command::Demo(args) => {
            output::init(false);
            let ui = Ui::new(false);
            commands::run(&ui, commands::demo::run(args, ui.clone()))
        }
    }
}

/// Sets up the output of a client command: how the server's text reaches stdout, and the
/// stderr side.
fn start(args: OutputArgs) -> Ui {
    output::init(args.raw);
    Ui::new(args.quiet)
}

/// A value clap's parser refused (`--timeout 1e30`, `--max-sessions 0`): one line saying why,
/// exit status 2, like every other usage error of the program.
fn bad_value(error: &clap::Error) -> ExitCode {
    let text = error.to_string();
    let first = text.lines().next().unwrap_or_default();
    let line = first.strip_prefix("error: ").unwrap_or(first);
    eprintln!("tidewire: {}", sanitize::line(line));
    ExitCode::from(2)
}

/// Logs to stderr (stdout belongs to the protocol or the result), filtered by `RUST_LOG`,
/// default `warn`.
fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
