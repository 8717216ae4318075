//! The child-process client against small shell scripts standing in for servers.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;
use serde_json::json;
use tidewire_core::jsonrpc::{Message, Notification, Request};
use tidewire_core::transport::{
    Codec, Envelope, Transport, TransportError, TransportReceiver, TransportSender,
};
use tidewire_stdio::client::{
    ChildHandle, ChildReceiver, ChildSender, ServerExited, ShutdownTimeouts, SpawnError,
    StderrMode, StdioConnector,
};
use tokio::sync::mpsc;

/// Bounds every test: a hang is a failure, never a stuck CI job.
async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the test timed out")
}

/// Timeouts short enough to keep the escalation tests fast.
const QUICK: ShutdownTimeouts =
    ShutdownTimeouts::new(Duration::from_millis(100), Duration::from_millis(200));

fn sh(script: &str) -> StdioConnector {
    StdioConnector::command("sh")
        .args(["-c", script])
        .stderr(StderrMode::Null)
}

fn spawn(script: &str) -> (ChildSender, ChildReceiver, ChildHandle) {
    sh(script).spawn().expect("spawn sh").split_with_handle()
}

/// A shell snippet printing a notification that carries the pid of the last background job.
const PRINT_BG_PID: &str = r#"printf '{"jsonrpc":"2.0","method":"bg","params":{"pid":%d}}\n' "$!""#;

async fn next_message(rx: &mut ChildReceiver) -> Message {
    rx.recv()
        .await
        .expect("a message, not the end")
        .expect("a message, not an error")
        .message
}

async fn background_pid(rx: &mut ChildReceiver) -> Pid {
    let Message::Notification(n) = next_message(rx).await else {
        panic!("expected the bg notification");
    };
    assert_eq!(n.method, "bg");
    let pid = n.params.unwrap()["pid"].as_i64().unwrap();
    Pid::from_raw(i32::try_from(pid).unwrap())
}

/// Alive means signalable and not a zombie (a zombie is dead but not yet reaped by its parent,
/// which may be a PID 1 that never reaps).
fn is_alive(pid: Pid) -> bool {
    match kill(pid, None) {
        Err(Errno::ESRCH) => false,
        _ => match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat) => {
                let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
                !matches!(state.and_then(|s| s.chars().next()), Some('Z' | 'X') | None)
            }
            Err(_) => !cfg!(target_os = "linux"),
        },
    }
}

/// Waits until `pid` is gone. Death after `SIGKILL` is asynchronous but immediate, so this only
/// spins for a moment; the caller's timeout bounds it.
async fn until_dead(pid: Pid) {
    while is_alive(pid) {
        tokio::task::yield_now().await;
    }
}

fn exited(error: &TransportError) -> &ServerExited {
    std::error::Error::source(error)
        .and_then(|s| s.downcast_ref::<ServerExited>())
        .unwrap_or_else(|| panic!("expected a ServerExited source, got {error:?}"))
}

#[test]
fn child_transport_is_a_transport() {
    fn assert_transport<T: Transport>() {}
    fn assert_clone_send_sync<T: Clone + Send + Sync>() {}
    assert_transport::<tidewire_stdio::client::ChildTransport>();
    assert_clone_send_sync::<ChildHandle>();
}

#[tokio::test]
async fn messages_round_trip_through_cat() {
    within(async {
        let (mut tx, mut rx, handle) = spawn("exec cat");
        let request = Request::new(1, "tools/list", Some(json!({"cursor": "a\nb"})));
        let note = Notification::new("notifications/initialized", None);
        tx.send(Envelope::new(request.clone())).await.unwrap();
        tx.send(Envelope::new(note.clone())).await.unwrap();
        assert_eq!(next_message(&mut rx).await, Message::Request(request));
        assert_eq!(next_message(&mut rx).await, Message::Notification(note));
        assert!(!handle.has_exited());

        // Closing the sender closes stdin: cat exits cleanly and the stream ends without error.
        tx.close().await.unwrap();
        assert!(rx.recv().await.is_none());
        assert!(rx.recv().await.is_none());
        let status = handle.wait().await.unwrap();
        assert!(status.success());
        assert_eq!(handle.exit_status(), Some(status));

        // Sending after the end fails as closed.
        let err = tx
            .send(Envelope::new(Notification::new("late", None)))
            .await
            .unwrap_err();
        assert!(err.is_closed(), "{err:?}");
    })
    .await;
}

#[tokio::test]
async fn dropping_the_sender_closes_stdin() {
    within(async {
        let (tx, mut rx, handle) = spawn("exec cat");
        drop(tx);
        assert!(rx.recv().await.is_none());
        assert!(handle.wait().await.unwrap().success());
    })
    .await;
}

#[tokio::test]
async fn a_crash_ends_the_stream_with_the_exit_status() {
    within(async {
        let (mut tx, mut rx, handle) = spawn(r#"read line; printf '%s\n' "$line"; exit 3"#);
        let request = Request::new(7, "ping", None);
        tx.send(Envelope::new(request.clone())).await.unwrap();
        // What the server wrote before dying still arrives.
        assert_eq!(next_message(&mut rx).await, Message::Request(request));
        let err = rx.recv().await.unwrap().unwrap_err();
        assert!(!err.is_recoverable());
        assert_eq!(exited(&err).status.code(), Some(3));
        let text = format!("{err}: {}", std::error::Error::source(&err).unwrap());
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(rx.recv().await.is_none());
        assert_eq!(handle.wait().await.unwrap().code(), Some(3));
    })
    .await;
}

#[tokio::test]
async fn a_clean_exit_ends_the_stream_without_error() {
    within(async {
        let (_tx, mut rx, handle) = spawn("exit 0");
        assert!(rx.recv().await.is_none());
        assert!(handle.wait().await.unwrap().success());
    })
    .await;
}

#[tokio::test]
async fn bad_lines_are_recoverable() {
    within(async {
        let (_tx, mut rx, _handle) =
            spawn(r#"echo 'not json'; echo '{"jsonrpc":"2.0","method":"ok"}'; exec cat"#);
        let err = rx.recv().await.unwrap().unwrap_err();
        assert!(err.is_malformed(), "{err:?}");
        assert!(err.error_response().is_some());
        assert_eq!(next_message(&mut rx).await.method(), Some("ok"));
    })
    .await;
}

#[tokio::test]
async fn the_server_leaving_a_grandchild_on_stdout_still_ends_the_stream() {
    within(async {
        // The grandchild keeps stdout open; the stream must end anyway, and the grandchild die.
        let script = format!("sleep 30 & {PRINT_BG_PID}; exit 4");
        let (_tx, mut rx, handle) = spawn(&script);
        let grandchild = background_pid(&mut rx).await;
        let err = rx.recv().await.unwrap().unwrap_err();
        assert_eq!(exited(&err).status.code(), Some(4));
        assert!(rx.recv().await.is_none());
        assert_eq!(handle.wait().await.unwrap().code(), Some(4));
        until_dead(grandchild).await;
    })
    .await;
}

#[tokio::test]
async fn shutdown_closing_stdin_is_enough_for_a_polite_server() {
    within(async {
        let transport = sh("exec cat").spawn().unwrap();
        let handle = transport.handle();
        let (_tx, mut rx) = transport.split();
        let started = Instant::now();
        let status = handle.shutdown().await.unwrap();
        assert!(status.success());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(rx.recv().await.is_none());
        // Again, and from a clone: returns the same status at once.
        assert_eq!(handle.clone().shutdown().await.unwrap(), status);
    })
    .await;
}

#[tokio::test]
async fn shutdown_escalates_to_sigterm() {
    within(async {
        // Does not read stdin, so closing it changes nothing; SIGTERM ends it.
        let script = format!("sleep 30 & {PRINT_BG_PID}; wait");
        let (_tx, mut rx, handle) = spawn(&script);
        let grandchild = background_pid(&mut rx).await;
        let status = handle.shutdown_with(QUICK).await.unwrap();
        assert_eq!(status.signal(), Some(15), "{status}");
        // A requested shutdown ends the stream quietly.
        assert!(rx.recv().await.is_none());
        // The grandchild shared the process group, so it got the signal too.
        until_dead(grandchild).await;
    })
    .await;
}

#[tokio::test]
async fn shutdown_escalates_to_sigkill_when_sigterm_is_ignored() {
    within(async {
        // `trap '' TERM` is inherited by the background sleep as well.
        let script = format!("trap '' TERM; sleep 30 & {PRINT_BG_PID}; wait");
        let transport = sh(&script).shutdown_timeouts(QUICK).spawn().unwrap();
        let (_tx, mut rx, handle) = transport.split_with_handle();
        let grandchild = background_pid(&mut rx).await;
        let started = Instant::now();
        let status = handle.shutdown().await.unwrap();
        assert_eq!(status.signal(), Some(9), "{status}");
        assert!(started.elapsed() >= Duration::from_millis(300));
        until_dead(grandchild).await;
    })
    .await;
}

#[tokio::test]
async fn shutdown_unblocks_a_send_stuck_on_a_full_pipe() {
    within(async {
        // Never reads stdin: the pipe fills and `send` waits.
        let (mut tx, mut rx, handle) =
            spawn(r#"echo '{"jsonrpc":"2.0","method":"ready"}'; trap '' TERM; exec sleep 30"#);
        assert_eq!(next_message(&mut rx).await.method(), Some("ready"));
        let (counter, mut sent) = tokio::sync::watch::channel(0_usize);
        let writer = tokio::spawn(async move {
            let big = json!({"data": "x".repeat(16 * 1024)});
            loop {
                let note = Notification::new("filler", Some(big.clone()));
                if let Err(e) = tx.send(Envelope::new(note)).await {
                    return e;
                }
                counter.send_modify(|n| *n += 1);
            }
        });
        // A pipe holds 64 KiB on Linux: after three of these messages the next send stalls.
        sent.wait_for(|n| *n >= 3).await.expect("the writer runs");
        handle.close_stdin();
        let err = writer.await.unwrap();
        assert!(err.is_closed(), "{err:?}");
        let status = handle.shutdown_with(QUICK).await.unwrap();
        assert_eq!(status.signal(), Some(9));
    })
    .await;
}

#[tokio::test]
async fn dropping_everything_kills_the_group() {
    within(async {
        let script = format!("sleep 30 & {PRINT_BG_PID}; wait");
        let (tx, mut rx, handle) = spawn(&script);
        let grandchild = background_pid(&mut rx).await;
        let leader = Pid::from_raw(i32::try_from(handle.id()).unwrap());
        drop((tx, rx, handle));
        until_dead(grandchild).await;
        until_dead(leader).await;
    })
    .await;
}

#[tokio::test]
async fn kill_on_drop_can_be_turned_off() {
    within(async {
        let script = format!("sleep 30 & {PRINT_BG_PID}; wait");
        let (tx, mut rx, handle) = sh(&script)
            .kill_on_drop(false)
            .spawn()
            .unwrap()
            .split_with_handle();
        let grandchild = background_pid(&mut rx).await;
        let keep = handle.clone();
        drop((tx, rx, handle));
        assert!(is_alive(grandchild));
        assert!(!keep.has_exited());
        // Clean up explicitly.
        keep.kill().unwrap();
        assert_eq!(keep.wait().await.unwrap().signal(), Some(9));
        until_dead(grandchild).await;
    })
    .await;
}

#[tokio::test]
async fn stderr_lines_reach_a_channel() {
    within(async {
        let (lines_tx, mut lines) = mpsc::channel(16);
        let transport = StdioConnector::command("sh")
            .args([
                "-c",
                r#"echo one >&2; printf 'two\r\n' >&2; printf 'caf\303\251 ' >&2; printf 'partial' >&2"#,
            ])
            .stderr(StderrMode::channel(lines_tx))
            .spawn()
            .unwrap();
        let handle = transport.handle();
        let mut got = Vec::new();
        while let Some(line) = lines.recv().await {
            got.push(line);
        }
        assert_eq!(got, ["one", "two", "café partial"]);
        assert!(handle.wait().await.unwrap().success());
    })
    .await;
}

#[tokio::test]
async fn stderr_lines_reach_a_callback() {
    within(async {
        let (lines_tx, mut lines) = mpsc::unbounded_channel();
        let (_tx, mut rx, _handle) = StdioConnector::command("sh")
            .args(["-c", "echo hello >&2; echo world >&2; exit 0"])
            .env("UNUSED", "1")
            .current_dir("/")
            .stderr(StderrMode::callback(move |line| {
                let _ = lines_tx.send(line);
            }))
            .spawn()
            .unwrap()
            .split_with_handle();
        assert!(rx.recv().await.is_none());
        let mut got = Vec::new();
        while let Some(line) = lines.recv().await {
            got.push(line);
        }
        assert_eq!(got, ["hello", "world"]);
    })
    .await;
}

#[tokio::test]
async fn environment_and_working_directory_are_applied() {
    within(async {
        let (_tx, mut rx, _handle) = StdioConnector::command("sh")
            .args([
                "-c",
                r#"printf '{"jsonrpc":"2.0","method":"env","params":{"v":"%s","d":"%s","gone":"%s"}}\n' "$TW_VALUE" "$(pwd)" "${TW_GONE-unset}""#,
            ])
            .env_clear()
            .envs([("TW_VALUE", "42"), ("PATH", "/usr/bin:/bin")])
            .env("TW_GONE", "x")
            .env_remove("TW_GONE")
            .current_dir("/")
            .codec(Codec::new(1024))
            .stderr(StderrMode::Null)
            .spawn()
            .unwrap()
            .split_with_handle();
        let Message::Notification(n) = next_message(&mut rx).await else {
            panic!("expected a notification");
        };
        assert_eq!(n.params, Some(json!({"v": "42", "d": "/", "gone": "unset"})));
    })
    .await;
}

#[tokio::test]
async fn the_size_limit_applies_to_what_the_server_writes() {
    within(async {
        let script = r#"printf '{"jsonrpc":"2.0","method":"big","params":{"x":"%0200d"}}\n' 0; echo '{"jsonrpc":"2.0","method":"small"}'"#;
        let (_tx, mut rx, _handle) = sh(script).codec(Codec::new(100)).spawn().unwrap().split_with_handle();
        let err = rx.recv().await.unwrap().unwrap_err();
        assert!(err.is_too_large(), "{err:?}");
        assert_eq!(next_message(&mut rx).await.method(), Some("small"));
    })
    .await;
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    within(async {
        let err = StdioConnector::command("/nonexistent/tidewire-no-such-server")
            .spawn()
            .unwrap_err();
        assert!(matches!(err, SpawnError::Spawn { .. }), "{err:?}");
        assert!(err.to_string().contains("tidewire-no-such-server"), "{err}");
        assert!(std::error::Error::source(&err).is_some());
    })
    .await;
}

#[test]
fn spawning_outside_a_runtime_is_an_error() {
    let err = StdioConnector::command("true").spawn().unwrap_err();
    assert!(matches!(err, SpawnError::NoRuntime), "{err:?}");
}

#[tokio::test]
async fn a_dying_server_fails_every_in_flight_request() {
    use tidewire_core::session::{NoHandler, Session, SessionError, SessionOptions};
    within(async {
        // Reads both requests, answers neither, and dies.
        let transport = sh("read a; read b; exit 5").spawn().unwrap();
        let handle = transport.handle();
        let peer = Session::spawn(transport, NoHandler, SessionOptions::default());
        let first = peer.request_raw("tools/call", None).send().await.unwrap();
        let second = peer.request_raw("tools/call", None).send().await.unwrap();
        for outcome in [first.await, second.await] {
            match outcome {
                Err(SessionError::Closed(reason)) => {
                    assert!(reason.contains("exit status: 5"), "{reason}");
                }
                other => panic!("expected Closed, got {other:?}"),
            }
        }
        assert_eq!(handle.wait().await.unwrap().code(), Some(5));
    })
    .await;
}
