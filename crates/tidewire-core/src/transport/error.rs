//! The transport error: opaque, with predicates a caller can act on.

use std::fmt;
use std::sync::Arc;

use crate::jsonrpc::{ErrorObject, Response};

/// An error from a transport.
///
/// Some errors are fatal (the connection is gone: [`is_closed`](Self::is_closed),
/// [`is_io`](Self::is_io)); others concern one message only
/// ([`is_malformed`](Self::is_malformed), [`is_too_large`](Self::is_too_large)) and the connection
/// goes on. A malformed inbound message may carry the JSON-RPC error response the peer deserves
/// ([`error_response`](Self::error_response)); the session engine sends it back.
#[derive(Clone)]
pub struct TransportError {
    kind: Kind,
}

#[derive(Clone)]
enum Kind {
    Closed,
    Io(Arc<std::io::Error>),
    Malformed {
        reason: String,
        response: Option<Box<Response>>,
    },
    TooLarge {
        size: usize,
        limit: usize,
        response: Option<Box<Response>>,
    },
    Other(Arc<dyn std::error::Error + Send + Sync>),
    SessionEnded(String),
    HttpStatus(Box<HttpFailure>),
}

/// A request's HTTP exchange answered with a status that is not success.
#[derive(Clone)]
struct HttpFailure {
    status: u16,
    /// The JSON-RPC error the body carried, if it carried one.
    answer: Option<ErrorObject>,
    /// The start of a body that carried no JSON-RPC error, made safe to print.
    detail: String,
    /// What the transport was doing, when it was not the request's own POST.
    context: Option<String>,
}

impl TransportError {
    /// The connection is closed.
    pub fn closed() -> Self {
        Self { kind: Kind::Closed }
    }

    /// An I/O error; the connection is unusable.
    pub fn io(error: std::io::Error) -> Self {
        Self {
            kind: Kind::Io(Arc::new(error)),
        }
    }

    /// One inbound message was malformed; `response` is the error to send back, if any.
    pub fn malformed(reason: impl Into<String>, response: Option<Response>) -> Self {
        Self {
            kind: Kind::Malformed {
                reason: reason.into(),
                response: response.map(Box::new),
            },
        }
    }

    /// A message of `size` bytes exceeded the `limit`.
    pub fn too_large(size: usize, limit: usize, inbound: bool) -> Self {
        let response = inbound.then(|| {
            Box::new(Response::error(
                None,
                ErrorObject::invalid_request(format!(
                    "message of {size} bytes exceeds the limit of {limit} bytes"
                )),
            ))
        });
        Self {
            kind: Kind::TooLarge {
                size,
                limit,
                response,
            },
        }
    }

    /// Any other transport-specific failure; treated as fatal.
    pub fn other(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self {
            kind: Kind::Other(Arc::new(error)),
        }
    }

    /// The server ended the session the transport carried (Streamable HTTP: a 404 to a request
    /// with its session id); the connection goes on, and a client that wants a session again
    /// sends a new `initialize` (the client API does so on its own).
    pub fn session_ended(reason: impl Into<String>) -> Self {
        Self {
            kind: Kind::SessionEnded(reason.into()),
        }
    }

    /// The server answered a request's HTTP exchange with `status`, not a success: the request
    /// fails with this error and the connection goes on. When `body` is a JSON-RPC error
    /// response (as servers send with a 4xx), that error is kept whole
    /// ([`http_answer`](Self::http_answer)); otherwise the start of the body is kept for the
    /// message, made safe to print.
    pub fn http(status: u16, body: impl AsRef<[u8]>) -> Self {
        let body = body.as_ref();
        let answer = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|mut v| v.get_mut("error").map(serde_json::Value::take))
            .and_then(|e| serde_json::from_value::<ErrorObject>(e).ok());
        let detail = match &answer {
            Some(_) => String::new(),
            None => crate::text::excerpt(&String::from_utf8_lossy(body)),
        };
        Self {
            kind: Kind::HttpStatus(Box::new(HttpFailure {
                status,
                answer,
                detail,
                context: None,
            })),
        }
    }

    /// Says what the transport was doing when an HTTP status failed it (for a failure that is
    /// not the request's own POST: resuming its stream, say). Other errors are unchanged.
    #[must_use]
    pub fn during(mut self, context: impl Into<String>) -> Self {
        if let Kind::HttpStatus(failure) = &mut self.kind {
            failure.context = Some(context.into());
        }
        self
    }

    /// The HTTP status that failed the request, when that is what happened
    /// ([`http`](Self::http)). Read from the HTTP response itself, never from a message body.
    pub fn http_status(&self) -> Option<u16> {
        match &self.kind {
            Kind::HttpStatus(failure) => Some(failure.status),
            _ => None,
        }
    }

    /// The JSON-RPC error the body of a failed HTTP exchange carried, if it carried one.
    pub fn http_answer(&self) -> Option<&ErrorObject> {
        match &self.kind {
            Kind::HttpStatus(failure) => failure.answer.as_ref(),
            _ => None,
        }
    }

    /// The server ended the session; the connection goes on (see
    /// [`session_ended`](Self::session_ended)).
    pub fn is_session_ended(&self) -> bool {
        matches!(self.kind, Kind::SessionEnded(_))
    }

    /// The connection is closed (by the peer, or locally).
    pub fn is_closed(&self) -> bool {
        matches!(self.kind, Kind::Closed)
    }

    /// An I/O error broke the connection.
    pub fn is_io(&self) -> bool {
        matches!(self.kind, Kind::Io(_))
    }

    /// One message was not valid JSON or not valid JSON-RPC; the connection goes on.
    pub fn is_malformed(&self) -> bool {
        matches!(self.kind, Kind::Malformed { .. })
    }

    /// One message exceeded the size limit; the connection goes on.
    pub fn is_too_large(&self) -> bool {
        matches!(self.kind, Kind::TooLarge { .. })
    }

    /// The size of a message over the limit, and the limit, when that is what this is
    /// ([`is_too_large`](Self::is_too_large)).
    pub fn too_large_sizes(&self) -> Option<(usize, usize)> {
        match &self.kind {
            Kind::TooLarge { size, limit, .. } => Some((*size, *limit)),
            _ => None,
        }
    }

    /// True when the error concerns a single message and the connection can go on.
    pub fn is_recoverable(&self) -> bool {
        self.is_malformed()
            || self.is_too_large()
            || self.is_session_ended()
            || self.http_status().is_some()
    }

    /// The JSON-RPC error response to send back for a bad inbound message, if it deserves one.
    pub fn error_response(&self) -> Option<&Response> {
        match &self.kind {
            Kind::Malformed { response, .. } | Kind::TooLarge { response, .. } => {
                response.as_deref()
            }
            _ => None,
        }
    }
}

impl fmt::Debug for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TransportError({self})")
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Closed => f.write_str("the connection is closed"),
            Kind::Io(_) => f.write_str("I/O error on the connection"),
            Kind::Malformed { reason, .. } => write!(f, "malformed message: {reason}"),
            Kind::TooLarge { size, limit, .. } => {
                write!(
                    f,
                    "message of {size} bytes exceeds the limit of {limit} bytes"
                )
            }
            Kind::Other(_) => f.write_str("transport failure"),
            Kind::SessionEnded(reason) => write!(f, "the server ended the session: {reason}"),
            Kind::HttpStatus(failure) => {
                if let Some(context) = &failure.context {
                    write!(f, "{context}: ")?;
                }
                // Only an HTTP transport makes this error, and it builds with the `http` feature.
                #[cfg(feature = "http")]
                let reason = http::StatusCode::from_u16(failure.status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("");
                #[cfg(not(feature = "http"))]
                let reason = "";
                write!(f, "HTTP {}", failure.status)?;
                if !reason.is_empty() {
                    write!(f, " {reason}")?;
                }
                let detail = match &failure.answer {
                    Some(answer) => crate::text::excerpt(&answer.message),
                    None => failure.detail.clone(),
                };
                if !detail.is_empty() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for TransportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            Kind::Io(e) => Some(e.as_ref()),
            Kind::Other(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}

impl From<std::io::Error> for TransportError {
    fn from(e: std::io::Error) -> Self {
        if matches!(
            e.kind(),
            std::io::ErrorKind::BrokenPipe
                | std::io::ErrorKind::ConnectionReset
                | std::io::ErrorKind::UnexpectedEof
        ) {
            Self::closed()
        } else {
            Self::io(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The status line's reason phrase: read from the `http` crate, so only with the feature.
    fn reason(phrase: &str) -> String {
        if cfg!(feature = "http") {
            format!(" {phrase}")
        } else {
            String::new()
        }
    }

    #[test]
    fn an_http_failure_keeps_the_json_rpc_error_of_its_body() {
        let body = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"Bad version","data":{"supported":["2026-07-28"]}}}"#;
        let e = TransportError::http(400, body);
        assert_eq!(e.http_status(), Some(400));
        let answer = e.http_answer().expect("the body's error");
        assert_eq!(answer.code, -32022);
        assert_eq!(answer.data, Some(json!({"supported": ["2026-07-28"]})));
        assert_eq!(
            e.to_string(),
            format!("HTTP 400{}: Bad version", reason("Bad Request"))
        );
        assert!(e.is_recoverable() && !e.is_closed());
    }

    #[test]
    fn an_http_failure_quotes_a_plain_body_safely() {
        let e = TransportError::http(500, "boom\n  at line 3\u{1b}[2J");
        assert_eq!(e.http_answer(), None);
        let start = format!(
            "HTTP 500{}: boom at line 3",
            reason("Internal Server Error")
        );
        assert!(e.to_string().starts_with(&start), "{e}");
        assert!(!e.to_string().contains('\u{1b}'), "{e}");
        let e = TransportError::http(502, "").during("resuming the stream failed");
        assert_eq!(
            e.to_string(),
            format!(
                "resuming the stream failed: HTTP 502{}",
                reason("Bad Gateway")
            )
        );
        assert_eq!(TransportError::closed().http_status(), None);
    }
}
