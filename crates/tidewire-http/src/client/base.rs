//! What every reqwest-based client builder holds and checks before any I/O (Streamable HTTP,
//! its stateless form, the legacy HTTP+SSE client): the endpoint URL, the headers every
//! request carries, the reqwest client, the codec and the timeouts. The setters are written on
//! each builder by `__http_client_setters!`.

use http::HeaderMap;
use tidewire_core::http::AuthorizerSlot;
use tidewire_core::http::ClientTimeouts;
use tidewire_core::http::InvalidHeader;
use tidewire_core::http::RequestHeaders;
use tidewire_core::transport::Codec;

use super::error::HttpClientError;
use super::redirect::same_origin_policy;

/// The settings every reqwest-based client builder holds (see the module docs).
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct HttpClientBase {
    /// The endpoint, as given.
    pub url: String,
    /// Headers every request carries.
    pub headers: RequestHeaders,
    /// The caller's reqwest client, if any.
    pub http: Option<reqwest::Client>,
    /// The codec, hence the size limit of one message.
    pub codec: Codec,
    /// How long connecting and one HTTP exchange may take.
    pub timeouts: ClientTimeouts,
    pub authorizer: AuthorizerSlot,
}

/// An [`HttpClientBase`], checked and ready: what a transport is made of.
#[doc(hidden)]
#[derive(Debug)]
pub struct Checked {
    /// The endpoint.
    pub url: reqwest::Url,
    /// Headers every request carries.
    pub headers: HeaderMap,
    /// The caller's reqwest client, or one of ours.
    pub http: reqwest::Client,
    /// The codec.
    pub codec: Codec,
    /// The timeouts.
    pub timeouts: ClientTimeouts,
    pub authorizer: AuthorizerSlot,
}

impl HttpClientBase {
    /// The defaults, for the endpoint at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: RequestHeaders::default(),
            http: None,
            codec: Codec::default(),
            timeouts: ClientTimeouts::DEFAULT,
            authorizer: AuthorizerSlot::default(),
        }
    }

    /// Checks the URL (`http`, or `https` when TLS is available: built with `rustls`, or the
    /// caller brings its own client) and the headers, and builds the reqwest client unless the
    /// caller gave one: it follows redirects only within the URL's origin, and gives up
    /// connecting after the connect timeout.
    ///
    /// # Errors
    /// [`HttpClientError::InvalidUrl`], [`HttpClientError::UnsupportedScheme`],
    /// [`HttpClientError::TlsUnavailable`], [`HttpClientError::InvalidHeader`], and
    /// [`HttpClientError::HttpClient`] when the default client cannot be built.
    pub fn check(self) -> Result<Checked, HttpClientError> {
        let headers = self
            .headers
            .checked()
            .map_err(|InvalidHeader(reason)| HttpClientError::InvalidHeader(reason))?;
        let url = endpoint(&self.url, self.http.is_some())?;
        let http = match self.http {
            Some(client) => client,
            None => reqwest::Client::builder()
                .connect_timeout(self.timeouts.connect)
                .redirect(same_origin_policy())
                .build()
                .map_err(HttpClientError::HttpClient)?,
        };
        Ok(Checked {
            url,
            headers,
            http,
            codec: self.codec,
            timeouts: self.timeouts,
            authorizer: self.authorizer,
        })
    }
}

/// The endpoint `url`, checked.
fn endpoint(url: &str, own_client: bool) -> Result<reqwest::Url, HttpClientError> {
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

/// The setters every reqwest-based client builder has, over its [`HttpClientBase`] field:
/// `header`, `bearer` and `request_headers` (`$sent` says which requests carry them),
/// `http_client`, `codec`, `max_message_size`, `connect_timeout` and `request_timeout`.
#[doc(hidden)]
#[macro_export]
macro_rules! __http_client_setters {
    ($base:ident, $sent:literal) => {
        ::tidewire_core::__request_header_setters!($base.headers, $sent);
        ::tidewire_core::__client_timeout_setters!($base.timeouts);

        /// Uses `client` for every HTTP request, so connections (and its settings: proxies,
        /// TLS, pools) are shared with the rest of the program; it must have no total request
        /// timeout, which would cut streams. By default the transport builds its own.
        ///
        /// Its redirect policy is then yours too. The client the transport builds follows
        /// redirects only within the URL's origin (scheme, host and port) and fails a request
        /// redirected elsewhere, because reqwest's default policy would re-send your headers
        /// (API keys), any session id and the body to whatever host the server names. Build
        /// yours with `reqwest::redirect::Policy::none()` or a policy of the same kind unless
        /// you trust every place the server may send you.
        pub fn http_client(mut self, client: $crate::__reqwest::Client) -> Self {
            self.$base.http = Some(client);
            self
        }

        /// The codec, hence the size limit of one message either way (8 MiB by default).
        pub fn codec(mut self, codec: ::tidewire_core::transport::Codec) -> Self {
            self.$base.codec = codec;
            self
        }

        /// Shorthand for `codec(Codec::new(bytes))`: the largest message either way.
        pub fn max_message_size(self, bytes: usize) -> Self {
            self.codec(::tidewire_core::transport::Codec::new(bytes))
        }

        /// Sends the `Authorization` header `authorizer` supplies on every request, and when
        /// the server refuses one with 401 or 403, lets it get new credentials and sends the
        /// request once more (OAuth: `tidewire_auth::client::OAuthSession`). It replaces a
        /// `bearer` set on the builder.
        pub fn authorizer(mut self, authorizer: impl ::tidewire_core::http::Authorizer) -> Self {
            self.$base.authorizer =
                ::tidewire_core::http::AuthorizerSlot(Some(::std::sync::Arc::new(authorizer)));
            self
        }
    };
}
