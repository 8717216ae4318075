//! Tasks outlive the connection that started them: a 10-URL crawl started as a task, its client
//! gone after three progress reports, and a new client on a new connection that watches it to
//! its end or cancels it — over Streamable HTTP in both eras and over WebSocket.

use futures::StreamExt;
use serde_json::json;
use tidewire_client::{Client, ClientBuilder, Era, TaskHandle, TaskStart};
use tidewire_core::schema::{Implementation, TaskStatus};
use tidewire_http::client::{StatelessHttpConnector, StreamableHttpConnector};
use tidewire_tests::LIMIT;
use tidewire_tests::harness::{HttpMode, start_http, start_ws};
use tidewire_ws::client::WebSocketConnector;

/// How a client reaches the server.
#[derive(Debug, Clone, Copy)]
enum Wire {
    /// Streamable HTTP, the stateless revision (2026-07-28: the tasks extension).
    HttpModern,
    /// Streamable HTTP, a session (2025-11-25: `params.task`).
    HttpSession,
    /// WebSocket, the stateless revision.
    WebSocket,
}

fn builder(era: Era) -> ClientBuilder {
    Client::builder(Implementation::new("task-test", "1.0.0")).era(era)
}

async fn connect(wire: Wire, url: &str) -> Client {
    match wire {
        Wire::HttpModern => builder(Era::Modern)
            .connect(
                StatelessHttpConnector::new(url)
                    .connect()
                    .await
                    .expect("transport"),
            )
            .await
            .expect("connect"),
        Wire::HttpSession => builder(Era::Legacy)
            .connect(
                StreamableHttpConnector::new(url)
                    .connect()
                    .await
                    .expect("transport"),
            )
            .await
            .expect("connect"),
        Wire::WebSocket => builder(Era::Modern)
            .connect(
                WebSocketConnector::new(url)
                    .connect()
                    .await
                    .expect("transport"),
            )
            .await
            .expect("connect"),
    }
}

/// A client of the suite server in this process, speaking `era`.
async fn in_memory(era: Era) -> Client {
    let server = tidewire_tests::suite_server();
    let (a, b) = tidewire_core::transport::memory::duplex();
    let (_peer, driver) = server.serve(a);
    tokio::spawn(driver);
    builder(era).connect(b).await.expect("connect")
}

async fn url_of(wire: Wire) -> String {
    match wire {
        Wire::HttpModern | Wire::HttpSession => start_http(HttpMode::Sse).await.0,
        Wire::WebSocket => start_ws(tidewire_ws::server::WsConfig::default()).await.0,
    }
}

/// Starts a 10-URL crawl as a task with the first client, waits for three of its progress
/// reports, closes that client, and hands the task's id to a second client.
async fn crawl_handed_over(wire: Wire) -> (Client, TaskHandle) {
    let url = url_of(wire).await;
    let first = connect(wire, &url).await;
    let urls: Vec<String> = (0..10)
        .map(|i| format!("https://example.com/{i}"))
        .collect();
    let start = first
        .call_tool("crawl", json!({ "urls": urls, "delay_ms": 150 }))
        .as_task()
        .await
        .expect("the call is answered");
    let task = start.task().expect("the crawl runs as a task");
    let mut messages = Vec::new();
    let mut numbers = 0;
    let mut watch = Box::pin(task.watch());
    while messages.len() < 3 {
        let details = watch
            .next()
            .await
            .expect("the task goes on")
            .expect("a state");
        // Its progress comes as numbers too (a tidewire server puts them in `_meta`).
        if let Some(progress) = details.progress() {
            assert!(
                progress.progress >= 1.0 && progress.total == Some(10.0),
                "{progress:?}"
            );
            numbers += 1;
        }
        let state = details.task;
        assert!(!state.status.is_terminal(), "ended early: {state:?}");
        if let Some(message) = state.status_message
            && !messages.contains(&message)
        {
            messages.push(message);
        }
    }
    drop(watch);
    assert!(
        numbers >= 2,
        "{wire:?}: the progress numbers came {numbers} times"
    );
    let id = task.id().to_owned();
    first.close().await;
    let second = connect(wire, &url).await;
    let again = second.task(id);
    (second, again)
}

async fn outlives_its_client(wire: Wire) {
    tokio::time::timeout(LIMIT, async {
        let (_second, task) = crawl_handed_over(wire).await;
        let states: Vec<_> = task.watch().collect().await;
        let last = &states
            .last()
            .expect("a state")
            .as_ref()
            .expect("watched")
            .task;
        assert_eq!(last.status, TaskStatus::Completed, "{wire:?}: {last:?}");
        let result = task.result().await.expect("the result");
        let text = result.first_text().expect("text").to_owned();
        assert!(text.contains("10"), "{wire:?}: {text}");
    })
    .await
    .expect("in time");
}

async fn cancelled_by_a_new_client(wire: Wire) {
    tokio::time::timeout(LIMIT, async {
        let (_second, task) = crawl_handed_over(wire).await;
        task.cancel().await.expect("cancel");
        let state = task.state().await.expect("state");
        assert_eq!(state.status, TaskStatus::Cancelled, "{wire:?}");
        let outcome = task.result().await;
        assert!(
            outcome.as_ref().is_err_and(|e| e.session().is_some()),
            "{wire:?}: {outcome:?}"
        );
        // Cancelling an ended task changes nothing and is no error.
        task.cancel().await.expect("cancel again");
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_crawl_task_outlives_its_client_on_streamable_http_2026() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        outlives_its_client(Wire::HttpModern).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_crawl_task_outlives_its_client_on_streamable_http_sessions() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        outlives_its_client(Wire::HttpSession).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_crawl_task_outlives_its_client_on_websocket() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        outlives_its_client(Wire::WebSocket).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_new_client_cancels_a_task_on_streamable_http_2026() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        cancelled_by_a_new_client(Wire::HttpModern).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_new_client_cancels_a_task_on_streamable_http_sessions() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        cancelled_by_a_new_client(Wire::HttpSession).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_new_client_cancels_a_task_on_websocket() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        cancelled_by_a_new_client(Wire::WebSocket).await;
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// A task outlives its request on the transports where a connection is one client's (in
/// memory, legacy HTTP+SSE): started, then followed to its result on the same connection.
async fn outlives_its_request(client: Client) {
    let task = client
        .call_tool("crawl", json!({ "urls": ["a", "b", "c"], "delay_ms": 20 }))
        .as_task()
        .await
        .expect("started")
        .task()
        .expect("a task");
    let result = task.result().await.expect("completed");
    assert!(
        result.first_text().is_some_and(|t| t.contains('3')),
        "{result:?}"
    );
    assert_eq!(
        task.state().await.expect("state").status,
        TaskStatus::Completed
    );
}

#[tokio::test]
async fn a_task_outlives_its_request_in_memory_in_both_eras() {
    tokio::time::timeout(LIMIT, async {
        for era in [Era::Modern, Era::Legacy] {
            outlives_its_request(in_memory(era).await).await;
        }
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_task_outlives_its_request_over_stdio_in_both_eras() {
    tokio::time::timeout(LIMIT, async {
        for era in [Era::Modern, Era::Legacy] {
            let child = tidewire_stdio::client::StdioConnector::command(env!(
                "CARGO_BIN_EXE_tidewire-demo-stdio"
            ))
            .spawn()
            .expect("spawn the demo server");
            outlives_its_request(builder(era).connect(child).await.expect("connect")).await;
        }
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_task_outlives_its_request_on_legacy_sse() {
    tokio::time::timeout(LIMIT, async {
        let (url, _server, _sse) =
            tidewire_tests::harness::start_sse(tidewire_sse::server::SseConfig::default()).await;
        let transport = tidewire_sse::client::LegacySseConnector::new(url)
            .connect()
            .await
            .expect("the stream");
        outlives_its_request(
            builder(Era::Legacy)
                .connect(transport)
                .await
                .expect("connect"),
        )
        .await;
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_task_asks_and_the_watcher_answers_with_its_handlers() {
    tokio::time::timeout(LIMIT, async {
        let url = url_of(Wire::HttpModern).await;
        let client = builder(Era::Modern)
            .elicitation_handler(
                |_: tidewire_core::schema::ElicitParams,
                 _: tidewire_core::session::RequestContext| async move {
                    Ok(tidewire_core::schema::ElicitResult::accept(
                        [("confirm".to_owned(), true.into())].into_iter().collect(),
                    ))
                },
            )
            .connect(
                StatelessHttpConnector::new(&url)
                    .connect()
                    .await
                    .expect("transport"),
            )
            .await
            .expect("connect");
        let start = client
            .call_tool("confirm_delete", json!({ "filename": "notes.txt" }))
            .as_task()
            .await
            .expect("started");
        let TaskStart::Task(task) = start else {
            panic!("confirm_delete runs as a task when asked");
        };
        let result = task.result().await.expect("completed");
        assert_eq!(result.first_text(), Some("notes.txt deleted"));
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn session_era_tasks_are_listed_and_a_foreign_cursor_is_refused() {
    use tidewire_core::schema::{ListTasks, PaginatedParams};
    tokio::time::timeout(LIMIT, async {
        let client = in_memory(Era::Legacy).await;
        let mut ids = Vec::new();
        for _ in 0..2 {
            let task = client
                .call_tool("crawl", json!({ "urls": ["a"], "delay_ms": 1 }))
                .as_task()
                .await
                .expect("started")
                .task()
                .expect("a task");
            task.result().await.expect("completed");
            ids.push(task.id().to_owned());
        }
        let listed = client
            .request::<ListTasks>(PaginatedParams::default())
            .await
            .expect("tasks/list");
        for id in &ids {
            assert!(
                listed.tasks.iter().any(|t| &t.task_id == id),
                "{id} not listed"
            );
        }
        let foreign = PaginatedParams {
            cursor: Some("not-a-task-of-yours".into()),
            ..PaginatedParams::default()
        };
        let refused = client.request::<ListTasks>(foreign).await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.remote().is_some_and(|r| r.code == -32602)),
            "{refused:?}"
        );
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_listen_naming_a_task_hears_its_changes_to_the_end() {
    use tidewire_core::schema::{ServerNotification, SubscriptionFilter};
    tokio::time::timeout(LIMIT, async {
        let url = url_of(Wire::HttpModern).await;
        let client = connect(Wire::HttpModern, &url).await;
        let task = client
            .call_tool("crawl", json!({ "urls": ["a", "b", "c"], "delay_ms": 50 }))
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        let mut changes = client
            .listen(SubscriptionFilter {
                task_ids: Some(vec![task.id().to_owned()]),
                ..SubscriptionFilter::default()
            })
            .await
            .expect("listen");
        assert_eq!(
            changes.honoured().task_ids.as_deref(),
            Some(&[task.id().to_owned()][..])
        );
        loop {
            let note = changes.next().await.expect("a change").expect("no lag");
            let ServerNotification::Other { method, params } = note else {
                continue;
            };
            assert_eq!(method, "notifications/tasks");
            let params = params.expect("params");
            assert_eq!(params["taskId"], task.id());
            if params["status"] == "completed" {
                assert!(params["result"]["content"].is_array(), "{params}");
                break;
            }
        }
        changes.end().await.expect("end");
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_listen_naming_tasks_without_the_extension_is_refused() {
    use tidewire_core::schema::{ListenParams, SubscriptionFilter};
    tokio::time::timeout(LIMIT, async {
        let url = url_of(Wire::HttpModern).await;
        let client = connect(Wire::HttpModern, &url).await;
        let params = ListenParams {
            notifications: SubscriptionFilter {
                task_ids: Some(vec!["t".into()]),
                ..SubscriptionFilter::default()
            },
            meta: None,
        };
        let refused = client
            .request_raw(
                "subscriptions/listen",
                serde_json::to_value(params).expect("params"),
            )
            .await;
        assert!(
            refused
                .as_ref()
                .is_err_and(|e| e.remote().is_some_and(|r| r.code == -32021)),
            "{refused:?}"
        );
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_session_hears_the_status_of_the_tasks_it_started() {
    use tidewire_core::schema::ServerNotification;
    tokio::time::timeout(LIMIT, async {
        let client = in_memory(Era::Legacy).await;
        let mut notes = client.notifications();
        let task = client
            .call_tool("crawl", json!({ "urls": ["a", "b"], "delay_ms": 10 }))
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        loop {
            let note = notes.next().await.expect("a notification").expect("no lag");
            if let ServerNotification::TaskStatus(status) = note {
                assert_eq!(status.task.task_id, task.id());
                if status.task.status == TaskStatus::Completed {
                    break;
                }
            }
        }
    })
    .await
    .expect("in time");
}

/// On the stateless revision a watch hears the task's changes pushed: with a poll interval of
/// ten minutes, polling could not see a 5-URL crawl through within the time limit, and every
/// progress report (with its numbers, which the push carries in `_meta`) still arrives.
#[tokio::test]
async fn a_modern_watch_is_pushed_its_changes_not_polled() {
    tokio::time::timeout(LIMIT, async {
        let server = tidewire_demo::demo_builder()
            .task_poll_interval(std::time::Duration::from_secs(600))
            .build();
        let (a, b) = tidewire_core::transport::memory::duplex();
        let (_peer, driver) = server.serve(a);
        tokio::spawn(driver);
        let client = builder(Era::Modern).connect(b).await.expect("connect");
        let urls: Vec<String> = (0..5).map(|i| format!("https://example.com/{i}")).collect();
        let task = client
            .call_tool("crawl", json!({ "urls": urls, "delay_ms": 20 }))
            .as_task()
            .await
            .expect("the call is answered")
            .task()
            .expect("a task");
        let states: Vec<_> = task.watch().collect().await;
        let states: Vec<_> = states.into_iter().map(|s| s.expect("watched")).collect();
        let last = states.last().expect("a state");
        assert_eq!(last.task.status, TaskStatus::Completed, "{last:?}");
        assert!(last.result.is_some(), "the push carries the result");
        let with_numbers = states.iter().filter(|s| s.progress().is_some()).count();
        assert!(
            states.len() >= 3 && with_numbers >= 2,
            "{} states, {with_numbers} with progress numbers",
            states.len()
        );
        client.close().await;
    })
    .await
    .expect("pushed changes end the watch well within the limit");
}

/// `Server::task_counts`: the tasks running in this process by status, and the ends this
/// process wrote by status (what `tidewire serve` reports as `tidewire.server.tasks` and
/// `tidewire.server.tasks.ended`).
#[tokio::test]
async fn the_server_counts_its_tasks_by_status() {
    use std::sync::Arc;

    use tidewire_core::schema::{ElicitParams, ElicitResult};
    use tidewire_core::session::RequestContext;
    use tidewire_server::tasks::TaskCounts;

    tokio::time::timeout(LIMIT, async {
        let server = tidewire_tests::suite_server();
        let (a, b) = tidewire_core::transport::memory::duplex();
        let (_peer, driver) = server.serve(a);
        tokio::spawn(driver);
        // The client's answer waits until the test has looked at the counts.
        let (asked, mut questions) = tokio::sync::mpsc::channel::<()>(1);
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let client = builder(Era::Modern)
            .elicitation_handler(move |_: ElicitParams, _: RequestContext| {
                let (asked, held) = (asked.clone(), held.clone());
                async move {
                    let _ = asked.send(()).await;
                    held.notified().await;
                    Ok(ElicitResult::accept(
                        [("confirm".to_owned(), true.into())].into_iter().collect(),
                    ))
                }
            })
            .connect(b)
            .await
            .expect("connect");
        assert_eq!(server.task_counts(), TaskCounts::default());

        // A crawl, running, then cancelled.
        let crawl = client
            .call_tool(
                "crawl",
                json!({ "urls": ["a", "b", "c"], "delay_ms": 10_000 }),
            )
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        let counts = server.task_counts();
        assert_eq!(
            (counts.working, counts.input_required),
            (1, 0),
            "{counts:?}"
        );
        crawl.cancel().await.expect("cancel");
        assert_eq!(server.task_counts().cancelled, 1);

        // A task that asks: input_required while the client has not answered, then completed.
        let asking = client
            .call_tool("confirm_delete", json!({ "filename": "notes.txt" }))
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        let result = tokio::spawn(async move { asking.result().await });
        questions.recv().await.expect("the task asked");
        assert_eq!(server.task_counts().input_required, 1);
        release.notify_one();
        let result = result.await.expect("joined").expect("completed");
        assert_eq!(result.first_text(), Some("notes.txt deleted"));
        let counts = server.task_counts();
        assert_eq!(
            (counts.completed, counts.failed, counts.cancelled),
            (1, 0, 1),
            "{counts:?}"
        );
    })
    .await
    .expect("in time");
}
