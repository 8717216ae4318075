//! The client error.

use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::session::SessionError;

/// Why a client operation failed.
///
/// Most failures come from the session engine ([`ClientError::Session`]); the predicates
/// ([`is_timeout`](Self::is_timeout), [`is_closed`](Self::is_closed), …) answer the usual
/// questions without matching on it. The cause is printed once: a wrapped [`SessionError`] shows
/// through `Display` unchanged and is not repeated as a `source()`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The request failed in the session: the server answered with an error, it timed out, it
    /// was cancelled, or the connection closed.
    #[error(transparent)]
    Session(SessionError),
    /// The server chose a protocol revision this client cannot speak.
    #[error(
        "the server chose protocol version {answered:?}, which this client cannot use \
         (offered {offered}; usable: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25)"
    )]
    UnsupportedVersion {
        /// The revision the client offered.
        offered: ProtocolVersion,
        /// The revision the server answered with, verbatim.
        answered: String,
    },
    /// The server's answer does not follow the protocol (a result that does not decode, a
    /// pagination cursor that repeats, …).
    #[error("the server's response to {method} is not valid: {reason}")]
    InvalidResponse {
        /// The method called.
        method: String,
        /// What is wrong with the answer.
        reason: String,
    },
    /// Answering one of the server's questions (a stateless `input_required` round) failed:
    /// no handler for it, or the handler's error.
    #[error("answering the server's question {key:?} failed: {error}")]
    Input {
        /// The question's key.
        key: String,
        /// Why it could not be answered.
        error: ErrorObject,
    },
    /// A `list_all_*` call followed `nextCursor` for more pages than the configured limit
    /// (see [`ClientBuilder::max_list_pages`](crate::ClientBuilder::max_list_pages)).
    #[error("{method} returned more than {limit} pages; stopped following nextCursor")]
    TooManyPages {
        /// The list method.
        method: String,
        /// The page limit that was reached.
        limit: usize,
    },
}

impl From<SessionError> for ClientError {
    fn from(error: SessionError) -> Self {
        match error {
            SessionError::InvalidResult { method, reason } => {
                Self::InvalidResponse { method, reason }
            }
            other => Self::Session(other),
        }
    }
}

impl ClientError {
    /// The request timed out (and was cancelled on the server).
    pub fn is_timeout(&self) -> bool {
        self.session().is_some_and(SessionError::is_timeout)
    }

    /// A refusal from a server of the stateless revision (2026-07-28) while connecting: no
    /// version in common, or a header mismatch. Unlike other failures of a stateless probe, it
    /// is no reason to try the session era instead.
    pub fn is_stateless_refusal(&self) -> bool {
        match self {
            Self::UnsupportedVersion { .. } => true,
            other => other
                .remote()
                .is_some_and(|e| e.code == tidewire_core::jsonrpc::ErrorCode::HEADER_MISMATCH.0),
        }
    }

    /// The request was cancelled locally (cancel handle or drop).
    pub fn is_cancelled(&self) -> bool {
        self.session().is_some_and(SessionError::is_cancelled)
    }

    /// The connection is closed.
    pub fn is_closed(&self) -> bool {
        self.session().is_some_and(SessionError::is_closed)
    }

    /// The JSON-RPC error the server answered with, if that is what happened.
    pub fn remote(&self) -> Option<&ErrorObject> {
        self.session().and_then(SessionError::remote)
    }

    /// The HTTP status that failed the request, on an HTTP transport (a refused POST): taken
    /// from the HTTP response, never from a message the server wrote.
    pub fn http_status(&self) -> Option<u16> {
        self.session().and_then(SessionError::http_status)
    }

    /// The session error underneath, if this is one.
    pub fn session(&self) -> Option<&SessionError> {
        match self {
            Self::Session(e) => Some(e),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;
    use std::time::Duration;

    use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};

    use super::*;

    #[test]
    fn predicates_and_display() {
        let e = ClientError::from(SessionError::Timeout(Duration::from_millis(5)));
        assert!(e.is_timeout() && !e.is_closed() && !e.is_cancelled());
        assert_eq!(e.to_string(), "the request timed out after 5ms");
        assert!(
            e.source().is_none(),
            "transparent: the cause is not repeated"
        );

        let remote = ErrorObject::new(ErrorCode::METHOD_NOT_FOUND, "nope");
        let e = ClientError::from(SessionError::Remote(remote.clone()));
        assert_eq!(e.remote(), Some(&remote));

        let e = ClientError::from(SessionError::InvalidResult {
            method: "tools/list".to_owned(),
            reason: "missing field `tools`".to_owned(),
        });
        assert!(matches!(e, ClientError::InvalidResponse { .. }));
        assert!(e.to_string().contains("missing field"));
        assert!(e.session().is_none());
    }
}
