//! A queue of messages read from Redis for one taker (a relay, the inbox), bounded in
//! messages and in bytes: a reader that falls behind costs at most its bound, however large
//! each message is.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

/// The sending end (the subscription's reader). Cloned into the routing table.
#[derive(Debug, Clone)]
pub(super) struct PieceSender {
    tx: mpsc::Sender<Vec<u8>>,
    held: Arc<AtomicUsize>,
    max_bytes: usize,
}

/// The taking end.
#[derive(Debug)]
pub(super) struct PieceReceiver {
    rx: mpsc::Receiver<Vec<u8>>,
    held: Arc<AtomicUsize>,
}

/// A queue of at most `items` messages and `max_bytes` bytes (one message larger than that
/// still passes alone, into an empty queue).
pub(super) fn pieces(items: usize, max_bytes: usize) -> (PieceSender, PieceReceiver) {
    let (tx, rx) = mpsc::channel(items.max(1));
    let held = Arc::new(AtomicUsize::new(0));
    (
        PieceSender {
            tx,
            held: held.clone(),
            max_bytes,
        },
        PieceReceiver { rx, held },
    )
}

impl PieceSender {
    /// Queues `piece` unless the queue is full in messages or in bytes, or its taker is gone.
    pub(super) fn try_send(&self, piece: Vec<u8>) -> Result<(), Vec<u8>> {
        let size = piece.len();
        let before = self.held.fetch_add(size, Ordering::AcqRel);
        if before > 0 && before + size > self.max_bytes {
            self.held.fetch_sub(size, Ordering::AcqRel);
            return Err(piece);
        }
        self.tx.try_send(piece).map_err(|e| {
            self.held.fetch_sub(size, Ordering::AcqRel);
            match e {
                mpsc::error::TrySendError::Full(p) | mpsc::error::TrySendError::Closed(p) => p,
            }
        })
    }
}

impl PieceReceiver {
    /// The next message; `None` once every sender is gone.
    pub(super) async fn recv(&mut self) -> Option<Vec<u8>> {
        let piece = self.rx.recv().await?;
        self.held.fetch_sub(piece.len(), Ordering::AcqRel);
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_in_messages_and_in_bytes() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let (tx, mut rx) = pieces(3, 100);
            assert!(tx.try_send(vec![0; 60]).is_ok());
            assert!(tx.try_send(vec![0; 60]).is_err(), "over the bytes");
            assert!(tx.try_send(vec![0; 40]).is_ok());
            assert!(tx.try_send(vec![]).is_ok());
            assert!(tx.try_send(vec![]).is_err(), "over the messages");
            assert_eq!(rx.recv().await.map(|p| p.len()), Some(60));
            assert!(tx.try_send(vec![0; 60]).is_ok(), "room again");
            // One message larger than the bound passes alone into an empty queue.
            let (tx, mut rx) = pieces(3, 10);
            assert!(tx.try_send(vec![0; 50]).is_ok());
            assert!(tx.try_send(vec![0; 1]).is_err());
            assert_eq!(rx.recv().await.map(|p| p.len()), Some(50));
            assert!(tx.try_send(vec![0; 1]).is_ok());
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
