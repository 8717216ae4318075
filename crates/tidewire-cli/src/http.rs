//! `tidewire serve --bind ADDR`: the demo server over HTTP.

use std::process::ExitCode;

use tidewire_http::server::{EventStoreLimits, HttpConfig, ResponseMode, StreamableHttp, health};
use tidewire_sse::server::{LegacySse, SseConfig};
use tidewire_ws::server::{WebSocket, WsConfig};

use std::sync::Arc;

use tidewire_demo::{DemoStore, MemoryDemoStore};
use tidewire_server::ServerBuilder;

use crate::duration::Span;

/// How long open connections may take to close once the sessions have ended at shutdown.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);
use crate::serve_args::ServeArgs;

/// Serves the demo server until SIGTERM or Ctrl-C (then drains: see `shutdown.rs`) on one port: Streamable HTTP at `/mcp`, legacy HTTP+SSE
/// at `/sse` (messages POSTed to `/messages`), WebSocket at `/ws`. `build` makes its builder
/// with the peer tools' state in the store it is given (in Redis with `--redis`).
pub(crate) fn serve(
    address: &str,
    args: &ServeArgs,
    telemetry: Option<&tidewire_otel::Telemetry>,
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
        .event_store_bytes(args.event_store_bytes);
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
    let metrics_listener = match crate::telemetry::metrics_listener(args) {
        Ok(listener) => listener,
        Err(message) => {
            eprintln!("tidewire serve: {message}");
            return ExitCode::FAILURE;
        }
    };
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
        let routing = replica.as_ref().map(|replica| replica.routing.clone());
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
        let ws = WebSocket::new(ws_config, server.clone());
        if telemetry.is_some() {
            crate::telemetry::observe(&server);
            crate::telemetry::observe_transports(&mcp, &sse, &ws);
            if let Some(routing) = &routing {
                crate::telemetry::observe_routing(routing);
            }
        }
        if let (Some(listener), Some(metrics)) = (
            metrics_listener,
            telemetry.and_then(tidewire_otel::Telemetry::prometheus),
        ) {
            crate::telemetry::serve_metrics(listener, metrics);
        }
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
        if telemetry.is_some() {
            app = crate::telemetry::count_refusals(app);
        }
        // Outside the authentication layer: a load balancer probes without a token.
        app = app.merge(health(server.lifecycle().clone()));
        // The first stdout line is the URL (scripts and tests read it); a closed stdout is not
        // a reason to stop serving.
        crate::output::out(&format!("http://{local}/mcp"));
        eprintln!(
            "tidewire serve: the demo server is at http://{local}/mcp (Streamable HTTP); Ctrl-C \
             or SIGTERM drains and stops it (health checks at /healthz and /readyz)"
        );
        eprintln!("tidewire serve: legacy HTTP+SSE at http://{local}/sse (messages to /messages)");
        eprintln!("tidewire serve: WebSocket (subprotocol mcp) at ws://{local}/ws");
        if args.scale.redis.is_some() {
            eprintln!(
                "tidewire serve: replica {} sharing its bus, tasks and state key through Redis",
                args.scale.node()
            );
        }
        // Connections are still accepted while the server drains (a new session gets 503, and
        // so does /readyz); then every session ends, and the listener closes.
        let stopped = Arc::new(tokio::sync::Notify::new());
        let shutdown = {
            let stopped = stopped.clone();
            let Span(deadline) = args.drain_timeout;
            async move {
                let signal = crate::shutdown::signalled().await;
                // Other replicas answer this one's sessions 404 from now on (their clients
                // start new sessions there), instead of forwarding them here.
                if let Some(routing) = &routing {
                    routing.leave().await;
                }
                crate::shutdown::drain(&server, signal, deadline).await;
                if let Some(routing) = &routing {
                    routing.stop().await;
                }
                // Open streams (GET, legacy SSE, WebSocket) would hold the graceful shutdown
                // forever.
                mcp.close_all();
                sse.close_all();
                ws.close_all();
                stopped.notify_one();
            }
        };
        let serving = tidewire_http::server::serve_until(listener, app, shutdown);
        tokio::select! {
            served = serving => served.map_err(|e| format!("the HTTP server failed: {e}")),
            // Connections still open a moment after the sessions ended (a client that keeps
            // an idle keep-alive connection, a request past the deadline) are not waited for.
            () = async {
                stopped.notified().await;
                tokio::time::sleep(CLOSE_GRACE).await;
            } => Ok(()),
        }
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
