//! What the CLI tests share: the binary, the demo server over HTTP, crawl arguments.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `tidewire` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tidewire");

/// The longest any one CLI run may take in these tests.
pub const LIMIT: Duration = Duration::from_secs(30);

/// An HTTP client whose every request (its body included) fails after [`LIMIT`] instead of
/// waiting for ever on a server that stopped answering.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(LIMIT)
        .build()
        .expect("an HTTP client")
}

/// `-- <tidewire> serve --stdio`: the demo server as a stdio target.
pub fn stdio_server() -> Vec<String> {
    vec![
        "--".to_owned(),
        BIN.to_owned(),
        "serve".to_owned(),
        "--stdio".to_owned(),
    ]
}

/// Arguments for `crawl`: `count` URLs, `delay_ms` each.
pub fn crawl_args(count: usize, delay_ms: u64) -> String {
    let urls: Vec<String> = (1..=count)
        .map(|i| format!("https://example.com/page/{i}"))
        .collect();
    serde_json::json!({ "urls": urls, "delay_ms": delay_ms }).to_string()
}

/// `tidewire serve --bind 127.0.0.1:0`, killed when dropped.
pub struct HttpServer {
    child: Child,
    /// The Streamable HTTP URL (`http://127.0.0.1:PORT/mcp`).
    pub url: String,
    /// The Prometheus endpoint's URL, when started with [`HttpServer::start_with_metrics`].
    pub metrics: Option<String>,
}

impl HttpServer {
    /// `tidewire serve --bind 127.0.0.1:0`.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// `tidewire serve --bind 127.0.0.1:0 EXTRA…`.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_with_env(extra, &[])
    }

    /// `tidewire serve --bind 127.0.0.1:0 --metrics-bind 127.0.0.1:0 EXTRA…`, with the
    /// metrics URL the server names on stderr (the rest of stderr is drained).
    pub fn start_with_metrics(extra: &[&str]) -> Self {
        let mut args = vec!["--metrics-bind", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let mut child = Self::spawn(&args, &[], Stdio::piped());
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(at) = line.split("metrics (Prometheus text format) at ").nth(1) {
                    let _ = tx.send(at.trim().to_owned());
                }
            }
        });
        let mut server = Self::started(child);
        server.metrics = Some(
            rx.recv_timeout(LIMIT)
                .expect("the server names its metrics address in time"),
        );
        server
    }

    /// `tidewire serve --bind 127.0.0.1:0 EXTRA…` with the environment variables `env`.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Self {
        Self::started(Self::spawn(extra, env, Stdio::null()))
    }

    fn spawn(extra: &[&str], env: &[(&str, &str)], stderr: Stdio) -> Child {
        Command::new(BIN)
            .args(["serve", "--bind", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("start tidewire serve --bind")
    }

    /// The server `child`, once it has printed its URL.
    fn started(mut child: Child) -> Self {
        let stdout = child.stdout.take().expect("stdout");
        // The first line is the URL; read it on a thread so a silent server cannot hang the test.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let url = rx
            .recv_timeout(LIMIT)
            .expect("the server prints its URL in time")
            .trim()
            .to_owned();
        assert!(url.starts_with("http://127.0.0.1:"), "{url:?}");
        Self {
            child,
            url,
            metrics: None,
        }
    }

    /// The server's base, `http://127.0.0.1:PORT`.
    /// The server's process id (to signal it).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn base(&self) -> &str {
        self.url.trim_end_matches("/mcp")
    }

    /// The legacy HTTP+SSE URL.
    pub fn sse_url(&self) -> String {
        format!("{}/sse", self.base())
    }

    /// The WebSocket URL.
    pub fn ws_url(&self) -> String {
        format!("{}/ws", self.base().replacen("http://", "ws://", 1))
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
