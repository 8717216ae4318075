//! `tidewire serve --bind ADDR`: the demo server over HTTP.

use std::process::ExitCode;

use axum::serve::ListenerExt;
use tidewire_http::server::{HttpConfig, ResponseMode, StreamableHttp};

use crate::ServeArgs;

/// Serves the demo server over Streamable HTTP at `/mcp` until Ctrl-C.
pub(crate) fn serve(address: &str, args: &ServeArgs) -> ExitCode {
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
    let mut config = HttpConfig::default()
        .max_body(args.max_message_size)
        .max_message_size(args.max_message_size)
        .stateless(args.stateless);
    if args.json_response {
        config = config.response_mode(ResponseMode::Json);
    }
    let result = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address: {e}"))?;
        if !local.ip().is_loopback() {
            tracing::warn!(%local, "listening on a non-loopback address: the demo server has no authentication");
        }
        let server = tidewire_demo::demo_server();
        let mcp = StreamableHttp::new(config, move |transport| server.serve(transport).1);
        let app = mcp.router("/mcp");
        // Without TCP_NODELAY, small SSE events wait behind Nagle's algorithm.
        let listener = listener.tap_io(|tcp| {
            if let Err(error) = tcp.set_nodelay(true) {
                tracing::debug!(%error, "cannot set TCP_NODELAY");
            }
        });
        println!("http://{local}/mcp");
        eprintln!("tidewire serve: the demo server is at http://{local}/mcp (Streamable HTTP); Ctrl-C stops it");
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| format!("the HTTP server failed: {e}"))
    });
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("tidewire serve: {message}");
            ExitCode::FAILURE
        }
    }
}
