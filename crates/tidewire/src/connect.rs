//! Connecting to an HTTP URL whatever the server speaks: the stateless revision or sessions
//! ([`auto`]), Streamable HTTP or, for older servers, legacy HTTP+SSE ([`with_fallback`], the
//! backwards-compatibility rule of MCP 2025-03-26).
//!
//! These choose between transports, so they live above them, here (feature `connect`).

use tidewire_client::{Client, ClientBuilder, ClientError, Era};
use tidewire_http::client::{HttpClientHandle, StatelessHttpConnector, StreamableHttpConnector};
use tidewire_sse::client::{LegacySseConnector, SseClientError};

/// Which transport [`with_fallback`] or [`auto`] ended up on.
#[derive(Debug)]
#[non_exhaustive]
pub enum Fallback {
    /// The server speaks the stateless revision (2026-07-28) on Streamable HTTP
    /// ([`auto`] only).
    Stateless,
    /// The server speaks Streamable HTTP.
    StreamableHttp(HttpClientHandle),
    /// The server refused the `initialize` POST (HTTP 400, 404 or 405) and its URL served a
    /// legacy SSE stream; `endpoint` is where messages go.
    LegacySse {
        /// The POST URL the stream named.
        endpoint: String,
    },
}

/// Why [`with_fallback`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FallbackError {
    /// The URL or a setting was refused before any request.
    #[error("the Streamable HTTP transport refused its configuration: {0}")]
    Config(#[source] tidewire_http::client::HttpClientError),
    /// Streamable HTTP failed in a way that does not mean "old server" (no fallback tried).
    #[error("connecting over Streamable HTTP failed: {0}")]
    StreamableHttp(#[source] ClientError),
    /// The server refused Streamable HTTP, and the legacy SSE stream could not be opened.
    #[error("the server refused Streamable HTTP ({first}) and legacy SSE failed too: {second}")]
    Legacy {
        /// What the `initialize` POST got.
        first: String,
        /// Why the SSE stream failed.
        second: SseClientError,
    },
    /// The SSE stream opened, but the handshake over it failed.
    #[error("connecting over legacy HTTP+SSE failed: {0}")]
    LegacyHandshake(#[source] ClientError),
}

/// Connects to `url` over Streamable HTTP; when the server answers the `initialize` POST with
/// HTTP 400, 404 or 405, opens a legacy SSE stream at the same URL (GET) and connects over that.
///
/// `builder` makes the client (handlers, options) and is called once per attempt.
///
/// ```no_run
/// use tidewire::prelude::*;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let (client, how) = tidewire::connect::with_fallback("http://127.0.0.1:8000/sse", || {
///     Client::builder(Implementation::new("my-agent", "1.0.0"))
/// })
/// .await?;
/// println!("connected over {how:?}");
/// # Ok(()) }
/// ```
///
/// # Errors
/// See [`FallbackError`].
pub async fn with_fallback(
    url: &str,
    builder: impl Fn() -> ClientBuilder,
) -> Result<(Client, Fallback), FallbackError> {
    let transport = StreamableHttpConnector::new(url)
        .connect()
        .await
        .map_err(FallbackError::Config)?;
    let handle = transport.handle();
    let refused = match builder().connect(transport).await {
        Ok(client) => return Ok((client, Fallback::StreamableHttp(handle))),
        Err(error) => match refused_status(&error) {
            Some(status) => format!("HTTP {status} to the initialize POST"),
            None => return Err(FallbackError::StreamableHttp(error)),
        },
    };
    tracing::debug!(%url, %refused, "falling back to legacy HTTP+SSE");
    let transport = LegacySseConnector::new(url)
        .connect()
        .await
        .map_err(|second| FallbackError::Legacy {
            first: refused,
            second,
        })?;
    let endpoint = transport.endpoint().to_owned();
    let client = builder()
        .connect(transport)
        .await
        .map_err(FallbackError::LegacyHandshake)?;
    Ok((client, Fallback::LegacySse { endpoint }))
}

/// Connects to `url` in whichever era the server speaks: first the stateless revision
/// (`server/discover` over [`StatelessHttpConnector`], with `builder`'s client in
/// [`Era::Modern`]); when the answer is not one of that revision (an unknown method, a 4xx
/// without a stateless error, no answer), the session era as [`with_fallback`] does it
/// (Streamable HTTP, then legacy HTTP+SSE). An answer that is the stateless revision's but
/// refuses (no version in common, a header mismatch) is an error, not a reason to fall back.
///
/// # Errors
/// See [`FallbackError`]; the stateless attempt's refusal comes as
/// [`FallbackError::StreamableHttp`].
pub async fn auto(
    url: &str,
    builder: impl Fn() -> ClientBuilder,
) -> Result<(Client, Fallback), FallbackError> {
    let transport = StatelessHttpConnector::new(url)
        .connect()
        .await
        .map_err(FallbackError::Config)?;
    match builder().era(Era::Modern).connect(transport).await {
        Ok(client) => return Ok((client, Fallback::Stateless)),
        Err(error) if error.is_stateless_refusal() => {
            return Err(FallbackError::StreamableHttp(error));
        }
        Err(error) => {
            tracing::debug!(%url, %error, "not the stateless revision: trying sessions");
        }
    }
    with_fallback(url, || builder().era(Era::Legacy)).await
}

/// The HTTP status of a refused `initialize` POST, when it is one that means "not a Streamable
/// HTTP endpoint" (400, 404, 405), as the transport read it from the HTTP response.
fn refused_status(error: &ClientError) -> Option<u16> {
    let status = error.http_status()?;
    matches!(status, 400 | 404 | 405).then_some(status)
}
