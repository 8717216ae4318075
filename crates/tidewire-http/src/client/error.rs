//! Errors of the client transport: building it, and the failures that end a connection.

use http::StatusCode;
use serde_json::json;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
pub(crate) use tidewire_core::transport::text::{chain, excerpt};

/// Why [`StreamableHttpClient::connect`](super::StreamableHttpClient::connect) refused the
/// configuration.
///
/// Only configuration is checked there: the transport does no I/O until the session engine sends
/// `initialize`, so an unreachable server shows up as an error answer to that request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HttpClientError {
    /// The endpoint is not a valid absolute URL.
    #[error("{url:?} is not a valid MCP endpoint URL: {reason}")]
    InvalidUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The endpoint's scheme is neither `http` nor `https`.
    #[error("the MCP endpoint must be an http or https URL, not {scheme}:")]
    UnsupportedScheme {
        /// The scheme found.
        scheme: String,
    },
    /// An `https` endpoint, but this build has no TLS: enable the `rustls` feature of
    /// `tidewire-http`, or pass a `reqwest::Client` built with TLS to
    /// [`http_client`](super::StreamableHttpClient::http_client).
    #[error(
        "{url} needs TLS, which this build lacks: enable the `rustls` feature of tidewire-http \
         or pass a reqwest::Client built with TLS"
    )]
    TlsUnavailable {
        /// The endpoint.
        url: String,
    },
    /// A header set on the builder has an invalid name or value.
    #[error("invalid header: {0}")]
    InvalidHeader(String),
    /// The default `reqwest::Client` could not be built.
    #[error("could not build the HTTP client")]
    HttpClient(#[source] reqwest::Error),
}

/// The code of JSON-RPC errors the transport makes up for a request it could not complete.
pub(crate) const TRANSPORT_ERROR_CODE: ErrorCode = ErrorCode::CONNECTION_CLOSED;

/// The error answer for a request whose POST failed at the HTTP level.
///
/// When the body is a JSON-RPC error (many servers send one with a 4xx), its code and message are
/// kept; otherwise the code is `-32000` and the message quotes the start of the body.
pub(crate) fn http_status_error(status: StatusCode, body: &str) -> ErrorObject {
    let reason = status.canonical_reason().unwrap_or("");
    let wire = serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").cloned())
        .and_then(|e| serde_json::from_value::<ErrorObject>(e).ok());
    let (code, detail) = match wire {
        Some(e) => (ErrorCode(e.code), e.message),
        None => (TRANSPORT_ERROR_CODE, excerpt(body)),
    };
    let mut message = format!("HTTP {} {reason}", status.as_u16());
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(&detail);
    }
    ErrorObject::new(code, message).with_data(json!({ "httpStatus": status.as_u16() }))
}

/// An error answer made up by the transport (network failure, broken stream, …).
pub(crate) fn transport_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(TRANSPORT_ERROR_CODE, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_errors_keep_a_json_rpc_error_from_the_body() {
        let e = http_status_error(
            StatusCode::BAD_REQUEST,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Bad session"}}"#,
        );
        assert_eq!(e.code, -32600);
        assert_eq!(e.message, "HTTP 400 Bad Request: Bad session");
        assert_eq!(e.data, Some(json!({"httpStatus": 400})));
    }

    #[test]
    fn http_errors_quote_a_plain_body() {
        let e = http_status_error(StatusCode::INTERNAL_SERVER_ERROR, "boom\n  at line 3");
        assert_eq!(e.code, -32000);
        assert_eq!(e.message, "HTTP 500 Internal Server Error: boom at line 3");
        let e = http_status_error(StatusCode::INTERNAL_SERVER_ERROR, "");
        assert_eq!(e.message, "HTTP 500 Internal Server Error");
    }
}
