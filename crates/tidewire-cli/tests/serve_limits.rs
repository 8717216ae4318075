//! `tidewire serve --bind`'s limits as flags: `--help` shows each with its default, a limit of
//! one session turns the next one away with 503, and a value that makes no sense is one line
//! and exit status 2.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::Output;

use support::{BIN, HttpServer, LIMIT};

fn tidewire(args: &[&str]) -> Output {
    assert_cmd::Command::new(BIN)
        .args(args)
        .timeout(LIMIT)
        .output()
        .expect("run tidewire")
}

/// Sends `request` (its head up to the blank line, and `body`) on a new connection to
/// `address`; returns the status code of the answer and the connection, still open.
fn send(address: &str, head: &str, body: &str) -> (u16, TcpStream) {
    let mut stream = TcpStream::connect(address).expect("connect");
    stream.set_read_timeout(Some(LIMIT)).expect("read timeout");
    let request = format!(
        "{head}\r\nHost: {address}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send");
    let mut status = String::new();
    BufReader::new(stream.try_clone().expect("clone the stream"))
        .read_line(&mut status)
        .expect("the status line");
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status in {status:?}"));
    (code, stream)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"limits-test","version":"0"}}}"#;

fn initialize(address: &str) -> (u16, TcpStream) {
    send(
        address,
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream",
        INITIALIZE,
    )
}

fn open_sse(address: &str) -> (u16, TcpStream) {
    send(
        address,
        "GET /sse HTTP/1.1\r\nAccept: text/event-stream",
        "",
    )
}

#[test]
fn max_sessions_turns_the_next_session_away_with_503() {
    let server = HttpServer::start_with(&["--max-sessions", "1"]);
    let address = server.base().trim_start_matches("http://").to_owned();

    // Streamable HTTP: the session lives on after its initialize is answered.
    let (first, _first) = initialize(&address);
    assert_eq!(first, 200, "the first session is admitted");
    let (second, _second) = initialize(&address);
    assert_eq!(second, 503, "the second session is turned away");

    // Legacy HTTP+SSE: the session lives as long as its stream, kept open here.
    let (first, _stream) = open_sse(&address);
    assert_eq!(first, 200, "the first stream is admitted");
    let (second, _) = open_sse(&address);
    assert_eq!(second, 503, "the second stream is turned away");
}

#[test]
fn serve_help_lists_each_limit_with_its_default() {
    let output = tidewire(&["serve", "--help"]);
    assert!(output.status.success());
    let help = String::from_utf8_lossy(&output.stdout);
    for (flag, default) in [
        ("--session-idle-timeout <DURATION>", Some("30m")),
        ("--max-sessions <COUNT>", Some("10000")),
        // The library's default, whatever it is.
        ("--max-streams-per-session <COUNT>", None),
        ("--event-store-bytes <BYTES>", Some("67108864")),
        ("--max-message-size <BYTES>", Some("8388608")),
    ] {
        // The flag's paragraph: its line, up to the next flag's.
        let paragraph: Vec<&str> = help
            .lines()
            .skip_while(|line| !line.contains(flag))
            .enumerate()
            .take_while(|(i, line)| *i == 0 || !line.trim_start().starts_with('-'))
            .map(|(_, line)| line)
            .collect();
        assert!(!paragraph.is_empty(), "{flag} missing from:\n{help}");
        let shown = paragraph.iter().find_map(|line| {
            let (_, rest) = line.split_once("[default: ")?;
            rest.split_once(']').map(|(value, _)| value)
        });
        match (shown, default) {
            (Some(shown), Some(default)) => assert_eq!(shown, default, "{flag}"),
            (Some(_), None) => {}
            (None, _) => panic!("{flag} shows no default:\n{}", paragraph.join("\n")),
        }
    }
}

#[test]
fn serve_limits_that_make_no_sense_are_one_line_errors() {
    for args in [
        ["--session-idle-timeout", "1e30"],
        ["--session-idle-timeout", "-5m"],
        ["--session-idle-timeout", "NaN"],
        ["--max-sessions", "0"],
        ["--max-streams-per-session", "many"],
        ["--event-store-bytes", "0"],
    ] {
        let mut all = vec!["serve", "--bind", "127.0.0.1:0"];
        all.extend(args);
        let output = tidewire(&all);
        let err = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {err}");
        assert!(output.stdout.is_empty(), "{args:?}: nothing is served");
        assert_eq!(
            err.lines().count(),
            1,
            "{args:?}: one line expected:\n{err}"
        );
        assert!(
            err.starts_with("tidewire: ") && err.contains(args[0]),
            "{args:?}: {err}"
        );
    }
    // The limits are for HTTP: with --stdio they are refused.
    let output = tidewire(&["serve", "--stdio", "--max-sessions", "3"]);
    assert_eq!(output.status.code(), Some(2));
}
