//! The answers of refused requests that more than one handler gives: an unknown session, a
//! full session table, a draining server, too many streams, a duplicate id, a method not served
//! here.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, RequestId};
use tidewire_core::text::excerpt;

use super::checks::{error, error_for};

pub(crate) fn session_not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        ErrorCode(-32001),
        format!(
            "Session not found: {:?} is unknown or has ended; initialize a new session",
            excerpt(id)
        ),
    )
}

pub(crate) fn too_many_streams(id: RequestId, limit: usize) -> Response {
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

/// `initialize` on an endpoint that serves only the stateless revision: `-32022` naming the
/// versions it serves.
pub(crate) fn initialize_refused(request: &tidewire_core::jsonrpc::Request) -> Response {
    let refusal = tidewire_core::stateless::initialize_refused(request.params.as_ref());
    error_for(StatusCode::BAD_REQUEST, Some(request.id.clone()), refusal)
}

/// 503 with `Retry-After`: the server drains and takes no new session or stateless request.
pub(crate) fn draining(id: Option<RequestId>) -> Response {
    let mut response = error_for(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        tidewire_core::lifecycle::draining_error(),
    );
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(tidewire_core::lifecycle::DRAINING_RETRY_AFTER_SECS),
    );
    response
}

pub(crate) fn sessions_full(max: usize) -> Response {
    tidewire_core::http::reply::sessions_full(max).into_response()
}

pub(crate) fn method_not_allowed(what: &str) -> Response {
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
