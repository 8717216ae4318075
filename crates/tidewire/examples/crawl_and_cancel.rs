//! A call with live progress and a cancellation, over stdio.
//!
//! The example starts the tidewire demo server as a child process (itself, run with `--serve`),
//! asks it to crawl ten slow URLs with progress, cancels after the third report, and shows that
//! the server stopped within the URL in flight and sent nothing more.
//!
//! ```sh
//! cargo run -p tidewire --example crawl_and_cancel
//! ```

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use serde_json::json;
use tidewire::client::Client;
use tidewire::core::schema::{Implementation, ServerNotification};
use tidewire::stdio::client::{StderrMode, StdioConnector};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().any(|a| a == "--serve") {
        // The child: the demo server on stdin/stdout.
        let result = tidewire_demo::demo_server()
            .run(tidewire::stdio::server::transport())
            .await;
        std::process::exit(i32::from(result.is_err()));
    }

    let me = std::env::current_exe()?;
    let child = StdioConnector::command(me)
        .arg("--serve")
        .stderr(StderrMode::Inherit)
        .spawn()?;
    let handle = child.handle();
    let client = Client::builder(Implementation::new("crawl-and-cancel", "0.1.0"))
        .connect(child)
        .await?;
    println!(
        "connected to {} {} over stdio (protocol {})",
        client.server_info().name,
        client.server_info().version,
        client.protocol_version()
    );

    let mut notifications = client.notifications();
    let urls: Vec<String> = (1..=10)
        .map(|i| format!("https://example.com/slow/{i}"))
        .collect();
    let (call, mut progress) = client
        .call_tool("crawl", json!({"urls": urls, "delay_ms": 300}))
        .progress_stream();
    let call = call.send().await?;
    let token = call.id().clone();
    let started = Instant::now();
    let mut reports = 0;
    while let Some(p) = progress.next().await {
        reports += 1;
        println!("  [{:>5} ms] progress {p}", started.elapsed().as_millis());
        if reports == 3 {
            break;
        }
    }
    let cancelled_at = epoch_ms();
    call.cancel("the example cancels after three reports");
    let outcome = call.await;
    println!(
        "cancelled the call: {}",
        match &outcome {
            Err(e) if e.is_cancelled() => "the call ended as cancelled".to_owned(),
            other => format!("unexpected outcome {other:?}"),
        }
    );

    // Ask the server where it stopped (it records the stop when the cancelled task ends).
    let mut status = serde_json::Value::Null;
    for _ in 0..50 {
        let result = client.call_tool("crawl_status", json!({})).await?;
        let text = result
            .content
            .first()
            .and_then(|b| b.as_text())
            .unwrap_or("{}")
            .to_owned();
        status = serde_json::from_str(&text)?;
        if status["finished"] == json!(true) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stop_ms = status["stopped_at_ms"].as_f64().unwrap_or(f64::NAN) - cancelled_at;
    // The server's clock is read in whole milliseconds, so a stop within the same millisecond
    // can come out slightly negative.
    let stop = if stop_ms < 1.0 {
        "within 1 ms".to_owned()
    } else {
        format!("{stop_ms:.0} ms")
    };
    println!(
        "server: completed {} of {} URLs, cancelled={}, stopped {stop} after the cancel",
        status["completed"], status["total"], status["cancelled"]
    );
    // Everything the server sent before answering crawl_status has arrived by now.
    let mut late = 0;
    while let Some(Some(Ok(note))) = futures::FutureExt::now_or_never(notifications.next()) {
        if let ServerNotification::Progress(p) = note
            && p.progress_token == token
            && p.progress > 3.0
        {
            late += 1;
        }
    }
    println!("progress notifications after the cancel: {late}");

    client.close().await;
    handle.shutdown().await?;
    Ok(())
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}
