//! The `tidewire` binary: `serve --stdio` over real pipes, and the command line itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::time::timeout;

use support::{BIN, LIMIT};

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every line the server wrote to stdout.
    lines: Vec<String>,
}

impl Server {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn tidewire");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Self {
            child,
            stdin,
            stdout,
            lines: Vec::new(),
        }
    }

    async fn write_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.expect("write");
        stdin.write_all(b"\n").await.expect("write");
        stdin.flush().await.expect("flush");
    }

    async fn send(&mut self, message: &Value) {
        self.write_line(&message.to_string()).await;
    }

    /// The next line on stdout, parsed; `None` at end of output.
    async fn read(&mut self) -> Option<Value> {
        let line = timeout(LIMIT, self.stdout.next_line())
            .await
            .expect("no output in time")
            .expect("read stdout")?;
        self.lines.push(line.clone());
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
    }

    async fn response(&mut self) -> Value {
        self.read().await.expect("a response before end of output")
    }

    async fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = timeout(LIMIT, stderr.read_to_string(&mut text)).await;
        }
        text
    }
}

fn initialize(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "serve-stdio-test", "version": "0.0.0"}
    }})
}

fn echo(id: u64, text: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}}})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {response}"))
}

#[tokio::test]
async fn serves_over_stdio_answers_bad_input_and_exits_cleanly_at_eof() {
    timeout(LIMIT, async {
        let mut server = Server::start(&["serve", "--stdio"]);

        server.send(&initialize(1)).await;
        let init = server.response().await;
        assert_eq!(init["id"], 1);
        assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(init["result"]["serverInfo"]["name"], "tidewire-demo");
        server
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;

        let tricky = "héllo \"wörld\" \\ \u{1F30A}";
        server.send(&echo(2, tricky)).await;
        let echoed = server.response().await;
        assert_eq!(echoed["id"], 2);
        assert_eq!(echoed["result"]["content"][0]["text"], tricky);

        // Not JSON at all: a parse error, with a null id.
        server.write_line("this is not JSON {").await;
        let parse = server.response().await;
        assert_eq!(error_code(&parse), -32700);
        assert!(parse["id"].is_null());

        // JSON, but not JSON-RPC 2.0: an invalid request, answered with its id.
        server
            .send(&json!({"jsonrpc": "1.0", "id": 3, "method": "ping"}))
            .await;
        let invalid = server.response().await;
        assert_eq!(error_code(&invalid), -32600);
        assert_eq!(invalid["id"], 3);

        server
            .send(&json!({"jsonrpc": "2.0", "id": 4, "method": "no/such/method"}))
            .await;
        let unknown = server.response().await;
        assert_eq!(error_code(&unknown), -32601);
        assert_eq!(unknown["id"], 4);

        // A line past the default 8 MiB limit: an error, then serving goes on.
        let huge = echo(5, &"x".repeat(8 * 1024 * 1024 + 1024)).to_string();
        server.write_line(&huge).await;
        let too_large = server.response().await;
        assert_eq!(error_code(&too_large), -32600);
        assert!(
            too_large["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("exceeds")),
            "{too_large}"
        );
        server.send(&ping(6)).await;
        assert_eq!(
            server.response().await,
            json!({"jsonrpc": "2.0", "id": 6, "result": {}})
        );

        // A response to a request the server never sent: ignored. The next line out is the
        // answer to the ping that follows it.
        server
            .send(&json!({"jsonrpc": "2.0", "id": 99, "result": {}}))
            .await;
        server.send(&ping(7)).await;
        assert_eq!(
            server.response().await,
            json!({"jsonrpc": "2.0", "id": 7, "result": {}})
        );

        // Close stdin: the server finishes and exits 0, promptly, with nothing more on stdout.
        let closed_at = Instant::now();
        drop(server.stdin.take());
        assert_eq!(server.read().await, None, "output after end of input");
        let status = timeout(Duration::from_secs(5), server.child.wait())
            .await
            .expect("the server did not exit within 5 s of end of input")
            .expect("wait");
        let took = closed_at.elapsed();
        let stderr = server.stderr().await;
        assert!(status.success(), "exit status {status}; stderr:\n{stderr}");
        assert!(took < Duration::from_secs(2), "took {took:?} to exit");
        println!("MEASURE exit after end of input: {} ms", took.as_millis());

        // Stdout held JSON-RPC messages only, one per line.
        assert_eq!(server.lines.len(), 8);
        for line in &server.lines {
            let message: Value = serde_json::from_str(line).expect("JSON");
            assert_eq!(message["jsonrpc"], "2.0", "{line}");
            assert!(
                message.get("result").is_some() || message.get("error").is_some(),
                "only responses were expected: {line}"
            );
        }
    })
    .await
    .expect("the test timed out");
}

#[tokio::test]
async fn requests_piped_before_end_of_input_are_still_answered() {
    timeout(LIMIT, async {
        let mut server = Server::start(&["serve", "--stdio"]);
        server.send(&initialize(1)).await;
        server.send(&echo(2, "piped")).await;
        server
            .send(
                &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
                "name": "crawl", "arguments": {"urls": ["a", "b"], "delay_ms": 50}}}),
            )
            .await;
        drop(server.stdin.take());

        let mut ids = Vec::new();
        while let Some(message) = server.read().await {
            assert!(message.get("result").is_some(), "{message}");
            ids.push(message["id"].as_u64().expect("id"));
        }
        ids.sort_unstable();
        assert_eq!(ids, [1, 2, 3]);
        let status = timeout(Duration::from_secs(5), server.child.wait())
            .await
            .expect("exit")
            .expect("wait");
        assert!(status.success());
    })
    .await
    .expect("the test timed out");
}

#[tokio::test]
async fn logs_go_to_stderr_only() {
    timeout(LIMIT, async {
        let mut child = Command::new(BIN)
            .args(["serve", "--stdio"])
            .env("RUST_LOG", "debug")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(format!("{}\n{}\n", initialize(1), ping(2)).as_bytes())
            .await
            .expect("write");
        drop(stdin);
        let output = child.wait_with_output().await.expect("output");
        assert!(output.status.success());
        let stdout = String::from_utf8(output.stdout).expect("utf-8");
        for line in stdout.lines() {
            let message: Value = serde_json::from_str(line).expect("stdout holds JSON only");
            assert_eq!(message["jsonrpc"], "2.0");
        }
        assert_eq!(stdout.lines().count(), 2);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains("serving the tidewire demo server over stdio"),
            "debug logs should reach stderr:\n{stderr}"
        );
    })
    .await
    .expect("the test timed out");
}

#[test]
fn help_says_what_is_served() {
    let top = std::process::Command::new(BIN)
        .arg("--help")
        .output()
        .expect("run");
    assert!(top.status.success());
    let text = String::from_utf8_lossy(&top.stdout);
    assert!(text.contains("serve") && text.contains("demo"), "{text}");

    let serve = std::process::Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("run");
    assert!(serve.status.success());
    let text = String::from_utf8_lossy(&serve.stdout);
    for wanted in [
        "--stdio",
        "--bind",
        "echo",
        "crawl",
        "test_*",
        "conformance",
    ] {
        assert!(text.contains(wanted), "`{wanted}` missing from:\n{text}");
    }
}

#[test]
fn serving_without_a_transport_is_refused_clearly() {
    let bare = std::process::Command::new(BIN)
        .arg("serve")
        .output()
        .expect("run");
    assert_eq!(bare.status.code(), Some(2));
    assert!(bare.stdout.is_empty());
    let text = String::from_utf8_lossy(&bare.stderr);
    assert!(
        text.contains("--stdio") && text.contains("--bind"),
        "{text}"
    );

    let bad = std::process::Command::new(BIN)
        .args(["serve", "--bind", "not-an-address"])
        .output()
        .expect("run");
    assert_eq!(bad.status.code(), Some(1));
    assert!(bad.stdout.is_empty());
    let text = String::from_utf8_lossy(&bad.stderr);
    assert!(text.contains("cannot listen on not-an-address"), "{text}");

    let json_without_bind = std::process::Command::new(BIN)
        .args(["serve", "--stdio", "--json-response"])
        .output()
        .expect("run");
    assert_eq!(
        json_without_bind.status.code(),
        Some(2),
        "--json-response needs --bind"
    );

    let both = std::process::Command::new(BIN)
        .args(["serve", "--stdio", "--bind", "127.0.0.1:8080"])
        .output()
        .expect("run");
    assert_eq!(both.status.code(), Some(2), "clap refuses the conflict");
}
