//! What both client transports check before any I/O: the endpoint URL, and the extra headers
//! every request carries.

use std::fmt;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue};

use super::error::HttpClientError;

/// Headers every request carries, and why the first one that could not be added was refused.
#[derive(Clone, Default)]
pub(crate) struct ExtraHeaders {
    pub(crate) map: HeaderMap,
    pub(crate) error: Option<String>,
}

impl fmt::Debug for ExtraHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be credentials: only their names.
        f.debug_list().entries(self.map.keys()).finish()
    }
}

impl ExtraHeaders {
    /// Adds `name: value`; an invalid one is remembered and refused when connecting.
    pub(crate) fn add<K, V>(&mut self, name: K, value: V)
    where
        K: TryInto<HeaderName>,
        K::Error: fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: fmt::Display,
    {
        let name = name.try_into().map_err(|e| e.to_string());
        let value = value.try_into().map_err(|e| e.to_string());
        match (name, value) {
            (Ok(name), Ok(value)) => {
                self.map.append(name, value);
            }
            (Err(e), _) | (_, Err(e)) => {
                self.error.get_or_insert(e);
            }
        }
    }

    /// `Authorization: Bearer <token>`, marked sensitive so it is never logged.
    pub(crate) fn bearer(&mut self, token: impl fmt::Display) {
        match HeaderValue::try_from(format!("Bearer {token}")) {
            Ok(mut value) => {
                value.set_sensitive(true);
                self.map.insert(AUTHORIZATION, value);
            }
            Err(_) => {
                self.error
                    .get_or_insert_with(|| "the bearer token is not a valid header value".into());
            }
        }
    }

    /// The headers, or why one was refused.
    ///
    /// # Errors
    /// [`HttpClientError::InvalidHeader`].
    pub(crate) fn checked(self) -> Result<HeaderMap, HttpClientError> {
        match self.error {
            Some(error) => Err(HttpClientError::InvalidHeader(error)),
            None => Ok(self.map),
        }
    }
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
