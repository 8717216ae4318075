//! The JSON-RPC error object that travels on the wire, and the codes MCP uses.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The error member of a JSON-RPC response: `code`, `message` and optional `data`.
///
/// This is the wire layer of errors. Handlers return it to answer a request with an error; a
/// client sees it inside `SessionError::Remote`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code (see [`ErrorCode`] for the ones JSON-RPC and MCP define).
    pub code: i64,
    /// A short human-readable description.
    pub message: String,
    /// Extra information, free-form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// Error codes defined by JSON-RPC 2.0 and by MCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i64);

impl ErrorCode {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: Self = Self(-32700);
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: Self = Self(-32600);
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: Self = Self(-32601);
    /// Invalid method parameters.
    pub const INVALID_PARAMS: Self = Self(-32602);
    /// Internal error.
    pub const INTERNAL_ERROR: Self = Self(-32603);
    /// The connection closed before the request completed (as the MCP SDKs use it).
    pub const CONNECTION_CLOSED: Self = Self(-32000);
    /// The request was refused because too many requests are in flight on this connection.
    /// A tidewire code in the implementation-defined server-error range.
    pub const SERVER_BUSY: Self = Self(-32001);
    /// The request's principal lacks a scope the operation needs (a tool with its own scopes):
    /// the answer where no HTTP `403 insufficient_scope` can be given (WebSocket, stdio, a
    /// message past the HTTP layer). Its data is `{"requiredScopes": [...]}`. A tidewire code
    /// in the implementation-defined server-error range.
    pub const INSUFFICIENT_SCOPE: Self = Self(-32003);
    /// MCP (2024-11-05 … 2025-11-25): the resource does not exist.
    pub const RESOURCE_NOT_FOUND: Self = Self(-32002);
    /// MCP 2025-11-25: the request needs a URL-mode elicitation first.
    pub const URL_ELICITATION_REQUIRED: Self = Self(-32042);
    /// MCP 2026-07-28: HTTP headers do not match the body.
    pub const HEADER_MISMATCH: Self = Self(-32020);
    /// MCP 2026-07-28: a required client capability was not declared.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: Self = Self(-32021);
    /// MCP 2026-07-28: the protocol version is not supported.
    pub const UNSUPPORTED_PROTOCOL_VERSION: Self = Self(-32022);
}

impl ErrorObject {
    /// An error with a code and a message, without data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code: code.0,
            message: message.into(),
            data: None,
        }
    }

    /// Adds `data` to the error.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32700`: the message was not valid JSON.
    pub fn parse_error(detail: impl fmt::Display) -> Self {
        Self::new(ErrorCode::PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// `-32600`: the message was JSON but not a valid JSON-RPC message.
    pub fn invalid_request(detail: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::INVALID_REQUEST,
            format!("Invalid request: {detail}"),
        )
    }

    /// `-32601`: nobody handles this method (named by an excerpt of at most 200 characters).
    pub fn method_not_found(method: &str) -> Self {
        // The name is the peer's: quoted by an excerpt, never whole (it may be megabytes).
        Self::new(
            ErrorCode::METHOD_NOT_FOUND,
            format!("Method not found: {}", crate::text::excerpt(method)),
        )
    }

    /// `-32602`: the parameters are wrong.
    pub fn invalid_params(detail: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::INVALID_PARAMS,
            format!("Invalid params: {detail}"),
        )
    }

    /// `-32603`: something went wrong on our side.
    pub fn internal(detail: impl fmt::Display) -> Self {
        Self::new(
            ErrorCode::INTERNAL_ERROR,
            format!("Internal error: {detail}"),
        )
    }

    /// `-32003` ([`ErrorCode::INSUFFICIENT_SCOPE`]): `what` needs every scope in `required`,
    /// and the request's principal (if any) was not granted them all.
    pub fn insufficient_scope(what: &str, required: &[String]) -> Self {
        let mut error = Self::new(
            ErrorCode::INSUFFICIENT_SCOPE,
            format!(
                "Insufficient scope: {} needs the scopes {:?}",
                crate::text::excerpt(what),
                required.join(" ")
            ),
        );
        error.data = Some(serde_json::json!({ "requiredScopes": required }));
        error
    }

    /// The code as an [`ErrorCode`].
    pub fn code(&self) -> ErrorCode {
        ErrorCode(self.code)
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for ErrorObject {}
