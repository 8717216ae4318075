//! `tidewire call` in a real pseudo-terminal, as a person meets it: the progress bar moves with
//! the server's messages, Ctrl-C cancels the call, and the program exits 130 with
//! "cancelled after N/M". Against the demo server over stdio and HTTP, and against the Python
//! SDK's peer server when it is installed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use expectrl::process::unix::WaitStatus;
use expectrl::{Expect, Session};
use support::{BIN, HttpServer, crawl_args, stdio_server};
use tidewire_tests::external::python_peers;

/// How long any one expected output may take to appear.
const STEP: Duration = Duration::from_secs(20);

/// Starts `command` in a pseudo-terminal wide enough for the bar and the server's message.
fn terminal(command: Command) -> expectrl::session::OsSession {
    let mut session = Session::spawn(command).expect("spawn in a pseudo-terminal");
    session
        .get_process_mut()
        .set_window_size(200, 40)
        .expect("set the terminal size");
    session.set_expect_timeout(Some(STEP));
    session
}

/// Runs `tidewire ARGS…` in a pseudo-terminal, waits for the bar to reach 2 of 10 and show the
/// server's message, presses Ctrl-C, and checks the cancellation and exit status 130.
fn ctrl_c_cancels(args: &[String]) {
    let mut command = Command::new(BIN);
    command.args(args);
    let mut session = terminal(command);

    // A bar with position, total and ETA, and the server's message beside it.
    session
        .expect("(2/10)")
        .unwrap_or_else(|e| panic!("no progress message for URL 2: {e}"));
    session
        .expect(" ETA ")
        .unwrap_or_else(|e| panic!("no bar with an ETA: {e}"));

    let pressed = Instant::now();
    session.send("\x03").expect("send Ctrl-C");
    let found = session
        .expect(expectrl::Regex(r"cancelled after (\d+)/10"))
        .unwrap_or_else(|e| panic!("no cancellation message: {e}"));
    let position: u32 = String::from_utf8_lossy(found.get(1).unwrap())
        .parse()
        .unwrap();
    assert!(
        (2..=10).contains(&position),
        "cancelled after {position}/10"
    );

    let status = session.get_process().wait().expect("wait for tidewire");
    assert!(
        matches!(status, WaitStatus::Exited(_, 130)),
        "exit status {status:?} instead of 130"
    );
    let took = pressed.elapsed();
    // The wait for the server is brief: well under its five-second limit.
    assert!(
        took < Duration::from_secs(5),
        "took {took:?} to exit after Ctrl-C"
    );
    println!("MEASURE Ctrl-C to exit: {} ms", took.as_millis());
}

fn call_crawl_over(target: Vec<String>) -> Vec<String> {
    let mut args = vec!["call".to_owned()];
    args.extend(target);
    args.extend(["crawl".to_owned(), crawl_args(10, 300)]);
    args
}

#[test]
fn ctrl_c_cancels_a_call_over_stdio() {
    ctrl_c_cancels(&call_crawl_over(stdio_server()));
}

#[test]
fn ctrl_c_cancels_a_call_over_streamable_http() {
    let server = HttpServer::start();
    ctrl_c_cancels(&call_crawl_over(vec![server.url.clone()]));
}

#[test]
fn ctrl_c_cancels_a_call_over_websocket() {
    let server = HttpServer::start();
    ctrl_c_cancels(&call_crawl_over(vec![server.ws_url()]));
}

#[test]
fn ctrl_c_cancels_a_call_to_the_python_peer_server() {
    let Some(peers) = python_peers() else { return };
    ctrl_c_cancels(&call_crawl_over(vec![
        "--".to_owned(),
        peers.python.display().to_string(),
        peers.server_script().display().to_string(),
        "stdio".to_owned(),
    ]));
}

#[test]
fn a_second_ctrl_c_exits_at_once() {
    // A server that outlives its stdin by ten seconds: the wait after the first Ctrl-C would
    // last its full two seconds.
    let script = format!("'{BIN}' serve --stdio; sleep 10");
    let mut command = Command::new(BIN);
    command.args([
        "call",
        "--",
        "sh",
        "-c",
        &script,
        "crawl",
        &crawl_args(10, 300),
    ]);
    let mut session = terminal(command);
    session
        .expect("(2/10)")
        .unwrap_or_else(|e| panic!("no progress message for URL 2: {e}"));
    session.send("\x03").expect("send Ctrl-C");
    session
        .expect("cancelled at")
        .unwrap_or_else(|e| panic!("the bar did not show the cancel: {e}"));
    let pressed = Instant::now();
    session.send("\x03").expect("send the second Ctrl-C");
    session
        .expect("interrupted again")
        .unwrap_or_else(|e| panic!("no word about the second Ctrl-C: {e}"));
    let status = session.get_process().wait().expect("wait for tidewire");
    assert!(matches!(status, WaitStatus::Exited(_, 130)), "{status:?}");
    let took = pressed.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "took {took:?} after the second Ctrl-C"
    );
}

#[test]
fn ctrl_c_while_connecting_exits_130() {
    // A "server" that never answers the handshake; it says when it has started.
    let mut command = Command::new(BIN);
    command.args([
        "call",
        "--show-stderr",
        "--",
        "sh",
        "-c",
        "echo the server started >&2; exec sleep 60",
        "echo",
    ]);
    let mut session = terminal(command);
    session
        .expect("the server started")
        .unwrap_or_else(|e| panic!("the server did not start: {e}"));
    session.send("\x03").expect("send Ctrl-C");
    session
        .expect("tidewire: cancelled while connecting")
        .unwrap_or_else(|e| panic!("no word about the cancel: {e}"));
    let status = session.get_process().wait().expect("wait for tidewire");
    assert!(matches!(status, WaitStatus::Exited(_, 130)), "{status:?}");
}

#[test]
fn the_demo_shows_a_bar_per_transport_and_era() {
    let mut command = Command::new(BIN);
    command.args(["demo", "--delay-ms", "400"]);
    let mut session = terminal(command);
    for transport in [
        "stdio (session)",
        "stdio (2026-07-28)",
        "Streamable HTTP (session)",
        "Streamable HTTP (2026-07-28)",
        "legacy HTTP+SSE (session)",
        "WebSocket (session)",
        "WebSocket (2026-07-28)",
    ] {
        session
            .expect(transport)
            .unwrap_or_else(|e| panic!("no bar for {transport}: {e}"));
        session
            .expect("] 3/10 cancelled after 3/10; the server stopped after URL 4/10 (cooperative")
            .unwrap_or_else(|e| panic!("no finished bar for {transport}: {e}"));
    }
    session
        .expect("Every transport in this build behaved")
        .unwrap_or_else(|e| panic!("no verdict: {e}"));
    let status = session.get_process().wait().expect("wait for tidewire");
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
}
