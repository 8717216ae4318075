//! The endpoint (it checks `Host`/`Origin` first): POST ([`post`](super::post)), GET (the
//! standalone stream, or a resumed one) and DELETE (the end of a session).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidewire_core::jsonrpc::ErrorCode;
use tidewire_core::text::excerpt;

use super::checks::{self, LAST_EVENT_ID, check_accept, error};
use super::post::post;
use super::refusals::{method_not_allowed, session_not_found};
use super::sse_body::sse;
use super::state::State;
use super::streams::{STANDALONE, parse_event_id};

use tidewire_core::transport::Principal;

/// The endpoint: the `Host`/`Origin` rule first (what `HostLayer` would do, without the boxing
/// of a router layer), then a dispatch on the method.
///
/// The request is taken whole and split: axum's `HeaderMap`, `Method` and `Extension`
/// extractors would each clone their part (a header map clone is several allocations, and
/// promotes every custom header name to a shared buffer), where taking the parts moves them.
pub(crate) async fn endpoint(
    Extract(state): Extract<Arc<State>>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let axum::http::request::Parts {
        method,
        headers,
        mut extensions,
        ..
    } = parts;
    // What an authorization layer in front said of the caller; the rest goes now, as it did
    // when extractors read the request.
    let principal = extensions.remove::<Principal>();
    drop(extensions);
    if let Err(refused) = state.config.limits.hosts.check(&headers) {
        return refused.response().map(Body::from);
    }
    match method {
        Method::POST => post(&state, headers, principal, body).await,
        Method::GET | Method::DELETE if !state.config.eras.legacy() => method_not_allowed(
            "this endpoint serves only the stateless revision (2026-07-28): POST each request",
        ),
        Method::GET => get(&state, &headers, principal.as_ref()),
        Method::DELETE => delete(&state, &headers, principal.as_ref()),
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

fn get(state: &Arc<State>, headers: &HeaderMap, principal: Option<&Principal>) -> Response {
    if state.config.one_shot {
        return method_not_allowed("a server of one-shot sessions has no standalone stream");
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
    let Some(session) = state.sessions.get_for(id.as_str(), principal) else {
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

fn delete(state: &Arc<State>, headers: &HeaderMap, principal: Option<&Principal>) -> Response {
    if state.config.one_shot {
        return method_not_allowed("a server of one-shot sessions has no sessions to end");
    }
    let Some(id) = checks::session_id(headers) else {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: the Mcp-Session-Id header is required",
        );
    };
    let owned = state.sessions.get_for(id.as_str(), principal).is_some();
    if owned && state.sessions.end(id.as_str()) {
        StatusCode::OK.into_response()
    } else {
        session_not_found(&id)
    }
}
