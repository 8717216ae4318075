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

    /// True when the error concerns a single message and the connection can go on.
    pub fn is_recoverable(&self) -> bool {
        self.is_malformed() || self.is_too_large() || self.is_session_ended()
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
