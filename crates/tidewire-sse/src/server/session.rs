//! One legacy SSE session: the table entry the POST handler finds, and the transport the engine
//! runs on.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tidewire_core::transport::{
    Codec, Envelope, TransportError, TransportReceiver, TransportSender,
};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A session as the HTTP side sees it.
#[derive(Debug)]
pub(crate) struct Session {
    /// Messages POSTed by the client, to the engine.
    pub(crate) inbound: mpsc::Sender<Envelope>,
    /// Fired when the session ends: the stream went away, it expired, or the engine stopped.
    pub(crate) closed: CancellationToken,
    last_active: Mutex<Instant>,
}

impl Session {
    pub(crate) fn new(inbound: mpsc::Sender<Envelope>) -> Self {
        Self {
            inbound,
            closed: CancellationToken::new(),
            last_active: Mutex::new(Instant::now()),
        }
    }

    /// Notes traffic, for idle expiry.
    pub(crate) fn touch(&self) {
        *self
            .last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    /// How long since the last message either way.
    pub(crate) fn idle_for(&self) -> Duration {
        self.last_active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .elapsed()
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
    pub(crate) rx: mpsc::Receiver<Envelope>,
    pub(crate) closed: CancellationToken,
    pub(crate) ended: bool,
}

impl TransportSender for SseSender {
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        let bytes = self.codec.encode(&envelope.message)?;
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
        let next = tokio::select! {
            biased;
            envelope = self.rx.recv() => envelope,
            () = self.closed.cancelled() => None,
        };
        match next {
            Some(envelope) => Some(Ok(envelope)),
            None => {
                self.ended = true;
                Some(Err(TransportError::other(StreamGone)))
            }
        }
    }
}
