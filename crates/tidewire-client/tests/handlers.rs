//! The client's answers to the server's requests: sampling, elicitation and roots handlers,
//! progress reported back to the server, refusals, and cancellation by the server.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{builder, connect, within};
use tidewire_client::{ElicitationHandler, ElicitationModes, StaticRoots};
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::progress::Progress;
use tidewire_core::schema::{
    CreateMessageParams, CreateMessageResult, ElicitParams, ElicitResult, ElicitValue, Root,
};
use tidewire_core::session::{Peer, RequestContext};
use tokio::sync::mpsc;

/// A sampling handler written as a plain async function; it reports two steps of progress.
async fn sample(
    params: CreateMessageParams,
    ctx: RequestContext,
) -> Result<CreateMessageResult, ErrorObject> {
    ctx.report_progress(1.0, Some(2.0), Some("reading".into()))
        .await
        .map_err(ErrorObject::internal)?;
    ctx.report_progress(2.0, Some(2.0), Some("writing".into()))
        .await
        .map_err(ErrorObject::internal)?;
    Ok(CreateMessageResult::text(
        "test-model",
        format!(
            "{} message(s), at most {} tokens",
            params.messages.len(),
            params.max_tokens
        ),
    ))
}

fn sampling_request() -> Value {
    json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 50
    })
}

/// Sends `method` from the fake server to the client, collecting the progress it reports.
async fn ask(server: &Peer, method: &str, params: Value) -> (Result<Value, i64>, Vec<Progress>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let outcome = server
        .request_raw(method, Some(params))
        .on_progress(move |p| sink.lock().expect("lock").push(p))
        .await
        .map_err(|e| e.remote().map_or(0, |e| e.code));
    let progress = seen.lock().expect("lock").clone();
    (outcome, progress)
}

#[tokio::test]
async fn the_sampling_handler_answers_and_reports_progress() {
    within(async {
        let (_client, harness) = connect(builder().sampling_handler(sample)).await;
        let (result, progress) = ask(
            &harness.server,
            "sampling/createMessage",
            sampling_request(),
        )
        .await;
        let result = result.expect("sampled");
        assert_eq!(result["role"], "assistant");
        assert_eq!(result["model"], "test-model");
        assert_eq!(
            result["content"],
            json!({"type": "text", "text": "1 message(s), at most 50 tokens"})
        );
        assert_eq!(
            progress
                .iter()
                .map(|p| (p.progress, p.message.as_deref()))
                .collect::<Vec<_>>(),
            [(1.0, Some("reading")), (2.0, Some("writing"))]
        );
    })
    .await;
}

#[tokio::test]
async fn sampling_with_tools_needs_the_capability() {
    within(async {
        let mut with_tools = sampling_request();
        with_tools["tools"] = json!([{"name": "t", "inputSchema": {"type": "object"}}]);
        let mut with_context = sampling_request();
        with_context["includeContext"] = json!("thisServer");

        let (_client, harness) = connect(builder().sampling_handler(sample)).await;
        let (outcome, _) = ask(
            &harness.server,
            "sampling/createMessage",
            with_tools.clone(),
        )
        .await;
        assert_eq!(outcome, Err(-32602));
        let (outcome, _) = ask(
            &harness.server,
            "sampling/createMessage",
            with_context.clone(),
        )
        .await;
        assert_eq!(outcome, Err(-32602));

        let (_client, harness) = connect(
            builder()
                .sampling_handler(sample)
                .sampling_tools(true)
                .sampling_context(true),
        )
        .await;
        let (outcome, _) = ask(&harness.server, "sampling/createMessage", with_tools).await;
        assert!(outcome.is_ok(), "{outcome:?}");
        let (outcome, _) = ask(&harness.server, "sampling/createMessage", with_context).await;
        assert!(outcome.is_ok(), "{outcome:?}");
    })
    .await;
}

/// An elicitation handler written as a type: fills in the form, or agrees to open the URL.
struct Form;

impl ElicitationHandler for Form {
    async fn elicit(
        &self,
        params: ElicitParams,
        ctx: RequestContext,
    ) -> Result<ElicitResult, ErrorObject> {
        ctx.report_progress(1.0, None, Some(format!("asking: {}", params.message())))
            .await
            .map_err(ErrorObject::internal)?;
        Ok(match params {
            ElicitParams::Form(_) => ElicitResult::accept(BTreeMap::from([(
                "name".to_owned(),
                ElicitValue::from("Ann"),
            )])),
            ElicitParams::Url(_) => ElicitResult::accept_url(),
        })
    }
}

fn form_request() -> Value {
    json!({
        "message": "Who are you?",
        "requestedSchema": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        }
    })
}

fn url_request() -> Value {
    json!({"mode": "url", "message": "Sign in", "url": "https://example.com/login",
           "elicitationId": "e-1"})
}

#[tokio::test]
async fn the_elicitation_handler_answers_declared_modes_only() {
    within(async {
        let (_client, harness) = connect(builder().elicitation_handler(Form)).await;
        let (result, progress) = ask(&harness.server, "elicitation/create", form_request()).await;
        assert_eq!(
            result,
            Ok(json!({"action": "accept", "content": {"name": "Ann"}}))
        );
        assert_eq!(progress.len(), 1);
        assert_eq!(progress[0].message.as_deref(), Some("asking: Who are you?"));
        // URL mode was not declared, and "voice" is no mode at all.
        let (result, progress) = ask(&harness.server, "elicitation/create", url_request()).await;
        assert_eq!(result, Err(-32602));
        assert!(progress.is_empty(), "refused before the handler ran");
        let mut voice = form_request();
        voice["mode"] = json!("voice");
        let (result, _) = ask(&harness.server, "elicitation/create", voice).await;
        assert_eq!(result, Err(-32602));

        let (_client, harness) = connect(
            builder()
                .elicitation_handler(Form)
                .elicitation_modes(ElicitationModes::URL),
        )
        .await;
        let (result, _) = ask(&harness.server, "elicitation/create", url_request()).await;
        assert_eq!(result, Ok(json!({"action": "accept"})));
        let (result, _) = ask(&harness.server, "elicitation/create", form_request()).await;
        assert_eq!(result, Err(-32602), "form mode was not declared");
    })
    .await;
}

#[tokio::test]
async fn static_roots_are_served_and_changes_announced() {
    within(async {
        let roots = StaticRoots::new([Root::new("file:///work").with_name("work")]);
        let (client, mut harness) = connect(builder().roots_handler(roots.clone())).await;
        let (result, _) = ask(&harness.server, "roots/list", json!({})).await;
        assert_eq!(
            result,
            Ok(json!({"roots": [{"uri": "file:///work", "name": "work"}]}))
        );

        roots.set([Root::new("file:///tmp"), Root::new("file:///home")]);
        client.notify_roots_changed().await.expect("sent");
        harness
            .notification("notifications/roots/list_changed")
            .await;
        let (result, _) = ask(&harness.server, "roots/list", json!({})).await;
        assert_eq!(
            result,
            Ok(json!({"roots": [{"uri": "file:///tmp"}, {"uri": "file:///home"}]}))
        );
    })
    .await;
}

#[tokio::test]
async fn a_roots_closure_gets_the_request_context() {
    within(async {
        let (_client, harness) =
            connect(builder().roots_handler(|ctx: RequestContext| async move {
                let _ = ctx.report_progress(1.0, Some(1.0), None).await;
                Ok(tidewire_core::schema::ListRootsResult::new(vec![
                    Root::new(format!("file:///from/{}", ctx.method())),
                ]))
            }))
            .await;
        let (result, progress) = ask(&harness.server, "roots/list", json!({})).await;
        assert_eq!(
            result,
            Ok(json!({"roots": [{"uri": "file:///from/roots/list"}]}))
        );
        assert_eq!(progress.len(), 1);
    })
    .await;
}

#[tokio::test]
async fn requests_without_a_handler_are_method_not_found() {
    within(async {
        let (_client, harness) = connect(builder()).await;
        for (method, params) in [
            ("sampling/createMessage", sampling_request()),
            ("elicitation/create", form_request()),
            ("roots/list", json!({})),
            ("tasks/list", json!({})),
            ("no/such/method", json!({})),
            // Without a handler the params do not matter.
            ("sampling/createMessage", json!({"garbage": true})),
        ] {
            let (result, _) = ask(&harness.server, method, params).await;
            assert_eq!(result, Err(-32601), "{method}");
        }
        // ping is answered by the engine.
        let (result, _) = ask(&harness.server, "ping", json!({})).await;
        assert_eq!(result, Ok(json!({})));
    })
    .await;
}

#[tokio::test]
async fn invalid_params_for_a_served_method_are_refused() {
    within(async {
        let (_client, harness) = connect(builder().sampling_handler(sample)).await;
        let (result, _) = ask(
            &harness.server,
            "sampling/createMessage",
            json!({"messages": "nope"}),
        )
        .await;
        assert_eq!(result, Err(-32602));
    })
    .await;
}

/// Sends a message when dropped: tells the test that a handler task was torn down.
struct DropSignal(mpsc::UnboundedSender<&'static str>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.send("dropped");
    }
}

#[tokio::test]
async fn the_server_can_cancel_a_handler() {
    within(async {
        let (tx, mut events) = mpsc::unbounded_channel();
        let handler = move |_params: ElicitParams, _ctx: RequestContext| {
            let tx = tx.clone();
            async move {
                let _guard = DropSignal(tx.clone());
                let _ = tx.send("started");
                std::future::pending::<()>().await;
                Ok(ElicitResult::cancel())
            }
        };
        let (client, harness) = connect(builder().elicitation_handler(handler)).await;
        let in_flight = harness
            .server
            .request_raw("elicitation/create", Some(form_request()))
            .send()
            .await
            .expect("sent");
        assert_eq!(events.recv().await, Some("started"));
        drop(in_flight);
        assert_eq!(events.recv().await, Some("dropped"));
        client.ping().await.expect("the client goes on");
        assert_eq!(client.peer().inflight_requests(), 0);
    })
    .await;
}
