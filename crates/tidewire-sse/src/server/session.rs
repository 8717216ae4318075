//! One legacy SSE session: the table entry the POST handler finds, and the transport the engine
//! runs on.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tidewire_core::jsonrpc::{Message, RequestId};
use tidewire_core::queue::BoundedQueue;
use tidewire_core::transport::sessions::TableEntry;
use tidewire_core::transport::{
    Codec, Envelope, Principal, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A session as the HTTP side sees it.
#[derive(Debug)]
pub(crate) struct Session {
    /// Messages POSTed by the client, to the engine (a small queue: boxed slots, allocated on
    /// first use; see `tidewire_core::queue`).
    pub(crate) inbox: BoundedQueue<Box<Envelope>>,
    /// Fired when the session ends: the stream went away, it expired, or the engine stopped.
    pub(crate) closed: CancellationToken,
    activity: Mutex<Activity>,
    /// Who opened the stream, when an authentication layer said: only requests acting for
    /// the same principal may post to the session.
    pub(crate) owner: Option<Principal>,
}

/// What idle expiry looks at.
#[derive(Debug)]
struct Activity {
    /// The last message either way.
    last: Instant,
    /// The client's requests not answered yet: a session is not idle while one runs, however
    /// long it stays silent. Bounded by what the engine lets run (it answers the rest at once).
    unanswered: HashSet<RequestId>,
}

impl Session {
    pub(crate) fn new(inbound_queue: usize, owner: Option<Principal>) -> Self {
        Self {
            owner,
            inbox: BoundedQueue::new(inbound_queue),
            closed: CancellationToken::new(),
            activity: Mutex::new(Activity {
                last: Instant::now(),
                unanswered: HashSet::new(),
            }),
        }
    }

    fn activity(&self) -> MutexGuard<'_, Activity> {
        self.activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes a message from the client: a request is now waiting for its answer; a
    /// cancellation ends that wait.
    pub(crate) fn note_inbound(&self, message: &Message) {
        let mut activity = self.activity();
        activity.last = Instant::now();
        match message {
            Message::Request(request) => {
                activity.unanswered.insert(request.id.clone());
            }
            Message::Notification(n) if n.method == "notifications/cancelled" => {
                if let Some(id) = n
                    .params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .and_then(RequestId::from_json)
                {
                    activity.unanswered.remove(&id);
                }
            }
            _ => {}
        }
    }

    /// Notes a message to the client: a response answers its request.
    fn note_outbound(&self, message: &Message) {
        let mut activity = self.activity();
        activity.last = Instant::now();
        if let Message::Response(response) = message
            && let Some(id) = &response.id
        {
            activity.unanswered.remove(id);
        }
    }

    /// How long since the last message either way, or `None` while a request of the client's
    /// is running (the session is busy, not idle).
    fn idle_since(&self) -> Option<Duration> {
        let activity = self.activity();
        activity
            .unanswered
            .is_empty()
            .then(|| activity.last.elapsed())
    }
}

/// Why a session's receiver ended with an error: its stream is gone.
#[derive(Debug)]
struct StreamGone;

impl std::fmt::Display for StreamGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the client's SSE stream closed (or the session expired)")
    }
}

impl std::error::Error for StreamGone {}

/// The transport one engine session runs on: what [`LegacySse`](super::LegacySse) gives the
/// function that starts a session.
pub type SseTransport = (SseSender, SseReceiver);

/// The engine's sending half: each message becomes a `message` event on the session's stream.
#[derive(Debug)]
pub struct SseSender {
    pub(crate) session: Arc<Session>,
    pub(crate) outbound: mpsc::Sender<Arc<str>>,
    pub(crate) codec: Codec,
}

/// The engine's receiving half: the messages the client POSTs to this session.
///
/// When the stream closes, it yields one fatal error, so the engine stops at once and cancels
/// the requests it was running (nothing could carry their answers).
#[derive(Debug)]
pub struct SseReceiver {
    pub(crate) session: Arc<Session>,
    pub(crate) ended: bool,
}

impl TransportSender for SseSender {
    /// HTTP+SSE carries sessions only (a server given it serves the session era there).
    fn carries_stateless(&self) -> bool {
        false
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        let bytes = self.codec.encode(&envelope.message)?;
        let text: Arc<str> = String::from_utf8_lossy(&bytes).into();
        self.session.note_outbound(&envelope.message);
        tokio::select! {
            biased;
            () = self.session.closed.cancelled() => Err(TransportError::closed()),
            sent = self.outbound.send(text) => sent.map_err(|_| TransportError::closed()),
        }
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.session.closed.cancel();
        Ok(())
    }
}

impl TransportReceiver for SseReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        if self.ended {
            return None;
        }
        let session = &self.session;
        let next = tokio::select! {
            biased;
            envelope = session.inbox.pop() => envelope,
            () = session.closed.cancelled() => None,
        };
        match next {
            Some(envelope) => Some(Ok(*envelope)),
            None => {
                self.ended = true;
                Some(Err(TransportError::other(StreamGone)))
            }
        }
    }
}

impl TableEntry for Session {
    fn idle_for(&self) -> Option<Duration> {
        self.idle_since()
    }

    fn end(&self) {
        self.closed.cancel();
    }
}
