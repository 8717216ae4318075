//! One request: its POST, its reply (JSON or SSE), and the resumption of a stream that ended
//! before the response.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use reqwest::StatusCode;
use tidewire_core::transport::{Exchange, TransportError};

use super::error::{chain, excerpt, transport_error};
use super::reply::{Body, answers, body_kind, decode_json, error_text, read_limited};
use super::session_end;
use super::shared::{Snapshot, TransportState};
use super::sse::{Cursor, End, Pumped, events, pump};
use super::task::catch;

/// Starts the task that runs the exchange of one request (see [`run`]), watched by
/// [`supervise`]. Unless the request `opens` a session, it first waits for the session the
/// client is starting after the server ended the last one (when there is none such, it goes at
/// once).
pub(crate) fn spawn(shared: Arc<TransportState>, exchange: Exchange, body: Vec<u8>, opens: bool) {
    let task = {
        let (shared, exchange) = (shared.clone(), exchange.clone());
        async move {
            let snapshot = if opens {
                shared.snapshot()
            } else {
                tokio::select! {
                    biased;
                    () = exchange.over() => return,
                    snapshot = shared.snapshot_in_session() => snapshot,
                }
            };
            run(shared, exchange, body, snapshot).await;
        }
    };
    tokio::spawn(supervise(shared, exchange, task));
}

/// Runs `task`, the one serving a request, and makes sure the request does not stay pending
/// when that task panics: unless the request is over or the transport closed, it is failed with
/// an error that says so. (A task that returns has answered or failed the request on every path;
/// its response may still be on its way through the receiver, so nothing is failed then.)
async fn supervise(
    shared: Arc<TransportState>,
    exchange: Exchange,
    task: impl Future<Output = ()>,
) {
    let Err(panic) = catch(task).await else {
        return;
    };
    if exchange.is_over() || shared.shutdown.is_cancelled() {
        return;
    }
    let reason = format!("the task reading its reply panicked ({panic})");
    tracing::error!(id = %exchange.id(), %reason, "a request lost the task serving it");
    exchange.fail(transport_error(format!(
        "the HTTP transport could not complete this request: {reason}"
    )));
}

/// Runs the exchange of one request until it is answered or failed, the engine stops waiting,
/// its session ends, or the transport closes.
///
/// When the session ends while the request's stream is being resumed, the resumption goes on
/// (with the ended session's id) until it delivers the response or is refused: a server whose
/// replica holding the session died may still replay what it wrote (`tidewire_redis`). A
/// request with no stream to resume is failed at once.
async fn run(shared: Arc<TransportState>, exchange: Exchange, body: Vec<u8>, snapshot: Snapshot) {
    let session = snapshot.ended.clone();
    let resuming = AtomicBool::new(false);
    let ended = async {
        session.cancelled().await;
        if resuming.load(Ordering::Acquire) {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        biased;
        () = exchange.over() => {}
        () = shared.shutdown.cancelled() => {}
        () = ended => exchange.fail(session_end::error()),
        () = post(&shared, &exchange, body, &snapshot, &resuming) => {}
    }
}

async fn post(
    shared: &Arc<TransportState>,
    exchange: &Exchange,
    body: Vec<u8>,
    snapshot: &Snapshot,
    resuming: &AtomicBool,
) {
    let auth = &shared.config.authorizer;
    let sent = super::authorized::send(auth, body, |body| shared.post(body, snapshot)).await;
    let response = match sent {
        Ok(response) => response,
        Err(e) => {
            exchange.fail(transport_error(format!(
                "the HTTP request to {} failed: {}",
                shared.config.url,
                chain(&e)
            )));
            return;
        }
    };
    let status = response.status();
    if status == StatusCode::NOT_FOUND && snapshot.session_id.is_some() {
        session_end::ended(shared, snapshot.generation, Some(exchange)).await;
        return;
    }
    if !status.is_success() {
        let text = error_text(response, shared.config.request_timeout).await;
        exchange.fail_transport(TransportError::http(status.as_u16(), &text));
        return;
    }
    shared.adopt_session_id(snapshot, response.headers());
    match body_kind(&response) {
        Body::Json => json_reply(shared, exchange, response).await,
        Body::EventStream => {
            let mut cursor = Cursor::default();
            let stream = events(response, shared.config.codec.max_message_size());
            let pumped = pump(shared, stream, &mut cursor, Some(exchange)).await;
            if !matches!(pumped.end, End::Answered | End::Gone) {
                resuming.store(true, Ordering::Release);
            }
            follow(shared, exchange, snapshot, cursor, pumped).await;
        }
        Body::Empty => exchange.fail(transport_error(format!(
            "HTTP {status}: the server accepted the request but sent no response"
        ))),
        Body::Other => {
            let kind = response
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            exchange.fail(transport_error(format!(
                "the server answered with Content-Type {kind:?}; expected application/json or \
                 text/event-stream"
            )));
        }
    }
}

/// A JSON reply: deliver what it holds; the request must be answered by it.
async fn json_reply(shared: &TransportState, exchange: &Exchange, response: reqwest::Response) {
    let limit = shared.config.codec.max_message_size();
    let body = match read_limited(response, limit).await {
        Ok(body) => body,
        Err(reason) => {
            exchange.fail(transport_error(reason));
            return;
        }
    };
    let mut problems = Vec::new();
    let mut answered = false;
    for item in decode_json(&shared.config.codec, &body) {
        match item {
            Ok(message) => {
                answered |= answers(&message, exchange);
                if !shared.deliver(message).await {
                    return;
                }
            }
            Err(reason) => problems.push(reason),
        }
    }
    if !answered {
        let detail = if problems.is_empty() {
            format!(
                "it holds no response to this request: {}",
                excerpt(&String::from_utf8_lossy(&body))
            )
        } else {
            format!("it is not valid JSON-RPC: {}", problems.join("; "))
        };
        exchange.fail(transport_error(format!(
            "the server's JSON reply is unusable: {detail}"
        )));
    }
}

/// After a stream carrying the request's reply ended: resume it with GET + `Last-Event-ID` until
/// the response arrives, the policy gives up, or the server refuses. Every attempt names the
/// request's own session (`snapshot`), even once that has ended: the stream is that session's.
pub(crate) async fn follow(
    shared: &TransportState,
    exchange: &Exchange,
    snapshot: &Snapshot,
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
                exchange.fail(error);
                return;
            }
            End::Broken(reason) => format!("the stream broke: {reason}"),
            End::Closed => String::from("the server ended the stream"),
        };
        if exchange.is_over() {
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
            exchange.fail(error);
            return;
        };
        if failures >= policy.attempts() {
            let error = transport_error(format!(
                "the response stream ended before the response; gave up resuming it after \
                 {failures} unproductive attempts (last: {problem})"
            ));
            exchange.fail(error);
            return;
        }
        let wait = policy.wait(cursor.retry, failures);
        tracing::debug!(id = %exchange.id(), ?wait, %last_event_id, "resuming a response stream");
        tokio::time::sleep(wait).await;

        // The session's headers as they are now (an `initialize` learns its session id from
        // its reply), unless the session ended: then the ended one's.
        let current = shared.snapshot();
        let headers = if current.generation == snapshot.generation {
            &current
        } else {
            snapshot
        };
        let request = shared.get(headers, Some(&last_event_id)).send();
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
        if status == StatusCode::NOT_FOUND && snapshot.ended.is_cancelled() {
            // The session ended, and nothing of this stream is left to replay.
            exchange.fail(session_end::error());
            return;
        }
        if !status.is_success() {
            // 405: the server cannot resume; other 4xx will not fix themselves either.
            let text = error_text(response, shared.config.request_timeout).await;
            let error = TransportError::http(status.as_u16(), &text)
                .during("the response stream ended before the response, and resuming it failed");
            exchange.fail_transport(error);
            return;
        }
        if body_kind(&response) != Body::EventStream {
            let error = transport_error(
                "the response stream ended before the response, and the resuming GET did not \
                 answer with text/event-stream",
            );
            exchange.fail(error);
            return;
        }
        let stream = events(response, shared.config.codec.max_message_size());
        pumped = pump(shared, stream, &mut cursor, Some(exchange)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use http::HeaderMap;
    use tidewire_core::jsonrpc::RequestId;
    use tidewire_core::transport::{Codec, Failure};

    use super::*;
    use crate::client::reconnect::ReconnectPolicy;
    use crate::client::shared::Config;

    fn fixture() -> Arc<TransportState> {
        let config = Config {
            http: reqwest::Client::new(),
            url: reqwest::Url::parse("http://127.0.0.1:9/mcp").expect("a URL"),
            headers: HeaderMap::new(),
            codec: Codec::default(),
            reconnect: ReconnectPolicy::never(),
            get_stream: false,
            request_timeout: Duration::from_secs(5),
            authorizer: Default::default(),
        };
        Arc::new(TransportState::new(config).0)
    }

    fn explode() {
        panic!("the parser broke");
    }

    #[tokio::test]
    async fn a_request_whose_task_panics_fails_with_an_error_saying_so() {
        let check = async {
            let shared = fixture();
            let (exchange, far) = Exchange::standalone(RequestId::from(7));
            tokio::spawn(supervise(shared, exchange, async { explode() }));
            let Some(Failure::Answer(error)) = far.failure().await else {
                panic!("a failure made up as an answer");
            };
            assert!(error.message.contains("panicked"), "{}", error.message);
            assert!(
                error.message.contains("the parser broke"),
                "{}",
                error.message
            );
        };
        tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .expect("in time");
    }

    #[tokio::test]
    async fn a_request_that_is_over_is_not_failed_by_its_supervisor() {
        let check = async {
            let shared = fixture();
            let (exchange, far) = Exchange::standalone(RequestId::from(8));
            far.end();
            supervise(shared, exchange, async { explode() }).await;
            assert!(far.failure().await.is_none(), "nothing is failed");
        };
        tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .expect("in time");
    }
}
