//! The client side of Streamable HTTP, in both eras: a transport that talks to one MCP
//! endpoint over HTTP (sessions of 2025-03-26 … 2025-11-25, and the stateless revision
//! 2026-07-28), built on reqwest and eventsource-stream.
//!
//! ```no_run
//! use tidewire_client::Client;
//! use tidewire_core::schema::Implementation;
//! use tidewire_http::client::StreamableHttpConnector;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = StreamableHttpConnector::new("http://127.0.0.1:8080/mcp")
//!     .bearer("my-token")
//!     .connect()
//!     .await?;
//! let session = transport.handle();
//! let client = Client::builder(Implementation::new("my-agent", "1.0.0"))
//!     .connect(transport)
//!     .await?;
//! println!("session {:?}, MCP {}", session.session_id(), client.protocol_version());
//! let tools = client.list_all_tools().await?;
//! println!("{} tools", tools.len());
//! client.close().await; // DELETEs the session on the server
//! # Ok(()) }
//! ```
//!
//! [`StreamableHttpConnector`] is the builder (headers, bearer token, a shared `reqwest::Client`,
//! message-size limit, [`ReconnectPolicy`], whether to open the GET stream, the HTTP timeout);
//! [`connect`](StreamableHttpConnector::connect) returns an [`HttpClientTransport`] for the session
//! engine. It does no I/O itself: the first request is what the engine sends, the
//! `server/discover` probe of `Era::Auto` (the default) or `initialize`. A request written in the
//! stateless era (its `_meta` names its revision) goes out as a POST of its own, as
//! [`StatelessHttpConnector`] sends it; everything else belongs to the session, as below.
//!
//! ## What goes over the wire
//!
//! - **One POST per message**, with `Accept: application/json, text/event-stream` and
//!   `Content-Type: application/json`. After the handshake every request (POST, GET, DELETE)
//!   carries `Mcp-Session-Id` (when the server issued one with its `initialize` answer) and
//!   `MCP-Protocol-Version` (the version the engine negotiated, which it tells the transport
//!   before `notifications/initialized`: [`SessionEvent`](tidewire_core::transport::SessionEvent)).
//! - **Requests** are sent in the background: `send` returns once the POST is under way, so a
//!   slow tool never holds up the messages behind it (a cancellation, say). The reply is read
//!   as it comes: `application/json` holds one message (or, leniently, an array); a
//!   `text/event-stream` carries progress, logs and requests from the server before the
//!   response. Each message goes to the receiver in arrival order; priming events (an id and no
//!   data) and comments are skipped, event ids and `retry` are remembered.
//! - **Notifications and responses** are sent in order: `send` returns once the server took
//!   the message (202), within the [`request_timeout`](StreamableHttpConnector::request_timeout).
//!   A server that answers them with 200 and a body (some answer `{"jsonrpc":"2.0","result":{}}`)
//!   is tolerated: usable messages in the body are delivered, the rest is logged at debug level.
//!   An SSE stream in answer to them is read until it ends or the transport closes, but at most
//!   [`MAX_NOTIFICATION_STREAMS`] at once: past that, a new one is closed unread (and logged).
//! - **HTTP errors fail the request.** A request whose POST is answered with a status that is
//!   not success fails through its [`Exchange`](tidewire_core::transport::Exchange) with a
//!   transport error ([`TransportError::http`](tidewire_core::transport::TransportError::http)):
//!   the caller reads the status with `ClientError::http_status`, read from the HTTP response and
//!   never from the body, and a JSON-RPC error the body carried with `ClientError::remote`; it
//!   prints as `HTTP 400 Bad Request: <its message or the start of the body>`. A request the
//!   transport could not complete otherwise (connection refused, a reply without its response)
//!   fails with a JSON-RPC error of code `-32000` saying why. A
//!   caller never hangs on a dead exchange: even a task of the transport that panics while
//!   reading a reply fails its request with an error saying so.
//! - **Redirects** are followed only within the endpoint's origin (scheme, host and port). A
//!   redirect anywhere else fails the request with an error naming the target: following it
//!   would send the headers you set, the `Mcp-Session-Id` and the body to another host. (With
//!   your own `reqwest::Client`, its redirect policy applies instead.)
//! - **SSE bodies** are read as the specification says: one leading UTF-8 byte-order mark is
//!   skipped, lines may end with LF, CR or CRLF, and invalid UTF-8 reads as U+FFFD.
//! - **The GET stream** opens right after `notifications/initialized` (before the engine sends
//!   anything more, so nothing the server sends right after the handshake is missed), with
//!   `Accept: text/event-stream`. Its messages go to the receiver. A server without one (405;
//!   404 or 400 from simpler servers) is fine: the transport goes on without it. When it
//!   breaks or the server ends it, it is reconnected with `Last-Event-ID` after the server's
//!   `retry` time, per the [`ReconnectPolicy`].
//! - **Resumption** (SEP-1699): when the SSE stream of a request's POST ends before its
//!   response, the transport waits the server's `retry` time and resumes it with a GET carrying
//!   `Last-Event-ID`, again until the response comes or the policy gives up; then the request
//!   gets an error answer. A stream without event ids cannot be resumed: the request fails at
//!   once. (A `retry` above 10 minutes is read as 10 minutes.)
//! - **Cancellation**: once the engine stops waiting for a request (answered, cancelled, timed
//!   out: its exchange is over), the transport stops reading that request's stream; the
//!   engine's `notifications/cancelled` goes out as any notification.
//! - **Closing** ([`TransportSender::close`](tidewire_core::transport::TransportSender::close),
//!   which `Client::close` reaches): stops the GET stream and every reply reader, ends the
//!   receiver, and sends `DELETE` with the session id (a 405 or 404 answer is fine). Dropping
//!   the transport stops its tasks too, but does not send `DELETE`.
//!
//! ## When the server ends the session
//!
//! A 404 to a request that carried a session id means the server no longer knows the session
//! (it restarted, or expired it). The transport then:
//!
//! 1. fails every call of that session with error `-32000`, "the server ended the MCP session
//!    (HTTP 404) …" — their results are lost with it — and stops its GET stream. A call whose
//!    reply stream is being resumed at that moment is the exception: it goes on resuming with
//!    the ended session's id until the response comes or the server refuses (a server may still
//!    replay what it wrote, as a replica on Redis does for a replica that died);
//! 2. tells the engine with a non-fatal
//!    [`TransportError::session_ended`](tidewire_core::transport::TransportError::session_ended)
//!    (counted in `Peer::sessions_ended`);
//! 3. holds the requests sent from then on (each at most the request timeout) until the engine
//!    has negotiated a new session, sending only the `initialize` that opens it without a
//!    session id. The session is forgotten before step 1 fails the call that met the 404, so
//!    its caller's retry is held too, never sent with the dead id.
//!
//! Starting the new session is the client's policy: `tidewire_client::Client` runs a real
//! `initialize` and `notifications/initialized` and keeps what the new handshake says (server
//! information, capabilities, version: a server restarted with another configuration is seen
//! as such), counted by `Client::reinitializations`; with `ClientBuilder::reinitialize(false)`
//! it closes the connection instead. Subscriptions and log levels set on the old session are
//! gone. [`HttpClientHandle::sessions_ended`] counts the sessions the server ended.
//!
//! ## Limits
//!
//! Every queue is bounded: 256 messages wait for the receiver before the readers wait; a task
//! runs per request in flight, which the session engine bounds (1024 by default); a JSON reply
//! and an SSE event may not exceed the codec's size limit (8 MiB by default). `https` needs the
//! `rustls` feature, or a `reqwest::Client` with TLS given to
//! [`http_client`](StreamableHttpConnector::http_client). The `retry` of an event that has no
//! `data` line at all is not seen (the SSE parser drops such events); servers send priming
//! events with an empty `data` line, as the specification describes.

mod authorized;
mod base;
mod builder;
mod error;
mod get_stream;
mod reconnect;
mod redirect;
mod reply;
mod request;
mod session_end;
mod shared;
mod sse;
mod stateless;
mod task;
mod transport;

#[doc(hidden)]
pub use authorized::send as __send_authorized;
#[doc(hidden)]
pub use base::{Checked, HttpClientBase};
pub use builder::{DEFAULT_REQUEST_TIMEOUT, StreamableHttpConnector};
pub use error::HttpClientError;
pub use reconnect::ReconnectPolicy;
pub use redirect::same_origin_policy;
pub use shared::MAX_NOTIFICATION_STREAMS;
pub use stateless::{
    StatelessHttpConnector, StatelessHttpTransport, StatelessReceiver, StatelessSender,
};
pub use transport::{HttpClientHandle, HttpClientTransport, HttpReceiver, HttpSender};
