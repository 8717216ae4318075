//! A tool server on Streamable HTTP and WebSocket in one axum app, serving clients of both eras
//! (the session revisions and the stateless 2026-07-28) on the same endpoints.
//!
//! ```sh
//! cargo run -p tidewire --example http_server --features full -- 127.0.0.1:3000
//! ```
//!
//! Its tools: `crawl` (progress per URL, stops when cancelled, cleans up either way) and
//! `visits` (state shared across calls and connections). The `http_client` example talks to it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tidewire::http::server::{HttpConfig, StreamableHttp};
use tidewire::prelude::*;
use tidewire::ws::server::{WebSocket, WsConfig};

#[derive(Deserialize, JsonSchema)]
#[serde(crate = "tidewire::serde")]
#[schemars(crate = "tidewire::schemars")]
struct Crawl {
    /// The pages to fetch.
    urls: Vec<String>,
    /// How long each page takes, in milliseconds (the example sleeps instead of fetching).
    #[serde(default)]
    delay_ms: u64,
}

/// The server: build it once, give a clone to each transport.
pub fn server() -> Server {
    // State shared by every call on every connection: keep it in the closures.
    let visits = Arc::new(AtomicU64::new(0));
    let counted = visits.clone();
    Server::builder(Implementation::new("example-crawler", "1.0.0"))
        .instructions("Call crawl with the URLs to fetch; visits says how many were fetched.")
        .tool(
            "crawl",
            "Fetches each URL, reporting progress",
            move |args: Crawl, ctx: Context| {
                let visits = counted.clone();
                async move {
                    let _cleanup = ctx.on_cancel(|| eprintln!("crawl cancelled: cleaning up"));
                    let n = u32::try_from(args.urls.len()).unwrap_or(u32::MAX);
                    for (i, url) in (1..).zip(&args.urls) {
                        tokio::time::sleep(Duration::from_millis(args.delay_ms)).await;
                        visits.fetch_add(1, Ordering::Relaxed);
                        ctx.progress(i)
                            .of(n)
                            .message(format!("fetched {url}"))
                            .await?;
                    }
                    Ok(CallToolResult::text(format!("crawled {n} URLs")))
                }
            },
        )
        .tool(
            "visits",
            "How many pages were fetched so far",
            move |_: NoArgs, _ctx: Context| {
                let visits = visits.clone();
                async move {
                    Ok(CallToolResult::text(
                        visits.load(Ordering::Relaxed).to_string(),
                    ))
                }
            },
        )
        .build()
}

/// The app: Streamable HTTP at `/mcp`, WebSocket at `/ws`.
pub fn app(server: &Server) -> tidewire::http::server::axum::Router {
    let mcp = StreamableHttp::new(HttpConfig::default(), server.clone());
    let ws = WebSocket::new(WsConfig::default(), server.clone());
    mcp.router("/mcp").merge(ws.router("/ws"))
}

#[allow(dead_code)] // also compiled into the http_client example, which has its own main
#[tokio::main]
async fn main() -> std::io::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&address).await?;
    let local = listener.local_addr()?;
    println!("MCP over Streamable HTTP at http://{local}/mcp, WebSocket at ws://{local}/ws");
    tidewire::http::server::serve(listener, app(&server())).await
}
