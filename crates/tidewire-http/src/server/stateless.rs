//! The 2026-07-28 wire on the same endpoint: each POST is one stateless request, with no
//! session, checked against its headers and answered on its own stream.
//!
//! What the transport checks, in this order (each a JSON error echoing the request id):
//! 1. `_meta` carries the protocol version and the client capabilities — else 400 `-32602`;
//! 2. `MCP-Protocol-Version` equals the `_meta` version — else 400 `-32020`;
//! 3. the version is served — else 400 `-32022` naming the served ones;
//! 4. `Mcp-Method` equals the method (case-sensitive) — else 400 `-32020`;
//! 5. `Mcp-Name` equals `params.name` (`tools/call`, `prompts/get`) or `params.uri`
//!    (`resources/read`), after decoding `=?base64?…?=` — else 400 `-32020`.
//!
//! The server checks the rest (`Mcp-Param-*` against the tool's schema, the method itself).
//! A server that serves requests without a session (a `tidewire_server::Server`: see
//! [`Serve::request_server`](tidewire_core::session::Serve::request_server)) runs each one
//! in the POST's own task ([`served`](super::served)); any other engine runs it in a one-shot
//! engine session that ends with its response. Either way the client closing the response
//! cancels the request. A request whose first message is its
//! response (within [`HttpConfig::json_wait`](super::HttpConfig::json_wait)) is answered as
//! JSON, with the status its error calls for (404 for `-32601`, 400 for the envelope and
//! capability errors); one that sends anything first is answered as SSE, events without ids
//! (there is no resumption on this wire).

// A refused request is answered with an axum `Response`, as in `handlers`.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tidewire_core::jsonrpc::{
    ErrorCode, ErrorObject, Message, Request, RequestId, Response as Reply,
};
use tidewire_core::stateless;
use tidewire_core::stateless::header_value;
use tidewire_core::text::excerpt;
use tidewire_core::transport::{Envelope, Principal, RequestLimits};

use super::checks::{PROTOCOL_VERSION, error, error_for, status_of};
use super::config::ResponseMode;
use super::session::{PostReply, ReplyTarget};
use super::sse_body::{EndOnDrop, sse_from};
use super::state::{State, StatelessSlot, server_busy};
use tidewire_core::http::HttpRequestInfo;

const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// Serves one POST of the stateless wire.
pub(crate) async fn post(
    state: &Arc<State>,
    headers: HeaderMap,
    principal: Option<Principal>,
    message: Message,
) -> Response {
    let request = match message {
        Message::Request(request) => request,
        // Only `notifications/cancelled` exists client to server, and a closed stream already
        // cancels on HTTP: nothing here waits for it.
        Message::Notification(_) => return StatusCode::ACCEPTED.into_response(),
        Message::Response(response) => {
            return error_for(
                StatusCode::BAD_REQUEST,
                response.id,
                ErrorObject::invalid_request(
                    "a client sends no responses on the 2026-07-28 wire (there are no requests \
                     to answer)",
                ),
            );
        }
    };
    if let Err(error) = check(&headers, &request) {
        return error_for(status_of(error.code), Some(request.id), error);
    }
    if state.lifecycle.is_draining() {
        return super::refusals::draining(Some(request.id));
    }
    deliver(state, headers, principal, request).await
}

/// The envelope and header checks, in the order the module documentation gives.
fn check(headers: &HeaderMap, request: &Request) -> Result<(), ErrorObject> {
    let params = request.params.as_ref();
    let header_version = headers
        .get(PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim);
    let same_version = |requested: &str| {
        if header_version == Some(requested) {
            Ok(())
        } else {
            Err(mismatch(format!(
                "MCP-Protocol-Version ({:?}) must equal _meta's protocol version ({:?})",
                excerpt(header_version.unwrap_or("absent")),
                excerpt(requested)
            )))
        }
    };
    match stateless::envelope(params) {
        Ok((_, version)) => same_version(version.as_str())?,
        Err(error) if error.code == ErrorCode::UNSUPPORTED_PROTOCOL_VERSION.0 => {
            same_version(stateless::requested_version(params).unwrap_or(""))?;
            return Err(error);
        }
        Err(error) => return Err(error),
    }
    let method = headers.get(MCP_METHOD).map(|v| v.as_bytes().trim_ascii());
    if method != Some(request.method.as_bytes()) {
        return Err(mismatch(format!(
            "Mcp-Method must name the method {:?}",
            excerpt(&request.method)
        )));
    }
    let name_field = tidewire_core::stateless::name_member(&request.method);
    if let Some(field) = name_field {
        let body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
        let header = headers
            .get(MCP_NAME)
            .map(|v| header_value::decode(v.as_bytes()));
        match (body, header) {
            (Some(body), Some(Ok(header))) if header == body => {}
            (_, Some(Err(e))) => return Err(mismatch(format!("Mcp-Name cannot be read: {e}"))),
            (_, None) => {
                return Err(mismatch(format!(
                    "Mcp-Name is required for {} (it carries params.{field})",
                    request.method
                )));
            }
            _ => {
                return Err(mismatch(format!("Mcp-Name must equal params.{field}")));
            }
        }
    }
    Ok(())
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::new(
        ErrorCode::HEADER_MISMATCH,
        format!("Header mismatch: {message}"),
    )
}

/// Runs the request (without a session, or in a one-shot one) and answers the POST.
async fn deliver(
    state: &Arc<State>,
    headers: HeaderMap,
    principal: Option<Principal>,
    request: Request,
) -> Response {
    let Some(slot) = StatelessSlot::take(state) else {
        return server_busy(state, request.id);
    };
    let id = request.id.clone();
    let sse = state.config.response_mode == ResponseMode::Sse;
    let mut extensions = tidewire_core::Extensions::new();
    extensions.insert(RequestLimits {
        related_notifications: sse,
        peer_requests: false,
        reason: "the stateless 2026-07-28 wire",
    });
    let info = HttpRequestInfo { headers };
    extensions.insert(info.arrival(None));
    extensions.insert(info);
    if let Some(principal) = principal {
        extensions.insert(principal);
    }
    if let Some(server) = &state.requests {
        return super::served::answer(state, server.as_ref(), request, extensions, slot, sse).await;
    }
    let n = state.stateless_seq.fetch_add(1, Ordering::Relaxed);
    let session = state.start_session(format!("stateless-{n}").into(), true);
    // The one-shot session ends with this request, however the POST ends: answered, or dropped
    // by a client that went away (which cancels the request).
    let one_shot = EndOnDrop::new(session.clone(), Some(slot));
    let stream = match session.streams.open() {
        Ok(stream) => stream,
        Err(_) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::INTERNAL_ERROR,
                "a one-shot session has no room for its stream",
            );
        }
    };
    let mut envelope = Envelope::new(Message::Request(request));
    envelope.extensions = extensions;
    envelope.reply = Some(PostReply::slot(
        &session,
        id.clone(),
        ReplyTarget::Stream(stream),
    ));
    let Some(engine_has_it) = session.hand_over(envelope).await else {
        return ended(id);
    };
    let cursor = session.streams.attach(stream, None).unwrap_or(0);
    if !sse {
        // JSON mode: nothing travels before the response, so the answer waits for it (a client
        // that goes away drops this, which ends the one-shot session and cancels the request).
        loop {
            session
                .streams
                .wait_for_event(stream, cursor, state.config.json_wait, engine_has_it)
                .await;
            let Some(events) = session.streams.take(stream, cursor).await else {
                return ended(id);
            };
            if let Some(event) = events.into_iter().find(|e| e.last) {
                session.streams.finish(stream).await;
                drop(one_shot);
                return json(event.data);
            }
        }
    }
    // Wait for the first message: the response alone goes back as JSON (with its status);
    // anything else first makes it a stream.
    session
        .streams
        .wait_for_event(stream, cursor, state.config.json_wait, engine_has_it)
        .await;
    match session.streams.take(stream, cursor).await {
        Some(events) if events.len() == 1 && events[0].last => {
            let body = events[0].data.clone();
            session.streams.finish(stream).await;
            drop(one_shot);
            json(body)
        }
        Some(events) => sse_from(state, session, stream, events, one_shot),
        None => ended(id),
    }
}

/// A response as one JSON body, with the status its error calls for.
fn json(body: bytes::Bytes) -> Response {
    (
        error_status(&body),
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        Body::from(body),
    )
        .into_response()
}

fn ended(id: RequestId) -> Response {
    error_for(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(id),
        ErrorObject::internal("the request ended without a response"),
    )
}

/// The status of a response body: by its error code, 200 for a result. Only an error is
/// decoded: in a response as we write it, `"error":` comes before any `"result":` only in an
/// error (inside a string, its quotes would be escaped).
fn error_status(body: &[u8]) -> StatusCode {
    let find = |needle: &[u8]| body.windows(needle.len()).position(|w| w == needle);
    let is_error = match (find(b"\"error\":"), find(b"\"result\":")) {
        (Some(e), Some(r)) => e < r,
        (Some(_), None) => true,
        _ => false,
    };
    if !is_error {
        return StatusCode::OK;
    }
    match Message::from_slice(body) {
        Ok(Message::Response(Reply {
            outcome: Err(error),
            ..
        })) => status_of(error.code),
        _ => StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: RequestId::Number(7),
            method: method.to_owned(),
            params: Some(params),
        }
    }

    fn meta(version: &str) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        })
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                http::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        map
    }

    #[test]
    fn checks_come_in_order() {
        let good = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "  echo "),
        ];
        let call = |m: Value| request("tools/call", json!({"name": "echo", "_meta": m}));
        assert!(check(&headers(&good), &call(meta("2026-07-28"))).is_ok());
        let code =
            |h: &[(&str, &str)], r: &Request| check(&headers(h), r).expect_err("refused").code;
        assert_eq!(
            code(&good, &request("tools/call", json!({"name": "echo"}))),
            -32602
        );
        let v999 = [
            ("mcp-protocol-version", "v999.0.0"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ];
        assert_eq!(code(&v999, &call(meta("v999.0.0"))), -32022);
        assert_eq!(code(&good, &call(meta("v999.0.0"))), -32020);
        assert_eq!(
            code(&good[..2], &call(meta("2026-07-28"))),
            -32020,
            "no Mcp-Name"
        );
        let upper = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "TOOLS/CALL"),
            ("mcp-name", "echo"),
        ];
        assert_eq!(code(&upper, &call(meta("2026-07-28"))), -32020);
        let wrong = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?ZWNobzI=?="),
        ];
        assert_eq!(code(&wrong, &call(meta("2026-07-28"))), -32020);
    }

    #[test]
    fn statuses_follow_the_error() {
        assert_eq!(status_of(-32601), StatusCode::NOT_FOUND);
        assert_eq!(status_of(-32021), StatusCode::BAD_REQUEST);
        assert_eq!(status_of(-32603), StatusCode::OK);
        assert_eq!(
            error_status(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}"#),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            error_status(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            StatusCode::OK
        );
    }
}
