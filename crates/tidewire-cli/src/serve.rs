//! `tidewire serve`: the demo server over stdio (`--stdio`) or HTTP (`--bind ADDR`, in
//! `http.rs`).

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use tidewire_core::session::SessionOptions;
use tidewire_core::transport::{Codec, DEFAULT_MAX_MESSAGE_SIZE};

use crate::http;

/// Exit status for a command line that cannot be served (usage errors, as clap uses).
const USAGE_ERROR: u8 = 2;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Serve one client over this process's stdin and stdout (one JSON-RPC message per line).
    #[arg(long)]
    pub(crate) stdio: bool,

    /// Serve over HTTP on this address, e.g. 127.0.0.1:3000 (port 0 picks a free one):
    /// Streamable HTTP at /mcp, legacy HTTP+SSE at /sse, WebSocket at /ws.
    #[arg(long, value_name = "ADDR", conflicts_with = "stdio")]
    pub(crate) bind: Option<String>,

    /// HTTP: answer each request with one JSON body instead of an SSE stream (progress, logs
    /// and requests back to the client are then refused for that request).
    #[arg(long)]
    pub(crate) json_response: bool,

    /// HTTP: serve statelessly (no sessions, no GET stream, no requests back to the client).
    #[arg(long)]
    pub(crate) stateless: bool,

    /// The largest message accepted or sent, in bytes. A longer input line is answered with a
    /// JSON-RPC error and skipped.
    #[arg(long, value_name = "BYTES", default_value_t = DEFAULT_MAX_MESSAGE_SIZE, value_parser = parse_size)]
    pub(crate) max_message_size: usize,

    /// When stdin ends, how long requests still running may take to finish and answer before
    /// the server stops them and exits, in milliseconds (0: stop them at once).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub(crate) eof_grace_ms: u64,
}

fn parse_size(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the limit must be at least 1 byte".to_owned()),
        Ok(size) => Ok(size),
        Err(e) => Err(format!("not a number of bytes: {e}")),
    }
}

pub(crate) fn serve(args: &ServeArgs) -> ExitCode {
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
    if std::io::stdin().is_terminal() {
        // A person started it by hand; a client reading stdout never sees this.
        eprintln!(
            "tidewire serve: the demo server is reading JSON-RPC from stdin and answering on \
             stdout (one message per line); end the input (Ctrl-D) to stop it"
        );
    }
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
