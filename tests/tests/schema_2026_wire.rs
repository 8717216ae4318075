//! The 2026-07-28 wire, checked against its official schema: the demo server is asked
//! everything it offers on that revision (discovery, every list, every tool called, every
//! resource read, every prompt got, a listen), in memory and over HTTP as stateless POSTs, and
//! every result and every notification it sends back validates against
//! `$TIDEWIRE_SPEC_DIR/2026-07-28/schema.json`.
//!
//! `schema_conformance.rs` checks the messages tidewire's types can build, revision by revision;
//! this checks what a server actually sends on the wire every new client speaks. Without
//! `TIDEWIRE_SPEC_DIR` the test says so and passes (CI sets it and requires it).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tidewire_core::jsonrpc::{ErrorObject, Notification, Request};
use tidewire_core::session::{
    Handler, Peer, RequestContext, Session, SessionError, SessionOptions,
};
use tidewire_core::transport::memory;
use tidewire_http::client::StatelessHttpConnector;
use tidewire_http::server::{HttpConfig, StreamableHttp};
use tidewire_tests::LIMIT;
use tokio::sync::mpsc;
use tokio::time::timeout;

/// How long one request may take before it is counted as still running (a slow demo tool) and
/// left: its result is then not checked.
const PER_CALL: Duration = Duration::from_secs(3);

/// What the server sends unprompted, kept to be checked.
#[derive(Clone)]
struct Recorder(mpsc::UnboundedSender<Notification>);

impl Handler for Recorder {
    async fn handle_request(
        &self,
        request: Request,
        _ctx: RequestContext,
    ) -> Result<Value, ErrorObject> {
        Err(ErrorObject::method_not_found(&request.method))
    }

    fn handle_notification(&self, notification: Notification, _peer: &Peer) {
        let _ = self.0.send(notification);
    }
}

/// `params` with the 2026-07-28 `_meta`: every client capability declared.
fn modern(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {}, "roots": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "schema-check", "version": "1"},
    });
    params
}

/// The schema's validator for one definition.
fn validator(document: &Value, definition: &str) -> jsonschema::Validator {
    let uri = "urn:tidewire:mcp-schema:2026-07-28";
    let resource = jsonschema::Resource::from_contents(document.clone()).expect("a schema");
    let wrapper = json!({
        "$schema": document.get("$schema").cloned().unwrap_or(Value::Null),
        "$ref": format!("{uri}#/$defs/{definition}"),
    });
    jsonschema::options()
        .should_validate_formats(true)
        .with_resource(uri, resource)
        .build(&wrapper)
        .unwrap_or_else(|e| panic!("a validator for {definition}: {e}"))
}

struct Checker {
    document: Value,
    failures: Vec<String>,
    checked: usize,
}

impl Checker {
    fn check(&mut self, definition: &str, what: &str, instance: &Value) {
        self.checked += 1;
        let errors: Vec<String> = validator(&self.document, definition)
            .iter_errors(instance)
            .map(|e| format!("at {}: {e}", e.instance_path))
            .collect();
        if !errors.is_empty() {
            self.failures.push(format!(
                "{what} is no {definition}: {}\n  {}",
                errors.join("; "),
                instance
            ));
        }
    }

    /// A result, by the definition its method and `resultType` name.
    fn result(&mut self, method: &str, what: &str, result: &Value) {
        let definition = match (method, result.get("resultType").and_then(Value::as_str)) {
            (_, Some("input_required")) => "InputRequiredResult",
            ("server/discover", _) => "DiscoverResult",
            ("tools/list", _) => "ListToolsResult",
            ("tools/call", _) => "CallToolResult",
            ("resources/list", _) => "ListResourcesResult",
            ("resources/templates/list", _) => "ListResourceTemplatesResult",
            ("resources/read", _) => "ReadResourceResult",
            ("prompts/list", _) => "ListPromptsResult",
            ("prompts/get", _) => "GetPromptResult",
            ("completion/complete", _) => "CompleteResult",
            ("subscriptions/listen", _) => "SubscriptionsListenResult",
            _ => "Result",
        };
        self.check(definition, what, result);
    }

    /// Every notification received so far, as whole messages; those of extensions (tasks) are
    /// outside the core schema and left.
    fn notifications(&mut self, rx: &mut mpsc::UnboundedReceiver<Notification>) {
        while let Ok(notification) = rx.try_recv() {
            if notification.method.starts_with("notifications/tasks") {
                continue;
            }
            let message = json!({
                "jsonrpc": "2.0",
                "method": notification.method,
                "params": notification.params,
            });
            let what = format!("the notification {}", notification.method);
            self.check("ServerNotification", &what, &message);
        }
    }
}

/// Sends `method` and returns its result, or `None` for an error answer or a request still
/// running after [`PER_CALL`].
async fn ask(peer: &Peer, method: &str, params: Value) -> Option<Value> {
    match timeout(PER_CALL, peer.request_raw(method, Some(modern(params)))).await {
        Ok(Ok(result)) => Some(result),
        Ok(Err(SessionError::Remote(_))) | Err(_) => None,
        Ok(Err(other)) => panic!("{method}: {other}"),
    }
}

fn items<'a>(list: Option<&'a Value>, key: &str) -> Vec<&'a Value> {
    list.and_then(|l| l.get(key))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Asks `server`, through `peer`, everything it offers on 2026-07-28, and checks each answer
/// and notification (`wire` names where, in the failures).
async fn exercise(
    server: &tidewire_server::Server,
    peer: &Peer,
    rx: &mut mpsc::UnboundedReceiver<Notification>,
    checker: &mut Checker,
    wire: &str,
) {
    for method in [
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    ] {
        let result = ask(peer, method, json!({})).await;
        let result = result.unwrap_or_else(|| panic!("{method} answered"));
        checker.result(method, &format!("{method} {wire}"), &result);
    }
    let tools = ask(peer, "tools/list", json!({})).await;
    for tool in items(tools.as_ref(), "tools") {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            continue;
        };
        let params = json!({"name": name, "arguments": {}, "_meta": {"progressToken": name}});
        let mut params = params;
        let meta = params["_meta"].clone();
        params = modern(params);
        if let Some(map) = params["_meta"].as_object_mut() {
            map.extend(meta.as_object().cloned().unwrap_or_default());
        }
        let called = timeout(PER_CALL, peer.request_raw("tools/call", Some(params))).await;
        if let Ok(Ok(result)) = called {
            checker.result("tools/call", &format!("tools/call {name} {wire}"), &result);
        }
        checker.notifications(rx);
    }
    let resources = ask(peer, "resources/list", json!({})).await;
    for resource in items(resources.as_ref(), "resources") {
        let Some(uri) = resource.get("uri").and_then(Value::as_str) else {
            continue;
        };
        if let Some(result) = ask(peer, "resources/read", json!({"uri": uri})).await {
            checker.result(
                "resources/read",
                &format!("resources/read {uri} {wire}"),
                &result,
            );
        }
    }
    let prompts = ask(peer, "prompts/list", json!({})).await;
    for prompt in items(prompts.as_ref(), "prompts") {
        let Some(name) = prompt.get("name").and_then(Value::as_str) else {
            continue;
        };
        let arguments: serde_json::Map<String, Value> = items(Some(prompt), "arguments")
            .iter()
            .filter_map(|a| a.get("name").and_then(Value::as_str))
            // A value that is also a URI, for arguments that name one.
            .map(|a| (a.to_owned(), json!("test://x")))
            .collect();
        let params = json!({"name": name, "arguments": arguments});
        if let Some(result) = ask(peer, "prompts/get", params).await {
            checker.result(
                "prompts/get",
                &format!("prompts/get {name} {wire}"),
                &result,
            );
        }
    }

    // A listen: its acknowledgement, a list change, and its `complete` result.
    let listen = {
        let peer = peer.clone();
        let params = modern(json!({"notifications": {"toolsListChanged": true}}));
        tokio::spawn(async move { peer.request_raw("subscriptions/listen", Some(params)).await })
    };
    let ack = rx.recv().await.expect("the acknowledgement");
    let ack = json!({"jsonrpc": "2.0", "method": ack.method, "params": ack.params});
    checker.check("ServerNotification", "the acknowledgement", &ack);
    server.notify_tools_changed().await;
    server.end_subscriptions();
    let ended = listen.await.expect("joined").expect("the listen's result");
    checker.result("subscriptions/listen", "the listen's result", &ended);
    checker.notifications(rx);
}

#[tokio::test]
async fn what_the_demo_server_sends_on_2026_07_28_validates() {
    let Some(dir) = std::env::var_os("TIDEWIRE_SPEC_DIR").map(PathBuf::from) else {
        tidewire_tests::external::skip("TIDEWIRE_SPEC_DIR is not set (see .ci/run)");
        return;
    };
    let path = dir.join("2026-07-28").join("schema.json");
    let text = std::fs::read_to_string(&path).expect("the 2026-07-28 schema");
    let document: Value = serde_json::from_str(&text).expect("JSON");
    let mut checker = Checker {
        document,
        failures: Vec::new(),
        checked: 0,
    };
    timeout(LIMIT * 3, async {
        // In memory: what the engine sends.
        let server = tidewire_demo::demo_server();
        let (a, b) = memory::duplex();
        let (_peer, driver) = server.serve(a);
        tokio::spawn(driver);
        let (tx, mut rx) = mpsc::unbounded_channel();
        let peer = Session::spawn(b, Recorder(tx), SessionOptions::default());
        exercise(&server, &peer, &mut rx, &mut checker, "in memory").await;

        // Over HTTP, each request a stateless POST: what the endpoint writes, tool results
        // spliced into the response as bytes, not built as a `Value`.
        let server = tidewire_demo::demo_server();
        let http = StreamableHttp::new(HttpConfig::default(), server.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a loopback port");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let app = http.router("/mcp");
        tokio::spawn(async move { axum::serve(listener, app).await });
        let transport = StatelessHttpConnector::new(url)
            .connect()
            .await
            .expect("a stateless HTTP transport");
        let (tx, mut rx) = mpsc::unbounded_channel();
        let peer = Session::spawn(transport, Recorder(tx), SessionOptions::default());
        exercise(&server, &peer, &mut rx, &mut checker, "over HTTP").await;
    })
    .await
    .expect("within the limit");

    assert!(
        checker.checked > 20,
        "only {} messages checked",
        checker.checked
    );
    assert!(
        checker.failures.is_empty(),
        "{} of {} messages do not validate:\n{}",
        checker.failures.len(),
        checker.checked,
        checker.failures.join("\n")
    );
    println!("2026-07-28 wire: {} messages validated", checker.checked);
}
