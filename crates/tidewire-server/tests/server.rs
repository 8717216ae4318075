//! The server API over the in-memory transport, driven with raw JSON-RPC from the core engine.

mod support;

use support::{LIMIT, Recorder};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tidewire_core::jsonrpc::Notification;
use tidewire_core::schema::{
    CallToolResult, GetPromptResult, Implementation, LoggingLevel, Prompt, PromptArgument,
    PromptMessage, ReadResourceResult, Resource, ResourceTemplate, Tool,
};
use tidewire_core::session::{Peer, Session, SessionOptions};
use tidewire_core::transport::memory;
use tidewire_core::transport::{Envelope, TransportError, TransportReceiver, TransportSender};
use tidewire_server::{Context, NoArgs, Server};
use tokio::sync::{mpsc, oneshot};
use tokio::time::timeout;

#[derive(Deserialize, JsonSchema)]
struct Add {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

fn server() -> Server {
    let mut builder = Server::builder(Implementation::new("test", "1.0.0"))
        .instructions("be nice")
        .page_size(2)
        .max_subscriptions(2)
        .structured_tool(
            "add",
            "Adds two integers",
            |args: Add, _ctx: Context| async move {
                Ok(Sum {
                    sum: args.a + args.b,
                })
            },
        )
        .tool(
            "log_all",
            "Logs at every level",
            |_: NoArgs, ctx: Context| async move {
                for level in LoggingLevel::ALL {
                    ctx.log(level, json!(format!("{level:?}"))).await?;
                }
                Ok(CallToolResult::text("logged"))
            },
        )
        .resource(Resource::new("mem://a", "a"), |uri, _ctx| async move {
            Ok(ReadResourceResult::text(uri, "A"))
        })
        .resource_template(
            ResourceTemplate::new("mem://items/{id}", "item"),
            |uri, vars, _ctx| async move {
                Ok(ReadResourceResult::text(
                    uri,
                    format!("item {}", vars["id"]),
                ))
            },
        )
        .prompt(
            Prompt::new("greet", "Greets someone").with_argument(PromptArgument::new("name", true)),
            |args, _ctx| async move {
                Ok(GetPromptResult::new(vec![PromptMessage::user_text(
                    format!("Hello {}", args["name"]),
                )]))
            },
        );
    for i in 0..3 {
        builder = builder.tool_raw(
            Tool::new(format!("t{i}"), "numbered", json!({"type": "object"})),
            move |_args, _ctx| async move { Ok(CallToolResult::text(format!("t{i}"))) },
        );
    }
    builder.build()
}

async fn connect(server: &Server) -> (Peer, mpsc::UnboundedReceiver<Notification>) {
    let (a, b) = memory::duplex();
    let (_peer, driver) = server.serve(a);
    tokio::spawn(driver);
    let (tx, rx) = mpsc::unbounded_channel();
    let client = Session::spawn(b, Recorder(tx), SessionOptions::default());
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let result = timeout(LIMIT, client.request_raw("initialize", Some(init)))
        .await
        .expect("in time")
        .expect("initialize");
    assert_eq!(result["protocolVersion"], "2025-06-18");
    assert_eq!(result["instructions"], "be nice");
    client
        .notify_raw("notifications/initialized", None)
        .await
        .expect("initialized");
    (client, rx)
}

async fn call(
    peer: &Peer,
    method: &str,
    params: Value,
) -> Result<Value, tidewire_core::session::SessionError> {
    timeout(LIMIT, peer.request_raw(method, Some(params)))
        .await
        .expect("in time")
}

#[tokio::test]
async fn lists_page_through_every_tool() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = server();
        let (peer, _rx) = connect(&server).await;
        let mut names = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = call(&peer, "tools/list", params).await.expect("page");
            let tools = page["tools"].as_array().expect("tools").clone();
            assert!(tools.len() <= 2);
            names.extend(
                tools
                    .iter()
                    .map(|t| t["name"].as_str().unwrap_or_default().to_owned()),
            );
            cursor = page["nextCursor"].as_str().map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(names, vec!["add", "log_all", "t0", "t1", "t2"]);
        let err = call(&peer, "tools/list", json!({"cursor": "bogus"}))
            .await
            .expect_err("bad cursor");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn structured_tools_declare_and_return_their_output() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = server();
        let (peer, _rx) = connect(&server).await;
        let list = call(&peer, "tools/list", json!({})).await.expect("list");
        let add = &list["tools"][0];
        assert_eq!(add["inputSchema"]["type"], "object");
        assert!(add["inputSchema"]["properties"]["a"].is_object());
        assert!(add["outputSchema"]["properties"]["sum"].is_object());
        let result = call(
            &peer,
            "tools/call",
            json!({"name": "add", "arguments": {"a": 2, "b": 40}}),
        )
        .await
        .expect("call");
        assert_eq!(result["structuredContent"], json!({"sum": 42}));
        assert_eq!(result["content"][0]["text"], r#"{"sum":42}"#);
        let bad = call(
            &peer,
            "tools/call",
            json!({"name": "add", "arguments": {"a": "x"}}),
        )
        .await
        .expect("isError");
        assert_eq!(bad["isError"], true);
        assert!(
            bad["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .contains("invalid arguments for tool add")
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn set_level_filters_log_messages() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = server();
        let (peer, mut rx) = connect(&server).await;
        call(&peer, "tools/call", json!({"name": "log_all"}))
            .await
            .expect("call");
        let mut levels = Vec::new();
        while let Ok(n) = rx.try_recv() {
            levels.push(
                n.params.expect("params")["level"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        assert_eq!(
            levels.first().map(String::as_str),
            Some("info"),
            "info and above by default: {levels:?}"
        );
        assert_eq!(levels.len(), 7);
        call(&peer, "logging/setLevel", json!({"level": "error"}))
            .await
            .expect("setLevel");
        call(&peer, "tools/call", json!({"name": "log_all"}))
            .await
            .expect("call");
        let mut levels = Vec::new();
        while let Ok(n) = rx.try_recv() {
            levels.push(
                n.params.expect("params")["level"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        assert_eq!(levels, vec!["error", "critical", "alert", "emergency"]);
        let err = call(&peer, "logging/setLevel", json!({"level": "loud"}))
            .await
            .expect_err("bad level");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn resources_templates_and_subscriptions() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let server = server();
        let (peer, mut rx) = connect(&server).await;
        let a = call(&peer, "resources/read", json!({"uri": "mem://a"}))
            .await
            .expect("read");
        assert_eq!(a["contents"][0]["text"], "A");
        let item = call(&peer, "resources/read", json!({"uri": "mem://items/7"}))
            .await
            .expect("template");
        assert_eq!(item["contents"][0]["text"], "item 7");
        let err = call(&peer, "resources/read", json!({"uri": "mem://nothing"}))
            .await
            .expect_err("missing");
        assert_eq!(err.remote().map(|e| e.code), Some(-32002));
        call(&peer, "resources/subscribe", json!({"uri": "mem://a"}))
            .await
            .expect("subscribe");
        call(&peer, "resources/subscribe", json!({"uri": "mem://b"}))
            .await
            .expect("subscribe");
        let err = call(&peer, "resources/subscribe", json!({"uri": "mem://c"}))
            .await
            .expect_err("limit");
        assert!(err.to_string().contains("limit 2"), "{err}");
        server.notify_resource_updated("mem://a").await;
        server.notify_resource_updated("mem://zzz").await;
        let n = timeout(LIMIT, rx.recv())
            .await
            .expect("in time")
            .expect("updated");
        assert_eq!(n.method, "notifications/resources/updated");
        assert_eq!(
            n.params.as_ref().map(|p| p["uri"].clone()),
            Some(json!("mem://a"))
        );
        call(&peer, "resources/unsubscribe", json!({"uri": "mem://a"}))
            .await
            .expect("unsubscribe");
        server.notify_resource_updated("mem://a").await;
        // A list change as a marker: what comes first would be an update nobody asked for (the one
        // for mem://zzz, or for mem://a after the unsubscribe).
        server.notify_tools_changed().await;
        let n = timeout(LIMIT, rx.recv())
            .await
            .expect("in time")
            .expect("marker");
        assert_eq!(n.method, "notifications/tools/list_changed");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn prompts_check_required_arguments() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = server();
        let (peer, _rx) = connect(&server).await;
        let got = call(
            &peer,
            "prompts/get",
            json!({"name": "greet", "arguments": {"name": "Ada"}}),
        )
        .await
        .expect("get");
        assert_eq!(got["messages"][0]["content"]["text"], "Hello Ada");
        let err = call(&peer, "prompts/get", json!({"name": "greet"}))
            .await
            .expect_err("missing arg");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
        assert!(err.to_string().contains("name"));
        let err = call(&peer, "prompts/get", json!({"name": "nope"}))
            .await
            .expect_err("unknown");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn run_time_tool_changes_are_announced() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let server = server();
        let (peer, mut rx) = connect(&server).await;
        server
            .add_tool(
                Tool::new("late", "added later", json!({"type": "object"})),
                |_, _| async { Ok(CallToolResult::text("late")) },
            )
            .await;
        let n = timeout(LIMIT, rx.recv())
            .await
            .expect("in time")
            .expect("notification");
        assert_eq!(n.method, "notifications/tools/list_changed");
        let r = call(&peer, "tools/call", json!({"name": "late"}))
            .await
            .expect("call");
        assert_eq!(r["content"][0]["text"], "late");
        assert!(server.remove_tool("late").await);
        let err = call(&peer, "tools/call", json!({"name": "late"}))
            .await
            .expect_err("gone");
        assert_eq!(err.remote().map(|e| e.code), Some(-32602));
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn unknown_versions_and_methods() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let server = server();
    let (a, b) = memory::duplex();
    let (_p, driver) = server.serve(a);
    tokio::spawn(driver);
    let (tx, _rx) = mpsc::unbounded_channel();
    let client = Session::spawn(b, Recorder(tx), SessionOptions::default());
    let err = call(&client, "server/discover", json!({}))
        .await
        .expect_err("modern probe");
    assert_eq!(err.remote().map(|e| e.code), Some(-32601));
    let init = json!({"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let result = call(&client, "initialize", init).await.expect("initialize");
    assert_eq!(
        result["protocolVersion"], "2025-11-25",
        "an unknown version gets our newest"
    );
    let caps = &result["capabilities"];
    assert!(
        caps["tools"].is_object()
            && caps["resources"]["subscribe"] == true
            && caps["prompts"].is_object()
    );
    assert!(caps["logging"].is_object() && caps["completions"].is_object());
    let done = call(&client, "completion/complete", json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "name", "value": "A"}}))
        .await
        .expect("complete");
    assert_eq!(done["completion"]["values"], json!([]));
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn huge_names_and_values_are_not_echoed_whole() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = server();
        let (peer, _rx) = connect(&server).await;
        let huge = "t".repeat(2 << 20);
        let short = |message: &str| {
            assert!(message.len() < 1024, "{} bytes", message.len());
            assert!(message.ends_with('…'), "marked as cut");
        };
        let err = call(&peer, "tools/call", json!({"name": huge}))
            .await
            .expect_err("unknown tool");
        let error = err.remote().expect("an error answer");
        assert_eq!(error.code, -32602);
        assert!(error.message.contains("unknown tool: ttt"), "{error}");
        short(&error.message);
        let err = call(&peer, &huge, json!({}))
            .await
            .expect_err("unknown method");
        let error = err.remote().expect("an error answer");
        assert_eq!(error.code, -32601);
        short(&error.message);
        let err = call(&peer, "resources/read", json!({"uri": huge}))
            .await
            .expect_err("unknown resource");
        let error = err.remote().expect("an error answer");
        assert_eq!(error.code, -32002);
        short(&error.message);
        let uri = error.data.as_ref().and_then(|d| d["uri"].as_str());
        short(uri.expect("data.uri"));
        // A subscription is kept for the connection's life: a huge URI is refused, not kept.
        let err = call(&peer, "resources/subscribe", json!({"uri": huge}))
            .await
            .expect_err("too long to keep");
        let error = err.remote().expect("an error answer");
        assert_eq!(error.code, -32602);
        assert!(error.message.len() < 1024, "{} bytes", error.message.len());
        let err = call(&peer, "prompts/get", json!({"name": huge}))
            .await
            .expect_err("unknown prompt");
        short(&err.remote().expect("an error answer").message);
        // serde quotes the value it could not read: cut too.
        let err = call(&peer, "logging/setLevel", json!({"level": huge}))
            .await
            .expect_err("unknown level");
        short(&err.remote().expect("an error answer").message);
        let bad = call(
            &peer,
            "tools/call",
            json!({"name": "add", "arguments": {"a": huge, "b": 1}}),
        )
        .await
        .expect("an isError result");
        assert_eq!(bad["isError"], true);
        short(bad["content"][0]["text"].as_str().unwrap_or_default());
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// A receiving half on which nothing ever arrives.
struct Silent;

impl TransportReceiver for Silent {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        std::future::pending().await
    }
}

#[tokio::test]
async fn a_client_that_stopped_reading_does_not_hold_up_broadcasts() {
    const CHANGED: &str = "notifications/tools/list_changed";
    let server = Server::builder(Implementation::new("test", "1.0.0"))
        .session_options(SessionOptions::default().outbound_queue(1))
        .build();
    timeout(LIMIT, async {
        // A client whose connection takes one message and never gets it out.
        let (stuck_tx, stuck) = oneshot::channel();
        let (_never, release) = oneshot::channel();
        let (out, _delivered) = mpsc::unbounded_channel();
        let transport = (
            GatedSender {
                stuck: Some(stuck_tx),
                release: Some(release),
                out,
            },
            Silent,
        );
        let (_stuck_peer, driver) = server.serve(transport);
        tokio::spawn(driver);
        // And one that reads.
        let (a, b) = memory::duplex();
        let (_peer, driver) = server.serve(a);
        tokio::spawn(driver);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let _client = Session::spawn(b, Recorder(tx), SessionOptions::default());
        assert_eq!(server.connection_count(), 2);
        // The stuck writer takes the first broadcast and hangs; the second fills its queue.
        server.notify_tools_changed().await;
        stuck.await.expect("the writer is stuck");
        assert_eq!(rx.recv().await.expect("first").method, CHANGED);
        server.notify_tools_changed().await;
        assert_eq!(rx.recv().await.expect("second").method, CHANGED);
        assert_eq!(server.dropped_notifications(), 0);
        // The third finds the stuck client's queue full: it is dropped and counted, and the
        // broadcast neither waits for that client nor skips the one after it.
        server.notify_tools_changed().await;
        assert_eq!(rx.recv().await.expect("third").method, CHANGED);
        assert_eq!(server.dropped_notifications(), 1);
    })
    .await
    .expect("in time: no broadcast waits on a client that does not read");
}

/// A sending half that holds the first message until `release` fires (never, if its sender is
/// kept), then hands every message to `out`: a client that stopped reading, for a while or for
/// good. It says when the writer first got stuck in it.
struct GatedSender {
    stuck: Option<oneshot::Sender<()>>,
    release: Option<oneshot::Receiver<()>>,
    out: mpsc::UnboundedSender<Envelope>,
}

impl TransportSender for GatedSender {
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if let Some(stuck) = self.stuck.take() {
            let _ = stuck.send(());
        }
        if let Some(release) = self.release.take() {
            let _ = release.await;
        }
        let _ = self.out.send(envelope);
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_slow_client_gets_the_list_changes_it_missed_once_it_reads_again() {
    const CHANGED: &str = "notifications/tools/list_changed";
    let server = Server::builder(Implementation::new("test", "1.0.0"))
        .session_options(SessionOptions::default().outbound_queue(1))
        .build();
    timeout(LIMIT, async {
        let (stuck_tx, stuck) = oneshot::channel();
        let (release_tx, release) = oneshot::channel();
        let (out, mut delivered) = mpsc::unbounded_channel();
        let sender = GatedSender {
            stuck: Some(stuck_tx),
            release: Some(release),
            out,
        };
        let (_peer, driver) = server.serve((sender, Silent));
        tokio::spawn(driver);
        // The writer takes the first change and waits; the second fills the queue; the next
        // five find it full and are owed, without the broadcasts waiting.
        server.notify_tools_changed().await;
        stuck.await.expect("the writer holds the first");
        for _ in 0..6 {
            server.notify_tools_changed().await;
        }
        assert_eq!(server.dropped_notifications(), 5);
        // The client reads again: the two queued ones, then one for all it missed.
        release_tx.send(()).expect("release");
        for n in 1..=3 {
            let envelope = delivered.recv().await.expect("a message");
            match envelope.message {
                tidewire_core::jsonrpc::Message::Notification(n) => assert_eq!(n.method, CHANGED),
                other => panic!("message {n}: {other:?}"),
            }
        }
    })
    .await
    .expect("in time: the missed change arrives once the client reads");
}
