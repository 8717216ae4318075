//! One MCP session over Streamable HTTP: the engine side (a transport) and the HTTP side
//! (where each outbound message goes).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::{Message, RequestId};
use tidewire_core::queue::BoundedQueue;
use tidewire_core::transport::sessions::TableEntry;
use tidewire_core::transport::{
    Codec, Envelope, Principal, Route, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::body::BodyBudget;
use super::event_store::EventStore;
use super::streams::{STANDALONE, StreamId, Streams};

/// Where the response to one inbound request goes.
#[derive(Debug)]
pub(crate) enum ReplyTarget {
    /// An SSE stream (the POST's reply, resumable).
    Stream(StreamId),
    /// A JSON body: the POST handler waits on this.
    Json(oneshot::Sender<Bytes>),
}

/// The session state shared by the HTTP handlers and the engine's transport.
#[derive(Debug)]
pub(crate) struct HttpSession {
    /// The `Mcp-Session-Id` (in stateless mode, an internal `stateless-N` never sent out).
    pub(crate) id: Arc<str>,
    /// Messages from the client, to the engine (boxed: small slots).
    pub(crate) inbox: BoundedQueue<Box<Envelope>>,
    pub(crate) streams: Streams,
    routes: Mutex<HashMap<RequestId, ReplyTarget>>,
    last_active: Mutex<Instant>,
    /// The negotiated revision, read from the `initialize` result on its way out; 0 = unknown.
    version: AtomicU8,
    /// Bytes of this session's POST bodies being read at once.
    pub(crate) body_budget: BodyBudget,
    /// Who opened the session, when an authentication layer said (set once, at `initialize`).
    owner: OnceLock<Principal>,
}

/// A request id is already waiting for its response in this session.
#[derive(Debug)]
pub(crate) struct DuplicateId;

impl HttpSession {
    pub(crate) fn new(
        id: Arc<str>,
        inbound_queue: usize,
        store: Arc<dyn EventStore>,
        stream_capacity: usize,
        patience: Duration,
        max_streams: usize,
        body_bytes: usize,
    ) -> Self {
        Self {
            streams: Streams::new(id.clone(), store, stream_capacity, patience, max_streams),
            id,
            inbox: BoundedQueue::new(inbound_queue),
            routes: Mutex::new(HashMap::new()),
            last_active: Mutex::new(Instant::now()),
            version: AtomicU8::new(0),
            body_budget: BodyBudget::new(body_bytes),
            owner: OnceLock::new(),
        }
    }

    /// Binds the session to the principal that opened it: from then on only requests acting
    /// for the same principal reach it.
    pub(crate) fn bind(&self, owner: Option<Principal>) {
        if let Some(owner) = owner {
            let _ = self.owner.set(owner);
        }
    }

    /// Whether a request acting for `principal` may use the session: it must act for the
    /// principal that opened it (or for none, when none opened it).
    pub(crate) fn is_owned_by(&self, principal: Option<&Principal>) -> bool {
        Principal::may_use(self.owner.get(), principal)
    }

    fn routes(&self) -> MutexGuard<'_, HashMap<RequestId, ReplyTarget>> {
        self.routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes activity (for idle expiry).
    pub(crate) fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// How long since the last request, or `None` while something is going on (a request in
    /// flight or a stream with a reader), which keeps the session alive.
    fn idle_since(&self) -> Option<Duration> {
        if !self.routes().is_empty() || self.streams.any_attached() {
            return None;
        }
        Some(
            self.last_active
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed(),
        )
    }

    /// Registers where the response to request `id` goes.
    pub(crate) fn expect_reply(
        &self,
        id: RequestId,
        target: ReplyTarget,
    ) -> Result<(), DuplicateId> {
        let mut routes = self.routes();
        if routes.contains_key(&id) {
            return Err(DuplicateId);
        }
        if let ReplyTarget::Stream(stream) = &target {
            self.streams.expect_response(*stream);
        }
        routes.insert(id, target);
        Ok(())
    }

    /// The client cancelled request `id`: no response will come (the engine sends none after
    /// a cancellation), so its route goes now — or the session would never be idle again — and
    /// its POST stream ends after what it already holds. A JSON reply's waiting POST learns it
    /// from its dropped sender.
    pub(crate) fn cancelled(&self, id: &RequestId) {
        if let Some(ReplyTarget::Stream(stream)) = self.take_route(id) {
            self.streams.abandon_response(stream);
        }
    }

    /// Forgets request `id` (its POST went away before a JSON reply).
    pub(crate) fn forget(&self, id: &RequestId) {
        self.take_route(id);
    }

    /// Takes where the response to `id` goes.
    fn take_route(&self, id: &RequestId) -> Option<ReplyTarget> {
        let mut routes = self.routes();
        let target = routes.remove(id);
        release_if_empty(&mut routes);
        target
    }

    /// The revision negotiated by `initialize`, once seen.
    pub(crate) fn version(&self) -> Option<ProtocolVersion> {
        match self.version.load(Ordering::Acquire) {
            0 => None,
            n => ProtocolVersion::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    fn note_version(&self, message: &Message) {
        if let Message::Response(r) = message
            && let Ok(result) = &r.outcome
            && let Some(v) = result.get("protocolVersion").and_then(|v| v.as_str())
            && result.get("serverInfo").is_some()
            && let Ok(version) = v.parse::<ProtocolVersion>()
            && let Some(i) = ProtocolVersion::ALL.iter().position(|x| *x == version)
        {
            self.version
                .store(u8::try_from(i + 1).unwrap_or(0), Ordering::Release);
        }
    }

    /// Decides where one outbound message goes: a response to its request's stream (or JSON
    /// body, delivered here), a message related to a request to that request's stream, anything
    /// else to the standalone stream. Each message goes to exactly one stream (H17). Returns
    /// the stream, the encoded message and whether it is the response, or `None` when nothing
    /// is left to do. Synchronous, so the sending future stays small.
    fn route(
        &self,
        envelope: &Envelope,
        codec: &Codec,
    ) -> Result<Option<(StreamId, Bytes, bool)>, TransportError> {
        self.note_version(&envelope.message);
        // Encoded once; every stream, the store and the JSON body share these bytes.
        let data = Bytes::from(codec.encode(&envelope.message)?);
        let routed = match (&envelope.message, &envelope.route) {
            (Message::Response(r), _) => {
                let target = r.id.as_ref().and_then(|id| self.take_route(id));
                match target {
                    Some(ReplyTarget::Json(tx)) => {
                        let _ = tx.send(data);
                        return Ok(None);
                    }
                    Some(ReplyTarget::Stream(s)) => (s, data, true),
                    None => {
                        tracing::debug!(id = ?r.id, "a response with no open request; dropped");
                        return Ok(None);
                    }
                }
            }
            (_, Route::Request(id)) => match self.routes().get(id) {
                Some(ReplyTarget::Stream(s)) => (*s, data, false),
                _ => (STANDALONE, data, false),
            },
            (_, Route::Unrelated) => (STANDALONE, data, false),
        };
        Ok(Some(routed))
    }

    /// Whether the session has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.inbox.is_closed()
    }

    /// The session ends (DELETE, expiry, shutdown, or the engine stopped): its inbox closes
    /// (so POSTs get 404), its streams end (readers wake and finish), and the waiting JSON
    /// replies are dropped.
    pub(crate) fn close(&self) {
        self.inbox.close();
        self.streams.close_all();
        self.routes().clear();
    }
}

/// The transport one engine session runs on: what
/// [`StreamableHttp`](super::StreamableHttp) hands to the function that starts a session.
pub type HttpTransport = (HttpSender, HttpReceiver);

/// The engine's sending half: routes each message to its stream.
#[derive(Debug)]
pub struct HttpSender {
    pub(crate) session: Arc<HttpSession>,
    pub(crate) codec: Codec,
}

/// The engine's receiving half: the messages clients POST to this session.
#[derive(Debug)]
pub struct HttpReceiver {
    pub(crate) session: Arc<HttpSession>,
}

impl TransportSender for HttpSender {
    // Routing is decided before the future is made, so the future holds only the push (every
    // idle session's writer holds one of these).
    fn send(
        &mut self,
        envelope: Envelope,
    ) -> impl Future<Output = Result<(), TransportError>> + Send {
        let routed = if self.session.is_closed() {
            Err(TransportError::closed())
        } else {
            self.session.route(&envelope, &self.codec)
        };
        drop(envelope);
        let session = &self.session;
        async move {
            let Some((stream, data, response)) = routed? else {
                return Ok(());
            };
            if !session.streams.push(stream, data, response).await && stream != STANDALONE {
                // The request's stream is gone (the session is closing): nothing to deliver to.
                tracing::debug!(stream, "a message for a closed stream; dropped");
            }
            Ok(())
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.session.close();
        Ok(())
    }
}

impl TransportReceiver for HttpReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        match self.session.inbox.pop().await {
            Some(envelope) => Some(Ok(*envelope)),
            // Only the server ends an HTTP session (DELETE, expiry, a stateless request's end,
            // shutdown), and nothing it still does can reach the client then: an error, not
            // the end of input, so the engine stops running handlers at once instead of
            // letting them drain.
            None => Some(Err(TransportError::closed())),
        }
    }
}

/// Gives an emptied table's memory back, so an idle session holds none (the next request
/// allocates a small one again).
fn release_if_empty<K, V>(table: &mut HashMap<K, V>) {
    if table.is_empty() && table.capacity() > 0 {
        *table = HashMap::new();
    }
}

impl TableEntry for HttpSession {
    fn idle_for(&self) -> Option<Duration> {
        self.idle_since()
    }

    fn end(&self) {
        self.close();
    }

    /// Finished streams past their grace go, in live sessions too.
    fn sweep(&self) {
        self.streams.expire();
    }
}
