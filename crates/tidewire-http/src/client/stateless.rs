//! The client transport of the stateless wire (2026-07-28): each request is a POST of its own,
//! with no session, carrying the routing headers; its answer (JSON, or an SSE stream of its
//! notifications and then its response) is read into the engine; closing that answer is how a
//! request is cancelled.
//!
//! A request refused with 503 and a `Retry-After` of at most 5 s (a server that drains, or has
//! no room) is sent again after that wait, up to three times.
//!
//! It keeps no state of its own beyond the connection pool. The engine attaches to each request
//! its [`Exchange`] (the request ends when it is over: that is the cancel) and the client its
//! routing headers ([`RoutingHeaders`], from `tidewire_core::stateless::routing_headers`, with the
//! `Mcp-Param-*` of the tools it listed); a request sent without them gets the headers its body
//! gives.

use std::sync::Arc;

use http::HeaderMap;
use tidewire_core::http::AuthorizerSlot;
use tidewire_core::jsonrpc::{ErrorObject, Message};
use tidewire_core::stateless::RoutingHeaders;
use tidewire_core::stateless::routing_headers;
use tidewire_core::transport::TransportProfile;
use tidewire_core::transport::{
    Codec, Envelope, Exchange, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::base::{Checked, HttpClientBase};
use super::error::{HttpClientError, chain, transport_error};
use super::reply::{Body, answers, body_kind, decode_json, read_limited};
use super::sse;

/// Messages read from answers and waiting for the engine.
const INBOUND: usize = 64;
/// Builds a [`StatelessHttpTransport`]: the client side of the 2026-07-28 wire on Streamable
/// HTTP. Pair it with `ClientBuilder::era(Era::Modern)`.
///
/// ```no_run
/// # async fn demo() -> Result<(), tidewire_http::client::HttpClientError> {
/// let transport = tidewire_http::client::StatelessHttpConnector::new("http://127.0.0.1:3000/mcp")
///     .connect()
///     .await?;
/// # let _ = transport; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it connects"]
pub struct StatelessHttpConnector {
    base: HttpClientBase,
}

impl StatelessHttpConnector {
    crate::__http_client_setters!(base, "every POST");

    /// A client of the endpoint at `url`.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            base: HttpClientBase::new(url),
        }
    }

    /// The stateless half of a [`StreamableHttpConnector`](super::StreamableHttpConnector), with its
    /// settings.
    pub(crate) fn from_base(base: HttpClientBase) -> Self {
        Self { base }
    }

    /// The transport: `connect().await`, as every client transport of tidewire. No I/O happens
    /// yet: each request is a POST of its own.
    ///
    /// # Errors
    /// When the URL is not an `http` one (or `https` without a TLS-enabled client), or the HTTP
    /// client cannot be built.
    pub async fn connect(self) -> Result<StatelessHttpTransport, HttpClientError> {
        let Checked {
            url,
            headers: extra,
            http,
            codec,
            timeouts,
            authorizer,
        } = self.base.check()?;
        let (tx, rx) = mpsc::channel(INBOUND);
        let shared = Arc::new(PostContext {
            http,
            url,
            codec,
            extra,
            request_timeout: timeouts.request,
            authorizer,
            inbound: tx,
            shutdown: CancellationToken::new(),
        });
        Ok((
            StatelessSender {
                shared: shared.clone(),
            },
            StatelessReceiver {
                rx,
                _shared: shared,
            },
        ))
    }
}

/// The transport [`StatelessHttpConnector::connect`] makes.
pub type StatelessHttpTransport = (StatelessSender, StatelessReceiver);

struct PostContext {
    http: reqwest::Client,
    url: reqwest::Url,
    codec: Codec,
    /// Headers every POST carries.
    extra: HeaderMap,
    /// Supplies `Authorization`, and new credentials after a 401 or 403.
    authorizer: AuthorizerSlot,
    /// How long the POST of a notification may take (a request's is bounded by the request).
    request_timeout: std::time::Duration,
    inbound: mpsc::Sender<Result<Envelope, TransportError>>,
    /// Cancelled when the transport closes or is dropped: every POST still running ends.
    shutdown: CancellationToken,
}

/// The sending half: every request a POST of its own.
pub struct StatelessSender {
    shared: Arc<PostContext>,
}

/// The receiving half: what the answers carried, in the order read.
pub struct StatelessReceiver {
    rx: mpsc::Receiver<Result<Envelope, TransportError>>,
    _shared: Arc<PostContext>,
}

impl std::fmt::Debug for StatelessSender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatelessSender")
            .field("url", &self.shared.url.as_str())
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for StatelessReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatelessReceiver").finish_non_exhaustive()
    }
}

impl TransportReceiver for StatelessReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        self.rx.recv().await
    }
}

impl Drop for StatelessSender {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl TransportSender for StatelessSender {
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM
            .routing_by_headers()
            .cancelling_by_closing()
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.shared.shutdown.is_cancelled() {
            return Err(TransportError::closed());
        }
        let headers = match envelope.extensions.get::<RoutingHeaders>() {
            Some(headers) => header_map(headers),
            None => match &envelope.message {
                Message::Request(r) => {
                    header_map(&routing_headers(&r.method, r.params.as_ref(), &[]))
                }
                Message::Notification(n) => {
                    header_map(&routing_headers(&n.method, n.params.as_ref(), &[]))
                }
                Message::Response(_) => HeaderMap::new(),
            },
        };
        match envelope.message {
            Message::Request(request) => {
                let exchange = envelope.exchange.unwrap_or_else(|| {
                    tracing::debug!("a request without an exchange: its failures are only logged");
                    Exchange::standalone(request.id.clone()).0
                });
                let body = self.shared.codec.encode(&Message::Request(request))?;
                let shared = self.shared.clone();
                tokio::spawn(async move {
                    // Closing the answer (dropping the POST) is the cancel on this wire.
                    tokio::select! {
                        biased;
                        () = exchange.over() => {}
                        () = shared.shutdown.cancelled() => {}
                        () = shared.exchange(&exchange, headers, body) => {}
                    }
                });
                Ok(())
            }
            Message::Notification(notification) => {
                // Its bytes as the engine wrote them, if it did, else the message encoded.
                let body = self.shared.codec.encode_envelope_to_vec(&Envelope {
                    message: Message::Notification(notification),
                    ..envelope
                })?;
                let shared = self.shared.clone();
                tokio::spawn(async move {
                    let auth = &shared.authorizer;
                    let post = super::authorized::send(auth, body, |body| {
                        shared.post(headers.clone(), body)
                    });
                    tokio::select! {
                        () = shared.shutdown.cancelled() => {}
                        sent = tokio::time::timeout(shared.request_timeout, post) => match sent {
                            Ok(Ok(_)) => {}
                            Ok(Err(error)) => {
                                tracing::debug!(error = %chain(&error), "a notification POST failed");
                            }
                            Err(_) => tracing::debug!("a notification POST timed out"),
                        },
                    }
                });
                Ok(())
            }
            // The server sends no requests on this wire, so there is nothing to answer.
            Message::Response(_) => {
                tracing::debug!("dropped a response: the 2026-07-28 wire has no server requests");
                Ok(())
            }
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.shared.shutdown.cancel();
        Ok(())
    }
}

/// How many times a request refused with 503 and `Retry-After` is sent again.
const UNAVAILABLE_RETRIES: u32 = 3;
/// The longest `Retry-After` honoured; a server asking for more is not retried.
const UNAVAILABLE_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// The wait before sending a request again that `response` refused: a 503 with `Retry-After`
/// in seconds (at most [`UNAVAILABLE_WAIT_MAX`]), fewer than [`UNAVAILABLE_RETRIES`] times so
/// far. A 503 says the server did not act on the request, so sending it again is safe.
fn retry_after_unavailable(
    response: &reqwest::Response,
    refused: u32,
) -> Option<std::time::Duration> {
    if response.status() != http::StatusCode::SERVICE_UNAVAILABLE || refused >= UNAVAILABLE_RETRIES
    {
        return None;
    }
    let seconds: u64 = response
        .headers()
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let wait = std::time::Duration::from_secs(seconds);
    (wait <= UNAVAILABLE_WAIT_MAX).then_some(wait)
}

impl PostContext {
    fn post<B: Into<reqwest::Body>>(&self, headers: HeaderMap, body: B) -> reqwest::RequestBuilder {
        self.http
            .post(self.url.clone())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .headers(self.extra.clone())
            .headers(headers)
            .body(body)
    }

    async fn exchange(&self, exchange: &Exchange, headers: HeaderMap, body: Vec<u8>) {
        let body = bytes::Bytes::from(body);
        let mut refused = 0;
        let response = loop {
            let sent = super::authorized::send(&self.authorizer, body.clone(), |body| {
                self.post(headers.clone(), body)
            });
            let response = match sent.await {
                Ok(response) => response,
                Err(error) => {
                    exchange.fail(failure(format!("the POST failed: {}", chain(&error))));
                    return;
                }
            };
            // A server that drains, or has no room, refused the request before acting on it:
            // it is sent again after the wait it asked for (a balancer sends it elsewhere).
            match retry_after_unavailable(&response, refused) {
                Some(wait) => {
                    refused += 1;
                    tracing::debug!(?wait, refused, "HTTP 503 with Retry-After: sending again");
                    drop(response);
                    tokio::time::sleep(wait).await;
                }
                None => break response,
            }
        };
        let status = response.status();
        let kind = body_kind(&response);
        if kind == Body::EventStream && status.is_success() {
            let mut events = sse::events(response, self.codec.max_message_size());
            while let Some(item) = futures::StreamExt::next(&mut events).await {
                let Ok(event) = item else {
                    exchange.fail(failure("the answer's stream broke"));
                    return;
                };
                if event.data.trim().is_empty() {
                    continue;
                }
                match self.codec.decode(event.data.as_bytes()) {
                    Ok(message) => {
                        let answered = answers(&message, exchange);
                        if !self.deliver(message).await || answered {
                            return;
                        }
                    }
                    Err(error) => {
                        tracing::debug!(%error, "the server sent a bad message on a stream");
                    }
                }
            }
            exchange.fail(failure("the answer's stream ended before the response"));
            return;
        }
        let text = match read_limited(response, self.codec.max_message_size()).await {
            Ok(text) => text,
            Err(reason) => {
                exchange.fail(failure(reason));
                return;
            }
        };
        for message in decode_json(&self.codec, &text) {
            match message {
                Ok(Message::Response(response)) if response.id.is_none() => {
                    // An error body without an id (HTTP 400 before the server read the id) is
                    // the answer to this request all the same.
                    match response.outcome {
                        Err(error) => exchange.fail(error),
                        Ok(_) => exchange.fail(failure("a result without an id")),
                    }
                    return;
                }
                Ok(message) => {
                    let answered = answers(&message, exchange);
                    if !self.deliver(message).await || answered {
                        return;
                    }
                }
                Err(reason) => tracing::debug!(%reason, "an answer that is no message"),
            }
        }
        if status.is_success() {
            exchange.fail(failure(format!("HTTP {status} with no JSON-RPC response")));
        } else {
            exchange.fail_transport(TransportError::http(status.as_u16(), &text));
        }
    }

    /// Hands a message to the engine. False when nobody reads any more.
    async fn deliver(&self, message: Message) -> bool {
        self.inbound.send(Ok(Envelope::new(message))).await.is_ok()
    }
}

/// The error a request the transport could not complete fails with.
fn failure(reason: impl Into<String>) -> ErrorObject {
    transport_error(reason)
}

/// The routing headers as HTTP headers; a pair that is not a valid header (a name from a tool's
/// schema with characters a header name cannot have) is left out, and the server then refuses
/// the call for its missing header.
fn header_map(headers: &RoutingHeaders) -> HeaderMap {
    headers
        .iter()
        .filter_map(|(name, value)| {
            Some((
                http::HeaderName::from_bytes(name.as_bytes()).ok()?,
                http::HeaderValue::from_str(value).ok()?,
            ))
        })
        .collect()
}
