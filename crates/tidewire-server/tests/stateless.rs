//! The stateless revision (2026-07-28) over the in-memory transport, where the era is chosen
//! per message as on stdio and WebSocket: raw JSON-RPC from the core engine, with `_meta`.

mod support;

use support::{LIMIT, Recorder};

use std::time::Duration;

use serde_json::{Value, json};
use tidewire_core::jsonrpc::Notification;
use tidewire_core::schema::{
    CallToolResult, CreateMessageParams, ElicitParams, ElicitationSchema, Implementation,
    InputRequest, InputRequiredResult, LoggingLevel, PrimitiveSchema, SamplingContent,
    SamplingMessage,
};
use tidewire_core::session::{Peer, Session, SessionError, SessionOptions};
use tidewire_core::transport::memory;
use tidewire_server::{CacheHint, CacheItem, Context, Eras, NoArgs, Server};
use tokio::sync::mpsc;
use tokio::time::timeout;

fn builder() -> tidewire_server::ServerBuilder {
    Server::builder(Implementation::new("stateless-test", "2.0.0"))
        .tool(
            "trip",
            "Asks a name, then (together) the model and the roots",
            |_: NoArgs, ctx: Context| async move {
                let name = ctx
                    .with_input_key("name")
                    .elicit(ElicitParams::form(
                        "Name?",
                        ElicitationSchema::new().property("name", PrimitiveSchema::string(), true),
                    ))
                    .await?;
                let (reply, roots) = tokio::join!(
                    ctx.create_message(CreateMessageParams::new(
                        vec![SamplingMessage::user_text("Hi?")],
                        10,
                    )),
                    ctx.list_roots(),
                );
                let (reply, roots) = (reply?, roots?);
                let name = name
                    .content
                    .and_then(|c| c.get("name").cloned())
                    .and_then(|v| serde_json::to_value(v).ok())
                    .unwrap_or_default();
                let text: String = reply
                    .content
                    .iter()
                    .filter_map(SamplingContent::as_text)
                    .collect();
                Ok(CallToolResult::text(format!(
                    "{} / {text} / {} roots",
                    name.as_str().unwrap_or("?"),
                    roots.roots.len()
                )))
            },
        )
        .tool(
            "own_state",
            "Answers input_required itself with its own state",
            |_: NoArgs, ctx: Context| async move {
                if let Some(state) = ctx.request_state() {
                    let answered = ctx.input_responses().is_some_and(|r| r.contains_key("q"));
                    return Ok(CallToolResult::text(format!(
                        "state {state}, answered {answered}"
                    )));
                }
                let mut asked = std::collections::BTreeMap::new();
                asked.insert("q".to_owned(), InputRequest::ListRoots);
                Err(ctx
                    .input_required(InputRequiredResult::new(asked, Some("mine".to_owned())))
                    .await
                    .into())
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
        .tool(
            "trace",
            "Returns the trace context it was handed",
            |_: NoArgs, ctx: Context| async move {
                let pairs: Vec<String> = ctx
                    .trace_context()
                    .into_iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                Ok(CallToolResult::text(format!(
                    "{} stateless={}",
                    pairs.join(";"),
                    ctx.is_stateless()
                )))
            },
        )
        .cache_hint(CacheHint::public(Duration::from_secs(60)))
        .cache_hint_for(
            CacheItem::Tool("log_all".into()),
            CacheHint::public(Duration::from_secs(5)),
        )
}

/// A client connection with no `initialize`.
fn connect(server: &Server) -> (Peer, mpsc::UnboundedReceiver<Notification>) {
    let (a, b) = memory::duplex();
    let (_peer, driver) = server.serve(a);
    tokio::spawn(driver);
    let (tx, rx) = mpsc::unbounded_channel();
    (
        Session::spawn(b, Recorder(tx), SessionOptions::default()),
        rx,
    )
}

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    })
}

fn all_caps() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {}})
}

/// `params` with the stateless `_meta` (all capabilities) merged in.
fn modern(mut params: Value) -> Value {
    params["_meta"] = meta(all_caps());
    params
}

async fn call(peer: &Peer, method: &str, params: Value) -> Result<Value, SessionError> {
    timeout(LIMIT, peer.request_raw(method, Some(params)))
        .await
        .expect("in time")
}

fn code(result: Result<Value, SessionError>) -> i64 {
    result
        .expect_err("an error")
        .remote()
        .map(|e| e.code)
        .expect("a remote error")
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Notification>) -> Notification {
    timeout(LIMIT, rx.recv())
        .await
        .expect("in time")
        .expect("a notification")
}

#[tokio::test]
async fn one_connection_serves_both_eras_request_by_request() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let server = builder().build();
    let (peer, _rx) = connect(&server);
    let stateless = call(&peer, "tools/list", modern(json!({})))
        .await
        .expect("list");
    assert_eq!(stateless["resultType"], "complete");
    assert_eq!(stateless["ttlMs"], 5000, "the shortest item hint");
    assert_eq!(stateless["cacheScope"], "public");
    assert_eq!(
        stateless["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "stateless-test"
    );
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    call(&peer, "initialize", init).await.expect("initialize");
    let session = call(&peer, "tools/list", json!({})).await.expect("list");
    assert!(session.get("resultType").is_none(), "{session}");
    assert!(session.get("ttlMs").is_none(), "{session}");
    assert_eq!(session["tools"], stateless["tools"]);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn discover_envelope_errors_and_removed_methods() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = builder().build();
        let (peer, _rx) = connect(&server);
        let discover = call(&peer, "server/discover", modern(json!({})))
            .await
            .expect("discover");
        assert_eq!(discover["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(discover["ttlMs"], 60_000);
        assert!(discover["capabilities"]["tools"].is_object());
        for method in [
            "ping",
            "initialize",
            "logging/setLevel",
            "resources/subscribe",
            "nope/nope",
        ] {
            assert_eq!(
                code(call(&peer, method, modern(json!({}))).await),
                -32601,
                "{method}"
            );
        }
        let no_caps = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        assert_eq!(code(call(&peer, "tools/list", no_caps).await), -32602);
        let v999 = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "v999",
            "io.modelcontextprotocol/clientCapabilities": {},
        }});
        let error = call(&peer, "server/discover", v999)
            .await
            .expect_err("v999");
        let error = error.remote().expect("remote");
        assert_eq!(error.code, -32022);
        assert_eq!(error.data.as_ref().expect("data")["requested"], "v999");
        // A session-era ping on the same connection is still answered.
        call(&peer, "ping", json!({})).await.expect("ping");
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn questions_travel_in_rounds_and_several_at_once() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let server = builder().build();
    let (peer, _rx) = connect(&server);
    let first = call(&peer, "tools/call", modern(json!({"name": "trip"})))
        .await
        .expect("round 1");
    assert_eq!(first["resultType"], "input_required");
    let asked: Vec<&String> = first["inputRequests"]
        .as_object()
        .expect("asks")
        .keys()
        .collect();
    assert_eq!(asked, ["name"]);
    assert_eq!(
        first["inputRequests"]["name"]["method"],
        "elicitation/create"
    );
    let state = first["requestState"].as_str().expect("state").to_owned();

    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    let second = call(
        &peer,
        "tools/call",
        modern(json!({"name": "trip", "inputResponses": {"name": answer}, "requestState": state})),
    )
    .await
    .expect("round 2");
    assert_eq!(second["resultType"], "input_required");
    let asked = second["inputRequests"].as_object().expect("asks");
    let methods: Vec<&str> = asked
        .values()
        .filter_map(|q| q["method"].as_str())
        .collect();
    assert_eq!(methods.len(), 2, "asked together: {asked:?}");
    assert!(methods.contains(&"sampling/createMessage") && methods.contains(&"roots/list"));
    let state2 = second["requestState"].as_str().expect("state").to_owned();
    assert_ne!(state, state2);

    let mut responses = serde_json::Map::new();
    for (key, question) in asked {
        let reply = if question["method"] == "roots/list" {
            json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]})
        } else {
            json!({"role": "assistant", "content": {"type": "text", "text": "hello"}, "model": "m"})
        };
        responses.insert(key.clone(), reply);
    }
    // Only the new answers: the first travels in the state.
    let third = call(
        &peer,
        "tools/call",
        modern(json!({"name": "trip", "inputResponses": responses, "requestState": state2})),
    )
    .await
    .expect("round 3");
    assert_eq!(third["resultType"], "complete");
    assert_eq!(third["content"][0]["text"], "Ada / hello / 2 roots");

    // Altered, or for other arguments: refused.
    let tampered = modern(json!({"name": "trip", "requestState": format!("{state2}x")}));
    assert_eq!(code(call(&peer, "tools/call", tampered).await), -32602);
    let other = modern(json!({"name": "trip", "arguments": {"x": 1}, "requestState": state2}));
    assert_eq!(code(call(&peer, "tools/call", other).await), -32602);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_question_the_client_cannot_answer_is_32021() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = builder().build();
        let (peer, _rx) = connect(&server);
        let mut params = json!({"name": "trip"});
        params["_meta"] = meta(json!({"sampling": {}}));
        let error = call(&peer, "tools/call", params)
            .await
            .expect_err("no elicitation");
        let error = error.remote().expect("remote");
        assert_eq!(error.code, -32021);
        assert_eq!(
            error.data.as_ref().expect("data")["requiredCapabilities"],
            json!({"elicitation": {}})
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn a_handler_may_answer_input_required_itself() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let server = builder().build();
    let (peer, _rx) = connect(&server);
    let first = call(&peer, "tools/call", modern(json!({"name": "own_state"})))
        .await
        .expect("1");
    assert_eq!(first["resultType"], "input_required");
    let state = first["requestState"].as_str().expect("state");
    assert_ne!(state, "mine", "the handler's state travels sealed");
    let retry = modern(json!({
        "name": "own_state",
        "requestState": state,
        "inputResponses": {"q": {"roots": []}},
    }));
    let done = call(&peer, "tools/call", retry).await.expect("2");
    assert_eq!(done["content"][0]["text"], "state mine, answered true");
    // On a session there is no such answer: a clear error, not a hang.
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    call(&peer, "initialize", init).await.expect("initialize");
    let error = call(&peer, "tools/call", json!({"name": "own_state"})).await;
    assert_eq!(code(error), -32603);
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn logs_are_sent_only_at_the_level_the_request_asks() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let server = builder().build();
        let (peer, mut rx) = connect(&server);
        call(&peer, "tools/call", modern(json!({"name": "log_all"})))
            .await
            .expect("call");
        // Messages related to a request arrive before its response, in order.
        assert!(rx.try_recv().is_err(), "no logLevel, no logs");
        let mut params = modern(json!({"name": "log_all"}));
        params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("error");
        call(&peer, "tools/call", params).await.expect("call");
        let mut levels = Vec::new();
        while let Ok(n) = rx.try_recv() {
            assert_eq!(n.method, "notifications/message");
            levels.push(n.params.expect("params")["level"].clone());
        }
        assert_eq!(
            levels,
            [
                json!("error"),
                json!("critical"),
                json!("alert"),
                json!("emergency")
            ]
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn listen_acknowledges_filters_tags_and_ends() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let server = builder().build();
        let (peer, mut rx) = connect(&server);
        let params = modern(
            json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        );
        let listen = {
            let peer = peer.clone();
            tokio::spawn(
                async move { peer.request_raw("subscriptions/listen", Some(params)).await },
            )
        };
        let ack = next(&mut rx).await;
        assert_eq!(ack.method, "notifications/subscriptions/acknowledged");
        let ack = ack.params.expect("params");
        // This server has no prompts: that part of the filter is not honoured.
        assert_eq!(ack["notifications"], json!({"toolsListChanged": true}));
        let id = ack["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();
        assert!(!id.is_null());
        assert_eq!(server.listener_count(), 1);

        server.notify_resources_changed().await; // not asked for
        server.notify_tools_changed().await;
        let changed = next(&mut rx).await;
        assert_eq!(changed.method, "notifications/tools/list_changed");
        assert_eq!(
            changed.params.expect("params")["_meta"]["io.modelcontextprotocol/subscriptionId"],
            id
        );

        server.end_subscriptions();
        let ended = timeout(LIMIT, listen)
            .await
            .expect("in time")
            .expect("task")
            .expect("result");
        assert_eq!(ended["resultType"], "complete");
        assert_eq!(ended["_meta"]["io.modelcontextprotocol/subscriptionId"], id);
        // Nothing untagged reached this connection: it never opened a session.
        assert!(rx.try_recv().is_err());
        assert_eq!(server.listener_count(), 0);
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn a_cancelled_listen_stops_listening() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let server = builder().build();
        let (peer, mut rx) = connect(&server);
        let params = modern(json!({"notifications": {"toolsListChanged": true}}));
        let listen = {
            let peer = peer.clone();
            tokio::spawn(
                async move { peer.request_raw("subscriptions/listen", Some(params)).await },
            )
        };
        assert_eq!(
            next(&mut rx).await.method,
            "notifications/subscriptions/acknowledged"
        );
        // Aborting the caller drops its request: the engine sends notifications/cancelled.
        listen.abort();
        timeout(LIMIT, async {
            while server.listener_count() > 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the listener is gone");
    })
    .await
    .expect("the test took longer than its limit");
}

#[tokio::test]
async fn eras_can_be_served_alone() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let modern_only = builder().eras(Eras::Modern).build();
    let (peer, _rx) = connect(&modern_only);
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    let error = call(&peer, "initialize", init.clone())
        .await
        .expect_err("refused");
    let error = error.remote().expect("remote");
    assert_eq!(error.code, -32022);
    assert_eq!(
        error.data.as_ref().expect("data")["supported"],
        json!(["2026-07-28"])
    );
    assert_eq!(code(call(&peer, "tools/list", json!({})).await), -32602);
    call(&peer, "server/discover", modern(json!({})))
        .await
        .expect("served");

    let legacy_only = builder().eras(Eras::Legacy).build();
    let (peer, _rx) = connect(&legacy_only);
    assert_eq!(
        code(call(&peer, "server/discover", modern(json!({}))).await),
        -32601
    );
    call(&peer, "initialize", init).await.expect("initialize");
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

#[tokio::test]
async fn handlers_see_the_w3c_trace_context() {
    tokio::time::timeout(std::time::Duration::from_secs(300), async move {
    let server = builder().build();
    let (peer, _rx) = connect(&server);
    let mut params = modern(json!({"name": "trace"}));
    params["_meta"]["traceparent"] =
        json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    params["_meta"]["tracestate"] = json!("vendor=1");
    let result = call(&peer, "tools/call", params).await.expect("call");
    assert_eq!(
        result["content"][0]["text"],
        "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;tracestate=vendor=1 stateless=true"
    );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
}

/// Issue 26, item 6: a listen kept about four copies of its params for as long as it ran (12
/// listens of 7.5 MB: +390 MiB) and could name any URI, offered or not. Now its resource URIs
/// and task ids are bounded in bytes all together, must name resources this server offers,
/// and are kept once, compactly.
#[tokio::test]
async fn a_listen_names_only_offered_resources_within_a_byte_bound() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        use tidewire_core::schema::{ReadResourceResult, Resource};
        let server = builder()
            .resource(Resource::new("file:///a", "a"), |uri, _| async move {
                Ok(ReadResourceResult::text(uri, "a"))
            })
            .build();
        let (peer, mut rx) = connect(&server);
        let listen =
            |uris: Value| modern(json!({"notifications": {"resourceSubscriptions": uris}}));

        let unknown = call(
            &peer,
            "subscriptions/listen",
            listen(json!(["file:///nope"])),
        )
        .await;
        assert_eq!(code(unknown), -32602);
        let many: Vec<String> = (0..40).map(|i| format!("file:///a#{i:08000}")).collect();
        let too_much = call(&peer, "subscriptions/listen", listen(json!(many))).await;
        let error = too_much.expect_err("refused");
        let error = error.remote().expect("remote");
        assert_eq!(error.code, -32602);
        assert!(error.message.contains("bytes"), "{}", error.message);
        assert_eq!(server.listener_count(), 0);

        let held = {
            let peer = peer.clone();
            let params = listen(json!(["file:///a"]));
            tokio::spawn(
                async move { peer.request_raw("subscriptions/listen", Some(params)).await },
            )
        };
        let ack = next(&mut rx).await;
        assert_eq!(ack.method, "notifications/subscriptions/acknowledged");
        assert_eq!(
            ack.params.expect("params")["notifications"]["resourceSubscriptions"],
            json!(["file:///a"])
        );
        server.notify_resource_updated("file:///a").await;
        let updated = next(&mut rx).await;
        assert_eq!(updated.method, "notifications/resources/updated");
        server.end_subscriptions();
        timeout(LIMIT, held)
            .await
            .expect("in time")
            .expect("task")
            .expect("the complete result");
    })
    .await
    .expect("the test took longer than its limit");
}
