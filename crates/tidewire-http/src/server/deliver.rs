//! Handing a POST's messages to the session's engine, and answering with the responses: one
//! JSON body, or an SSE stream that carries everything related to the request.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Message, RequestId};
use tidewire_core::transport::{Envelope, StreamCloser};
use tokio::sync::oneshot;

use super::checks::{error, error_for};
use super::config::ResponseMode;
use super::refusals::{duplicate, session_not_found, too_many_streams};
use super::session::{HttpSession, ReplyTarget};
use super::sse_body::{EndOnDrop, sse};
use super::state::State;
use super::streams::StreamId;

type Shared = Arc<State>;

/// Notes a cancellation the client sends, so its request's route and stream end with it
/// (the engine sends no response after a cancellation).
fn note_cancellation(session: &HttpSession, message: &Message) {
    if let Message::Notification(n) = message
        && n.method == "notifications/cancelled"
        && let Some(id) = n
            .params
            .as_ref()
            .and_then(|p| p.get("requestId"))
            .and_then(RequestId::from_json)
    {
        session.cancelled(&id);
    }
}

/// A batch: every message goes to the engine; the requests' responses come back on one SSE
/// stream, or as one JSON array.
pub(crate) async fn deliver_batch(
    state: &Shared,
    session: &Arc<HttpSession>,
    messages: Vec<Message>,
    extensions: &http::Extensions,
    priming: bool,
) -> Response {
    let ids: Vec<RequestId> = messages
        .iter()
        .filter_map(|m| match m {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        })
        .collect();
    let stream = match state.config.response_mode {
        ResponseMode::Sse if !ids.is_empty() => match session.streams.open() {
            Ok(stream) => Some(stream),
            Err(full) => return too_many_streams(ids[0].clone(), full.0),
        },
        _ => None,
    };
    let mut replies = Vec::new();
    for (n, id) in ids.iter().enumerate() {
        let target = match stream {
            Some(stream) => ReplyTarget::Stream(stream),
            None => {
                let (tx, rx) = oneshot::channel();
                replies.push(rx);
                ReplyTarget::Json(tx)
            }
        };
        if session.expect_reply(id.clone(), target).is_err() {
            for registered in &ids[..n] {
                session.forget(registered);
            }
            return duplicate(id.clone());
        }
    }
    for message in messages {
        note_cancellation(session, &message);
        let envelope = Envelope {
            message,
            route: Default::default(),
            extensions: extensions.clone(),
            exchange: None,
        };
        if session.inbox.push(Box::new(envelope)).await.is_err() {
            return session_not_found(&session.id);
        }
    }
    if ids.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    if let Some(stream) = stream {
        let cursor = session.streams.attach(stream, None).unwrap_or(0);
        let retry = priming.then_some(state.config.retry);
        return sse(state, session.clone(), stream, cursor, retry, None);
    }
    // A session that ends drops its reply senders, so this cannot outlive it.
    let all = futures::future::join_all(replies).await;
    let bodies: Vec<Bytes> = all.into_iter().filter_map(Result::ok).collect();
    if bodies.len() != ids.len() {
        return error(
            StatusCode::NOT_FOUND,
            ErrorCode(-32001),
            "the session ended before every response of the batch",
        );
    }
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from(json_array(&bodies)),
    )
        .into_response()
}

/// Hands one message to the session's engine and answers the POST.
pub(crate) async fn deliver(
    state: &Shared,
    session: &Arc<HttpSession>,
    message: Message,
    extensions: http::Extensions,
    priming: bool,
    one_shot: Option<EndOnDrop>,
) -> Response {
    note_cancellation(session, &message);
    let id = match &message {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    let envelope = Envelope {
        message,
        route: Default::default(),
        extensions,
        exchange: None,
    };
    let Some(id) = id else {
        // A notification or a response: accepted, nothing to answer (H7).
        return match session.inbox.push(Box::new(envelope)).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(_) => session_not_found(&session.id),
        };
    };
    match state.config.response_mode {
        ResponseMode::Json => {
            let (tx, rx) = oneshot::channel();
            if session
                .expect_reply(id.clone(), ReplyTarget::Json(tx))
                .is_err()
            {
                return duplicate(id);
            }
            let forget = Forget {
                session: session.clone(),
                id: id.clone(),
            };
            if session.inbox.push(Box::new(envelope)).await.is_err() {
                return session_not_found(&session.id);
            }
            // A session that ends drops its reply senders (`HttpSession::close`), and so does
            // a cancellation: no need to watch for either here too.
            let reply = rx.await.ok();
            drop(forget);
            // A stateless request's session (`one_shot`) ends when this returns.
            match reply {
                Some(body) => (
                    StatusCode::OK,
                    [(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    )],
                    Body::from(body),
                )
                    .into_response(),
                // Cancelled by the client: no response follows (the spec asks for none).
                None if !session.is_closed() => StatusCode::ACCEPTED.into_response(),
                None => error_for(
                    StatusCode::NOT_FOUND,
                    Some(id),
                    ErrorObject::new(ErrorCode(-32001), "the session ended before the response"),
                ),
            }
        }
        ResponseMode::Sse => {
            let stream = match session.streams.open() {
                Ok(stream) => stream,
                Err(full) => return too_many_streams(id, full.0),
            };
            if session
                .expect_reply(id.clone(), ReplyTarget::Stream(stream))
                .is_err()
            {
                session.streams.discard(stream);
                return duplicate(id);
            }
            // Until the engine has the request, a POST that goes away (its client left while
            // the inbox was full) takes its route and stream with it.
            let mut unsent = Unsent {
                session: session.clone(),
                id: id.clone(),
                stream,
                armed: true,
            };
            let mut envelope = envelope;
            if priming {
                // SSE polling (2025-11-25): the handler may end this stream; the client resumes.
                let closer = Arc::downgrade(session);
                envelope.extensions.insert(StreamCloser::new(move || {
                    if let Some(session) = closer.upgrade() {
                        session.streams.interrupt(stream);
                    }
                }));
            }
            if session.inbox.push(Box::new(envelope)).await.is_err() {
                return session_not_found(&session.id);
            }
            unsent.armed = false;
            let cursor = session.streams.attach(stream, None).unwrap_or(0);
            // A quick answer then leaves with the response head in one write.
            session
                .streams
                .wait_for_event(stream, cursor, state.config.first_event_wait)
                .await;
            let retry = priming.then_some(state.config.retry);
            sse(state, session.clone(), stream, cursor, retry, one_shot)
        }
    }
}

/// A request registered for an SSE reply but not yet handed to the engine: dropped, it takes its
/// route and its (empty) stream back.
struct Unsent {
    session: Arc<HttpSession>,
    id: RequestId,
    stream: StreamId,
    /// Still to be handed over.
    armed: bool,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if self.armed {
            self.session.forget(&self.id);
            self.session.streams.discard(self.stream);
        }
    }
}

/// Forgets a JSON-mode request whose POST went away.
struct Forget {
    session: Arc<HttpSession>,
    id: RequestId,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.session.forget(&self.id);
    }
}

/// The responses of a batch as one JSON array.
fn json_array(bodies: &[Bytes]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bodies.iter().map(|b| b.len() + 1).sum::<usize>() + 1);
    out.push(b'[');
    for (i, body) in bodies.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(body);
    }
    out.push(b']');
    out
}
