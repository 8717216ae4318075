//! What both client transports check before any I/O: the endpoint URL, and the extra headers
//! every request carries (tidewire_core's `RequestHeaders`, as for every client transport).

use http::HeaderMap;
use tidewire_core::transport::{InvalidHeader, RequestHeaders};

use super::error::HttpClientError;

/// The extra headers, checked (see [`RequestHeaders`]).
///
/// # Errors
/// [`HttpClientError::InvalidHeader`].
pub(crate) fn checked(headers: RequestHeaders) -> Result<HeaderMap, HttpClientError> {
    headers
        .checked()
        .map_err(|InvalidHeader(reason)| HttpClientError::InvalidHeader(reason))
}

/// The endpoint `url`, checked: `http`, or `https` when TLS is available (built with `rustls`, or
/// the caller brings its own client).
///
/// # Errors
/// [`HttpClientError::InvalidUrl`], [`HttpClientError::UnsupportedScheme`],
/// [`HttpClientError::TlsUnavailable`].
pub(crate) fn endpoint(url: &str, own_client: bool) -> Result<reqwest::Url, HttpClientError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| HttpClientError::InvalidUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })?;
    match parsed.scheme() {
        "http" => Ok(parsed),
        "https" if own_client || cfg!(feature = "rustls") => Ok(parsed),
        "https" => Err(HttpClientError::TlsUnavailable {
            url: parsed.to_string(),
        }),
        other => Err(HttpClientError::UnsupportedScheme {
            scheme: other.to_owned(),
        }),
    }
}
