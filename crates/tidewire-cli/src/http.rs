//! `tidewire serve --bind ADDR`: the demo server over HTTP.

use std::process::ExitCode;

use tidewire_http::server::{EventStoreLimits, HttpConfig, ResponseMode, StreamableHttp};
use tidewire_sse::server::{LegacySse, SseConfig};
use tidewire_ws::server::{WebSocketServer, WsConfig};

use std::sync::Arc;

use tidewire_demo::{DemoStore, MemoryDemoStore};
use tidewire_server::ServerBuilder;

use crate::duration::Span;
use crate::serve_args::ServeArgs;

/// Serves the demo server until Ctrl-C on one port: Streamable HTTP at `/mcp`, legacy HTTP+SSE
/// at `/sse` (messages POSTed to `/messages`), WebSocket at `/ws`. `build` makes its builder
/// with the peer tools' state in the store it is given (in Redis with `--redis`).
pub(crate) fn serve(
    address: &str,
    args: &ServeArgs,
    build: impl FnOnce(Arc<dyn DemoStore>) -> Result<ServerBuilder, String>,
) -> ExitCode {
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
    let Span(idle) = args.session_idle_timeout;
    let mut config = HttpConfig::default()
        .max_body(args.max_message_size)
        .max_message_size(args.max_message_size)
        .one_shot_sessions(args.one_shot_sessions)
        .idle_timeout(idle)
        .body_read_timeout(args.body_read_timeout.0)
        .max_sessions(args.max_sessions)
        .max_streams_per_session(args.max_streams_per_session)
        .event_store_bytes(args.event_store_bytes)
        .eras(args.era);
    if args.json_response {
        config = config.response_mode(ResponseMode::Json);
    }
    let sse_config = SseConfig::default()
        .max_body(args.max_message_size)
        .max_message_size(args.max_message_size)
        .idle_timeout(idle)
        .max_sessions(args.max_sessions);
    let ws_config = WsConfig::default()
        .max_message_size(args.max_message_size)
        .max_sessions(args.max_sessions);
    let result = runtime.block_on(async move {
        let limits = EventStoreLimits::default().total_bytes(args.event_store_bytes);
        let shared = args.scale.connect(idle, limits).await?;
        let store: Arc<dyn DemoStore> = match &shared {
            Some(shared) => shared.store.clone(),
            None => Arc::new(MemoryDemoStore::new()),
        };
        let mut builder = build(store)?;
        if let Some(shared) = &shared {
            builder = shared.attach(builder);
        }
        let replica = shared.map(|shared| shared.replica);
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| format!("cannot listen on {address}: {e}"))?;
        let local = listener
            .local_addr()
            .map_err(|e| format!("cannot read the bound address: {e}"))?;
        let protection = args
            .auth
            .protection(&format!("http://{local}/mcp"), args.max_message_size)?;
        if !local.ip().is_loopback() && protection.is_none() {
            tracing::warn!(%local, "listening on a non-loopback address: the demo server has no authentication");
        }
        let mut config = config;
        if let Some(replica) = &replica {
            config = config.event_store(replica.events.clone());
        }
        let server = builder.build();
        // HTTP+SSE carries sessions only: the server serves the session era there by itself.
        let mcp = StreamableHttp::new(config, server.clone());
        let sse = LegacySse::new(sse_config, server.clone());
        let ws = WebSocketServer::new(ws_config, server);
        // Both session transports are routed: a request for a session another replica holds
        // is forwarded there.
        let mut sessions = mcp.router("/mcp").merge(sse.router("/sse", "/messages"));
        if let Some(replica) = &replica {
            sessions = replica.routing.wrap(&mcp, sessions);
        }
        let mut app = sessions.merge(ws.router("/ws"));
        if let Some(protection) = protection {
            let document = serde_json::to_string(&protection.metadata)
                .map_err(|e| format!("cannot write the resource metadata: {e}"))?;
            eprintln!(
                "tidewire serve: access tokens from {} are required; the resource metadata is at {}",
                protection.metadata.authorization_servers.join(", "),
                protection.metadata.url()
            );
            app = app.layer(protection.layer).route(
                &protection.metadata.path(),
                axum::routing::get(move || async move {
                    ([(axum::http::header::CONTENT_TYPE, "application/json")], document)
                }),
            );
        }
        // The first stdout line is the URL (scripts and tests read it); a closed stdout is not
        // a reason to stop serving.
        crate::output::out(&format!("http://{local}/mcp"));
        eprintln!("tidewire serve: the demo server is at http://{local}/mcp (Streamable HTTP); Ctrl-C stops it");
        eprintln!("tidewire serve: legacy HTTP+SSE at http://{local}/sse (messages to /messages)");
        eprintln!("tidewire serve: WebSocket (subprotocol mcp) at ws://{local}/ws");
        if args.scale.redis.is_some() {
            eprintln!(
                "tidewire serve: replica {} sharing its bus, tasks and state key through Redis",
                args.scale.node()
            );
        }
        tidewire_http::server::serve_until(listener, app, async move {
            let _ = tokio::signal::ctrl_c().await;
            // Open legacy SSE streams would hold the graceful shutdown forever.
            sse.close_all();
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
