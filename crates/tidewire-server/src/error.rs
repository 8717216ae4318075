//! What a tool handler returns when it fails.

use std::fmt;

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::session::SessionError;

/// A tool failure.
///
/// By default it becomes a *tool execution error*: a result with `isError: true` and the message
/// as text, which the model sees and can react to. [`ToolError::protocol`] makes it a JSON-RPC
/// error instead, for failures the model should not see (the spec's "protocol errors").
#[derive(Debug, Clone)]
pub struct ToolError {
    message: String,
    protocol: Option<ErrorObject>,
}

impl ToolError {
    /// A tool execution error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            protocol: None,
        }
    }

    /// A JSON-RPC error answer instead of an `isError` result.
    pub fn protocol(error: ErrorObject) -> Self {
        Self {
            message: error.message.clone(),
            protocol: Some(error),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn into_protocol(self) -> Result<String, ErrorObject> {
        match self.protocol {
            Some(error) => Err(error),
            None => Ok(self.message),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::new(message)
    }
}

impl From<ErrorObject> for ToolError {
    fn from(error: ErrorObject) -> Self {
        Self::protocol(error)
    }
}

impl From<SessionError> for ToolError {
    /// A tool execution error naming what failed; except a capability a stateless client did
    /// not declare, which is the protocol error `-32021` (with `requiredCapabilities`).
    fn from(error: SessionError) -> Self {
        match error {
            missing @ SessionError::MissingCapability { .. } => Self::protocol(missing.into()),
            other => Self::new(other.to_string()),
        }
    }
}

impl From<serde_json::Error> for ToolError {
    /// A tool execution error naming the serde error; cut to an
    /// [`excerpt`](tidewire_core::transport::text::excerpt), since serde quotes the value it
    /// could not read, which is often the client's text.
    fn from(error: serde_json::Error) -> Self {
        Self::new(tidewire_core::transport::text::excerpt(&error.to_string()))
    }
}
