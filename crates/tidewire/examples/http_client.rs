//! A client that asks for a crawl with progress and cancels it after the third report, in each
//! era: on the session era (`initialize`) and on the stateless revision (2026-07-28), over
//! Streamable HTTP and WebSocket.
//!
//! ```sh
//! cargo run -p tidewire --example http_client --features full            # its own server
//! cargo run -p tidewire --example http_client --features full -- 127.0.0.1:3000
//! ```
//!
//! Without an address it starts the `http_server` example's server in-process, on a free
//! loopback port.

use std::time::Duration;

use tidewire::http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire::prelude::*;
use tidewire::serde_json::json;
use tidewire::ws::client::WebSocketConnector;

#[path = "http_server.rs"]
#[allow(dead_code)]
mod http_server;

fn builder() -> ClientBuilder {
    Client::builder(Implementation::new("example-agent", "1.0.0"))
}

/// Crawls ten slow pages and cancels from the progress callback after the third report.
async fn crawl_and_cancel(client: &Client, label: &str) -> Result<(), ClientError> {
    let urls: Vec<String> = (1..=10)
        .map(|i| format!("https://example.com/{i}"))
        .collect();
    let mut reports = 0;
    let outcome = client
        .call_tool("crawl", json!({"urls": urls, "delay_ms": 100}))
        .timeout(Duration::from_secs(30))
        .on_progress_with_cancel(move |p, call| {
            reports += 1;
            println!("  {p}"); // 3/10: Fetching https://example.com/3
            if reports == 3 {
                call.cancel("three reports are enough");
            }
        })
        .await;
    match outcome {
        Err(e) if e.is_cancelled() => println!("{label}: cancelled after three reports"),
        other => println!("{label}: unexpected {other:?}"),
    }
    let visits = client.call_tool("visits", json!({})).await?;
    println!(
        "{label}: the server fetched {} pages so far",
        visits.first_text().unwrap_or("?")
    );
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let address = match std::env::args().nth(1) {
        Some(address) => address,
        None => {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let address = listener.local_addr()?.to_string();
            let app = http_server::app(&http_server::server());
            tokio::spawn(tidewire::http::server::serve(listener, app));
            address
        }
    };
    let mcp = format!("http://{address}/mcp");
    let ws = format!("ws://{address}/ws");

    // The session era over Streamable HTTP.
    let client = builder()
        .connect(StreamableHttpConnector::new(&mcp).connect().await?)
        .await?;
    println!(
        "Streamable HTTP, {:?} era, protocol {}",
        client.era(),
        client.protocol_version()
    );
    crawl_and_cancel(&client, "session era over HTTP").await?;
    client.close().await;

    // The stateless revision over Streamable HTTP.
    let client = builder()
        .era(Era::Modern)
        .connect(StatelessHttpConnector::new(&mcp).connect().await?)
        .await?;
    println!(
        "Streamable HTTP, {:?} era, protocol {}",
        client.era(),
        client.protocol_version()
    );
    crawl_and_cancel(&client, "stateless over HTTP").await?;
    client.close().await;

    // WebSocket, the era found by probing (Era::Auto, the default).
    let client = builder()
        .connect(WebSocketConnector::new(&ws).connect().await?)
        .await?;
    println!(
        "WebSocket, {:?} era, protocol {}",
        client.era(),
        client.protocol_version()
    );
    crawl_and_cancel(&client, "WebSocket").await?;
    client.close().await;
    Ok(())
}
