//! The transport and its halves.

use std::fmt;
use std::sync::Arc;

use reqwest::StatusCode;
use tidewire_core::jsonrpc::Message;
use tidewire_core::transport::TransportProfile;
use tidewire_core::transport::{
    Envelope, Exchange, SessionEvent, Transport, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::mpsc;

use super::error::{chain, excerpt};
use super::get_stream;
use super::reply::{Body, body_kind, decode_json, error_text, read_limited};
use super::request;
use super::session_end;
use super::shared::{MAX_NOTIFICATION_STREAMS, Snapshot, TransportState};
use super::sse::{Cursor, events, pump};
use super::stateless::{StatelessHttpTransport, StatelessReceiver, StatelessSender};
use super::task::catch;

type Inbound = mpsc::Receiver<Result<Envelope, TransportError>>;

/// A Streamable HTTP connection to one MCP endpoint, from
/// [`StreamableHttpConnector::connect`](super::StreamableHttpConnector::connect).
///
/// Give it to the session engine (for example `tidewire_client::Client::builder(..).connect`),
/// which splits it into an [`HttpSender`] and an [`HttpReceiver`]. Keep a
/// [`handle`](Self::handle) to look at the HTTP session while it runs.
pub struct HttpClientTransport {
    sender: HttpSender,
    receiver: HttpReceiver,
}

impl fmt::Debug for HttpClientTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClientTransport")
            .field("url", &self.sender.shared.config.url.as_str())
            .finish_non_exhaustive()
    }
}

impl HttpClientTransport {
    pub(crate) fn new(
        (shared, rx): (TransportState, Inbound),
        stateless: StatelessHttpTransport,
    ) -> Self {
        let shared = Arc::new(shared);
        let (stateless_sender, stateless_receiver) = stateless;
        Self {
            sender: HttpSender {
                shared: shared.clone(),
                closed: false,
                stateless: stateless_sender,
            },
            receiver: HttpReceiver {
                shared,
                rx,
                stateless: stateless_receiver,
            },
        }
    }

    /// A handle on the HTTP session: its id, the version header, the sessions the server ended.
    pub fn handle(&self) -> HttpClientHandle {
        HttpClientHandle {
            shared: self.sender.shared.clone(),
        }
    }
}

impl Transport for HttpClientTransport {
    type Sender = HttpSender;
    type Receiver = HttpReceiver;

    fn split(self) -> (HttpSender, HttpReceiver) {
        (self.sender, self.receiver)
    }
}

/// A view of the HTTP session of a running [`HttpClientTransport`]. Cheap to clone.
#[derive(Clone)]
pub struct HttpClientHandle {
    shared: Arc<TransportState>,
}

impl fmt::Debug for HttpClientHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClientHandle")
            .field("url", &self.shared.config.url.as_str())
            .field("session_id", &self.session_id())
            .field("protocol_version", &self.protocol_version())
            .finish()
    }
}

impl HttpClientHandle {
    /// The endpoint.
    pub fn url(&self) -> &str {
        self.shared.config.url.as_str()
    }

    /// The `Mcp-Session-Id` the server issued for the current session, if any.
    pub fn session_id(&self) -> Option<String> {
        let session = self.shared.session();
        session
            .id
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// The negotiated protocol version sent as `MCP-Protocol-Version`, once the engine has told
    /// it (after the `initialize` answer).
    pub fn protocol_version(&self) -> Option<String> {
        let session = self.shared.session();
        session
            .protocol_version
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    /// How many sessions the server ended under this transport (HTTP 404 to a request carrying
    /// the session id). The client starts a new one each time; see
    /// `tidewire_client::Client::reinitializations`.
    pub fn sessions_ended(&self) -> u64 {
        self.shared.session().ended
    }

    /// True once the transport is closed (or dropped, or lost for good).
    pub fn is_closed(&self) -> bool {
        self.shared.shutdown.is_cancelled()
    }
}

/// The sending half: each message becomes a POST.
///
/// `send` returns once a request's POST is on its way (its reply is read in the background), or
/// once the server has accepted a notification or a response. Dropping it stops every
/// background task of the transport; [`close`](TransportSender::close) also ends the session on
/// the server.
pub struct HttpSender {
    shared: Arc<TransportState>,
    closed: bool,
    /// The stateless wire, for a server of the 2026-07-28 revision.
    stateless: StatelessSender,
}

impl fmt::Debug for HttpSender {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpSender")
            .field("url", &self.shared.config.url.as_str())
            .field("closed", &self.closed)
            .finish()
    }
}

impl Drop for HttpSender {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

/// The receiving half: what every POST reply and the GET stream deliver, in arrival order.
///
/// It ends (`None`) once the transport is closed or dropped. A failure that loses the
/// connection for good (a new session could not be started) comes as a fatal error first.
pub struct HttpReceiver {
    shared: Arc<TransportState>,
    rx: Inbound,
    /// What the stateless wire's answers carry.
    stateless: StatelessReceiver,
}

impl fmt::Debug for HttpReceiver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpReceiver")
            .field("url", &self.shared.config.url.as_str())
            .finish_non_exhaustive()
    }
}

impl Drop for HttpReceiver {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

impl TransportReceiver for HttpReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        tokio::select! {
            biased;
            item = self.rx.recv() => item,
            item = self.stateless.recv() => item,
            () = self.shared.shutdown.cancelled() => None,
        }
    }
}

impl TransportSender for HttpSender {
    /// Both eras: a stateless request carries its routing headers and is cancelled by closing
    /// its answer; on sessions the engine sends `notifications/cancelled` (it closes only for
    /// the stateless revision).
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM
            .routing_by_headers()
            .cancelling_by_closing()
    }

    async fn session_event(&mut self, event: SessionEvent) {
        match event {
            SessionEvent::Opening => self.shared.reset_session(),
            // The stateless revision has no session for the version header to belong to.
            SessionEvent::Negotiated { version }
                if tidewire_core::version::STATELESS_VERSIONS.contains(&version) => {}
            SessionEvent::Negotiated { version } => {
                self.shared.set_protocol_version(version.as_str());
            }
            SessionEvent::Opened if self.shared.config.get_stream => {
                // Open the GET stream before anything else goes out, so nothing the server sends
                // on it right after the handshake is missed.
                let ready = get_stream::start(&self.shared);
                let _ = tokio::time::timeout(self.shared.config.request_timeout, ready).await;
            }
            _ => {}
        }
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed || self.shared.shutdown.is_cancelled() {
            return Err(TransportError::closed());
        }
        // A request written in the stateless era (its `_meta` names its revision: the
        // `Era::Auto` probe, and every request once the server answered it) is a POST of its
        // own; everything else belongs to the session.
        if let Message::Request(request) = &envelope.message
            && tidewire_core::version::is_stateless_request(request.params.as_ref())
        {
            return self.stateless.send(envelope).await;
        }
        let body = self.shared.config.codec.encode_envelope_to_vec(&envelope)?;
        match envelope.message {
            Message::Request(request) => {
                let exchange = envelope.exchange.unwrap_or_else(|| {
                    // Not from the session engine: nobody can be told of a failure.
                    tracing::debug!("a request without an exchange: its failures are only logged");
                    Exchange::standalone(request.id).0
                });
                let opens = self.shared.opens_session();
                request::spawn(self.shared.clone(), exchange, body, opens);
            }
            Message::Notification(notification) => {
                self.post_and_wait(body, &notification.method).await;
            }
            Message::Response(response) => {
                let what = match &response.id {
                    Some(id) => format!("the response to {id}"),
                    None => "an error response".to_owned(),
                };
                self.post_and_wait(body, &what).await;
            }
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        if std::mem::replace(&mut self.closed, true) {
            return Ok(());
        }
        let _ = self.stateless.close().await;
        let snapshot = self.shared.snapshot();
        self.shared.shutdown.cancel();
        if snapshot.session_id.is_none() {
            return Ok(());
        }
        let timeout = self.shared.config.request_timeout;
        let delete = self.shared.delete(&snapshot).send();
        match tokio::time::timeout(timeout, delete).await {
            Ok(Ok(response)) => {
                let status = response.status();
                if status.is_success() {
                    tracing::debug!(%status, "the session is ended on the server");
                } else {
                    // 405: the server does not let clients end sessions; 404/400: already gone.
                    tracing::debug!(%status, "the server did not end the session on DELETE");
                }
            }
            Ok(Err(e)) => tracing::debug!(error = %chain(&e), "DELETE of the session failed"),
            Err(_) => tracing::debug!(?timeout, "DELETE of the session got no answer"),
        }
        Ok(())
    }
}

impl HttpSender {
    /// POSTs a notification or a response and waits until the server took it. Failures are
    /// logged: nobody waits for an answer to these.
    async fn post_and_wait(&self, body: Vec<u8>, what: &str) {
        let shared = &self.shared;
        let snapshot = shared.snapshot();
        let timeout = shared.config.request_timeout;
        let outcome = tokio::time::timeout(timeout, accept(shared, body, &snapshot)).await;
        match outcome {
            Ok(Ok(Accepted::Yes)) => {}
            Ok(Ok(Accepted::SessionEnded)) => {
                session_end::ended(shared, snapshot.generation, None).await;
            }
            Ok(Err(reason)) => {
                tracing::warn!(%what, %reason, "the server did not accept a message");
            }
            Err(_) => {
                tracing::warn!(%what, ?timeout, "the server did not accept a message in time")
            }
        }
    }
}

enum Accepted {
    Yes,
    SessionEnded,
}

/// One POST of a notification or a response, and whatever its reply holds.
async fn accept(
    shared: &Arc<TransportState>,
    body: Vec<u8>,
    snapshot: &Snapshot,
) -> Result<Accepted, String> {
    let auth = &shared.config.authorizer;
    let response = super::authorized::send(auth, body, |body| shared.post(body, snapshot))
        .await
        .map_err(|e| chain(&e))?;
    let status = response.status();
    if status == StatusCode::NOT_FOUND && snapshot.session_id.is_some() {
        return Ok(Accepted::SessionEnded);
    }
    if !status.is_success() {
        let text = error_text(response, shared.config.request_timeout).await;
        return Err(format!("HTTP {status}: {}", excerpt(&text)));
    }
    match body_kind(&response) {
        Body::Empty => {}
        Body::Json => {
            // Not expected (202 is), but some servers answer with a body; use what is usable.
            let body = read_limited(response, shared.config.codec.max_message_size()).await?;
            for item in decode_json(&shared.config.codec, &body) {
                match item {
                    Ok(message) => {
                        shared.deliver(message).await;
                    }
                    Err(reason) => {
                        tracing::debug!(%reason, "ignored an unusable body in the reply to a notification or response");
                    }
                }
            }
        }
        Body::EventStream => {
            // Read it in the background like any other stream: it may carry server messages.
            // Only a few at once, though: each holds a connection and a task until the server
            // ends it, which nothing obliges it to do.
            let Ok(permit) = shared.notification_streams.clone().try_acquire_owned() else {
                tracing::warn!(
                    limit = MAX_NOTIFICATION_STREAMS,
                    "the server answered a notification or response with an SSE stream while \
                     the most such streams are open already; closing it unread"
                );
                drop(response);
                return Ok(Accepted::Yes);
            };
            let stream = events(response, shared.config.codec.max_message_size());
            let task = shared.clone();
            tokio::spawn(async move {
                let mut cursor = Cursor::default();
                let read = catch(pump(&task, stream, &mut cursor, None));
                let outcome = tokio::select! {
                    biased;
                    () = task.shutdown.cancelled() => Ok(()),
                    outcome = read => outcome.map(drop),
                };
                if let Err(reason) = outcome {
                    tracing::error!(
                        %reason,
                        "the task reading the SSE reply to a notification or response panicked"
                    );
                }
                drop(permit);
            });
        }
        Body::Other => {
            tracing::debug!(%status, "ignored a reply body of an unexpected type");
        }
    }
    Ok(Accepted::Yes)
}
