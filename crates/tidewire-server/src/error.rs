//! What a tool handler returns when it fails.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::progress::ProgressError;
use tidewire_core::session::SessionError;
use tidewire_core::text::{chain, excerpt};

use crate::tasks::TaskRefused;

/// A tool failure.
///
/// By default it becomes a *tool execution error*: a result with `isError: true` and the message
/// as text, which the model sees and can react to. [`ToolError::protocol`] makes it a JSON-RPC
/// error instead, for failures the model should not see (the spec's "protocol errors").
///
/// Any error converts with `?`: an `std::io::Error`, a `reqwest::Error`, your own. The client
/// sees a short text (the error's own message, cut to an excerpt); the whole source chain is kept
/// ([`source`](Self::source)) and logged by the server at `debug` level. An [`ErrorObject`] is a
/// protocol error; a [`SessionError`] (a question to the client that failed) names what failed,
/// except a capability a stateless client did not declare, which is the protocol error `-32021`.
///
/// ```
/// use tidewire_server::ToolError;
///
/// fn read(path: &str) -> Result<String, ToolError> {
///     Ok(std::fs::read_to_string(path)?)
/// }
/// let error = read("/no/such/file").unwrap_err();
/// assert!(error.source().is_some());
/// ```
///
/// A message of your own is [`ToolError::new`]. `ToolError` does not implement
/// [`std::error::Error`] itself, which is what lets every error convert into it (and, for the
/// same reason, a `String` does not convert: write `ToolError::new(text)`).
#[derive(Debug, Clone)]
pub struct ToolError {
    message: String,
    protocol: Option<ErrorObject>,
    source: Option<Arc<dyn Error + Send + Sync>>,
}

impl ToolError {
    /// A tool execution error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            protocol: None,
            source: None,
        }
    }

    /// A JSON-RPC error answer instead of an `isError` result.
    pub fn protocol(error: ErrorObject) -> Self {
        Self {
            message: error.message.clone(),
            protocol: Some(error),
            source: None,
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error this one was converted from, with its own sources (for logs; the client sees
    /// only [`message`](Self::message)).
    pub fn source(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        self.source.as_deref()
    }

    pub(crate) fn into_protocol(self) -> Result<String, ErrorObject> {
        if let Some(source) = &self.source {
            tracing::debug!(error = %chain(&**source), "a tool failed");
        }
        match self.protocol {
            Some(error) => Err(error),
            None => Ok(self.message),
        }
    }

    /// From a boxed error (which cannot convert with `?`: a `Box<dyn Error>` is not itself an
    /// `Error`), as any error converts.
    pub fn from_boxed(error: Box<dyn Error + Send + Sync>) -> Self {
        let error = match error.downcast::<ErrorObject>() {
            Ok(error) => return Self::protocol(*error),
            Err(other) => other,
        };
        let error = match error.downcast::<SessionError>() {
            Ok(error) => return Self::from_session(*error),
            Err(other) => other,
        };
        let error = match error.downcast::<TaskRefused>() {
            Ok(refused) => return Self::protocol(refused.into_error()),
            Err(other) => other,
        };
        let error = match error.downcast::<ProgressError>() {
            Ok(error) => return Self::new(error.to_string()),
            Err(other) => other,
        };
        // The message is cut to an excerpt: errors often quote what they could not read
        // (serde quotes the value, which is often the client's text).
        Self {
            message: excerpt(&error.to_string()),
            protocol: None,
            source: Some(Arc::from(error)),
        }
    }

    fn from_session(error: SessionError) -> Self {
        match error {
            missing @ SessionError::MissingCapability { .. } => Self::protocol(missing.into()),
            other => Self::new(other.to_string()),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: Error + Send + Sync + 'static> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::from_boxed(Box::new(error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("the fetch failed")]
    struct Fetch(#[source] std::io::Error);

    #[test]
    fn any_error_converts_keeping_its_chain() {
        let io = std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out");
        let error = ToolError::from(Fetch(io));
        assert_eq!(error.message(), "the fetch failed");
        let source = error.source().expect("the source is kept");
        assert_eq!(chain(source), "the fetch failed: connect timed out");
        assert_eq!(error.into_protocol(), Ok("the fetch failed".to_owned()));
    }

    #[test]
    fn protocol_and_session_errors_keep_their_meaning() {
        let protocol = ToolError::from(ErrorObject::invalid_params("no such city"));
        assert_eq!(
            protocol.into_protocol().map_err(|e| e.code),
            Err(ErrorObject::invalid_params("").code)
        );
        let missing = ToolError::from(SessionError::MissingCapability {
            what: "sampling".to_owned(),
            required: serde_json::json!({"sampling": {}}),
        });
        assert_eq!(missing.into_protocol().map_err(|e| e.code), Err(-32021));
    }

    #[test]
    fn a_long_message_is_cut_for_the_client() {
        let long = std::io::Error::other("x".repeat(10_000));
        let error = ToolError::from(long);
        assert!(error.message().len() < 1_000, "{}", error.message().len());
    }
}
