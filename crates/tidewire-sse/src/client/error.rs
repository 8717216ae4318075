//! Why connecting failed, and why a connection ended.

use std::fmt;

pub(crate) use tidewire_core::text::{chain, excerpt};

/// Why [`LegacySseConnector::connect`](super::LegacySseConnector::connect) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SseClientError {
    /// The builder's settings were refused before any I/O: a URL that is not http(s) (or
    /// https without TLS support), an invalid header (the reason; never the value), or a
    /// default `reqwest::Client` that could not be built. The same checks as every HTTP client
    /// transport of tidewire.
    #[error(transparent)]
    Setup(#[from] tidewire_http::client::HttpClientError),
    /// The GET failed at the HTTP level.
    #[error("could not open the SSE stream: {0}")]
    Connect(String),
    /// The server answered the GET with an error status.
    #[error("the server answered the SSE GET with HTTP {status}: {body}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer was not `text/event-stream`.
    #[error("the server answered the SSE GET with {content_type:?}, not text/event-stream")]
    NotEventStream {
        /// The content type received.
        content_type: String,
    },
    /// The stream ended, broke or stayed silent before its `endpoint` event.
    #[error("the SSE stream gave no endpoint event: {reason}")]
    NoEndpoint {
        /// What happened.
        reason: String,
    },
    /// The `endpoint` event named a URL that is invalid or on another origin.
    #[error("refusing the endpoint {endpoint:?}: {reason}")]
    BadEndpoint {
        /// The endpoint as sent.
        endpoint: String,
        /// Why it is refused.
        reason: String,
    },
}

/// Why an open connection ended; the `source()` of the fatal `TransportError` the receiver
/// yields.
#[derive(Debug)]
pub(crate) struct ConnectionLost(pub(crate) String);

impl fmt::Display for ConnectionLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConnectionLost {}
