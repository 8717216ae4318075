//! `tidewire serve`'s logs and telemetry: log lines on stderr (text or JSON, filtered by
//! `RUST_LOG`), spans and metrics exported over OTLP (`--otlp-endpoint`), metrics for a
//! Prometheus scraper (`--metrics-bind`), and the gauges of what the server holds.

use std::io::IsTerminal;

use tidewire_otel::Telemetry;
use tidewire_otel::metrics::{counter, counter_by, gauge, gauge_by};
use tidewire_server::Server;
use tracing_subscriber::filter::{EnvFilter, LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{Layer as _, Registry};

use crate::serve_args::ServeArgs;

/// Sets up logging and, when asked, telemetry; call it before the async runtime starts (the
/// OTLP exporter's HTTP client runs threads of its own).
pub(crate) fn init(args: &ServeArgs) -> Result<Option<Telemetry>, String> {
    let telemetry = if args.otlp_endpoint.is_some() || args.metrics_bind.is_some() {
        let mut builder = Telemetry::builder("tidewire-demo");
        if let Some(endpoint) = &args.otlp_endpoint {
            builder = builder.otlp(endpoint.clone());
        }
        if args.metrics_bind.is_some() {
            builder = builder.prometheus();
        }
        Some(builder.install().map_err(|e| e.to_string())?)
    } else {
        None
    };
    let filter = || EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let logs = if args.log_format == "json" {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .with_filter(filter())
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .with_filter(filter())
            .boxed()
    };
    // tidewire's MCP spans go to the exporter whatever RUST_LOG says of the log lines.
    let spans = telemetry.as_ref().and_then(Telemetry::layer).map(|layer| {
        layer.with_filter(
            Targets::new()
                .with_target("tidewire_otel", LevelFilter::INFO)
                .with_default(LevelFilter::OFF),
        )
    });
    let _ = Registry::default().with(logs).with(spans).try_init();
    Ok(telemetry)
}

/// A gauge: its name, description and unit, and how to read it.
type Gauge = (
    &'static str,
    &'static str,
    &'static str,
    Box<dyn Fn() -> u64 + Send + Sync>,
);

fn register(gauges: Vec<Gauge>) {
    for (name, description, unit, read) in gauges {
        gauge(name, description, unit, read);
    }
}

/// Reports what `server` holds as gauges and counters (read at every collection).
pub(crate) fn observe(server: &Server) {
    let (s1, s2, s3, s4) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    register(vec![
        (
            "tidewire.server.requests.in_flight",
            "Requests being served now",
            "{request}",
            Box::new(move || s1.lifecycle().in_flight() as u64),
        ),
        (
            "tidewire.server.connections",
            "Live connections (session-era sessions and connection transports)",
            "{connection}",
            Box::new(move || s2.connection_count() as u64),
        ),
        (
            "tidewire.server.listeners",
            "Open subscriptions/listen streams",
            "{stream}",
            Box::new(move || s3.listener_count() as u64),
        ),
        (
            "tidewire.server.draining",
            "1 while the server drains, else 0",
            "1",
            Box::new(move || u64::from(s4.lifecycle().is_draining())),
        ),
    ]);
    let running = server.clone();
    gauge_by(
        "tidewire.server.tasks",
        "Tasks running in this process, by status",
        "{task}",
        "tidewire.task.status",
        move || {
            let counts = running.task_counts();
            vec![
                ("working", counts.working),
                ("input_required", counts.input_required),
            ]
        },
    );
    let ended = server.clone();
    counter_by(
        "tidewire.server.tasks.ended",
        "Tasks this process ended, by status",
        "{task}",
        "tidewire.task.status",
        move || {
            let counts = ended.task_counts();
            vec![
                ("completed", counts.completed),
                ("failed", counts.failed),
                ("cancelled", counts.cancelled),
            ]
        },
    );
    let refusing = server.clone();
    counter_by(
        "tidewire.server.refusals",
        "Messages the engine refused instead of serving, by reason (every transport; HTTP \
         refusals before the engine are in tidewire.http.refusals)",
        "{message}",
        "tidewire.refusal.reason",
        move || {
            let refusals = refusing.lifecycle().refusals();
            vec![
                ("too_large", refusals.too_large),
                ("malformed", refusals.malformed),
                ("busy", refusals.busy),
                ("draining", refusals.draining),
            ]
        },
    );
    let held = server.clone();
    counter(
        "tidewire.server.notifications.dropped",
        "Broadcast notifications that found a client's outbound queue full",
        "{notification}",
        move || held.dropped_notifications(),
    );
}

/// Reports the requests a replica forwarded to the owners of their sessions, and those it
/// served for other replicas (`--redis`).
pub(crate) fn observe_routing(routing: &tidewire_redis::SessionRouting) {
    let (out, served) = (routing.clone(), routing.clone());
    counter(
        "tidewire.redis.requests.forwarded",
        "Requests forwarded to the replica holding their session",
        "{request}",
        move || out.requests_forwarded(),
    );
    counter(
        "tidewire.redis.requests.served_forwarded",
        "Requests other replicas forwarded here, served",
        "{request}",
        move || served.forwarded_requests_served(),
    );
}

/// Reports the sessions each HTTP transport holds.
pub(crate) fn observe_transports(
    mcp: &tidewire_http::server::StreamableHttp,
    sse: &tidewire_sse::server::LegacySse,
    ws: &tidewire_ws::server::WebSocket,
) {
    let (m1, m2, m3) = (mcp.clone(), mcp.clone(), mcp.clone());
    let (sse, ws) = (sse.clone(), ws.clone());
    register(vec![
        (
            "tidewire.http.sessions",
            "Streamable HTTP sessions open",
            "{session}",
            Box::new(move || m1.session_count() as u64),
        ),
        (
            "tidewire.http.body_bytes_reading",
            "Bytes of POST bodies being read now (as the body budget counts them)",
            "By",
            Box::new(move || m2.body_bytes_reading() as u64),
        ),
        (
            "tidewire.http.event_store.usage",
            "Bytes of SSE events kept for their readers and for resumption (as the event \
             store's budget counts them)",
            "By",
            Box::new(move || m3.event_store_bytes() as u64),
        ),
        (
            "tidewire.sse.sessions",
            "Legacy HTTP+SSE sessions (streams) open",
            "{session}",
            Box::new(move || sse.session_count() as u64),
        ),
        (
            "tidewire.ws.connections",
            "WebSocket connections open",
            "{connection}",
            Box::new(move || ws.connection_count() as u64),
        ),
    ]);
}

/// The metrics' own listener, when `--metrics-bind` asks for one, bound before the runtime
/// starts (so a bad address stops the program before it serves anything).
pub(crate) fn metrics_listener(args: &ServeArgs) -> Result<Option<std::net::TcpListener>, String> {
    args.metrics_bind.as_deref().map(bind_metrics).transpose()
}

fn bind_metrics(address: &str) -> Result<std::net::TcpListener, String> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|e| format!("cannot listen on {address} for the metrics: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("cannot set up the metrics listener: {e}"))?;
    Ok(listener)
}

/// Serves `/metrics` on `listener`, naming it on stderr. Call it in the runtime.
pub(crate) fn serve_metrics(
    listener: std::net::TcpListener,
    metrics: &tidewire_otel::prometheus::PrometheusMetrics,
) {
    let app = metrics.router();
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "the metrics listener cannot be served");
            return;
        }
    };
    if let Ok(local) = listener.local_addr() {
        eprintln!("tidewire serve: metrics (Prometheus text format) at http://{local}/metrics");
    }
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "the metrics listener failed");
        }
    });
}

/// `app`, counting every answer it refuses (status 400 and above) in `tidewire.http.refusals`
/// by `http.response.status_code`: 503 (draining, a full table, no room), 413, 429, 408,
/// 401/403 (the authentication layer, when `app` holds it), 404 (an unknown session), 400.
pub(crate) fn count_refusals(app: axum::Router) -> axum::Router {
    let refusals = opentelemetry::global::meter("tidewire")
        .u64_counter("tidewire.http.refusals")
        .with_description("HTTP requests refused, by status")
        .with_unit("{request}")
        .build();
    app.layer(axum::middleware::map_response(
        move |response: axum::response::Response| {
            let refusals = refusals.clone();
            async move {
                let status = response.status().as_u16();
                if status >= 400 {
                    refusals.add(
                        1,
                        &[opentelemetry::KeyValue::new(
                            "http.response.status_code",
                            i64::from(status),
                        )],
                    );
                }
                response
            }
        },
    ))
}
