//! `tidewire call --task` and `tidewire task get|watch|cancel`, against `tidewire serve`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{BIN, HttpServer, LIMIT, crawl_args};

fn tidewire(args: &[&str]) -> std::process::Output {
    assert_cmd::Command::new(BIN)
        .args(args)
        .timeout(LIMIT)
        .output()
        .expect("run tidewire")
}

/// The task id `call --task` printed on stderr.
fn task_id(stderr: &str) -> String {
    let at = stderr
        .find("runs as task ")
        .expect("the task's id is printed")
        + 13;
    stderr[at..at + 32].to_owned()
}

#[test]
fn a_task_started_by_call_is_picked_up_by_a_later_process() {
    let server = HttpServer::start();
    let crawl = crawl_args(3, 50);
    let started = tidewire(&["call", "--task", &server.url, "crawl", &crawl]);
    let stderr = String::from_utf8_lossy(&started.stderr);
    assert!(started.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&started.stdout).trim(),
        "Crawled 3 URLs"
    );
    let id = task_id(&stderr);

    let got = tidewire(&["task", "get", &server.url, &id]);
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(got.status.success(), "{text}");
    assert!(text.contains("status   completed"), "{text}");

    let watched = tidewire(&["task", "watch", &server.url, &id]);
    assert!(watched.status.success());
    assert_eq!(
        String::from_utf8_lossy(&watched.stdout).trim(),
        "Crawled 3 URLs"
    );

    let json = tidewire(&["task", "get", "--json", &server.url, &id]);
    let state: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(state["taskId"], id.as_str());
    assert_eq!(state["status"], "completed");
}

#[test]
fn an_unknown_task_is_a_clear_error() {
    let server = HttpServer::start();
    let got = tidewire(&[
        "task",
        "cancel",
        &server.url,
        "0123456789abcdef0123456789abcdef",
    ]);
    assert!(!got.status.success());
    let stderr = String::from_utf8_lossy(&got.stderr);
    assert!(stderr.contains("unknown task"), "{stderr}");
}
