//! One MCP session over Streamable HTTP: the engine side (a transport) and the HTTP side
//! (where each outbound message goes).

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use bytes::Bytes;
use tidewire_core::ProtocolVersion;
use tidewire_core::http::sessions::TableEntry;
use tidewire_core::jsonrpc::{Message, RequestId};
use tidewire_core::queue::BoundedQueue;
use tidewire_core::transport::{
    Codec, Envelope, Principal, ReplySlot, SessionEvent, TransportError, TransportProfile,
    TransportReceiver, TransportSender,
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

/// The reply slot of one request a client POSTed ([`ReplySlot`]'s target): where its answer
/// goes, until the answer is delivered or the engine abandons the request. It counts as a
/// request in flight (the session is not idle) until the engine lets go of it.
#[derive(Debug)]
pub(crate) struct PostReply {
    session: Weak<HttpSession>,
    target: Mutex<Option<ReplyTarget>>,
}

impl PostReply {
    /// A slot for request `id` of `session`, answered to `target` (a stream is told to expect
    /// one more response).
    pub(crate) fn slot(
        session: &Arc<HttpSession>,
        id: RequestId,
        target: ReplyTarget,
    ) -> ReplySlot {
        if let ReplyTarget::Stream(stream) = &target {
            session.streams.expect_response(*stream);
        }
        session.in_flight.fetch_add(1, Ordering::AcqRel);
        ReplySlot::new(
            id,
            Self {
                session: Arc::downgrade(session),
                target: Mutex::new(Some(target)),
            },
        )
    }

    fn target(&self) -> MutexGuard<'_, Option<ReplyTarget>> {
        self.target
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The stream of a request still waiting for its answer (`None` for a JSON body, or once
    /// answered or abandoned).
    fn stream(&self) -> Option<StreamId> {
        match &*self.target() {
            Some(ReplyTarget::Stream(stream)) => Some(*stream),
            _ => None,
        }
    }

    /// Takes the target, to deliver the answer to it.
    fn take(&self) -> Option<ReplyTarget> {
        self.target().take()
    }
}

impl tidewire_core::transport::ReplyTarget for PostReply {
    /// Cancelled: no response will come, so the POST stream ends after what it already holds;
    /// a JSON reply's waiting POST learns it from its dropped sender.
    fn abandoned(&self) {
        let taken = self.take();
        if let (Some(ReplyTarget::Stream(stream)), Some(session)) = (taken, self.session.upgrade())
        {
            session.streams.abandon_response(stream);
        }
    }

    /// The answer comes later: a POST waiting for it at once stops waiting for free
    /// ([`Streams::wait_for_event`](super::streams::Streams::wait_for_event)).
    fn deferred(&self) {
        if let (Some(stream), Some(session)) = (self.stream(), self.session.upgrade()) {
            session.streams.nudge(stream);
        }
    }
}

impl Drop for PostReply {
    /// The engine let go of the request (answered, abandoned, or never delivered to it).
    fn drop(&mut self) {
        let unanswered = self
            .target
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(session) = self.session.upgrade() {
            if let Some(ReplyTarget::Stream(stream)) = unanswered {
                session.streams.abandon_response(stream);
            }
            session.in_flight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The session state shared by the HTTP handlers and the engine's transport.
#[derive(Debug)]
pub(crate) struct HttpSession {
    /// The `Mcp-Session-Id` (of a one-shot session, an internal `stateless-N` never sent out).
    pub(crate) id: Arc<str>,
    /// Messages from the client, to the engine (boxed: small slots).
    pub(crate) inbox: BoundedQueue<Box<Envelope>>,
    pub(crate) streams: Streams,
    /// Requests whose reply slot the engine still holds (see [`PostReply`]).
    in_flight: AtomicUsize,
    last_active: Mutex<Instant>,
    /// The negotiated revision, as the engine told it; 0 = unknown.
    version: AtomicU8,
    /// Bytes of this session's POST bodies being read at once.
    pub(crate) body_budget: BodyBudget,
    /// Who opened the session, when an authentication layer said (set once, at `initialize`).
    owner: OnceLock<Principal>,
}

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
            in_flight: AtomicUsize::new(0),
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
        if self.in_flight.load(Ordering::Acquire) > 0 || self.streams.any_attached() {
            return None;
        }
        Some(
            self.last_active
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .elapsed(),
        )
    }

    /// The revision negotiated by `initialize`, once seen.
    pub(crate) fn version(&self) -> Option<ProtocolVersion> {
        match self.version.load(Ordering::Acquire) {
            0 => None,
            n => ProtocolVersion::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    fn set_version(&self, version: ProtocolVersion) {
        if let Some(i) = ProtocolVersion::ALL.iter().position(|x| *x == version) {
            self.version
                .store(u8::try_from(i + 1).unwrap_or(0), Ordering::Release);
        }
    }

    /// Decides where one outbound message goes, from the reply slot the engine gave it back: a
    /// response to its request's stream (or JSON body, delivered here), a message sent for a
    /// request still waiting for its answer to that request's stream, anything else to the
    /// standalone stream. Each message goes to exactly one stream (H17). Returns the stream,
    /// the encoded message and whether it is the response, or `None` when nothing is left to
    /// do. Synchronous, so the sending future stays small.
    fn route(
        &self,
        envelope: &mut Envelope,
        codec: &Codec,
    ) -> Result<Option<(StreamId, Bytes, bool)>, TransportError> {
        // Encoded once (or taken as the engine wrote them); every stream, the store and the
        // JSON body share these bytes.
        let data = codec.take_encoded(envelope)?;
        let reply = envelope
            .reply
            .as_ref()
            .and_then(|slot| slot.target::<PostReply>());
        let routed = match &envelope.message {
            Message::Response(r) => match reply.and_then(PostReply::take) {
                Some(ReplyTarget::Json(tx)) => {
                    let _ = tx.send(data);
                    return Ok(None);
                }
                Some(ReplyTarget::Stream(s)) => (s, data, true),
                None => {
                    tracing::debug!(id = ?r.id, "a response with no open request; dropped");
                    return Ok(None);
                }
            },
            _ => (
                reply.and_then(PostReply::stream).unwrap_or(STANDALONE),
                data,
                false,
            ),
        };
        Ok(Some(routed))
    }

    /// Hands a request that will be answered on a stream to the engine, and says whether the
    /// engine has it at once: alone in the inbox, it is the engine's next message (the
    /// `engine_has_it` of [`Streams::wait_for_event`]). `None` when the session has ended.
    pub(crate) async fn hand_over(&self, envelope: Envelope) -> Option<bool> {
        self.inbox.push(Box::new(envelope)).await.ok()?;
        Some(self.inbox.len() <= 1)
    }

    /// Whether the session has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.inbox.is_closed()
    }

    /// The session ends (DELETE, expiry, shutdown, or the engine stopped): its inbox closes
    /// (so POSTs get 404) and what it still holds is dropped — the engine reads no more, and a
    /// request's reply slot goes with its envelope, so a POST waiting for its JSON reply wakes
    /// (the others' slots go as the engine drops them); its streams end (readers wake and
    /// finish).
    pub(crate) fn close(&self) {
        drop(self.inbox.close_and_take());
        self.streams.close_all();
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
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM.limiting_messages_to(self.codec.max_message_size())
    }

    // Routing is decided before the future is made, so the future holds only the push (every
    // idle session's writer holds one of these).
    fn send(
        &mut self,
        mut envelope: Envelope,
    ) -> impl Future<Output = Result<(), TransportError>> + Send {
        let routed = if self.session.is_closed() {
            Err(TransportError::closed())
        } else {
            self.session.route(&mut envelope, &self.codec)
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

    /// The engine says which revision `initialize` negotiated (before its answer goes out).
    fn session_event(&mut self, event: SessionEvent) -> impl Future<Output = ()> + Send {
        if let SessionEvent::Negotiated { version } = event {
            self.session.set_version(version);
        }
        async {}
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

    fn owner(&self) -> Option<&Principal> {
        self.owner.get()
    }
}
