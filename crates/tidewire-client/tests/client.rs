//! The client against a fake server: handshake, listing, typed calls, tool calls with progress,
//! timeouts and cancellation, and the notification stream.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use support::{FakeServer, Pages, Seen, builder, connect, connect_to, within};
use tidewire_client::{ClientError, Lagged};
use tidewire_core::ProtocolVersion;
use tidewire_core::schema::{
    CompleteParams, CompletionReference, LoggingLevel, ServerNotification,
};
use tidewire_core::session::SessionError;
use tidewire_core::transport::memory;

#[tokio::test]
async fn negotiates_each_handshake_revision() {
    within(async {
        for version in ProtocolVersion::HANDSHAKE {
            let (client, mut harness) =
                connect_to(FakeServer::answering(version.as_str()), builder()).await;
            let client = client.expect("the client accepts every handshake revision");
            assert_eq!(client.protocol_version(), version);
            assert_eq!(client.peer().protocol_version(), Some(version));
            assert_eq!(client.server_info().name, "fake-server");
            assert_eq!(client.instructions().as_deref(), Some("Use the tools."));
            assert!(client.server_capabilities().tools.is_some());

            // initialize came first, offering the newest handshake revision, then initialized.
            let Seen::Request { method, params } = harness.next().await else {
                panic!("the first message is a request");
            };
            assert_eq!(method, "initialize");
            assert_eq!(params["protocolVersion"], "2025-11-25");
            assert_eq!(params["clientInfo"]["name"], "test-client");
            assert_eq!(params["clientInfo"]["version"], "9.9.9");
            assert_eq!(
                harness.next().await,
                Seen::Notification {
                    method: "notifications/initialized".to_owned(),
                    params: json!({}),
                }
            );
            client.close().await;
        }
    })
    .await;
}

#[tokio::test]
async fn offers_the_configured_revision() {
    within(async {
        let (client, mut harness) =
            connect(builder().protocol_version(ProtocolVersion::V2025_03_26)).await;
        assert_eq!(client.protocol_version(), ProtocolVersion::V2025_03_26);
        let Seen::Request { params, .. } = harness.next().await else {
            panic!("initialize");
        };
        assert_eq!(params["protocolVersion"], "2025-03-26");
    })
    .await;
}

#[tokio::test]
async fn refuses_revisions_it_cannot_speak() {
    within(async {
        for answered in ["2030-01-01", "2026-07-28", "not-a-version"] {
            let (client, mut harness) =
                connect_to(FakeServer::answering(answered), builder()).await;
            let err = client.expect_err("refused");
            match &err {
                ClientError::UnsupportedVersion {
                    offered,
                    answered: a,
                } => {
                    assert_eq!(*offered, ProtocolVersion::LATEST_HANDSHAKE);
                    assert_eq!(a, answered);
                }
                other => panic!("expected UnsupportedVersion, got {other:?}"),
            }
            assert!(err.to_string().contains(answered), "{err}");
            // The client hung up without sending `initialized`.
            harness.server.closed().await;
            let mut after_initialize = Vec::new();
            while let Ok(seen) = harness.seen.try_recv() {
                after_initialize.push(seen);
            }
            assert!(
                !after_initialize.iter().any(|s| matches!(
                    s,
                    Seen::Notification { method, .. } if method == "notifications/initialized"
                )),
                "{after_initialize:?}"
            );
        }
    })
    .await;
}

#[tokio::test]
async fn a_failed_initialize_is_a_session_error() {
    within(async {
        // A raw peer that answers initialize with an error.
        let (server_end, client_end) = memory::duplex();
        struct Refuse;
        impl tidewire_core::session::Handler for Refuse {
            async fn handle_request(
                &self,
                _request: tidewire_core::jsonrpc::Request,
                _ctx: tidewire_core::session::RequestContext,
            ) -> Result<Value, tidewire_core::jsonrpc::ErrorObject> {
                Err(tidewire_core::jsonrpc::ErrorObject::invalid_params(
                    "no thanks",
                ))
            }
        }
        let server = tidewire_core::session::Session::spawn(
            server_end,
            Refuse,
            tidewire_core::session::SessionOptions::default(),
        );
        let err = builder().connect(client_end).await.expect_err("refused");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602), "{err}");
        server.closed().await;
    })
    .await;
}

#[tokio::test]
async fn capabilities_follow_the_handlers() {
    within(async {
        let (_client, mut harness) = connect(builder()).await;
        let Seen::Request { params, .. } = harness.next().await else {
            panic!("initialize");
        };
        assert_eq!(params["capabilities"], json!({}));

        let full = builder()
            .sampling_handler(
                |_p: tidewire_core::schema::CreateMessageParams,
                 _c: tidewire_core::session::RequestContext| async {
                    Ok(tidewire_core::schema::CreateMessageResult::text("m", "t"))
                },
            )
            .sampling_tools(true)
            .elicitation_handler(
                |_p: tidewire_core::schema::ElicitParams,
                 _c: tidewire_core::session::RequestContext| async {
                    Ok(tidewire_core::schema::ElicitResult::decline())
                },
            )
            .elicitation_modes(tidewire_client::ElicitationModes::FORM_AND_URL)
            .roots([]);
        let (client, mut harness) = connect(full).await;
        let Seen::Request { params, .. } = harness.next().await else {
            panic!("initialize");
        };
        assert_eq!(
            params["capabilities"],
            json!({
                "sampling": {"tools": {}},
                "elicitation": {"form": {}, "url": {}},
                "roots": {"listChanged": true}
            })
        );
        assert!(client.client_capabilities().roots.is_some());
    })
    .await;
}

#[tokio::test]
async fn connect_with_driver_runs_on_the_callers_driver() {
    within(async {
        let (server_end, client_end) = memory::duplex();
        let _server = tidewire_core::session::Session::spawn(
            server_end,
            EchoInit,
            tidewire_core::session::SessionOptions::default(),
        );
        let (connecting, driver) = builder().connect_with_driver(client_end);
        let driver = tokio::spawn(driver);
        let client = connecting.await.expect("connected");
        client.ping().await.expect("pong");
        client.close().await;
        assert!(client.is_closed());
        driver
            .await
            .expect("the driver task ran")
            .expect("a clean close");
    })
    .await;
}

/// Answers `initialize` with the offered version and nothing else.
struct EchoInit;

impl tidewire_core::session::Handler for EchoInit {
    async fn handle_request(
        &self,
        request: tidewire_core::jsonrpc::Request,
        _ctx: tidewire_core::session::RequestContext,
    ) -> Result<Value, tidewire_core::jsonrpc::ErrorObject> {
        let params = request.params.unwrap_or(Value::Null);
        Ok(json!({
            "protocolVersion": params["protocolVersion"],
            "capabilities": {},
            "serverInfo": {"name": "echo", "version": "1"}
        }))
    }
}

#[tokio::test]
async fn list_all_tools_follows_every_page() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let first = client.list_tools(None).await.expect("page 1");
        assert_eq!(first.tools.len(), 2);
        assert_eq!(first.next_cursor.as_deref(), Some("p2"));

        let names: Vec<_> = client
            .list_all_tools()
            .await
            .expect("all pages")
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["a", "b", "c", "d", "e"]);
        let cursors: Vec<_> = harness
            .drain_requests("tools/list")
            .into_iter()
            .map(|p| p["cursor"].clone())
            .collect();
        assert_eq!(
            cursors,
            [Value::Null, Value::Null, json!("p2"), json!("p3")]
        );
    })
    .await;
}

#[tokio::test]
async fn list_all_stops_a_server_that_pages_forever() {
    within(async {
        let endless = FakeServer {
            pages: Pages::Endless,
            ..FakeServer::default()
        };
        let (client, _harness) = connect_to(endless, builder().max_list_pages(5)).await;
        let err = client
            .expect("connected")
            .list_all_tools()
            .await
            .expect_err("capped");
        assert!(
            matches!(err, ClientError::TooManyPages { limit: 5, ref method } if method == "tools/list"),
            "{err:?}"
        );

        let repeat = FakeServer {
            pages: Pages::Repeat,
            ..FakeServer::default()
        };
        let (client, _harness) = connect_to(repeat, builder()).await;
        let err = client
            .expect("connected")
            .list_all_tools()
            .await
            .expect_err("loop");
        assert!(
            matches!(err, ClientError::InvalidResponse { .. }),
            "{err:?}"
        );
        assert!(err.to_string().contains("again"), "{err}");
    })
    .await;
}

#[tokio::test]
async fn typed_methods_round_trip() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let resources = client.list_all_resources().await.expect("resources");
        assert_eq!(
            resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
            ["file:///a", "file:///b"]
        );
        let templates = client
            .list_all_resource_templates()
            .await
            .expect("templates");
        assert_eq!(templates[0].uri_template, "file:///{path}");
        assert_eq!(client.list_all_prompts().await.expect("prompts")[0].name, "greet");

        let read = client.read_resource("file:///a").await.expect("read");
        assert_eq!(read.contents[0].uri(), "file:///a");

        let prompt = client
            .get_prompt("greet", json!({"name": "Ann"}))
            .await
            .expect("prompt");
        assert_eq!(prompt.messages[0].content.as_text(), Some("hello Ann"));
        let err = client
            .get_prompt("greet", json!({"name": 3}))
            .await
            .expect_err("not a string");
        assert!(
            matches!(
                err,
                ClientError::Session(SessionError::InvalidParams { .. })
            ),
            "{err:?}"
        );

        let completion = client
            .complete(CompleteParams::new(
                CompletionReference::prompt("greet"),
                "name",
                "A",
            ))
            .await
            .expect("complete");
        assert_eq!(completion.completion.values, ["A1"]);

        client
            .set_logging_level(LoggingLevel::Warning)
            .await
            .expect("setLevel");
        client.subscribe("file:///a").await.expect("subscribe");
        client.unsubscribe("file:///a").await.expect("unsubscribe");
        client.ping().await.expect("ping");

        let err = client
            .list_tools(Some("garbage".to_owned()))
            .await
            .expect_err("bad page");
        assert!(
            matches!(err, ClientError::InvalidResponse { ref method, .. } if method == "tools/list"),
            "{err:?}"
        );
        let err = client
            .list_tools(Some("nonsense".to_owned()))
            .await
            .expect_err("bad cursor");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));

        let requests = harness.drain_requests("logging/setLevel");
        assert_eq!(requests, [json!({"level": "warning"})]);
    })
    .await;
}

#[derive(serde::Serialize)]
struct Echo {
    text: &'static str,
    times: u32,
}

#[tokio::test]
async fn call_tool_takes_any_serialisable_arguments() {
    within(async {
        let (client, _harness) = connect(builder()).await;
        let result = client
            .call_tool(
                "echo",
                Echo {
                    text: "hi",
                    times: 2,
                },
            )
            .await
            .expect("echo");
        assert_eq!(
            result.structured_content,
            Some(json!({"text": "hi", "times": 2}))
        );
        assert!(!result.is_error());

        let failed = client
            .call_tool("fail", ())
            .await
            .expect("a tool error is a result");
        assert!(failed.is_error());

        let err = client
            .call_tool("echo", [1, 2, 3])
            .await
            .expect_err("arguments must be an object");
        assert!(
            matches!(
                err,
                ClientError::Session(SessionError::InvalidParams { .. })
            ),
            "{err:?}"
        );
        let err = client
            .call_tool("nope", ())
            .await
            .expect_err("unknown tool");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
    })
    .await;
}

#[tokio::test]
async fn call_tool_meta_is_sent_with_the_progress_token() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let mut meta = tidewire_core::schema::Meta::new();
        meta.insert("example.com/trace".to_owned(), json!("abc"));
        client
            .call_tool("count", json!({"n": 1}))
            .meta(meta)
            .on_progress(|_| {})
            .await
            .expect("count");
        let calls = harness.drain_requests("tools/call");
        let sent = &calls[0]["_meta"];
        assert_eq!(sent["example.com/trace"], "abc");
        assert!(sent["progressToken"].is_number(), "{sent}");
    })
    .await;
}

#[tokio::test]
async fn call_tool_progress_callback_runs_in_order_before_the_result() {
    within(async {
        let (client, _harness) = connect(builder()).await;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let result = client
            .call_tool("count", json!({"n": 20}))
            .on_progress(move |p| {
                sink.lock()
                    .expect("lock")
                    .push((p.progress, p.total, p.message))
            })
            .await
            .expect("count");
        // Everything arrived before the result did.
        let seen = seen.lock().expect("lock").clone();
        assert_eq!(result.content[0].as_text(), Some("counted 20"));
        assert_eq!(seen.len(), 20);
        for (i, (progress, total, message)) in seen.into_iter().enumerate() {
            assert_eq!(progress, (i + 1) as f64);
            assert_eq!(total, Some(20.0));
            assert_eq!(message, Some(format!("step {}", i + 1)));
        }
    })
    .await;
}

#[tokio::test]
async fn call_tool_progress_stream_holds_every_report_before_the_result() {
    within(async {
        let (client, _harness) = connect(builder()).await;
        let (call, progress) = client
            .call_tool("count", json!({"n": 10}))
            .progress_stream();
        let result = call.await.expect("count");
        assert_eq!(result.content[0].as_text(), Some("counted 10"));
        // The stream already holds all ten, and ends because the call is over.
        let reports: Vec<_> = progress.collect().await;
        assert_eq!(
            reports.iter().map(|p| p.progress).collect::<Vec<_>>(),
            (1..=10).map(f64::from).collect::<Vec<_>>()
        );
    })
    .await;
}

#[tokio::test]
async fn a_timeout_cancels_the_call_on_the_server() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let call = client
            .call_tool("hang", ())
            .timeout(Duration::from_millis(200))
            .send()
            .await
            .expect("sent");
        let id = call.id().clone();
        let err = call.await.expect_err("times out");
        assert!(err.is_timeout(), "{err}");
        let reason = harness.cancellation_of(&id).await;
        assert!(reason.is_some_and(|r| r.contains("timed out")));
        // The connection goes on.
        client.ping().await.expect("ping");
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn progress_resets_the_timeout_up_to_the_hard_maximum() {
    within(async {
        let (client, _harness) = connect(builder()).await;
        // Ten reports 50 ms apart (paused clock) against a 120 ms timeout.
        let slow = json!({"n": 10, "every_ms": 50});
        let err = client
            .call_tool("slow", &slow)
            .timeout(Duration::from_millis(120))
            .await
            .expect_err("no reset: times out");
        assert!(err.is_timeout(), "{err}");
        let result = client
            .call_tool("slow", &slow)
            .timeout(Duration::from_millis(120))
            .reset_timeout_on_progress(Duration::from_secs(5))
            .await
            .expect("each report resets the timeout");
        assert_eq!(result.content[0].as_text(), Some("slept 10 times"));
        let err = client
            .call_tool("slow", json!({"n": 100, "every_ms": 50}))
            .timeout(Duration::from_millis(120))
            .reset_timeout_on_progress(Duration::from_millis(400))
            .await
            .expect_err("the hard maximum still applies");
        assert!(err.is_timeout(), "{err}");
    })
    .await;
}

#[tokio::test]
async fn dropping_a_call_cancels_it_on_the_server() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let (call, mut progress) = client.call_tool("hang", ()).progress_stream();
        let call = call.send().await.expect("sent");
        let id = call.id().clone();
        // The tool has started once its first report arrives.
        let first = progress.next().await.expect("first report");
        assert_eq!(first.message.as_deref(), Some("started"));
        assert_eq!(harness.server.inflight_requests(), 1);
        drop(call);
        let reason = harness.cancellation_of(&id).await;
        assert_eq!(reason.as_deref(), Some("the caller dropped the request"));
        assert_eq!(client.peer().pending_requests(), 0);
        assert!(
            progress.next().await.is_none(),
            "the stream ends with the call"
        );
    })
    .await;
}

#[tokio::test]
async fn an_explicit_cancel_resolves_the_call() {
    within(async {
        let (client, mut harness) = connect(builder()).await;
        let (call, mut progress) = client.call_tool("hang", ()).progress_stream();
        let call = call.send().await.expect("sent");
        progress.next().await.expect("started");
        let handle = call.cancel_handle();
        assert!(handle.cancel("the user pressed Ctrl-C"));
        let err = call.await.expect_err("cancelled");
        assert!(err.is_cancelled(), "{err}");
        let reason = harness.cancellation_of(handle.id()).await;
        assert_eq!(reason.as_deref(), Some("the user pressed Ctrl-C"));
        assert!(!handle.cancel("again"), "nothing left to cancel");
    })
    .await;
}

#[tokio::test]
async fn notifications_arrive_typed_and_in_order() {
    within(async {
        let methods = Arc::new(Mutex::new(Vec::new()));
        let sink = methods.clone();
        let (client, harness) = connect(
            builder()
                .on_notification(move |n| sink.lock().expect("lock").push(n.method().to_owned())),
        )
        .await;
        let mut stream = client.notifications();
        let mut second = client.notifications();
        let server = &harness.server;
        server
            .notify_raw("notifications/tools/list_changed", None)
            .await
            .expect("send");
        server
            .notify_raw(
                "notifications/message",
                Some(json!({"level": "info", "logger": "db", "data": {"rows": 3}})),
            )
            .await
            .expect("send");
        server
            .notify_raw(
                "notifications/resources/updated",
                Some(json!({"uri": "file:///a"})),
            )
            .await
            .expect("send");
        // Invalid params are dropped rather than passed on half-decoded.
        server
            .notify_raw("notifications/resources/updated", Some(json!({"uri": 5})))
            .await
            .expect("send");
        server
            .notify_raw("notifications/custom", Some(json!({"x": 1})))
            .await
            .expect("send");

        for stream in [&mut stream, &mut second] {
            let n = stream.recv().await.expect("open").expect("no lag");
            assert!(matches!(n, ServerNotification::ToolListChanged(_)), "{n:?}");
            let n = stream.recv().await.expect("open").expect("no lag");
            let ServerNotification::LoggingMessage(log) = n else {
                panic!("expected a log message, got {n:?}");
            };
            assert_eq!(log.level, LoggingLevel::Info);
            assert_eq!(log.logger.as_deref(), Some("db"));
            assert_eq!(log.data, json!({"rows": 3}));
            let n = stream.recv().await.expect("open").expect("no lag");
            let ServerNotification::ResourceUpdated(updated) = n else {
                panic!("expected resources/updated, got {n:?}");
            };
            assert_eq!(updated.uri, "file:///a");
            let n = stream.recv().await.expect("open").expect("no lag");
            assert_eq!(
                n,
                ServerNotification::Other {
                    method: "notifications/custom".to_owned(),
                    params: Some(json!({"x": 1})),
                }
            );
        }
        // The callback ran first, for the same notifications.
        assert_eq!(
            *methods.lock().expect("lock"),
            [
                "notifications/tools/list_changed",
                "notifications/message",
                "notifications/resources/updated",
                "notifications/custom"
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn a_slow_stream_reports_lag() {
    within(async {
        let (client, harness) = connect(builder().notification_buffer(2)).await;
        let mut stream = client.notifications();
        for i in 0..5 {
            harness
                .server
                .notify_raw(
                    "notifications/message",
                    Some(json!({"level": "info", "data": i})),
                )
                .await
                .expect("send");
        }
        // Once the client answers this ping, it has read every notification sent before it.
        harness
            .server
            .request_raw("ping", None)
            .await
            .expect("pong");
        assert_eq!(stream.recv().await, Some(Err(Lagged(3))));
        for expected in [3, 4] {
            let Some(Ok(ServerNotification::LoggingMessage(log))) = stream.recv().await else {
                panic!("expected a log message");
            };
            assert_eq!(log.data, json!(expected));
        }
        assert!(Lagged(3).to_string().contains("missed 3"));
    })
    .await;
}

#[tokio::test]
async fn the_first_stream_holds_what_came_before_it() {
    within(async {
        let (client, harness) = connect(builder()).await;
        harness
            .server
            .notify_raw("notifications/prompts/list_changed", None)
            .await
            .expect("send");
        harness
            .server
            .request_raw("ping", None)
            .await
            .expect("pong");
        let mut first = client.notifications();
        let mut later = client.notifications();
        assert!(matches!(
            first.recv().await,
            Some(Ok(ServerNotification::PromptListChanged(_)))
        ));
        harness
            .server
            .notify_raw("notifications/tools/list_changed", None)
            .await
            .expect("send");
        assert!(matches!(
            later.recv().await,
            Some(Ok(ServerNotification::ToolListChanged(_)))
        ));
        assert!(matches!(
            first.recv().await,
            Some(Ok(ServerNotification::ToolListChanged(_)))
        ));
    })
    .await;
}

#[tokio::test]
async fn streams_end_when_the_connection_closes() {
    within(async {
        let (client, harness) = connect(builder()).await;
        let mut stream = client.notifications();
        let in_flight = client
            .call_tool("hang", ())
            .no_timeout()
            .send()
            .await
            .expect("sent");
        harness.server.close();
        client.closed().await;
        assert!(client.is_closed());
        assert!(client.close_reason().is_some());
        assert!(stream.recv().await.is_none());
        let err = in_flight.await.expect_err("closed");
        assert!(err.is_closed(), "{err}");
        let err = client.ping().await.expect_err("closed");
        assert!(err.is_closed(), "{err}");
    })
    .await;
}

#[tokio::test]
async fn dropping_the_last_client_closes_the_connection() {
    within(async {
        let (client, harness) = connect(builder()).await;
        let other = client.clone();
        drop(client);
        other.ping().await.expect("a clone keeps it open");
        drop(other);
        harness.server.closed().await;
    })
    .await;
}

#[tokio::test]
async fn a_misbehaving_server_cannot_break_the_client() {
    within(async {
        let (client, harness) = connect(builder()).await;
        let server = &harness.server;
        // Progress for nobody, cancellations of nothing, junk params.
        for (method, params) in [
            (
                "notifications/progress",
                json!({"progressToken": 999, "progress": 1}),
            ),
            ("notifications/progress", json!({"progress": "x"})),
            ("notifications/cancelled", json!({"requestId": 12345})),
            ("notifications/cancelled", json!([1, 2])),
            ("notifications/message", json!({"level": "loud", "data": 1})),
        ] {
            server.notify_raw(method, Some(params)).await.expect("send");
        }
        client.ping().await.expect("still serving");
    })
    .await;
}
