//! One legacy SSE session: the table entry the POST handler finds, and the transport the engine
//! runs on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tidewire_core::http::sessions::TableEntry;
use tidewire_core::jsonrpc::RequestId;
use tidewire_core::queue::BoundedQueue;
use tidewire_core::transport::TransportProfile;
use tidewire_core::transport::{
    Codec, Envelope, Principal, ReplySlot, ReplyTarget, TransportError, TransportReceiver,
    TransportSender,
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
    /// The client's requests the engine still holds (see [`Running`]).
    pub(crate) running: Arc<AtomicUsize>,
    /// Who opened the stream, when an authentication layer said: only requests acting for
    /// the same principal may post to the session.
    pub(crate) owner: Option<Principal>,
}

/// What idle expiry looks at.
#[derive(Debug)]
struct Activity {
    /// The last message either way.
    last: Instant,
}

/// The reply slot's target of one request the client posted: while the engine holds it, the
/// request runs and the session is not idle, however long it stays silent.
#[derive(Debug)]
pub(crate) struct Running(Arc<AtomicUsize>);

impl Running {
    /// A slot for request `id` of the session counting `running`.
    pub(crate) fn slot(running: &Arc<AtomicUsize>, id: RequestId) -> ReplySlot {
        running.fetch_add(1, Ordering::AcqRel);
        ReplySlot::new(id, Self(running.clone()))
    }
}

impl ReplyTarget for Running {}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Session {
    pub(crate) fn new(inbound_queue: usize, owner: Option<Principal>) -> Self {
        Self {
            owner,
            inbox: BoundedQueue::new(inbound_queue),
            closed: CancellationToken::new(),
            activity: Mutex::new(Activity {
                last: Instant::now(),
            }),
            running: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn activity(&self) -> MutexGuard<'_, Activity> {
        self.activity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes a message either way (for idle expiry).
    pub(crate) fn touch(&self) {
        self.activity().last = Instant::now();
    }

    /// How long since the last message either way, or `None` while a request of the client's
    /// is running (the session is busy, not idle).
    fn idle_since(&self) -> Option<Duration> {
        (self.running.load(Ordering::Acquire) == 0).then(|| self.activity().last.elapsed())
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
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM
            .sessions_only()
            .limiting_messages_to(self.codec.max_message_size())
    }

    async fn send(&mut self, mut envelope: Envelope) -> Result<(), TransportError> {
        let bytes = self.codec.take_encoded(&mut envelope)?;
        let text: Arc<str> = String::from_utf8_lossy(&bytes).into();
        self.session.touch();
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

    fn owner(&self) -> Option<&Principal> {
        self.owner.as_ref()
    }
}
