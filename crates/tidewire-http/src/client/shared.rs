//! What the sender, the receiver and every background task share: the configuration, the HTTP
//! session (its id, the version header, the token its tasks stop on), and the queue into the
//! receiver. Requests are not tracked here: each carries its engine's
//! [`Exchange`](tidewire_core::transport::Exchange).

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tidewire_core::http::AuthorizerSlot;
use tidewire_core::jsonrpc::Message;
use tidewire_core::transport::{Codec, Envelope, TransportError};
use tokio::sync::{Notify, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::reconnect::ReconnectPolicy;

/// `Mcp-Session-Id`.
pub(crate) use tidewire_core::http::sessions::SESSION_ID_HEADER as SESSION_ID;
/// `MCP-Protocol-Version`.
pub(crate) static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Last-Event-ID`.
pub(crate) static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Messages queued for the receiver before the background tasks wait.
const INBOUND_QUEUE: usize = 256;

/// The most SSE streams the transport reads at once in reply to POSTed notifications and
/// responses.
///
/// A server should answer those with `202 Accepted` and no body. One that answers with an SSE
/// stream has it read all the same (it may carry messages), until the stream ends or the
/// transport closes; but each such stream holds a connection and a task, and nothing obliges the
/// server to end it. So past this many open at once, a new one is closed unread, and logged.
pub const MAX_NOTIFICATION_STREAMS: usize = 4;

/// The checked configuration.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) http: reqwest::Client,
    pub(crate) url: reqwest::Url,
    pub(crate) headers: HeaderMap,
    pub(crate) codec: Codec,
    pub(crate) reconnect: ReconnectPolicy,
    pub(crate) get_stream: bool,
    pub(crate) request_timeout: Duration,
    /// Supplies `Authorization`, and new credentials after a 401 or 403.
    pub(crate) authorizer: AuthorizerSlot,
}

/// The HTTP session as the transport knows it.
#[derive(Debug)]
pub(crate) struct SessionState {
    /// The `Mcp-Session-Id` the server issued, if any.
    pub(crate) id: Option<HeaderValue>,
    /// The negotiated protocol version the engine told, sent as `MCP-Protocol-Version`.
    pub(crate) protocol_version: Option<HeaderValue>,
    /// Bumped whenever the session is replaced, so a 404 is acted on once per session.
    pub(crate) generation: u64,
    /// Cancelled when this session ends: the tasks serving it (its requests' streams, the GET
    /// stream) stop.
    pub(crate) token: CancellationToken,
    /// How many sessions the server ended under this transport.
    pub(crate) ended: u64,
    /// The server ended the last session and no new one is negotiated yet: requests wait.
    pub(crate) lost: bool,
    /// The next request opens a session (the engine said [`SessionEvent::Opening`]): it goes
    /// at once.
    ///
    /// [`SessionEvent::Opening`]: tidewire_core::transport::SessionEvent::Opening
    pub(crate) opening: bool,
}

/// The headers one HTTP request carries, read once when it is built, and the session it
/// belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) session_id: Option<HeaderValue>,
    pub(crate) protocol_version: Option<HeaderValue>,
    pub(crate) generation: u64,
    /// Fires when that session ends.
    pub(crate) ended: CancellationToken,
}

/// The shared state of one transport.
#[derive(Debug)]
pub(crate) struct TransportState {
    pub(crate) config: Config,
    session: Mutex<SessionState>,
    tx: mpsc::Sender<Result<Envelope, TransportError>>,
    /// Cancelled when the transport closes or is dropped: every task ends.
    pub(crate) shutdown: CancellationToken,
    /// One permit per SSE stream read in reply to a POSTed notification or response.
    pub(crate) notification_streams: Arc<Semaphore>,
    /// Woken when a new session is negotiated after one was lost.
    reopened: Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl TransportState {
    pub(crate) fn new(config: Config) -> (Self, mpsc::Receiver<Result<Envelope, TransportError>>) {
        let (tx, rx) = mpsc::channel(INBOUND_QUEUE);
        let shutdown = CancellationToken::new();
        let shared = Self {
            config,
            session: Mutex::new(SessionState {
                id: None,
                protocol_version: None,
                generation: 0,
                token: shutdown.child_token(),
                ended: 0,
                lost: false,
                opening: false,
            }),
            tx,
            shutdown,
            notification_streams: Arc::new(Semaphore::new(MAX_NOTIFICATION_STREAMS)),
            reopened: Notify::new(),
        };
        (shared, rx)
    }

    // ---- session ----

    pub(crate) fn session(&self) -> MutexGuard<'_, SessionState> {
        lock(&self.session)
    }

    /// The headers for a request built now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        Self::snapshot_of(&self.session())
    }

    fn snapshot_of(s: &SessionState) -> Snapshot {
        Snapshot {
            session_id: s.id.clone(),
            protocol_version: s.protocol_version.clone(),
            generation: s.generation,
            ended: s.token.clone(),
        }
    }

    /// Starts afresh: the engine is about to open a new session. What served the old one stops.
    pub(crate) fn reset_session(&self) {
        let mut s = self.session();
        s.opening = true;
        s.id = None;
        s.protocol_version = None;
        s.generation += 1;
        let old = std::mem::replace(&mut s.token, self.shutdown.child_token());
        drop(s);
        old.cancel();
    }

    /// The server ended session `generation`: forget it (once). Returns the token that stops
    /// what served it, for the caller to cancel once it has told the engine; `None` when that
    /// session was already replaced.
    pub(crate) fn end_session(&self, generation: u64) -> Option<CancellationToken> {
        let mut s = self.session();
        if s.generation != generation {
            return None;
        }
        s.id = None;
        s.generation += 1;
        s.ended += 1;
        s.lost = true;
        Some(std::mem::replace(&mut s.token, self.shutdown.child_token()))
    }

    /// Records the negotiated version the engine told, for `MCP-Protocol-Version`: the new
    /// session is open, and requests held since the last one was lost go.
    pub(crate) fn set_protocol_version(&self, version: &str) {
        let value = HeaderValue::from_str(version);
        let mut s = self.session();
        match value {
            Ok(value) => s.protocol_version = Some(value),
            Err(_) => tracing::warn!("a protocol version that is no header value"),
        }
        s.lost = false;
        drop(s);
        self.reopened.notify_waiters();
    }

    /// Whether the request being sent now opens a session (the engine said
    /// [`SessionEvent::Opening`] just before it): it goes at once, with no session id. Any other
    /// request takes its headers from [`snapshot_in_session`](Self::snapshot_in_session).
    ///
    /// [`SessionEvent::Opening`]: tidewire_core::transport::SessionEvent::Opening
    pub(crate) fn opens_session(&self) -> bool {
        std::mem::take(&mut self.session().opening)
    }

    /// The headers for a request that does not open a session, taken once no session is lost:
    /// at once when none is, else when a new one is negotiated after one was lost (or the
    /// request timeout passes, or the transport closes). Checked and taken under one lock, so a
    /// request never goes out with no session id, or a dead one, while the client starts anew.
    pub(crate) async fn snapshot_in_session(&self) -> Snapshot {
        {
            let s = self.session();
            if !s.lost {
                return Self::snapshot_of(&s);
            }
        }
        let deadline = tokio::time::sleep(self.config.request_timeout);
        tokio::pin!(deadline);
        loop {
            let reopened = self.reopened.notified();
            tokio::pin!(reopened);
            reopened.as_mut().enable();
            {
                let s = self.session();
                if !s.lost {
                    return Self::snapshot_of(&s);
                }
            }
            tokio::select! {
                () = reopened => {}
                () = &mut deadline => return self.snapshot(),
                () = self.shutdown.cancelled() => return self.snapshot(),
            }
        }
    }

    /// Adopts the session id a server issued in answer to a POST sent with none, in the session
    /// that POST belonged to.
    pub(crate) fn adopt_session_id(&self, snapshot: &Snapshot, headers: &HeaderMap) {
        if snapshot.session_id.is_some() {
            return;
        }
        let Some(id) = headers.get(SESSION_ID) else {
            return;
        };
        let visible = id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
        if !visible || id.is_empty() {
            tracing::warn!("ignoring a session id that is not visible ASCII");
            return;
        }
        let mut s = self.session();
        if s.generation == snapshot.generation && s.id.is_none() {
            s.id = Some(id.clone());
        }
    }

    // ---- HTTP requests ----

    /// A request to the endpoint with the user's headers, then the transport's own (which
    /// replace any the user set under the same names).
    fn request(
        &self,
        method: reqwest::Method,
        snapshot: &Snapshot,
        own: &[(&HeaderName, HeaderValue)],
    ) -> reqwest::RequestBuilder {
        let mut headers = self.config.headers.clone();
        if let Some(id) = &snapshot.session_id {
            headers.insert(SESSION_ID, id.clone());
        }
        if let Some(version) = &snapshot.protocol_version {
            headers.insert(PROTOCOL_VERSION.clone(), version.clone());
        }
        for (name, value) in own {
            headers.insert((*name).clone(), value.clone());
        }
        let request = self
            .config
            .http
            .request(method, self.config.url.clone())
            .headers(headers);
        super::authorized::with_authorization(request, &self.config.authorizer)
    }

    /// A POST carrying one message.
    pub(crate) fn post(&self, body: Vec<u8>, snapshot: &Snapshot) -> reqwest::RequestBuilder {
        let own = [
            (
                &ACCEPT,
                HeaderValue::from_static("application/json, text/event-stream"),
            ),
            (&CONTENT_TYPE, HeaderValue::from_static("application/json")),
        ];
        self.request(reqwest::Method::POST, snapshot, &own)
            .body(body)
    }

    /// A GET opening (or resuming, with `last_event_id`) an SSE stream.
    pub(crate) fn get(
        &self,
        snapshot: &Snapshot,
        last_event_id: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let mut own = vec![(&ACCEPT, HeaderValue::from_static("text/event-stream"))];
        if let Some(id) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            own.push((&LAST_EVENT_ID, id));
        }
        self.request(reqwest::Method::GET, snapshot, &own)
    }

    /// A DELETE ending the session.
    pub(crate) fn delete(&self, snapshot: &Snapshot) -> reqwest::RequestBuilder {
        self.request(reqwest::Method::DELETE, snapshot, &[])
    }

    // ---- the receiver queue ----

    /// Queues an item for the receiver; false once nobody will read it.
    pub(crate) async fn push(&self, item: Result<Envelope, TransportError>) -> bool {
        tokio::select! {
            biased;
            sent = self.tx.send(item) => sent.is_ok(),
            () = self.shutdown.cancelled() => false,
        }
    }

    /// Queues one message from the server for the receiver (the engine routes it). False once
    /// nobody will read the receiver.
    pub(crate) async fn deliver(&self, message: Message) -> bool {
        self.push(Ok(Envelope::new(message))).await
    }
}
