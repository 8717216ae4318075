//! Handing a POST's messages to the session's engine, and answering with the responses: one
//! JSON body, or an SSE stream that carries everything related to the request.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Message};
use tidewire_core::transport::{Envelope, StreamCloser};
use tokio::sync::oneshot;

use super::checks::{error, error_for};
use super::config::ResponseMode;
use super::refusals::{session_not_found, too_many_streams};
use super::session::{HttpSession, PostReply, ReplyTarget};
use super::sse_body::{EndOnDrop, sse};
use super::state::State;
use super::streams::StreamId;

/// A batch: every message goes to the engine; the requests' responses come back on one SSE
/// stream, or as one JSON array.
pub(crate) async fn deliver_batch(
    state: &Arc<State>,
    session: &Arc<HttpSession>,
    messages: Vec<Message>,
    extensions: &tidewire_core::Extensions,
    priming: bool,
) -> Response {
    let first_request = messages.iter().find_map(|m| match m {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    });
    let stream = match (&state.config.response_mode, first_request) {
        (ResponseMode::Sse, Some(id)) => match session.streams.open() {
            Ok(stream) => Some(stream),
            Err(full) => return too_many_streams(id, full.0),
        },
        _ => None,
    };
    // Each request carries its reply slot into the engine; a request id already in flight is
    // the engine's to refuse (on that request's own reply).
    let mut replies = Vec::new();
    let mut requests = 0;
    for message in messages {
        let mut envelope = Envelope::new(message);
        envelope.extensions = extensions.clone();
        if let Message::Request(r) = &envelope.message {
            requests += 1;
            let target = match stream {
                Some(stream) => ReplyTarget::Stream(stream),
                None => {
                    let (tx, rx) = oneshot::channel();
                    replies.push(rx);
                    ReplyTarget::Json(tx)
                }
            };
            envelope.reply = Some(PostReply::slot(session, r.id.clone(), target));
        }
        if session.inbox.push(Box::new(envelope)).await.is_err() {
            return session_not_found(&session.id);
        }
    }
    if requests == 0 {
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
    if bodies.len() != requests {
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
    state: &Arc<State>,
    session: &Arc<HttpSession>,
    message: Message,
    extensions: tidewire_core::Extensions,
    priming: bool,
    one_shot: Option<EndOnDrop>,
) -> Response {
    let id = match &message {
        Message::Request(r) => Some(r.id.clone()),
        _ => None,
    };
    let mut envelope = Envelope::new(message);
    envelope.extensions = extensions;
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
            envelope.reply = Some(PostReply::slot(session, id.clone(), ReplyTarget::Json(tx)));
            if session.inbox.push(Box::new(envelope)).await.is_err() {
                return session_not_found(&session.id);
            }
            // A session that ends drops its reply senders (`HttpSession::close`), and so does
            // a cancellation (the engine abandons the slot): no need to watch for either here.
            let reply = rx.await.ok();
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
            envelope.reply = Some(PostReply::slot(
                session,
                id.clone(),
                ReplyTarget::Stream(stream),
            ));
            // Until the engine has the request, a POST that goes away (its client left while
            // the inbox was full) takes its stream with it (its reply slot goes with the
            // envelope).
            let mut unsent = Unsent {
                session: session.clone(),
                stream,
                armed: true,
            };
            if priming {
                // SSE polling (2025-11-25): the handler may end this stream; the client resumes.
                let closer = Arc::downgrade(session);
                envelope.extensions.insert(StreamCloser::new(move || {
                    if let Some(session) = closer.upgrade() {
                        session.streams.interrupt(stream);
                    }
                }));
            }
            let Some(engine_has_it) = session.hand_over(envelope).await else {
                return session_not_found(&session.id);
            };
            unsent.armed = false;
            let cursor = session.streams.attach(stream, None).unwrap_or(0);
            // A quick answer then leaves with the response head in one write.
            session
                .streams
                .wait_for_event(stream, cursor, state.config.first_event_wait, engine_has_it)
                .await;
            let retry = priming.then_some(state.config.retry);
            sse(state, session.clone(), stream, cursor, retry, one_shot)
        }
    }
}

/// A request given an SSE reply but not yet handed to the engine: dropped, it takes its (empty)
/// stream back.
struct Unsent {
    session: Arc<HttpSession>,
    stream: StreamId,
    /// Still to be handed over.
    armed: bool,
}

impl Drop for Unsent {
    fn drop(&mut self) {
        if self.armed {
            self.session.streams.discard(self.stream);
        }
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
