//! Errors of the client transport: building it, and the failures that end a connection.

use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
pub(crate) use tidewire_core::text::{chain, excerpt};

/// Why [`StreamableHttpConnector::connect`](super::StreamableHttpConnector::connect) refused the
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
    /// [`http_client`](super::StreamableHttpConnector::http_client).
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

/// An error answer made up by the transport (network failure, broken stream, …).
pub(crate) fn transport_error(message: impl Into<String>) -> ErrorObject {
    ErrorObject::new(TRANSPORT_ERROR_CODE, message)
}
