//! The session error: what can go wrong with one request, in terms a caller can act on.

use std::time::Duration;

use crate::jsonrpc::ErrorObject;
use crate::transport::TransportError;

/// Why a request (or a notification send) failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The peer answered with a JSON-RPC error.
    #[error("the peer answered with an error: {0}")]
    Remote(ErrorObject),
    /// No response came in time; a `notifications/cancelled` was sent.
    #[error("the request timed out after {0:?}")]
    Timeout(Duration),
    /// The request was cancelled locally (explicit cancel); a `notifications/cancelled` was sent.
    #[error("the request was cancelled: {0}")]
    Cancelled(String),
    /// The connection closed before the request completed.
    #[error("the connection closed before the request completed: {0}")]
    Closed(String),
    /// Too many requests are already waiting for responses on this connection.
    #[error("too many requests in flight on this connection (limit {0})")]
    TooManyRequests(usize),
    /// The outbound queue of this connection is full (it holds this many messages), and the
    /// send was one that does not wait ([`Peer::try_notify`](super::Peer::try_notify)): nothing
    /// was sent. The peer is not reading as fast as we write.
    #[error("the outbound queue of this connection is full ({0} messages); nothing was sent")]
    QueueFull(usize),
    /// The peer's result did not match the expected type.
    #[error("the peer's result for {method} is not valid: {reason}")]
    InvalidResult {
        /// The method called.
        method: String,
        /// The decode error.
        reason: String,
    },
    /// Our parameters could not be serialised.
    #[error("could not serialise the parameters for {method}: {reason}")]
    InvalidParams {
        /// The method called.
        method: String,
        /// The serde error.
        reason: String,
    },
    /// The peer did not declare the capability this request needs, so it was not sent.
    #[error("the peer did not declare support for {0}")]
    NotSupported(String),
    /// A stateless (2026-07-28) request needs a capability its client did not declare; answered
    /// `-32021` with `data.requiredCapabilities`.
    #[error("the client did not declare {what}, which this request needs")]
    MissingCapability {
        /// What is missing, in words.
        what: String,
        /// The capabilities needed, as the `requiredCapabilities` object (`{"sampling": {}}`).
        required: serde_json::Value,
    },
    /// The transport refused the message (for example, it exceeds the size limit), or failed
    /// the request (an HTTP status that is not success: see
    /// [`http_status`](Self::http_status)).
    #[error(transparent)]
    Transport(TransportError),
}

impl SessionError {
    /// The request timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout(_))
    }

    /// The connection is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed(_))
    }

    /// The request was cancelled locally.
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Self::Cancelled(_))
    }

    /// A send that does not wait found the outbound queue full.
    pub fn is_queue_full(&self) -> bool {
        matches!(self, Self::QueueFull(_))
    }

    /// The JSON-RPC error the peer answered with, if that is what happened: a JSON-RPC error
    /// response, or the JSON-RPC error in the body of an HTTP status that is not success.
    pub fn remote(&self) -> Option<&ErrorObject> {
        match self {
            Self::Remote(e) => Some(e),
            Self::Transport(e) => e.http_answer(),
            _ => None,
        }
    }

    /// The HTTP status that failed the request, on an HTTP transport: taken from the HTTP
    /// response, never from a message a server wrote.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::Transport(e) => e.http_status(),
            _ => None,
        }
    }
}

impl From<SessionError> for ErrorObject {
    /// The error to answer a request with when a call it made failed: a peer's error as it was,
    /// a missing client capability as `-32021`, anything else as `-32603` naming it.
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::Remote(error) => error,
            SessionError::MissingCapability { what, required } => ErrorObject::new(
                crate::jsonrpc::ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY,
                format!("Missing required client capability: {what}"),
            )
            .with_data(serde_json::json!({ "requiredCapabilities": required })),
            other => ErrorObject::internal(other.to_string()),
        }
    }
}

/// The request was cancelled: what
/// [`RequestContext::check_cancelled`](super::RequestContext::check_cancelled) returns, so a
/// handler that stops where it chooses (between two steps, under
/// [`CancelPolicy::Cooperative`](super::CancelPolicy::Cooperative)) writes
/// `ctx.check_cancelled()?`. Nothing is sent for a cancelled request, so the error only ends
/// the handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the request was cancelled")]
pub struct Cancelled;
