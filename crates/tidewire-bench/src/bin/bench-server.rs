//! tidewire's peer server for the benchmarks.
//!
//! - `bench-server --bind ADDR`: Streamable HTTP at `/mcp`, with sessions and SSE replies;
//!   prints `http://ADDR/mcp` on stdout once listening.
//! - `bench-server --bind ADDR --json`: the same with JSON replies.
//! - `bench-server --bind ADDR --modern`: the default server, for the stateless 2026-07-28 rows.
//!   It serves that wire next to sessions (both eras are the default); SSE mode, so a request
//!   that reports progress can stream it (a request whose first message is its response is
//!   answered as JSON either way).
//! - `bench-server --stdio`: stdio.
//!
//! Tools: `echo({"text"})` and `progress({"n"})` (see `tidewire_bench::peers`).

use anyhow::{Context as _, bail};
use axum::serve::ListenerExt;
use tidewire_bench::peers::tidewire_server;
use tidewire_http::server::{HttpConfig, ResponseMode, StreamableHttp};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
    let Some(bind) = args
        .iter()
        .position(|a| a == "--bind")
        .and_then(|i| args.get(i + 1))
    else {
        bail!("usage: bench-server (--bind ADDR [--json | --modern] | --stdio)");
    };
    // `--modern` needs nothing more than the default: see the module docs.
    let json = args.iter().any(|a| a == "--json");
    runtime.block_on(serve(bind, json))
}

async fn serve(bind: &str, json: bool) -> anyhow::Result<()> {
    // Room for the 10,000-session memory measurement and its warm-up.
    let mut config = HttpConfig::default().max_sessions(20_000);
    if json {
        config = config.response_mode(ResponseMode::Json);
    }
    let server = tidewire_server();
    let mcp = StreamableHttp::new(config, server);
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("cannot listen on {bind}"))?;
    let local = listener.local_addr()?;
    println!("http://{local}/mcp");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, mcp.router("/mcp")).await?;
    Ok(())
}
