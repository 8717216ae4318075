//! When the server ends the session (HTTP 404 to a request carrying its id): fail what was in
//! flight, start a new session with the cached `initialize`, and carry on.

use std::sync::Arc;

use reqwest::StatusCode;
use tidewire_core::jsonrpc::{ErrorObject, Message, Notification, Request};
use tokio::sync::oneshot;

use super::error::{chain, excerpt, transport_error};
use super::get_stream;
use super::reply::{Body, body_kind, decode_json, error_text, read_limited};
use super::shared::{Shared, Snapshot, Waiter};
use super::sse::{Cursor, events, pump};
use super::task::catch;

/// The error answer of requests that were in flight when the server ended the session.
pub(crate) fn session_ended_error() -> ErrorObject {
    transport_error(
        "the server ended the MCP session (HTTP 404); the transport is starting a new session, \
         retry the request",
    )
}

/// Handles the end of session `generation` in a task of its own (once per session). The
/// returned receiver fires once that task holds the gate: from then on the sender waits for the
/// new session, so a caller told about the 404 after that cannot race ahead of it.
pub(crate) fn spawn(shared: Arc<Shared>, generation: u64) -> oneshot::Receiver<()> {
    let (held, held_rx) = oneshot::channel();
    tokio::spawn(async move {
        let outcome = tokio::select! {
            biased;
            () = shared.shutdown.cancelled() => Ok(()),
            outcome = catch(session_ended(&shared, generation, Some(held))) => outcome,
        };
        if let Err(reason) = outcome {
            // The session is gone and no new one will come: end the connection, which fails
            // every call in flight, rather than leave it half-alive.
            shared
                .fail_connection(format!(
                    "the server ended the MCP session (HTTP 404), and the task starting a new \
                     one panicked: {reason}"
                ))
                .await;
        }
    });
    held_rx
}

/// Handles the end of session `generation`; does nothing if a new session already replaced it.
///
/// Holds the gate for writing throughout, so the sender sends nothing until the new session
/// exists (or the connection is given up). `held` fires once the gate is taken.
pub(crate) async fn session_ended(
    shared: &Arc<Shared>,
    generation: u64,
    held: Option<oneshot::Sender<()>>,
) {
    let _gate = shared.gate.write().await;
    if let Some(held) = held {
        let _ = held.send(());
    }
    let (initialize, initialized) = {
        let mut session = shared.session();
        if session.generation != generation || session.id.is_none() {
            return;
        }
        session.id = None;
        (session.initialize.clone(), session.initialized.clone())
    };
    tracing::warn!("the server ended the MCP session (HTTP 404); starting a new one");
    shared.set_get_stream(None);
    shared.fail_all(&session_ended_error()).await;
    let Some(initialize) = initialize else {
        shared
            .fail_connection("the server ended the MCP session before it was initialized".into())
            .await;
        return;
    };
    let timeout = shared.config.request_timeout;
    let outcome =
        tokio::time::timeout(timeout, reinitialize(shared, initialize, initialized)).await;
    let failure = match outcome {
        Ok(Ok(())) => None,
        Ok(Err(reason)) => Some(reason),
        Err(_) => Some(format!("no answer within {timeout:?}")),
    };
    if let Some(reason) = failure {
        shared
            .fail_connection(format!(
                "the server ended the MCP session (HTTP 404), and starting a new one failed: {reason}"
            ))
            .await;
        return;
    }
    tracing::info!(
        session = shared.snapshot().session_id.is_some(),
        "a new MCP session is initialized"
    );
    if shared.config.get_stream {
        // The gate stays held until the GET stream is open, as after the first handshake.
        let _ = tokio::time::timeout(timeout, get_stream::start(shared)).await;
    }
}

/// Replays `initialize` (under an id of the transport's own, its answer kept from the engine),
/// takes the new session id, and sends `notifications/initialized`.
async fn reinitialize(
    shared: &Arc<Shared>,
    original: Request,
    initialized: Option<Notification>,
) -> Result<(), String> {
    let id = shared.internal_id();
    let request = Request::new(id.clone(), original.method, original.params);
    let codec = shared.config.codec;
    let body = codec
        .encode(&Message::Request(request))
        .map_err(|e| e.to_string())?;
    let (answer_tx, answer_rx) = oneshot::channel();
    shared
        .register(id.clone(), "initialize", Waiter::Internal(answer_tx))
        .ok_or("too many requests in flight")?;
    // Whatever happens below, the entry does not outlive this call.
    struct Forget<'a>(&'a Shared, &'a tidewire_core::jsonrpc::RequestId);
    impl Drop for Forget<'_> {
        fn drop(&mut self) {
            self.0.abandon(self.1);
        }
    }
    let _forget = Forget(shared, &id);

    let fresh = Snapshot::default();
    let response = shared
        .post(body, &fresh)
        .send()
        .await
        .map_err(|e| chain(&e))?;
    let status = response.status();
    if !status.is_success() {
        let text = error_text(response, shared.config.request_timeout).await;
        return Err(format!("HTTP {status}: {}", excerpt(&text)));
    }
    shared.note_session_id(response.headers());
    match body_kind(&response) {
        Body::Json => {
            let body = read_limited(response, codec.max_message_size()).await?;
            for message in decode_json(&codec, &body).into_iter().flatten() {
                shared.deliver(message).await;
            }
        }
        Body::EventStream => {
            let stream = events(response, codec.max_message_size());
            pump(shared, stream, &mut Cursor::default(), Some(&id)).await;
        }
        Body::Empty | Body::Other => return Err(format!("HTTP {status} without a JSON-RPC body")),
    }
    if shared.is_waiting(&id) {
        return Err("the reply holds no initialize response".into());
    }
    let response = answer_rx
        .await
        .map_err(|_| "the initialize response was lost".to_owned())?;
    let result = response
        .outcome
        .map_err(|e| format!("the server refused initialize: {e}"))?;
    shared.note_initialize_result(&result);
    {
        let mut session = shared.session();
        session.generation += 1;
        session.reinitializations += 1;
    }

    let notification =
        initialized.unwrap_or_else(|| Notification::new("notifications/initialized", None));
    let body = codec
        .encode(&Message::Notification(notification))
        .map_err(|e| e.to_string())?;
    let snapshot = shared.snapshot();
    match shared.post(body, &snapshot).send().await {
        Ok(r) if r.status().is_success() || r.status() == StatusCode::ACCEPTED => {}
        Ok(r) => {
            tracing::warn!(status = %r.status(), "the server refused notifications/initialized")
        }
        Err(e) => {
            return Err(format!(
                "sending notifications/initialized failed: {}",
                chain(&e)
            ));
        }
    }
    Ok(())
}
