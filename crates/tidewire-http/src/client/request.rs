//! One request: its POST, its reply (JSON or SSE), and the resumption of a stream that ended
//! before the response.

use std::future::Future;
use std::sync::Arc;

use reqwest::StatusCode;
use tidewire_core::jsonrpc::RequestId;
use tokio_util::sync::CancellationToken;

use super::error::{chain, excerpt, http_status_error, transport_error};
use super::reinit;
use super::reply::{Body, body_kind, decode_json, error_text, read_limited};
use super::shared::{Shared, Snapshot};
use super::sse::{Cursor, End, Pumped, events, pump};
use super::task::catch;

/// Starts the task that runs the exchange of one request (see [`run`]), watched by
/// [`supervise`].
pub(crate) fn spawn(
    shared: Arc<Shared>,
    id: RequestId,
    method: String,
    body: Vec<u8>,
    snapshot: Snapshot,
    cancel: CancellationToken,
) {
    let exchange = run(
        shared.clone(),
        id.clone(),
        method,
        body,
        snapshot,
        cancel.clone(),
    );
    tokio::spawn(supervise(shared, id, cancel, exchange));
}

/// Runs `exchange`, the task serving request `id`, and makes sure the request does not stay
/// pending when that task ends without answering it — above all when it panics: unless the
/// request was answered, cancelled or the transport closed (all of which fire `cancel`), it is
/// failed with an error answer that says so.
async fn supervise(
    shared: Arc<Shared>,
    id: RequestId,
    cancel: CancellationToken,
    exchange: impl Future<Output = ()>,
) {
    let outcome = catch(exchange).await;
    if cancel.is_cancelled() {
        return;
    }
    let reason = match outcome {
        Ok(()) => "the task reading its reply ended without its response".to_owned(),
        Err(panic) => format!("the task reading its reply panicked ({panic})"),
    };
    tracing::error!(%id, %reason, "a request lost the task serving it");
    let error = transport_error(format!(
        "the HTTP transport could not complete this request: {reason}"
    ));
    shared.fail(&id, error).await;
}

/// Runs the exchange of one request until it is answered, failed, or `cancel` fires.
async fn run(
    shared: Arc<Shared>,
    id: RequestId,
    method: String,
    body: Vec<u8>,
    snapshot: Snapshot,
    cancel: CancellationToken,
) {
    tokio::select! {
        biased;
        () = cancel.cancelled() => {}
        () = exchange(&shared, &id, &method, body, &snapshot) => {}
    }
}

async fn exchange(
    shared: &Arc<Shared>,
    id: &RequestId,
    method: &str,
    body: Vec<u8>,
    snapshot: &Snapshot,
) {
    let response = match shared.post(body, snapshot).send().await {
        Ok(response) => response,
        Err(e) => {
            let error = transport_error(format!(
                "the HTTP request to {} failed: {}",
                shared.config.url,
                chain(&e)
            ));
            shared.fail(id, error).await;
            return;
        }
    };
    let status = response.status();
    if status == StatusCode::NOT_FOUND && snapshot.session_id.is_some() {
        // Let the re-initialization take the gate before the caller learns of the failure, so
        // whatever it sends next waits for the new session.
        let _ = reinit::spawn(shared.clone(), snapshot.generation).await;
        shared.fail(id, reinit::session_ended_error()).await;
        return;
    }
    if !status.is_success() {
        let text = error_text(response, shared.config.request_timeout).await;
        shared.fail(id, http_status_error(status, &text)).await;
        return;
    }
    if method == "initialize" {
        shared.note_session_id(response.headers());
    }
    match body_kind(&response) {
        Body::Json => json_reply(shared, id, response).await,
        Body::EventStream => {
            let mut cursor = Cursor::default();
            let stream = events(response, shared.config.codec.max_message_size());
            let pumped = pump(shared, stream, &mut cursor, Some(id)).await;
            follow(shared, id, cursor, pumped).await;
        }
        Body::Empty => {
            let error = transport_error(format!(
                "HTTP {status}: the server accepted the request but sent no response"
            ));
            shared.fail(id, error).await;
        }
        Body::Other => {
            let kind = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let error = transport_error(format!(
                "the server answered with Content-Type {kind:?}; expected application/json or \
                 text/event-stream"
            ));
            shared.fail(id, error).await;
        }
    }
}

/// A JSON reply: deliver what it holds; the request must be answered by it.
async fn json_reply(shared: &Shared, id: &RequestId, response: reqwest::Response) {
    let limit = shared.config.codec.max_message_size();
    let body = match read_limited(response, limit).await {
        Ok(body) => body,
        Err(reason) => {
            shared.fail(id, transport_error(reason)).await;
            return;
        }
    };
    let mut problems = Vec::new();
    for item in decode_json(&shared.config.codec, &body) {
        match item {
            Ok(message) => {
                if !shared.deliver(message).await {
                    return;
                }
            }
            Err(reason) => problems.push(reason),
        }
    }
    if shared.is_waiting(id) {
        let detail = if problems.is_empty() {
            format!(
                "it holds no response to this request: {}",
                excerpt(&String::from_utf8_lossy(&body))
            )
        } else {
            format!("it is not valid JSON-RPC: {}", problems.join("; "))
        };
        let error = transport_error(format!("the server's JSON reply is unusable: {detail}"));
        shared.fail(id, error).await;
    }
}

/// After a stream carrying the request's reply ended: resume it with GET + `Last-Event-ID` until
/// the response arrives, the policy gives up, or the server refuses.
pub(crate) async fn follow(
    shared: &Shared,
    id: &RequestId,
    mut cursor: Cursor,
    mut pumped: Pumped,
) {
    let policy = shared.config.reconnect;
    let mut failures: u32 = 0;
    loop {
        let problem = match pumped.end {
            End::Answered | End::Gone => return,
            End::Unusable(reason) => {
                let error = transport_error(format!(
                    "the server's response stream is unusable: {reason}"
                ));
                shared.fail(id, error).await;
                return;
            }
            End::Broken(reason) => format!("the stream broke: {reason}"),
            End::Closed => String::from("the server ended the stream"),
        };
        if !shared.is_waiting(id) {
            return;
        }
        if pumped.events == 0 {
            failures += 1;
        } else {
            failures = 0;
        }
        let Some(last_event_id) = cursor.last_event_id.clone() else {
            let error = transport_error(format!(
                "{problem} before the response arrived, and gave no event id to resume from"
            ));
            shared.fail(id, error).await;
            return;
        };
        if failures >= policy.attempts() {
            let error = transport_error(format!(
                "the response stream ended before the response; gave up resuming it after \
                 {failures} unproductive attempts (last: {problem})"
            ));
            shared.fail(id, error).await;
            return;
        }
        let wait = policy.wait(cursor.retry, failures);
        tracing::debug!(%id, ?wait, %last_event_id, "resuming a response stream");
        tokio::time::sleep(wait).await;

        let snapshot = shared.snapshot();
        let request = shared.get(&snapshot, Some(&last_event_id)).send();
        let response = match tokio::time::timeout(shared.config.request_timeout, request).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => {
                pumped = Pumped {
                    end: End::Broken(chain(&e)),
                    events: 0,
                };
                continue;
            }
            Err(_) => {
                pumped = Pumped {
                    end: End::Broken(format!(
                        "no answer to the resuming GET within {:?}",
                        shared.config.request_timeout
                    )),
                    events: 0,
                };
                continue;
            }
        };
        let status = response.status();
        if status.is_server_error() {
            pumped = Pumped {
                end: End::Broken(format!("the resuming GET got HTTP {status}")),
                events: 0,
            };
            continue;
        }
        if !status.is_success() {
            // 405: the server cannot resume; other 4xx will not fix themselves either.
            let text = error_text(response, shared.config.request_timeout).await;
            let mut error = http_status_error(status, &text);
            error.message = format!(
                "the response stream ended before the response, and resuming it failed: {}",
                error.message
            );
            shared.fail(id, error).await;
            return;
        }
        if body_kind(&response) != Body::EventStream {
            let error = transport_error(
                "the response stream ended before the response, and the resuming GET did not \
                 answer with text/event-stream",
            );
            shared.fail(id, error).await;
            return;
        }
        let stream = events(response, shared.config.codec.max_message_size());
        pumped = pump(shared, stream, &mut cursor, Some(id)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderMap;
    use tidewire_core::jsonrpc::Message;
    use tidewire_core::transport::{Codec, Envelope, TransportError};
    use tokio::sync::mpsc;

    use super::*;
    use crate::client::builder::ReconnectPolicy;
    use crate::client::shared::{Config, Waiter};

    type Inbound = mpsc::Receiver<Result<Envelope, TransportError>>;

    fn fixture() -> (Arc<Shared>, Inbound) {
        let config = Config {
            http: reqwest::Client::new(),
            url: reqwest::Url::parse("http://127.0.0.1:9/mcp").expect("a URL"),
            headers: HeaderMap::new(),
            codec: Codec::default(),
            reconnect: ReconnectPolicy::never(),
            get_stream: false,
            request_timeout: Duration::from_secs(5),
        };
        let (shared, rx) = Shared::new(config);
        (Arc::new(shared), rx)
    }

    fn explode() {
        panic!("the parser broke");
    }

    #[tokio::test]
    async fn a_request_whose_task_panics_gets_an_error_answer() {
        let check = async {
            let (shared, mut rx) = fixture();
            let id = RequestId::from(7);
            let cancel = shared
                .register(id.clone(), "tools/call", Waiter::Engine)
                .expect("room in the table");
            tokio::spawn(supervise(shared.clone(), id.clone(), cancel, async {
                explode()
            }));
            let envelope = rx.recv().await.expect("an answer").expect("a message");
            let response = match envelope.message {
                Message::Response(response) => response,
                other => panic!("expected a response, got {other:?}"),
            };
            assert_eq!(response.id, Some(id.clone()));
            let error = response.outcome.expect_err("an error answer");
            assert!(error.message.contains("panicked"), "{}", error.message);
            assert!(
                error.message.contains("the parser broke"),
                "{}",
                error.message
            );
            assert!(!shared.is_waiting(&id));
        };
        tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .expect("in time");
    }

    #[tokio::test]
    async fn a_cancelled_request_is_not_answered_by_its_supervisor() {
        let check = async {
            let (shared, mut rx) = fixture();
            let id = RequestId::from(8);
            let cancel = shared
                .register(id.clone(), "tools/call", Waiter::Engine)
                .expect("room in the table");
            shared.abandon(&id);
            supervise(shared.clone(), id, cancel, async { explode() }).await;
            assert!(rx.try_recv().is_err(), "nothing is answered");
        };
        tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .expect("in time");
    }
}
