//! `tidewire`: the command-line program of the tidewire MCP SDK.
//!
//! For now it has one command, `tidewire serve --stdio`, which serves the tidewire demo server
//! (the interop peer tools and the conformance-suite server contract, see `tidewire-demo`) to one
//! client over stdin and stdout. HTTP serving comes with the HTTP transport.
//!
//! Stdout carries JSON-RPC messages only; logs go to stderr, filtered by `RUST_LOG` (default
//! `warn`).

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
                  stdin and stdout. Logs go to stderr; set RUST_LOG (for example \
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
                  JSON-RPC only; logs go to stderr) and exits when stdin ends. Serving over \
                  HTTP (--bind) comes with the HTTP transport and is not available yet.")]
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Serve one client over this process's stdin and stdout (one JSON-RPC message per line).
    #[arg(long)]
    stdio: bool,

    /// Serve over HTTP on this address. Not available yet: it comes with the HTTP transport.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    bind: Option<String>,

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
        eprintln!(
            "tidewire serve: cannot serve on {address}: serving over HTTP comes with the HTTP \
             transport, which this build does not have yet. Use `tidewire serve --stdio`."
        );
        return ExitCode::from(USAGE_ERROR);
    }
    if !args.stdio {
        eprintln!(
            "tidewire serve: say how to serve. `--stdio` serves one client over stdin and \
             stdout; serving over HTTP (`--bind ADDR`) comes with the HTTP transport and is not \
             available yet."
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
