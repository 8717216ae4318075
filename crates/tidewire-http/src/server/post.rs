//! POST, the front door: the checks and the body, read and decoded once, then one of three
//! lanes: the stateless revision 2026-07-28 ([`stateless`](super::stateless)), one-shot
//! sessions ([`one_shot`](super::one_shot)), or the session the POST belongs to
//! ([`session_post`](super::session_post)).

// A refused request is answered with an axum `Response`; returning it as the error keeps the
// handlers flat, and it is built once per refused request, never on the happy path.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tidewire_core::ProtocolVersion;
use tidewire_core::http::HttpRequestInfo;
use tidewire_core::jsonrpc::{DecodeFailure, ErrorObject, Message, RequestId};
use tidewire_core::transport::Principal;

use super::body::{self, BodyBudget};
use super::checks::{self, check_accept, check_content_type, error_for};
use super::refusals::{initialize_refused, session_not_found};
use super::state::State;

/// `principal`: who an authentication layer in front of the endpoint (such as
/// `tidewire_auth::BearerLayer`) says the request acts for; it goes into every message's
/// envelope, so handlers see it and the server binds tasks and request state to it.
pub(crate) async fn post(
    state: &Arc<State>,
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
        Some(id) if !state.config.one_shot => {
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
    // One message is not put in a `Vec` until the session era needs one (the stateless wire
    // takes it as it is).
    let (mut messages, single) = if is_batch {
        match parse_batch(&bytes, version, state.config.one_shot) {
            Ok(messages) => (messages, None),
            Err(refused) => return refused,
        }
    } else {
        match Message::from_slice(&bytes) {
            Ok(message) => (Vec::new(), Some(message)),
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
    // The body (most often a slice of the connection's read buffer) goes before the request
    // runs: the message owns what it read.
    drop(bytes);
    if let Some(message) = single {
        if known.is_none() && eras.modern() {
            let stateless_body = match &message {
                Message::Request(r) => {
                    tidewire_core::version::is_stateless_request(r.params.as_ref())
                }
                _ => false,
            };
            if stateless_header || stateless_body || !eras.legacy() {
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
        messages.push(message);
    }
    let mut extensions = tidewire_core::Extensions::new();
    let info = HttpRequestInfo { headers };
    extensions.insert(info.arrival(session_header));
    extensions.insert(info);
    if let Some(principal) = &principal {
        extensions.insert(principal.clone());
    }

    if state.config.one_shot {
        let Some(message) = messages.pop() else {
            return StatusCode::ACCEPTED.into_response();
        };
        return super::one_shot::post(state, message, extensions, version).await;
    }

    super::session_post::post(
        state, known, principal, messages, is_batch, extensions, version,
    )
    .await
}

/// Decodes a JSON-RPC batch, which only 2025-03-26 allows (and never with `initialize`).
fn parse_batch(
    bytes: &[u8],
    version: ProtocolVersion,
    one_shot: bool,
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
    if one_shot {
        return Err(refuse(
            None,
            "a server of one-shot sessions takes one message per POST".to_owned(),
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
