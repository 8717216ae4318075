//! The messages clients POST to a session, on their way to its engine: a bounded queue with one
//! reader (the engine) and any number of writers (the POST handlers).
//!
//! Why not a `tokio::sync::mpsc` channel: every session holds one for its whole life, and a
//! tokio channel costs about 800 bytes before its first message (a cache-padded channel state
//! plus a block of 32 slots). An idle session is what a server holds thousands of, so this queue
//! is a `VecDeque` that allocates on first use, and two `Notify`s.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tidewire_core::transport::Envelope;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The session ended: nothing more is taken.
#[derive(Debug)]
pub(crate) struct Closed;

/// A bounded queue of inbound messages; ends when `closed` is cancelled.
#[derive(Debug)]
pub(crate) struct Inbox {
    queue: Mutex<VecDeque<Box<Envelope>>>,
    capacity: usize,
    /// Woken when a message arrives (the engine waits on it).
    arrived: Notify,
    /// Woken when the engine takes one (a writer waiting for room waits on it).
    room: Notify,
}

impl Inbox {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            room: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Box<Envelope>>> {
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `envelope`, waiting while the queue is full. Fails once `closed` is cancelled.
    pub(crate) async fn push(
        &self,
        envelope: Envelope,
        closed: &CancellationToken,
    ) -> Result<(), Closed> {
        let envelope = Box::new(envelope);
        loop {
            if closed.is_cancelled() {
                return Err(Closed);
            }
            // Registered before the check, so room made in between still wakes us.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut queue = self.lock();
                if queue.len() < self.capacity {
                    queue.push_back(envelope);
                    drop(queue);
                    self.arrived.notify_one();
                    return Ok(());
                }
            }
            tokio::select! {
                () = &mut room => {}
                () = closed.cancelled() => return Err(Closed),
            }
        }
    }

    /// The next message, or `None` once `closed` is cancelled. One reader at a time.
    pub(crate) async fn pop(&self, closed: &CancellationToken) -> Option<Envelope> {
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let next = self.lock().pop_front();
            if let Some(envelope) = next {
                self.room.notify_one();
                return Some(*envelope);
            }
            tokio::select! {
                biased;
                () = &mut arrived => {}
                () = closed.cancelled() => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tidewire_core::jsonrpc::Notification;

    use super::*;

    fn note(n: u64) -> Envelope {
        Envelope::new(Notification::new(format!("n/{n}"), None))
    }

    fn method(envelope: &Envelope) -> String {
        envelope.message.method().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn keeps_order_waits_for_room_and_ends_on_close() {
        let inbox = Arc::new(Inbox::new(2));
        let closed = CancellationToken::new();
        inbox.push(note(1), &closed).await.expect("room");
        inbox.push(note(2), &closed).await.expect("room");
        // Full: the third writer waits until the reader takes one.
        let writer = {
            let (inbox, closed) = (inbox.clone(), closed.clone());
            tokio::spawn(async move { inbox.push(note(3), &closed).await })
        };
        tokio::task::yield_now().await;
        assert!(!writer.is_finished(), "a full inbox makes the writer wait");
        let first = inbox.pop(&closed).await.expect("first");
        assert_eq!(method(&first), "n/1");
        tokio::time::timeout(Duration::from_secs(5), writer)
            .await
            .expect("the writer got room in time")
            .expect("join")
            .expect("queued");
        for expected in ["n/2", "n/3"] {
            let next = inbox.pop(&closed).await.expect("next");
            assert_eq!(method(&next), expected);
        }
        closed.cancel();
        assert!(
            inbox.pop(&closed).await.is_none(),
            "closed: the reader ends"
        );
        assert!(
            inbox.push(note(4), &closed).await.is_err(),
            "and writers fail"
        );
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_a_new_message() {
        let inbox = Arc::new(Inbox::new(4));
        let closed = CancellationToken::new();
        let reader = {
            let (inbox, closed) = (inbox.clone(), closed.clone());
            tokio::spawn(async move { inbox.pop(&closed).await.map(|e| method(&e)) })
        };
        tokio::task::yield_now().await;
        inbox.push(note(7), &closed).await.expect("room");
        let got = tokio::time::timeout(Duration::from_secs(5), reader)
            .await
            .expect("in time")
            .expect("join");
        assert_eq!(got.as_deref(), Some("n/7"));
    }
}
