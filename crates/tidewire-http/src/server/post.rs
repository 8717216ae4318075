//! POST: the checks and the body, then the session it belongs to (found, or made by
//! `initialize`), or the stateless path (2026-07-28, or a server in stateless mode); the messages
//! then go to [`deliver`](super::deliver).

// A refused request is answered with an axum `Response`; returning it as the error keeps the
// handlers flat, and it is built once per refused request, never on the happy path.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{DecodeFailure, ErrorCode, ErrorObject, Message, RequestId};
use tidewire_core::transport::{HttpRequestInfo, Principal, RequestLimits, http_reply};

use super::body::{self, BodyBudget};
use super::checks::{self, SESSION_ID, check_accept, check_content_type, error, error_for};
use super::config::ResponseMode;
use super::deliver::{deliver, deliver_batch};
use super::refusals::{initialize_refused, session_not_found, sessions_full};
use super::sse_body::EndOnDrop;
use super::state::{State, StatelessSlot, server_busy};

type Shared = Arc<State>;

/// `principal`: who an authentication layer in front of the endpoint (such as
/// `tidewire_auth::BearerLayer`) says the request acts for; it goes into every message's
/// envelope, so handlers see it and the server binds tasks and request state to it.
pub(crate) async fn post(
    state: &Shared,
    headers: HeaderMap,
    principal: Option<Principal>,
    body: Body,
) -> Response {
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
        // Another principal's session is as unknown as one that never was (nothing leaks).
        Some(id) if !state.config.stateless => {
            match state.sessions.get_for(id.as_str(), principal.as_ref()) {
                Some(session) => Some(session),
                None => return session_not_found(id),
            }
        }
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
            return super::stateless::post(state, headers, principal, message).await;
        }
    }
    let mut extensions = http::Extensions::new();
    extensions.insert(HttpRequestInfo {
        headers,
        session_id: session_header.clone(),
    });
    if let Some(principal) = &principal {
        extensions.insert(principal.clone());
    }

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
            let id = match state.sessions.fresh_id() {
                Ok(id) => id,
                Err(refused) => return http_reply::no_new_session(refused).into_response(),
            };
            let session = state.start_session(id, false);
            session.bind(principal);
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
    let items = Message::batch_from_slice(bytes).map_err(|failure| match failure {
        DecodeFailure::Syntax(e) => {
            error_for(StatusCode::BAD_REQUEST, None, ErrorObject::parse_error(e))
        }
        DecodeFailure::Invalid(bad) => refuse(bad.id, bad.reason),
    })?;
    if items.is_empty() {
        return Err(refuse(None, "an empty batch".to_owned()));
    }
    let mut messages = Vec::with_capacity(items.len());
    for message in items {
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

/// Stateless mode: each POST gets its own short-lived engine session.
async fn post_stateless(
    state: &Shared,
    message: Message,
    mut extensions: http::Extensions,
    version: ProtocolVersion,
) -> Response {
    let Message::Request(request) = &message else {
        // Nothing in a stateless server can be waiting for it.
        return StatusCode::ACCEPTED.into_response();
    };
    // The same cap as the 2026-07-28 wire's: a place among the requests running at once, held
    // until the one-shot session ends.
    let Some(slot) = StatelessSlot::take(state) else {
        return server_busy(state, request.id.clone());
    };
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
    let session = state.start_session(format!("stateless-{n}").into(), true);
    // Owned by this request from here on: however the POST ends — answered, or dropped by a
    // client that went away before its reply began — the one-shot session ends with it.
    let one_shot = EndOnDrop::new(session.clone(), Some(slot));
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
