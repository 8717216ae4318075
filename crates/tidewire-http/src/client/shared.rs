//! What the sender, the receiver and every background task share: the configuration, the session
//! (id, negotiated version), the table of requests in flight, and the queue into the receiver.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tidewire_core::jsonrpc::{ErrorObject, Message, Notification, Request, RequestId, Response};
use tidewire_core::transport::{Codec, Envelope, TransportError};
use tokio::sync::{RwLock, Semaphore, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::builder::ReconnectPolicy;
use super::transport::MAX_NOTIFICATION_STREAMS;

/// `Mcp-Session-Id`.
pub(crate) static SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub(crate) static PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Last-Event-ID`.
pub(crate) static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");

/// Messages queued for the receiver before the background tasks wait.
const INBOUND_QUEUE: usize = 256;

/// The most requests the transport tracks at once. The session engine has its own, lower, limit
/// (1024 by default); entries outlive the engine's only while a cancelled request's stream winds
/// down.
pub(crate) const MAX_IN_FLIGHT: usize = 4096;

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
}

/// The MCP session as the transport knows it.
#[derive(Debug, Default)]
pub(crate) struct SessionState {
    /// The `Mcp-Session-Id` the server issued, if any.
    pub(crate) id: Option<HeaderValue>,
    /// The negotiated protocol version, sent as `MCP-Protocol-Version`.
    pub(crate) protocol_version: Option<HeaderValue>,
    /// Bumped by each re-initialization, so a 404 is acted on once per session.
    pub(crate) generation: u64,
    /// The engine's `initialize` request, replayed to start a new session.
    pub(crate) initialize: Option<Request>,
    /// The engine's `notifications/initialized`, replayed after it.
    pub(crate) initialized: Option<Notification>,
    /// How many times the transport started a new session.
    pub(crate) reinitializations: u64,
}

/// The headers one HTTP request carries, read once when it is built.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) session_id: Option<HeaderValue>,
    pub(crate) protocol_version: Option<HeaderValue>,
    pub(crate) generation: u64,
}

/// Who waits for the response to a request in flight.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// The session engine: the response goes into the receiver.
    Engine,
    /// The transport itself (the `initialize` of a re-initialization).
    Internal(oneshot::Sender<Response>),
}

/// A request in flight.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) method: String,
    /// Stops the tasks reading the request's streams.
    pub(crate) cancel: CancellationToken,
    pub(crate) waiter: Waiter,
}

/// The shared state of one transport.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: Config,
    session: Mutex<SessionState>,
    inflight: Mutex<HashMap<RequestId, InFlight>>,
    tx: mpsc::Sender<Result<Envelope, TransportError>>,
    /// Cancelled when the transport closes or is dropped: every task ends.
    pub(crate) shutdown: CancellationToken,
    /// Held for writing while a new session is being initialized; the sender takes it for reading
    /// before each message, so nothing goes out with a dead session id meanwhile.
    pub(crate) gate: RwLock<()>,
    /// Stops the running GET stream task.
    get_stream: Mutex<Option<CancellationToken>>,
    /// One permit per SSE stream read in reply to a POSTed notification or response.
    pub(crate) notification_streams: Arc<Semaphore>,
    next_internal_id: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the data consistent, so a poisoned lock is still usable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub(crate) fn new(config: Config) -> (Self, mpsc::Receiver<Result<Envelope, TransportError>>) {
        let (tx, rx) = mpsc::channel(INBOUND_QUEUE);
        let shared = Self {
            config,
            session: Mutex::new(SessionState::default()),
            inflight: Mutex::new(HashMap::new()),
            tx,
            shutdown: CancellationToken::new(),
            gate: RwLock::new(()),
            get_stream: Mutex::new(None),
            notification_streams: Arc::new(Semaphore::new(MAX_NOTIFICATION_STREAMS)),
            next_internal_id: AtomicU64::new(1),
        };
        (shared, rx)
    }

    // ---- session ----

    pub(crate) fn session(&self) -> MutexGuard<'_, SessionState> {
        lock(&self.session)
    }

    /// The headers for a request built now.
    pub(crate) fn snapshot(&self) -> Snapshot {
        let s = self.session();
        Snapshot {
            session_id: s.id.clone(),
            protocol_version: s.protocol_version.clone(),
            generation: s.generation,
        }
    }

    /// Records the negotiated version from an `initialize` result.
    pub(crate) fn note_initialize_result(&self, result: &serde_json::Value) {
        let version = result
            .get("protocolVersion")
            .and_then(serde_json::Value::as_str)
            .and_then(|v| HeaderValue::from_str(v).ok());
        match version {
            Some(version) => self.session().protocol_version = Some(version),
            None => tracing::debug!("the initialize result carries no usable protocolVersion"),
        }
    }

    /// Records the session id a server issued with its `initialize` answer.
    pub(crate) fn note_session_id(&self, headers: &HeaderMap) {
        let id = headers.get(&SESSION_ID).cloned();
        if let Some(id) = &id {
            let visible = id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b));
            if !visible || id.is_empty() {
                tracing::warn!("ignoring a session id that is not visible ASCII");
                return;
            }
        }
        self.session().id = id;
    }

    /// A fresh id for a request the transport sends on its own.
    pub(crate) fn internal_id(&self) -> RequestId {
        let n = self.next_internal_id.fetch_add(1, Ordering::Relaxed);
        RequestId::from(format!("tidewire-http-internal-{n}"))
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
            headers.insert(SESSION_ID.clone(), id.clone());
        }
        if let Some(version) = &snapshot.protocol_version {
            headers.insert(PROTOCOL_VERSION.clone(), version.clone());
        }
        for (name, value) in own {
            headers.insert((*name).clone(), value.clone());
        }
        self.config
            .http
            .request(method, self.config.url.clone())
            .headers(headers)
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

    // ---- requests in flight ----

    /// Starts tracking a request; `None` when the table is full.
    pub(crate) fn register(
        &self,
        id: RequestId,
        method: &str,
        waiter: Waiter,
    ) -> Option<CancellationToken> {
        let mut table = lock(&self.inflight);
        if table.len() >= MAX_IN_FLIGHT {
            return None;
        }
        let cancel = self.shutdown.child_token();
        let previous = table.insert(
            id,
            InFlight {
                method: method.to_owned(),
                cancel: cancel.clone(),
                waiter,
            },
        );
        if let Some(previous) = previous {
            // The engine never reuses an id in flight; if it did, the older reader stops.
            previous.cancel.cancel();
        }
        Some(cancel)
    }

    /// True while the request still waits for its response.
    pub(crate) fn is_waiting(&self, id: &RequestId) -> bool {
        lock(&self.inflight).contains_key(id)
    }

    fn take(&self, id: &RequestId) -> Option<InFlight> {
        lock(&self.inflight).remove(id)
    }

    /// Stops tracking a request without answering it (the engine cancelled it).
    pub(crate) fn abandon(&self, id: &RequestId) {
        if let Some(entry) = self.take(id) {
            entry.cancel.cancel();
        }
    }

    /// Answers a request in flight with an error made up by the transport. Does nothing when
    /// the request was already answered.
    pub(crate) async fn fail(&self, id: &RequestId, error: ErrorObject) {
        if let Some(entry) = self.take(id) {
            self.answer(id, entry, Response::error(Some(id.clone()), error))
                .await;
        }
    }

    /// Fails every request the engine waits for (the session is gone).
    pub(crate) async fn fail_all(&self, error: &ErrorObject) {
        let entries: Vec<(RequestId, InFlight)> = {
            let mut table = lock(&self.inflight);
            let ids: Vec<RequestId> = table
                .iter()
                .filter(|(_, e)| matches!(e.waiter, Waiter::Engine))
                .map(|(id, _)| id.clone())
                .collect();
            ids.into_iter()
                .filter_map(|id| table.remove(&id).map(|e| (id, e)))
                .collect()
        };
        for (id, entry) in entries {
            tracing::debug!(%id, method = %entry.method, "failing a request of the ended session");
            let response = Response::error(Some(id.clone()), error.clone());
            self.answer(&id, entry, response).await;
        }
    }

    /// Delivers the answer to a request taken out of the table, then stops its readers. The
    /// order matters: a reader may be the caller, and must not be stopped before the answer is
    /// queued.
    async fn answer(&self, id: &RequestId, entry: InFlight, response: Response) {
        match entry.waiter {
            Waiter::Engine => {
                if entry.method == "initialize"
                    && let Ok(result) = &response.outcome
                {
                    self.note_initialize_result(result);
                }
                self.push(Ok(Envelope::new(response))).await;
            }
            Waiter::Internal(tx) => {
                let _ = tx.send(response);
            }
        }
        tracing::trace!(%id, "request answered");
        entry.cancel.cancel();
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

    /// Routes one message from the server: a response goes to whoever waits for it (and is
    /// dropped when nobody does); anything else goes to the receiver. False once nobody will
    /// read the receiver.
    pub(crate) async fn deliver(&self, message: Message) -> bool {
        match message {
            Message::Response(Response {
                id: Some(id),
                outcome,
            }) => {
                match self.take(&id) {
                    Some(entry) => {
                        let response = Response {
                            id: Some(id.clone()),
                            outcome,
                        };
                        self.answer(&id, entry, response).await;
                    }
                    None => {
                        tracing::debug!(%id, "dropped a response to no request in flight");
                    }
                }
                !self.shutdown.is_cancelled()
            }
            other => self.push(Ok(Envelope::new(other))).await,
        }
    }

    /// Ends the connection with a fatal error the engine will report.
    pub(crate) async fn fail_connection(&self, reason: String) {
        tracing::warn!(%reason, "the Streamable HTTP connection is lost");
        let error = TransportError::other(super::error::ConnectionLost(reason));
        let _ = self.push(Err(error)).await;
        self.shutdown.cancel();
    }

    // ---- the GET stream ----

    /// Replaces the GET stream's stop token, stopping the previous task.
    pub(crate) fn set_get_stream(&self, token: Option<CancellationToken>) {
        let previous = std::mem::replace(&mut *lock(&self.get_stream), token);
        if let Some(previous) = previous {
            previous.cancel();
        }
    }
}
