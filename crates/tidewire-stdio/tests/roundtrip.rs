//! Both halves together: this test program spawns itself as a stdio echo server.
//!
//! Run with the `TIDEWIRE_STDIO_ECHO_SERVER` variable set, it serves over its own stdin and
//! stdout with `tidewire_stdio::server`; without it, it runs the checks below as the client.
//! (A plain libtest harness would print to stdout, so this test has `harness = false`.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use tidewire_core::jsonrpc::{Message, Request, RequestId, Response};
use tidewire_core::transport::{Envelope, Transport, TransportReceiver, TransportSender};
use tidewire_stdio::client::{ChildReceiver, StderrMode, StdioConnector};
use tokio::sync::mpsc;

const SERVER_MODE: &str = "TIDEWIRE_STDIO_ECHO_SERVER";

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if std::env::var_os(SERVER_MODE).is_some() {
        runtime.block_on(echo_server());
        return;
    }
    runtime.block_on(async {
        tokio::time::timeout(Duration::from_secs(30), async {
            requests_are_answered_and_stdin_eof_ends_the_server().await;
            println!("ok: requests_are_answered_and_stdin_eof_ends_the_server");
            bad_lines_get_an_error_answer_and_serving_goes_on().await;
            println!("ok: bad_lines_get_an_error_answer_and_serving_goes_on");
        })
        .await
        .expect("the test timed out");
    });
}

/// Answers each request with its method and params; logs to stderr; stops at end-of-file.
async fn echo_server() {
    let transport = tidewire_stdio::server::transport();
    eprintln!("echo server: ready (pipes: {})", transport.uses_pipes());
    let (mut tx, mut rx) = transport.split();
    while let Some(item) = rx.recv().await {
        let reply = match item {
            Ok(envelope) => match envelope.message {
                Message::Request(request) => Response::result(
                    request.id,
                    json!({"method": request.method, "params": request.params}),
                ),
                Message::Notification(_) | Message::Response(_) => continue,
            },
            Err(error) => match error.error_response() {
                Some(response) => response.clone(),
                None => continue,
            },
        };
        tx.send(Envelope::new(reply)).await.expect("send");
    }
    eprintln!("echo server: stdin closed");
    tx.close().await.expect("close");
}

fn server() -> StdioConnector {
    StdioConnector::command(std::env::current_exe().expect("current exe")).env(SERVER_MODE, "1")
}

async fn next_response(rx: &mut ChildReceiver) -> Response {
    match rx.recv().await.expect("a message").expect("valid").message {
        Message::Response(response) => response,
        other => panic!("expected a response, got {other:?}"),
    }
}

async fn requests_are_answered_and_stdin_eof_ends_the_server() {
    let (lines_tx, mut lines) = mpsc::channel(16);
    let (mut tx, mut rx, handle) = server()
        .stderr(StderrMode::channel(lines_tx))
        .spawn()
        .expect("spawn")
        .split_with_handle();

    for id in 1..=3 {
        let request = Request::new(id, "tools/call", Some(json!({"n": id})));
        tx.send(Envelope::new(request)).await.expect("send");
    }
    for id in 1..=3 {
        let response = next_response(&mut rx).await;
        assert_eq!(response.id, Some(RequestId::Number(id)));
        assert_eq!(
            response.outcome.expect("result"),
            json!({"method": "tools/call", "params": {"n": id}})
        );
    }

    tx.close().await.expect("close");
    assert!(rx.recv().await.is_none(), "the stream ends cleanly");
    assert!(handle.wait().await.expect("status").success());
    let mut got = Vec::new();
    while let Some(line) = lines.recv().await {
        got.push(line);
    }
    assert_eq!(
        got,
        [
            "echo server: ready (pipes: true)",
            "echo server: stdin closed"
        ],
        "spawned with pipes, the server reads and writes them without helper threads"
    );
}

async fn bad_lines_get_an_error_answer_and_serving_goes_on() {
    // A shell feeds the server one line that is not JSON, then whatever we send.
    let exe = std::env::current_exe().expect("current exe");
    let (mut tx, mut rx, handle) = StdioConnector::command("sh")
        .arg("-c")
        .arg(r#"{ printf 'not json\n'; cat; } | exec "$0""#)
        .arg(exe)
        .env(SERVER_MODE, "1")
        .stderr(StderrMode::Null)
        .spawn()
        .expect("spawn")
        .split_with_handle();

    let parse_error = next_response(&mut rx).await;
    assert_eq!(parse_error.id, None);
    assert_eq!(parse_error.outcome.expect_err("error").code().0, -32700);

    tx.send(Envelope::new(Request::new("after", "ping", None)))
        .await
        .expect("send");
    let response = next_response(&mut rx).await;
    assert_eq!(response.id, Some(RequestId::from("after")));

    let status = handle.shutdown().await.expect("shutdown");
    assert!(status.success(), "{status}");
}
