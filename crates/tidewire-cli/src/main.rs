//! `tidewire`: the command-line program of the tidewire MCP SDK.
//!
//! For now it has one command, `tidewire serve`, which serves the tidewire demo server (the
//! interop peer tools and the conformance-suite server contract, see `tidewire-demo`): to one
//! client over stdin and stdout (`--stdio`), or over HTTP (`--bind ADDR`: Streamable HTTP at
//! `/mcp`).
//!
//! Logs go to stderr, filtered by `RUST_LOG` (default `warn`); with `--stdio`, stdout carries
//! JSON-RPC messages only.

mod http;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use tidewire_core::session::SessionOptions;
use tidewire_core::transport::{Codec, DEFAULT_MAX_MESSAGE_SIZE};
use tracing_subscriber::EnvFilter;

/// Exit status for a command line that cannot be served (usage errors, as clap uses).
const USAGE_ERROR: u8 = 2;

#[derive(Debug, Parser)]
#[command(
    name = "tidewire",
    version,
    about = "tidewire: tools around the tidewire Model Context Protocol (MCP) SDK",
    long_about = "tidewire: tools around the tidewire Model Context Protocol (MCP) SDK.\n\n\
                  `tidewire serve --stdio` runs the tidewire demo MCP server for one client over \
                  stdin and stdout; `tidewire serve --bind 127.0.0.1:3000` serves it over \
                  Streamable HTTP at /mcp. Logs go to stderr; set RUST_LOG (for example \
                  RUST_LOG=debug) to see more than warnings."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the tidewire demo MCP server.
    #[command(long_about = "Serve the tidewire demo MCP server.\n\n\
                  The demo server offers, in one server:\n  \
                  - the interop peer tools: echo, crawl, crawl_status, notify, bump, sample, \
                  elicit, roots, and the subscribable resource test://counter;\n  \
                  - the conformance-suite server contract: the test_* tools, \
                  json_schema_2020_12_tool, the test:// resources and template, the test_* \
                  prompts, and argument completion.\n\n\
                  With --stdio it serves one client over stdin and stdout (stdout carries \
                  JSON-RPC only; logs go to stderr) and exits when stdin ends.\n\n\
                  With --bind ADDR it serves any number of clients over HTTP: Streamable HTTP \
                  at http://ADDR/mcp (sessions, SSE or JSON replies, a resumable GET stream). \
                  It prints the endpoint URL on stdout once it listens (with port 0, the port \
                  it got), and stops on Ctrl-C.")]
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Serve one client over this process's stdin and stdout (one JSON-RPC message per line).
    #[arg(long)]
    stdio: bool,

    /// Serve over HTTP on this address, e.g. 127.0.0.1:3000 (port 0 picks a free one).
    /// Streamable HTTP is at /mcp.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    bind: Option<String>,

    /// HTTP: answer each request with one JSON body instead of an SSE stream (progress, logs
    /// and requests back to the client are then refused for that request).
    #[arg(long)]
    json_response: bool,

    /// HTTP: serve statelessly (no sessions, no GET stream, no requests back to the client).
    #[arg(long)]
    stateless: bool,

    /// The largest message accepted or sent, in bytes. A longer input line is answered with a
    /// JSON-RPC error and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE, value_parser = parse_size)]
    max_message_size: usize,

    /// When stdin ends, how long requests still running may take to finish and answer before
    /// the server stops them and exits, in milliseconds (0: stop them at once).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    eof_grace_ms: u64,
}

fn parse_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1 byte".to_owned()),
        Ok(size) => Ok(size),
        Err(e) => Err(format!("not a number of bytes: {e}")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Serve(args) => serve(&args),
    }
}

/// Logs to stderr (stdout belongs to the protocol), filtered by `RUST_LOG`, default `warn`.
fn init_logging() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

fn serve(args: &ServeArgs) -> ExitCode {
    if let Some(address) = &args.bind {
        return http::serve(address, args);
    }
    if args.json_response || args.stateless {
        eprintln!(
            "tidewire serve: --json-response and --stateless apply to HTTP: use them with --bind ADDR"
        );
        return ExitCode::from(USAGE_ERROR);
    }
    if !args.stdio {
        eprintln!(
            "tidewire serve: say how to serve: `--stdio` serves one client over stdin and \
             stdout, `--bind ADDR` (e.g. 127.0.0.1:3000) serves over HTTP."
        );
        return ExitCode::from(USAGE_ERROR);
    }
    serve_stdio(args)
}

fn serve_stdio(args: &ServeArgs) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("tidewire serve: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let codec = Codec::new(args.max_message_size);
    let grace = Duration::from_millis(args.eof_grace_ms);
    let result = runtime.block_on(async move {
        // When stdin ends, requests still running get `grace` to finish and answer.
        let server = tidewire_demo::demo_builder()
            .session_options(SessionOptions::default().drain_timeout(grace))
            .build();
        let (_peer, driver) = server.serve(tidewire_stdio::server::transport_with(codec));
        tracing::info!(
            max_message_size = codec.max_message_size(),
            "serving the tidewire demo server over stdio"
        );
        driver.await
    });
    // Normally stdin has ended by now. If the session ended another way (say stdout was
    // closed), Tokio's blocking stdin read cannot be interrupted: do not wait for it.
    runtime.shutdown_background();
    match result {
        Ok(()) => {
            tracing::info!("the client closed the connection; exiting");
            ExitCode::SUCCESS
        }
        Err(error) => {
            tracing::error!(%error, "the stdio connection failed");
            eprintln!("tidewire serve: the stdio connection failed: {error}");
            ExitCode::FAILURE
        }
    }
}
