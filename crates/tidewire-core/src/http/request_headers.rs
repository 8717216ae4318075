//! [`RequestHeaders`]: the headers a client transport sends with every HTTP request.

use std::fmt;

use http::header::AUTHORIZATION;
use http::{HeaderMap, HeaderName, HeaderValue};

/// Headers a client transport sends with every HTTP request it makes (the POSTs and GETs of
/// Streamable HTTP and HTTP+SSE, the WebSocket upgrade): set one by one, checked once, when the
/// transport connects. The same type behind every tidewire client builder's `header` and
/// `bearer`.
///
/// Values may be credentials: `Debug` shows the names only, and a bearer token is marked
/// sensitive (hyper and reqwest then keep it out of their logs).
///
/// ```
/// use tidewire_core::http::RequestHeaders;
///
/// let mut headers = RequestHeaders::default();
/// headers.add("x-tenant", "blue");
/// headers.bearer("secret");
/// let map = headers.checked().expect("valid");
/// assert!(map["authorization"].is_sensitive());
///
/// let mut more = RequestHeaders::default();
/// more.add("x-trace", "1");
/// let mut all = RequestHeaders::default();
/// all.extend(more);
/// assert!(all.checked().expect("valid").contains_key("x-trace"));
///
/// let mut bad = RequestHeaders::default();
/// bad.add("not a name", "x");
/// assert!(bad.checked().is_err());
/// ```
#[derive(Clone, Default)]
pub struct RequestHeaders {
    map: HeaderMap,
    error: Option<String>,
}

/// A header that could not be set, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid header: {0}")]
pub struct InvalidHeader(pub String);

impl fmt::Debug for RequestHeaders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.map.keys()).finish()
    }
}

impl RequestHeaders {
    /// Adds `name: value` (a name may repeat). An invalid one is remembered and refused by
    /// [`checked`](Self::checked).
    pub fn add<K, V>(&mut self, name: K, value: V)
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

    /// `Authorization: Bearer <token>`, replacing any earlier `Authorization`, marked sensitive.
    pub fn bearer(&mut self, token: impl fmt::Display) {
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

    /// Adds every header of `other` (and remembers its first invalid one, if this has none).
    pub fn extend(&mut self, other: RequestHeaders) {
        self.map.extend(other.map);
        if self.error.is_none() {
            self.error = other.error;
        }
    }

    /// The headers, or why the first invalid one was refused.
    ///
    /// # Errors
    /// [`InvalidHeader`], naming the problem (never the value).
    pub fn checked(self) -> Result<HeaderMap, InvalidHeader> {
        match self.error {
            Some(error) => Err(InvalidHeader(error)),
            None => Ok(self.map),
        }
    }
}

/// The `header` and `bearer` setters every client builder has, over a [`RequestHeaders`]
/// field; `$sent` says which requests carry them.
#[doc(hidden)]
#[macro_export]
macro_rules! __request_header_setters {
    ($($field:ident).+, $sent:literal) => {
        #[doc = concat!("A header sent with ", $sent, " (a name may repeat); an invalid one is refused when connecting.")]
        pub fn header<K, V>(mut self, name: K, value: V) -> Self
        where
            K: TryInto<$crate::__http::HeaderName>,
            K::Error: ::std::fmt::Display,
            V: TryInto<$crate::__http::HeaderValue>,
            V::Error: ::std::fmt::Display,
        {
            self.$($field).+.add(name, value);
            self
        }

        #[doc = concat!("Every header of `headers` with ", $sent, ", as `header` and `bearer` would add them.")]
        pub fn request_headers(mut self, headers: $crate::http::RequestHeaders) -> Self {
            self.$($field).+.extend(headers);
            self
        }

        #[doc = concat!("`Authorization: Bearer <token>` with ", $sent, ", marked sensitive (kept out of logs).")]
        pub fn bearer(mut self, token: impl ::std::fmt::Display) -> Self {
            self.$($field).+.bearer(token);
            self
        }
    };
}
