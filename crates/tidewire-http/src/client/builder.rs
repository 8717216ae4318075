//! [`StreamableHttpConnector`]: the builder of the client transport, and its reconnect policy.

use std::fmt;
use std::time::Duration;

use http::header::HeaderMap;
use tidewire_core::http::ClientTimeouts;

use super::base::HttpClientBase;
use super::error::HttpClientError;
use super::reconnect::ReconnectPolicy;
use super::shared::{Config, TransportState};
use super::transport::HttpClientTransport;

/// The default limit on how long one HTTP exchange may take to get its answer (see
/// [`StreamableHttpConnector::request_timeout`]).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = ClientTimeouts::DEFAULT.request;

/// Builds a Streamable HTTP client transport (MCP 2025-03-26 and later).
///
/// Setters never fail; [`connect`](Self::connect) reports the first problem. `connect` does no
/// I/O: the first HTTP request is the `initialize` POST, sent when the session engine starts the
/// handshake.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tidewire_http::client::{ReconnectPolicy, StreamableHttpConnector};
///
/// let transport = StreamableHttpConnector::new("http://127.0.0.1:8080/mcp")
///     .bearer("secret-token")
///     .header("x-tenant", "blue")
///     .reconnect(ReconnectPolicy::default().max_attempts(10))
///     .request_timeout(Duration::from_secs(10))
///     .connect()
///     .await?;
/// # let _ = transport; Ok(()) }
/// ```
#[must_use = "a builder does nothing until it connects"]
pub struct StreamableHttpConnector {
    base: HttpClientBase,
    reconnect: ReconnectPolicy,
    get_stream: bool,
}

impl fmt::Debug for StreamableHttpConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be credentials: print only their names.
        f.debug_struct("StreamableHttpConnector")
            .field("base", &self.base)
            .field("reconnect", &self.reconnect)
            .field("get_stream", &self.get_stream)
            .finish_non_exhaustive()
    }
}

impl StreamableHttpConnector {
    crate::__http_client_setters!(base, "every HTTP request (POST, GET, DELETE)");

    /// A transport for the MCP endpoint at `url` (for example `http://127.0.0.1:8080/mcp`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            base: HttpClientBase::new(url),
            reconnect: ReconnectPolicy::default(),
            get_stream: true,
        }
    }

    /// Adds every header of `headers` to every HTTP request.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        for (name, value) in &headers {
            self.base.headers.add(name.clone(), value.clone());
        }
        self
    }

    /// How broken SSE streams are reconnected ([`ReconnectPolicy::default`] by default).
    pub fn reconnect(mut self, policy: ReconnectPolicy) -> Self {
        self.reconnect = policy;
        self
    }

    /// Whether to open the standalone GET stream for messages the server sends outside any
    /// request (default `true`). A server that has none (it answers 405) is tolerated either way.
    pub fn get_stream(mut self, open: bool) -> Self {
        self.get_stream = open;
        self
    }

    /// Checks the configuration and returns the transport: `connect().await`, as every client
    /// transport of tidewire. No I/O happens yet: the first request (the engine's
    /// `initialize`) is the first POST.
    ///
    /// The transport must then be used within a Tokio runtime: it spawns its background tasks
    /// (POST reply readers, the GET stream) as messages go out.
    ///
    /// # Errors
    /// [`HttpClientError::InvalidUrl`] / [`HttpClientError::UnsupportedScheme`] for a bad
    /// endpoint, [`HttpClientError::TlsUnavailable`] for `https` without TLS support,
    /// [`HttpClientError::InvalidHeader`] for a bad header, [`HttpClientError::HttpClient`] when
    /// the default `reqwest::Client` cannot be built.
    pub async fn connect(self) -> Result<HttpClientTransport, HttpClientError> {
        // The stateless wire beside the sessions, for a server of the 2026-07-28 revision
        // (`Era::Auto` probes it; nothing is sent on it otherwise).
        let stateless = super::StatelessHttpConnector::from_base(self.base.clone())
            .connect()
            .await?;
        let checked = self.base.check()?;
        let config = Config {
            http: checked.http,
            url: checked.url,
            headers: checked.headers,
            codec: checked.codec,
            reconnect: self.reconnect,
            get_stream: self.get_stream,
            request_timeout: checked.timeouts.request,
            authorizer: checked.authorizer,
        };
        Ok(HttpClientTransport::new(
            TransportState::new(config),
            stateless,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connect_checks_the_configuration() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let bad = StreamableHttpConnector::new("not a url").connect().await;
            assert!(matches!(bad, Err(HttpClientError::InvalidUrl { .. })));
            let bad = StreamableHttpConnector::new("ftp://example.com/mcp")
                .connect()
                .await;
            assert!(matches!(
                bad,
                Err(HttpClientError::UnsupportedScheme { .. })
            ));
            let bad = StreamableHttpConnector::new("http://127.0.0.1:1/mcp")
                .header("bad header", "x")
                .connect()
                .await;
            assert!(matches!(bad, Err(HttpClientError::InvalidHeader(_))));
            if !cfg!(feature = "rustls") {
                let bad = StreamableHttpConnector::new("https://example.com/mcp")
                    .connect()
                    .await;
                assert!(matches!(bad, Err(HttpClientError::TlsUnavailable { .. })));
            }
            assert!(
                StreamableHttpConnector::new("http://127.0.0.1:1/mcp")
                    .bearer("t")
                    .connect()
                    .await
                    .is_ok()
            );
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
