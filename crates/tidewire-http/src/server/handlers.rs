//! The HTTP handlers: POST, GET and DELETE on the one endpoint.

// A refused request is answered with an axum `Response`; returning it as the error keeps the
// handlers flat, and it is built once per refused request, never on the happy path.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{DecodeFailure, ErrorCode, ErrorObject, Message, RequestId};
use tidewire_core::transport::text::excerpt;
use tidewire_core::transport::{Envelope, RequestLimits, StreamCloser};
use tokio::sync::oneshot;

use super::body::{self, BodyBudget};
use super::checks::{
    self, LAST_EVENT_ID, SESSION_ID, check_accept, check_content_type, check_origin_and_host,
    error, error_for,
};
use super::session::{HttpSession, ReplyTarget};
use super::streams::{STANDALONE, StreamId, parse_event_id};
use tidewire_core::transport::sessions::new_session_id;

use super::sse_body::{EndOnDrop, sse};
use super::{HttpRequestInfo, ResponseMode, State};

type Shared = Arc<State>;

/// The endpoint: checks `Host`/`Origin`, then dispatches on the method.
pub(crate) async fn endpoint(
    Extract(state): Extract<Shared>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Err(refused) = check_origin_and_host(&headers, &state.config) {
        return refused;
    }
    match method {
        Method::POST => post(&state, headers, body).await,
        Method::GET | Method::DELETE if !state.config.eras.legacy() => method_not_allowed(
            "this endpoint serves only the stateless revision (2026-07-28): POST each request",
        ),
        Method::GET => get(&state, &headers),
        Method::DELETE => delete(&state, &headers),
        _ => {
            let mut response = error(
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::INVALID_REQUEST,
                format!("Method Not Allowed: {method} (use POST, GET or DELETE)"),
            );
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, POST, DELETE"));
            response
        }
    }
}

fn session_not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        ErrorCode(-32001),
        format!(
            "Session not found: {:?} is unknown or has ended; initialize a new session",
            excerpt(id)
        ),
    )
}

fn too_many_streams(id: RequestId, limit: usize) -> Response {
    let mut response = error_for(
        StatusCode::TOO_MANY_REQUESTS,
        Some(id),
        ErrorObject::new(
            ErrorCode::SERVER_BUSY,
            format!(
                "Too Many Requests: this session already holds its most streams ({limit}), each \
                 with a request in flight; retry when one has finished"
            ),
        ),
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

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

/// `initialize` on an endpoint that serves only the stateless revision: `-32022` naming the
/// versions it serves.
fn initialize_refused(request: &tidewire_core::jsonrpc::Request) -> Response {
    let refusal = tidewire_core::stateless::initialize_refused(request.params.as_ref());
    error_for(StatusCode::BAD_REQUEST, Some(request.id.clone()), refusal)
}

fn sessions_full(max: usize) -> Response {
    tidewire_core::transport::http_reply::sessions_full(max).into_response()
}

fn method_not_allowed(what: &str) -> Response {
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::INVALID_REQUEST,
        format!("Method Not Allowed: {what}"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

async fn post(state: &Shared, headers: HeaderMap, body: Body) -> Response {
    if let Err(r) = check_accept(&headers, &["application/json", "text/event-stream"]) {
        return r;
    }
    if let Err(r) = check_content_type(&headers) {
        return r;
    }
    let eras = state.config.eras;
    // A header that names no session-era revision (2026-07-28, or one we do not know) makes a
    // stateless request: its session id, if any, is ignored, and its body decides the rest.
    let stateless_header = eras.modern() && checks::names_stateless_revision(&headers);
    let version = if stateless_header {
        ProtocolVersion::V2026_07_28
    } else {
        match checks::protocol_version(&headers) {
            Ok(v) => v,
            Err(r) => return r,
        }
    };
    // The session is checked before a byte of the body is read (an unknown one costs nothing).
    let session_header = checks::session_id(&headers).filter(|_| !stateless_header);
    let known = match &session_header {
        Some(id) if !state.config.stateless => match state.sessions.get(id.as_str()) {
            Some(session) => Some(session),
            None => return session_not_found(id),
        },
        _ => None,
    };
    let bytes = {
        let budgets: &[&BodyBudget] = match &known {
            Some(session) => &[&session.body_budget, &state.body_budget],
            None => &[&state.body_budget],
        };
        let limits = body::Limits {
            max: state.config.limits.max_body,
            timeout: state.config.body_read_timeout,
            budgets,
            drains: &state.drains,
        };
        match body::read(body, &headers, limits).await {
            Ok(bytes) => bytes,
            Err(refused) => return refused,
        }
    };
    let is_batch = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[');
    if stateless_header && is_batch {
        return error_for(
            StatusCode::BAD_REQUEST,
            None,
            ErrorObject::invalid_request("the 2026-07-28 wire takes one message per POST"),
        );
    }
    let mut messages = if is_batch {
        match parse_batch(&bytes, version, state.config.stateless) {
            Ok(messages) => messages,
            Err(refused) => return refused,
        }
    } else {
        match Message::from_slice(&bytes) {
            Ok(message) => vec![message],
            Err(DecodeFailure::Syntax(reason)) => {
                return error_for(
                    StatusCode::BAD_REQUEST,
                    None,
                    ErrorObject::parse_error(reason),
                );
            }
            Err(DecodeFailure::Invalid(invalid)) => {
                return error_for(
                    StatusCode::BAD_REQUEST,
                    invalid.id,
                    ErrorObject::invalid_request(invalid.reason),
                );
            }
        }
    };
    if !is_batch && known.is_none() && eras.modern() {
        let stateless_body = match messages.first() {
            Some(Message::Request(r)) => {
                tidewire_core::version::is_stateless_request(r.params.as_ref())
            }
            _ => false,
        };
        if stateless_header || stateless_body || !eras.legacy() {
            let Some(message) = messages.pop() else {
                return StatusCode::ACCEPTED.into_response();
            };
            if !eras.legacy()
                && !stateless_header
                && !stateless_body
                && let Message::Request(r) = &message
                && r.method == "initialize"
            {
                return initialize_refused(r);
            }
            return super::stateless::post(state, headers, message).await;
        }
    }
    let mut extensions = http::Extensions::new();
    extensions.insert(HttpRequestInfo {
        headers,
        session_id: session_header.clone(),
    });

    if state.config.stateless {
        let Some(message) = messages.pop() else {
            return StatusCode::ACCEPTED.into_response();
        };
        return post_stateless(state, message, extensions, version).await;
    }

    let is_initialize = !is_batch
        && matches!(messages.first(), Some(Message::Request(r)) if r.method == "initialize");
    let (session, created) = match known {
        // Ended while the body was read: its inbox is closed, and delivery says 404.
        Some(session) => (session, false),
        None if is_initialize => {
            if state.sessions.is_full() {
                return sessions_full(state.config.limits.max_sessions);
            }
            let Some(id) = new_session_id() else {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    ErrorCode::INTERNAL_ERROR,
                    "cannot draw a session id",
                );
            };
            let session = state.start_session(id.into());
            // Checked again as it is admitted: two initializes racing for the last slot.
            if let Err(full) = state.sessions.admit(session.id.clone(), session.clone()) {
                session.close();
                return sessions_full(full.max);
            }
            (session, true)
        }
        None => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::INVALID_REQUEST,
                "Bad Request: the Mcp-Session-Id header is required (send initialize first to get one)",
            );
        }
    };
    session.touch();
    if state.config.response_mode == ResponseMode::Json {
        extensions.insert(RequestLimits {
            related_notifications: false,
            peer_requests: false,
            reason: "Streamable HTTP in JSON response mode",
        });
    }
    let priming = session.version().unwrap_or(version) >= ProtocolVersion::V2025_11_25;
    let mut response = if is_batch {
        deliver_batch(state, &session, messages, &extensions, priming).await
    } else {
        match messages.pop() {
            Some(message) => deliver(state, &session, message, extensions, priming, None).await,
            None => StatusCode::ACCEPTED.into_response(),
        }
    };
    if created && let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_ID, value);
    }
    response
}

/// Decodes a JSON-RPC batch, which only 2025-03-26 allows (and never with `initialize`).
fn parse_batch(
    bytes: &[u8],
    version: ProtocolVersion,
    stateless: bool,
) -> Result<Vec<Message>, Response> {
    let refuse = |id: Option<RequestId>, reason: String| {
        error_for(
            StatusCode::BAD_REQUEST,
            id,
            ErrorObject::invalid_request(reason),
        )
    };
    if version != ProtocolVersion::V2025_03_26 {
        return Err(refuse(
            None,
            format!("JSON-RPC batches exist only in 2025-03-26; this request is {version}"),
        ));
    }
    if stateless {
        return Err(refuse(
            None,
            "a stateless server takes one message per POST".to_owned(),
        ));
    }
    let items: Vec<serde_json::Value> = serde_json::from_slice(bytes)
        .map_err(|e| error_for(StatusCode::BAD_REQUEST, None, ErrorObject::parse_error(e)))?;
    if items.is_empty() {
        return Err(refuse(None, "an empty batch".to_owned()));
    }
    let mut messages = Vec::with_capacity(items.len());
    for item in items {
        let message = Message::from_value(item).map_err(|bad| refuse(bad.id, bad.reason))?;
        if let Message::Request(r) = &message
            && r.method == "initialize"
        {
            return Err(refuse(
                Some(r.id.clone()),
                "initialize cannot be batched".to_owned(),
            ));
        }
        messages.push(message);
    }
    Ok(messages)
}

/// A batch: every message goes to the engine; the requests' responses come back on one SSE
/// stream, or as one JSON array.
async fn deliver_batch(
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

/// Stateless mode: each POST gets its own short-lived engine session.
async fn post_stateless(
    state: &Shared,
    message: Message,
    mut extensions: http::Extensions,
    version: ProtocolVersion,
) -> Response {
    if !matches!(message, Message::Request(_)) {
        // Nothing in a stateless server can be waiting for it.
        return StatusCode::ACCEPTED.into_response();
    }
    extensions.insert(RequestLimits {
        related_notifications: state.config.response_mode == ResponseMode::Sse,
        peer_requests: false,
        reason: "stateless Streamable HTTP",
    });
    // Never a client's session id (those are hex), and unique: each one-shot session's streams
    // and stored events stay its own.
    let n = state
        .stateless_seq
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let session = state.start_session(format!("stateless-{n}").into());
    // Owned by this request from here on: however the POST ends — answered, or dropped by a
    // client that went away before its reply began — the one-shot session ends with it.
    let one_shot = EndOnDrop::new(session.clone(), None);
    let priming = version >= ProtocolVersion::V2025_11_25;
    deliver(
        state,
        &session,
        message,
        extensions,
        priming,
        Some(one_shot),
    )
    .await
}

/// Hands one message to the session's engine and answers the POST.
async fn deliver(
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

fn duplicate(id: RequestId) -> Response {
    error_for(
        StatusCode::CONFLICT,
        Some(id.clone()),
        ErrorObject::invalid_request(format!(
            "request id {id} is already in flight in this session"
        )),
    )
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

fn get(state: &Shared, headers: &HeaderMap) -> Response {
    if state.config.stateless {
        return method_not_allowed("a stateless server has no standalone stream");
    }
    if let Err(r) = check_accept(headers, &["text/event-stream"]) {
        return r;
    }
    if let Err(r) = checks::protocol_version(headers) {
        return r;
    }
    let Some(id) = checks::session_id(headers) else {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: the Mcp-Session-Id header is required",
        );
    };
    let Some(session) = state.sessions.get(id.as_str()) else {
        return session_not_found(&id);
    };
    session.touch();
    // A `Last-Event-ID` resumes the stream it names, and only that one (H19): an id naming no
    // stream this session can replay gets 404, never a silent attach to another stream.
    let (stream, after) = match headers.get(LAST_EVENT_ID) {
        None => (STANDALONE, None),
        Some(value) => {
            let named = value
                .to_str()
                .ok()
                .and_then(parse_event_id)
                .filter(|(stream, _)| session.streams.exists(*stream));
            match named {
                Some((stream, seq)) => (stream, Some(seq)),
                None => {
                    return error(
                        StatusCode::NOT_FOUND,
                        ErrorCode::INVALID_REQUEST,
                        format!(
                            "Not Found: Last-Event-ID {:?} names no stream of this session that \
                             can be resumed (it finished, was dropped to make room, or never \
                             existed)",
                            excerpt(&String::from_utf8_lossy(value.as_bytes()))
                        ),
                    );
                }
            }
        }
    };
    match session.streams.attach(stream, after) {
        Some(cursor) => sse(state, session, stream, cursor, None, None),
        None => error(
            StatusCode::CONFLICT,
            ErrorCode::INVALID_REQUEST,
            "Conflict: this stream already has a reader in this session",
        ),
    }
}

fn delete(state: &Shared, headers: &HeaderMap) -> Response {
    if state.config.stateless {
        return method_not_allowed("a stateless server has no sessions to end");
    }
    let Some(id) = checks::session_id(headers) else {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: the Mcp-Session-Id header is required",
        );
    };
    if state.sessions.end(id.as_str()) {
        StatusCode::OK.into_response()
    } else {
        session_not_found(&id)
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
