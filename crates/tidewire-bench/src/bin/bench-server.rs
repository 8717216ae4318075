//! tidewire's peer server for the benchmarks.
//!
//! - `bench-server --bind ADDR`: Streamable HTTP at `/mcp`, with sessions and SSE replies;
//!   prints `http://ADDR/mcp` on stdout once listening.
//! - `bench-server --bind ADDR --json`: the same with JSON replies.
//! - `bench-server --bind ADDR --modern`: the default server, for the stateless 2026-07-28 rows.
//!   It serves that wire next to sessions (both eras are the default); SSE mode, so a request
//!   that reports progress can stream it (a request whose first message is its response is
//!   answered as JSON either way).
//! - `bench-server --bind ADDR --redis URL --node-id NAME`: the default server as one replica
//!   of several sharing the Redis at URL (its notification bus, task store and sealing key,
//!   and the session routing that forwards a session's requests to the replica holding it),
//!   for the scale-out rows.
//! - `bench-server --stdio`: stdio.
//! - `--counts` (with `--bind`): also serves `GET /counts`, the running totals of heap
//!   allocations and spawned tasks for `bench --counts` (see `tidewire_bench::counting`, and
//!   the builds it needs). Without `--counts` nothing is counted and no route is added.
//!
//! - `--otel` (with a build of the feature `otel`): serves with telemetry on — a `tracing`
//!   subscriber whose OpenTelemetry layer exports every MCP span in batches to an exporter
//!   that keeps nothing (the benchmark has no collector), and a meter provider recording the
//!   duration histograms — to measure what telemetry costs. A build without the feature
//!   refuses the flag.
//!
//! Tools: `echo({"text"})` and `progress({"n"})` (see `tidewire_bench::peers`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use axum::serve::ListenerExt;
use tidewire_bench::counting;
use tidewire_bench::peers::{tidewire_builder, tidewire_server};
use tidewire_http::server::{EventStoreLimits, HttpConfig, ResponseMode, StreamableHttp};
use tidewire_redis::{Redis, RedisEventStore, RedisTaskStore, SessionRouting, shared_key_ring};
use tidewire_server::Server;
use tidewire_server::tasks::TaskLimits;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let counting = args.iter().any(|a| a == "--counts");
    // Lives as long as `main`: allocations are counted while it runs.
    let _counting = counting::start("bench-server", counting);
    let _telemetry = if args.iter().any(|a| a == "--otel") {
        Some(telemetry::start()?)
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    if args.iter().any(|a| a == "--stdio") {
        return runtime.block_on(async {
            let driver = tidewire_server()
                .serve(tidewire_stdio::server::transport())
                .1;
            driver.await.context("the stdio session failed")
        });
    }
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map(String::as_str)
    };
    let Some(bind) = value("--bind") else {
        bail!(
            "usage: bench-server (--bind ADDR [--json | --modern | --redis URL --node-id NAME] \
             [--counts] | --stdio)"
        );
    };
    // `--modern` needs nothing more than the default: see the module docs.
    let json = args.iter().any(|a| a == "--json");
    let redis = match value("--redis") {
        Some(url) => Some((url, value("--node-id").context("--redis needs --node-id")?)),
        None => None,
    };
    runtime.block_on(serve(bind, json, redis, counting))
}

/// How long a session may sit idle: the server's default.
const IDLE: Duration = Duration::from_secs(30 * 60);

/// The server, on the Redis at `url` as the replica `node`: its bus, task store and sealing
/// key; the session routing to wrap its endpoint in and the event store copying to Redis.
async fn on_redis(
    url: &str,
    node: &str,
) -> anyhow::Result<(Server, SessionRouting, RedisEventStore)> {
    let redis = Redis::connect(url, "bench").await?;
    let server = tidewire_builder()
        .notification_bus(Arc::new(redis.bus().await?))
        .task_store(Arc::new(RedisTaskStore::new(&redis, TaskLimits::default())))
        .state_keys(shared_key_ring(&redis).await?)
        .build();
    let routing = SessionRouting::start(&redis, node, IDLE).await?;
    let events = RedisEventStore::new(&redis, IDLE, EventStoreLimits::default());
    Ok((server, routing, events))
}

async fn serve(
    bind: &str,
    json: bool,
    redis: Option<(&str, &str)>,
    counting: bool,
) -> anyhow::Result<()> {
    // Room for the 10,000-session memory measurement and its warm-up.
    let mut config = HttpConfig::default()
        .max_sessions(20_000)
        .idle_timeout(IDLE);
    if json {
        config = config.response_mode(ResponseMode::Json);
    }
    let (server, routing) = match redis {
        Some((url, node)) => {
            let (server, routing, events) = on_redis(url, node)
                .await
                .with_context(|| format!("cannot use Redis at {url}"))?;
            config = config.event_store(Arc::new(events));
            (server, Some(routing))
        }
        None => (tidewire_server(), None),
    };
    let mcp = StreamableHttp::new(config, server);
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr()?;
    println!("http://{local}/mcp");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let router = mcp.router("/mcp");
    let router = match &routing {
        Some(routing) => routing.wrap(&mcp, router),
        None => router,
    };
    let router = if counting {
        counting::route(router)
    } else {
        router
    };
    axum::serve(listener, router).await?;
    Ok(())
}

/// `--otel`: telemetry on, as a production server would have it, exporting to nowhere.
#[cfg(feature = "otel")]
mod telemetry {
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    /// Takes every batch of spans and keeps nothing.
    #[derive(Debug)]
    struct Discard;

    impl SpanExporter for Discard {
        fn export(
            &self,
            batch: Vec<SpanData>,
        ) -> impl std::future::Future<Output = OTelSdkResult> + Send {
            drop(batch);
            std::future::ready(Ok(()))
        }
    }

    /// The providers, kept for the life of the server.
    pub(crate) struct Telemetry {
        _tracer: SdkTracerProvider,
        _meters: tidewire_otel::Telemetry,
    }

    pub(crate) fn start() -> anyhow::Result<Telemetry> {
        let tracer = SdkTracerProvider::builder()
            .with_batch_exporter(Discard)
            .build();
        // Metrics kept for a Prometheus scraper (none scrapes here): the histograms recorded.
        let meters = tidewire_otel::Telemetry::builder("bench-server")
            .prometheus()
            .install()?;
        let layer = tidewire_otel::lean_layer()
            .with_tracer(tracer.tracer("bench-server"))
            .with_filter(
                Targets::new()
                    .with_target("tidewire_otel", LevelFilter::INFO)
                    .with_default(LevelFilter::OFF),
            );
        tracing_subscriber::registry().with(layer).try_init()?;
        Ok(Telemetry {
            _tracer: tracer,
            _meters: meters,
        })
    }
}

#[cfg(not(feature = "otel"))]
mod telemetry {
    pub(crate) struct Telemetry;

    pub(crate) fn start() -> anyhow::Result<Telemetry> {
        anyhow::bail!("--otel needs a build with the feature `otel` (see docs/performance.md)")
    }
}
