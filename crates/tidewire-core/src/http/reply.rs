//! The HTTP answers every tidewire HTTP server gives the same way: a JSON-RPC error in a JSON
//! body with the status that goes with it, and the 503 of a full session table. Plain `http`
//! responses with a `String` body, which any server framework takes (axum as they are).

use http::header::{CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderValue, Response, StatusCode};

use super::sessions::NoNewSession;
use crate::jsonrpc::{ErrorCode, ErrorObject, Message, RequestId};

/// An HTTP answer whose body is the JSON-RPC error `error` for `id` (none: `null`).
pub fn json_rpc_error(
    status: StatusCode,
    id: Option<RequestId>,
    error: ErrorObject,
) -> Response<String> {
    let body = Message::Response(crate::jsonrpc::Response::error(id, error));
    json(status, &body)
}

/// An HTTP answer carrying `message` as its JSON body.
pub fn json(status: StatusCode, message: &Message) -> Response<String> {
    let text = serde_json::to_string(message).unwrap_or_else(|_| String::from("{}"));
    let mut response = Response::new(text);
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// 503 with `Retry-After: 5`: the server holds its maximum of `max` sessions.
pub fn sessions_full(max: usize) -> Response<String> {
    let mut response = json_rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        None,
        ErrorObject::new(
            ErrorCode(-32000),
            format!(
                "Service Unavailable: the server holds its maximum of {max} sessions; retry later"
            ),
        ),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

/// 503 with `Retry-After`: the server drains and takes no new work
/// ([`Lifecycle`](crate::lifecycle::Lifecycle)); a load balancer sends the retry elsewhere.
pub fn draining() -> Response<String> {
    let mut response = json_rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        None,
        crate::lifecycle::draining_error(),
    );
    response.headers_mut().insert(
        RETRY_AFTER,
        HeaderValue::from(crate::lifecycle::DRAINING_RETRY_AFTER_SECS),
    );
    response
}

/// The answer when no session can be opened: [`sessions_full`], [`draining`], or a 500 when
/// no session id can be drawn.
pub fn no_new_session(refusal: NoNewSession) -> Response<String> {
    match refusal {
        NoNewSession::Full(full) => sessions_full(full.max),
        NoNewSession::Draining => draining(),
        NoNewSession::NoRandomness => json_rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            ErrorObject::new(ErrorCode::INTERNAL_ERROR, "cannot draw a session id"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_table_is_a_503_with_retry_after_and_a_json_rpc_body() {
        let response = sessions_full(7);
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[RETRY_AFTER], "5");
        assert_eq!(response.headers()[CONTENT_TYPE], "application/json");
        let body: serde_json::Value = serde_json::from_str(response.body()).expect("JSON");
        assert_eq!(body["error"]["code"], -32000);
        assert_eq!(body["id"], serde_json::Value::Null);
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("7 sessions"))
        );
    }
}
