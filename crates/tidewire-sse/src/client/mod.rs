//! The client side of the legacy HTTP+SSE transport (MCP 2024-11-05), on reqwest and
//! eventsource-stream.
//!
//! ```no_run
//! use tidewire_client::Client;
//! use tidewire_core::schema::Implementation;
//! use tidewire_sse::client::LegacySseConnector;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = LegacySseConnector::new("http://127.0.0.1:8080/sse").connect().await?;
//! println!("posting to {}", transport.endpoint());
//! let client = Client::builder(Implementation::new("my-agent", "1.0.0"))
//!     .connect(transport)
//!     .await?;
//! let tools = client.list_all_tools().await?;
//! println!("{} tools", tools.len());
//! client.close().await; // closes the stream, which ends the session on the server
//! # Ok(()) }
//! ```
//!
//! ## What goes over the wire
//! - [`LegacySseConnector::connect`] opens the stream (`GET`, `Accept: text/event-stream`) and waits,
//!   within [`LegacySseConnector::connect_timeout`], for the `endpoint` event. Its data is resolved
//!   against the stream's URL; an endpoint on another origin (scheme, host or port) is refused,
//!   so a server cannot send the client's messages elsewhere.
//! - Each message is POSTed to the endpoint as `application/json`, one at a time, in order;
//!   `send` returns when the server took it (any 2xx, normally 202). Replies arrive on the
//!   stream as `message` events; other events and comments are skipped.
//! - A POST the server refuses (a 4xx other than 404, e.g. 413 for a body too large) fails
//!   that one request: it fails with a JSON-RPC error (`-32000`, or the server's own error
//!   code) naming the HTTP status, through the request's exchange with the engine (no response
//!   is made up), and the connection goes on. A 404 means the server no
//!   longer knows the session: the connection ends.
//! - **No resumption.** When the stream ends or breaks, the session is over (the server ends it
//!   too): the receiver yields a fatal error saying so, every call in flight fails with it, and
//!   the client must connect again, which opens a new session.
//! - Closing the transport (or dropping it) closes the stream.
//! - **Redirects** (of the GET and of every POST) are followed only within the origin of the URL
//!   asked for; one to another origin fails with an error naming the target, since following it
//!   would send the headers you set and the message to another host. (With your own
//!   `reqwest::Client`, its redirect policy applies instead.)
//! - The stream is read as the SSE specification says: one leading UTF-8 byte-order mark is
//!   skipped, lines may end with LF, CR or CRLF, and invalid UTF-8 reads as U+FFFD. Should the
//!   task reading it fail all the same, the connection ends with an error saying so, and every
//!   call in flight fails with it.
//!
//! `tidewire::connect::with_fallback` (in the facade) tries Streamable HTTP first and falls back
//! to this transport for servers that predate it.

mod error;
mod transport;

use tidewire_http::client::HttpClientBase;

pub use error::SseClientError;
pub use transport::{SseClientReceiver, SseClientSender, SseClientTransport};

/// Builds a legacy HTTP+SSE client transport. Setters never fail; [`connect`](Self::connect)
/// reports the first problem.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it connects"]
pub struct LegacySseConnector {
    base: HttpClientBase,
}

impl LegacySseConnector {
    tidewire_http::__http_client_setters!(base, "the GET and every POST");

    /// A client for the stream at `url` (conventionally `http://host:port/sse`).
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            base: HttpClientBase::new(url),
        }
    }

    /// Opens the stream and waits for its `endpoint` event.
    ///
    /// # Errors
    /// A bad URL or header, a connection that fails, an answer that is not an event stream,
    /// a stream without `endpoint` in time, or an endpoint on another origin.
    pub async fn connect(self) -> Result<SseClientTransport, SseClientError> {
        let checked = self.base.check()?;
        let limit = checked.timeouts.connect;
        let settings = transport::Settings {
            url: checked.url,
            headers: checked.headers,
            http: checked.http,
            codec: checked.codec,
            post_timeout: checked.timeouts.request,
            authorizer: checked.authorizer,
        };
        tokio::time::timeout(limit, transport::open(settings))
            .await
            .map_err(|_| SseClientError::NoEndpoint {
                reason: format!("no endpoint event within {limit:?}"),
            })?
    }
}
