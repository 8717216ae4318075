//! An in-memory duplex transport, for tests and for embedding a server in-process.
//!
//! Messages cross as encoded bytes through the [`Codec`], so the size limit and error answers
//! behave exactly as on a real connection, and the route and extensions of an envelope do not
//! leak to the other side.

use tokio::sync::mpsc;

use super::{Codec, Envelope, TransportError, TransportReceiver, TransportSender};

/// Messages buffered in each direction before `send` waits.
pub const DEFAULT_CAPACITY: usize = 64;

/// Creates two connected endpoints. What one sends, the other receives.
pub fn duplex() -> (MemoryTransport, MemoryTransport) {
    duplex_with(Codec::default(), DEFAULT_CAPACITY)
}

/// Like [`duplex`], with a codec (size limit) and a per-direction capacity.
pub fn duplex_with(codec: Codec, capacity: usize) -> (MemoryTransport, MemoryTransport) {
    let (a_tx, b_rx) = mpsc::channel(capacity.max(1));
    let (b_tx, a_rx) = mpsc::channel(capacity.max(1));
    (
        MemoryTransport {
            sender: MemorySender {
                tx: Some(a_tx),
                codec,
            },
            receiver: MemoryReceiver { rx: a_rx, codec },
        },
        MemoryTransport {
            sender: MemorySender {
                tx: Some(b_tx),
                codec,
            },
            receiver: MemoryReceiver { rx: b_rx, codec },
        },
    )
}

/// One end of an in-memory connection.
#[derive(Debug)]
pub struct MemoryTransport {
    sender: MemorySender,
    receiver: MemoryReceiver,
}

impl MemoryTransport {
    /// Sends raw bytes as if a peer had written them (for tests of bad input).
    ///
    /// # Errors
    /// `is_closed` when the other end is gone.
    pub async fn send_raw(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        self.sender.send_bytes(bytes).await
    }
}

impl super::Transport for MemoryTransport {
    type Sender = MemorySender;
    type Receiver = MemoryReceiver;
    fn split(self) -> (MemorySender, MemoryReceiver) {
        (self.sender, self.receiver)
    }
}

/// The sending half of a [`MemoryTransport`].
#[derive(Debug)]
pub struct MemorySender {
    tx: Option<mpsc::Sender<Vec<u8>>>,
    codec: Codec,
}

impl MemorySender {
    /// Sends raw bytes as if a peer had written them (for tests of bad input).
    ///
    /// # Errors
    /// `is_closed` when the other end is gone.
    pub async fn send_bytes(&mut self, bytes: Vec<u8>) -> Result<(), TransportError> {
        let tx = self.tx.as_ref().ok_or_else(TransportError::closed)?;
        tx.send(bytes).await.map_err(|_| TransportError::closed())
    }
}

/// The receiving half of a [`MemoryTransport`].
#[derive(Debug)]
pub struct MemoryReceiver {
    rx: mpsc::Receiver<Vec<u8>>,
    codec: Codec,
}

impl TransportSender for MemorySender {
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        let bytes = self.codec.encode_envelope_to_vec(&envelope)?;
        self.send_bytes(bytes).await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.tx = None;
        Ok(())
    }
}

impl TransportReceiver for MemoryReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        let bytes = self.rx.recv().await?;
        Some(self.codec.decode(&bytes).map(Envelope::new))
    }
}
