//! Measures what an idle Streamable HTTP session costs the server: it starts the demo server in
//! a child process, opens N sessions that each hold a GET stream, and reads the child's resident
//! memory before and after; then it ends them all with DELETE, opens as many again, and reads it
//! again (the allocator keeps freed memory, so reuse, not the resident size after DELETE, shows
//! that ended sessions gave everything back).
//!
//! ```sh
//! cargo run --release -p tidewire-http --example session_memory -- 10000
//! ```

use std::process::Stdio;
use std::time::Duration;

use tidewire_http::server::{HttpConfig, StreamableHttp};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--serve") {
        return serve().await;
    }
    let sessions: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(1000);
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg("--serve")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("no child pid")?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let addr = BufReader::new(stdout)
        .lines()
        .next_line()
        .await?
        .ok_or("no address")?;

    // Warm up: one session, so one-time allocations do not count.
    let mut warm = open_session(&addr).await?;
    close_session(&addr, &warm.0).await?;
    warm.1.shutdown().await.ok();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = rss_kib(pid)?;

    let mut held = Vec::with_capacity(sessions);
    for _ in 0..sessions {
        held.push(open_session(&addr).await?);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let during = rss_kib(pid)?;

    for (id, stream) in &mut held {
        close_session(&addr, id).await?;
        stream.shutdown().await.ok();
    }
    drop(held);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = rss_kib(pid)?;

    // More rounds: if ended sessions gave their memory back (to the allocator), it is reused
    // and the resident size stops growing.
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let mut again = Vec::with_capacity(sessions);
        for _ in 0..sessions {
            again.push(open_session(&addr).await?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        rounds.push(rss_kib(pid)?);
        for (id, stream) in &mut again {
            close_session(&addr, id).await?;
            stream.shutdown().await.ok();
        }
    }

    let per_session = (during.saturating_sub(before)) as f64 / sessions as f64;
    println!("sessions with an open GET stream: {sessions}");
    println!(
        "server RSS before: {before} KiB, with the sessions: {during} KiB, after DELETE: {after} KiB"
    );
    println!("per idle session (server): {per_session:.1} KiB");
    println!(
        "RSS with {sessions} sessions open, in three more rounds after DELETE: {rounds:?} KiB \
         (flat = ended sessions' memory is reused, not leaked)"
    );
    Ok(())
}

/// The child: the demo server on a free loopback port; prints `host:port`.
async fn serve() -> Result<(), Box<dyn std::error::Error>> {
    let server = tidewire_demo::demo_server();
    let mcp = StreamableHttp::new(HttpConfig::default(), server);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    println!("{}", listener.local_addr()?);
    axum::serve(listener, mcp.router("/mcp")).await?;
    Ok(())
}

/// `initialize` + `initialized` over raw HTTP/1.1, then a GET stream held open (never read
/// beyond its headers). Returns the session id and the GET connection.
async fn open_session(addr: &str) -> Result<(String, TcpStream), Box<dyn std::error::Error>> {
    let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"m","version":"1"}}}"#;
    let (headers, _) = exchange(addr, "POST", None, Some(init)).await?;
    let id = headers
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|v| v.trim().to_owned())
        })
        .ok_or("no session id")?;
    let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    exchange(addr, "POST", Some(&id), Some(note)).await?;
    let mut get = TcpStream::connect(addr).await?;
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\nMcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    get.write_all(request.as_bytes()).await?;
    let mut buf = [0u8; 512];
    let n = get.read(&mut buf).await?;
    if !String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200") {
        return Err("the GET stream was refused".into());
    }
    Ok((id, get))
}

async fn close_session(addr: &str, id: &str) -> Result<(), Box<dyn std::error::Error>> {
    exchange(addr, "DELETE", Some(id), None).await?;
    Ok(())
}

/// One request on its own connection (`Connection: close`); returns the head and the body.
async fn exchange(
    addr: &str,
    method: &str,
    session: Option<&str>,
    body: Option<&str>,
) -> Result<(String, String), Box<dyn std::error::Error>> {
    let mut stream = TcpStream::connect(addr).await?;
    let body = body.unwrap_or("");
    let session = session
        .map(|s| format!("Mcp-Session-Id: {s}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json, text/event-stream\r\n\
         Content-Type: application/json\r\nMCP-Protocol-Version: 2025-11-25\r\n{session}\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.to_owned(), rest.to_owned()))
}

fn rss_kib(pid: u32) -> Result<u64, Box<dyn std::error::Error>> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .ok_or_else(|| "no VmRSS".into())
}
