//! [`StreamableHttpClient`]: the builder of the client transport, and its reconnect policy.

use std::fmt;
use std::time::Duration;

use http::header::{HeaderMap, HeaderName, HeaderValue};
use tidewire_core::transport::Codec;

use super::endpoint::{ExtraHeaders, endpoint};
use super::error::HttpClientError;
use super::redirect::same_origin_policy;
use super::shared::{Config, Shared};
use super::transport::HttpClientTransport;

/// The default limit on how long one HTTP exchange may take to get its answer (see
/// [`StreamableHttpClient::request_timeout`]).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How the transport reconnects a broken SSE stream: the standalone GET stream, and the stream
/// of a POST that ended before its response (resumed by GET with `Last-Event-ID`).
///
/// Before each reconnection the transport waits the `retry` time the server last sent on that
/// stream (exactly, as the specification asks). Without one it waits `initial_delay`, doubling
/// after each unproductive attempt up to `max_delay`. An attempt is unproductive when it fails
/// (network error, HTTP error) or when the stream it opens ends without a single event; after
/// `max_attempts` unproductive attempts in a row the transport gives up on that stream (a request
/// waiting on it then fails with an error answer). An attempt that delivers an event resets the
/// count.
///
/// ```
/// use std::time::Duration;
/// use tidewire_http::client::ReconnectPolicy;
///
/// let policy = ReconnectPolicy::default()
///     .initial_delay(Duration::from_millis(250))
///     .max_delay(Duration::from_secs(10))
///     .max_attempts(8);
/// assert_eq!(policy.delay_after(0), Duration::from_millis(250));
/// assert_eq!(policy.delay_after(2), Duration::from_secs(1));
/// assert_eq!(policy.delay_after(20), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    initial_delay: Duration,
    max_delay: Duration,
    max_attempts: u32,
}

impl Default for ReconnectPolicy {
    /// 1 s, doubling up to 30 s, 5 unproductive attempts.
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_attempts: 5,
        }
    }
}

impl ReconnectPolicy {
    /// Never reconnect: a broken stream is given up at once.
    pub const fn never() -> Self {
        Self {
            initial_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            max_attempts: 0,
        }
    }

    /// The wait before the first reconnection when the server sent no `retry` (default 1 s).
    #[must_use]
    pub const fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = delay;
        self
    }

    /// The longest wait between attempts (default 30 s).
    #[must_use]
    pub const fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// How many unproductive attempts in a row before giving up (default 5; 0 never
    /// reconnects).
    #[must_use]
    pub const fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The attempt limit set by [`max_attempts`](Self::max_attempts).
    pub const fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait after `failures` unproductive attempts in a row, when the server sent no
    /// `retry`: `initial_delay × 2^failures`, at most `max_delay`.
    pub fn delay_after(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.initial_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay.max(self.initial_delay))
    }

    /// The wait before the next attempt: the server's `retry` when it sent one (never less, and
    /// exactly that before the first attempt), otherwise [`delay_after`](Self::delay_after).
    pub(crate) fn wait(&self, retry: Option<Duration>, failures: u32) -> Duration {
        match retry {
            Some(retry) if failures == 0 => retry,
            Some(retry) => retry.max(self.delay_after(failures)),
            None => self.delay_after(failures),
        }
    }
}

/// Builds a Streamable HTTP client transport (MCP 2025-03-26 and later).
///
/// Setters never fail; [`connect`](Self::connect) reports the first problem. `connect` does no
/// I/O: the first HTTP request is the `initialize` POST, sent when the session engine starts the
/// handshake.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use tidewire_http::client::{ReconnectPolicy, StreamableHttpClient};
///
/// let transport = StreamableHttpClient::new("http://127.0.0.1:8080/mcp")
///     .bearer("secret-token")
///     .header("x-tenant", "blue")
///     .reconnect(ReconnectPolicy::default().max_attempts(10))
///     .request_timeout(Duration::from_secs(10))
///     .connect()?;
/// # let _ = transport; Ok(()) }
/// ```
#[must_use = "a builder does nothing until it connects"]
pub struct StreamableHttpClient {
    url: String,
    headers: ExtraHeaders,
    http: Option<reqwest::Client>,
    codec: Codec,
    reconnect: ReconnectPolicy,
    get_stream: bool,
    request_timeout: Duration,
}

impl fmt::Debug for StreamableHttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header values may be credentials: print only their names.
        f.debug_struct("StreamableHttpClient")
            .field("url", &self.url)
            .field("headers", &self.headers)
            .field("codec", &self.codec)
            .field("reconnect", &self.reconnect)
            .field("get_stream", &self.get_stream)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl StreamableHttpClient {
    /// A transport for the MCP endpoint at `url` (for example `http://127.0.0.1:8080/mcp`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: ExtraHeaders::default(),
            http: None,
            codec: Codec::default(),
            reconnect: ReconnectPolicy::default(),
            get_stream: true,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// Adds a header to every HTTP request (POST, GET and DELETE). An invalid name or value is
    /// reported by [`connect`](Self::connect).
    ///
    /// The transport sets `Accept`, `Content-Type`, `Mcp-Session-Id`, `MCP-Protocol-Version` and
    /// `Last-Event-ID` itself; on the requests that carry them, its values replace these.
    pub fn header<K, V>(mut self, name: K, value: V) -> Self
    where
        K: TryInto<HeaderName>,
        K::Error: fmt::Display,
        V: TryInto<HeaderValue>,
        V::Error: fmt::Display,
    {
        self.headers.add(name, value);
        self
    }

    /// Adds every header of `headers` to every HTTP request.
    pub fn headers(mut self, headers: HeaderMap) -> Self {
        for (name, value) in &headers {
            self.headers.map.append(name.clone(), value.clone());
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` with every HTTP request (marked sensitive, so it is
    /// not logged).
    pub fn bearer(mut self, token: impl fmt::Display) -> Self {
        self.headers.bearer(token);
        self
    }

    /// Uses `client` for every HTTP request, so connections (and its settings: proxies, TLS,
    /// timeouts) are shared with the rest of the program. By default the transport builds its
    /// own client.
    ///
    /// Its redirect policy is then yours too. The client the transport builds follows redirects
    /// only within the endpoint's origin (scheme, host and port) and fails a request redirected
    /// elsewhere, because reqwest's default policy would re-send your headers (API keys), the
    /// `Mcp-Session-Id` and the body to any host the server names. Build yours with
    /// `reqwest::redirect::Policy::none()` or a policy of the same kind unless you trust every
    /// place the server may send you.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// The codec, hence the size limit of one message, in both directions
    /// ([`Codec::default`] by default: 8 MiB).
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// Shorthand for `codec(Codec::new(bytes))`.
    pub fn max_message_size(self, bytes: usize) -> Self {
        self.codec(Codec::new(bytes))
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

    /// How long one HTTP exchange may take to answer (default 30 s): the whole POST of a
    /// notification or a response, the response headers of a GET, a DELETE. The POST that carries
    /// a request is not bounded here, since the server may hold it open while a tool runs: the
    /// MCP request's own timeout (set on the session or the call) bounds it, and cancelling the
    /// request drops it.
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Checks the configuration and returns the transport. No I/O happens here.
    ///
    /// The transport must then be used within a Tokio runtime: it spawns its background tasks
    /// (POST reply readers, the GET stream) as messages go out.
    ///
    /// # Errors
    /// [`HttpClientError::InvalidUrl`] / [`HttpClientError::UnsupportedScheme`] for a bad
    /// endpoint, [`HttpClientError::TlsUnavailable`] for `https` without TLS support,
    /// [`HttpClientError::InvalidHeader`] for a bad header, [`HttpClientError::HttpClient`] when
    /// the default `reqwest::Client` cannot be built.
    pub fn connect(self) -> Result<HttpClientTransport, HttpClientError> {
        let headers = self.headers.checked()?;
        let url = endpoint(&self.url, self.http.is_some())?;
        let http = match self.http {
            Some(client) => client,
            None => reqwest::Client::builder()
                .connect_timeout(self.request_timeout)
                .redirect(same_origin_policy())
                .build()
                .map_err(HttpClientError::HttpClient)?,
        };
        let config = Config {
            http,
            url,
            headers,
            codec: self.codec,
            reconnect: self.reconnect,
            get_stream: self.get_stream,
            request_timeout: self.request_timeout,
        };
        Ok(HttpClientTransport::new(Shared::new(config)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let p = ReconnectPolicy::default()
            .initial_delay(Duration::from_millis(100))
            .max_delay(Duration::from_millis(1000));
        let waits: Vec<_> = (0..6).map(|n| p.delay_after(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.delay_after(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn the_server_retry_is_waited_exactly_first() {
        let p = ReconnectPolicy::default().initial_delay(Duration::from_secs(1));
        let retry = Some(Duration::from_millis(500));
        assert_eq!(p.wait(retry, 0), Duration::from_millis(500));
        assert_eq!(p.wait(retry, 1), Duration::from_secs(2));
        assert_eq!(p.wait(None, 0), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn connect_checks_the_configuration() {
        let bad = StreamableHttpClient::new("not a url").connect();
        assert!(matches!(bad, Err(HttpClientError::InvalidUrl { .. })));
        let bad = StreamableHttpClient::new("ftp://example.com/mcp").connect();
        assert!(matches!(
            bad,
            Err(HttpClientError::UnsupportedScheme { .. })
        ));
        let bad = StreamableHttpClient::new("http://127.0.0.1:1/mcp")
            .header("bad header", "x")
            .connect();
        assert!(matches!(bad, Err(HttpClientError::InvalidHeader(_))));
        if !cfg!(feature = "rustls") {
            let bad = StreamableHttpClient::new("https://example.com/mcp").connect();
            assert!(matches!(bad, Err(HttpClientError::TlsUnavailable { .. })));
        }
        assert!(
            StreamableHttpClient::new("http://127.0.0.1:1/mcp")
                .bearer("t")
                .connect()
                .is_ok()
        );
    }
}
