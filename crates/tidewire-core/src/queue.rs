//! A bounded queue between tasks: any number of writers, one reader, ended by a
//! [`CancellationToken`].
//!
//! Every connection holds two of these for its whole life (the engine's outbound queue, and on
//! Streamable HTTP the session's inbound one). A `tokio::sync::mpsc` channel costs about 800
//! bytes before its first message (a cache-padded channel state and a block of 32 slots); an
//! idle connection is what a server holds thousands of, so this queue is a `VecDeque` that
//! allocates on first use and two [`Notify`]s. Order is first in, first out; a writer that finds
//! the queue full waits for room (backpressure), or gets its item back from
//! [`try_push`](BoundedQueue::try_push).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tidewire_core::queue::BoundedQueue;
//! use tokio_util::sync::CancellationToken;
//!
//! let queue = BoundedQueue::new(2);
//! let closed = CancellationToken::new();
//! queue.push("a", &closed).await.unwrap();
//! assert!(queue.try_push("b").is_ok());
//! assert_eq!(queue.try_push("c"), Err("c")); // full
//! assert_eq!(queue.pop(&closed).await, Some("a"));
//! closed.cancel();
//! assert_eq!(queue.pop(&closed).await, Some("b")); // what was queued still comes out
//! assert_eq!(queue.pop(&closed).await, None);
//! # }
//! ```

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// A bounded first-in, first-out queue with one reader; see the [module docs](self).
#[derive(Debug)]
pub struct BoundedQueue<T> {
    items: Mutex<VecDeque<T>>,
    capacity: usize,
    /// Woken when an item arrives (the reader waits on it).
    arrived: Notify,
    /// Woken when the reader takes one (a writer waiting for room waits on it).
    room: Notify,
}

impl<T> BoundedQueue<T> {
    /// A queue holding at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            items: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            room: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `item` if there is room; gives it back when the queue is full.
    ///
    /// # Errors
    /// The item itself, when the queue is full.
    pub fn try_push(&self, item: T) -> Result<(), T> {
        let mut items = self.lock();
        if items.len() >= self.capacity {
            return Err(item);
        }
        items.push_back(item);
        drop(items);
        self.arrived.notify_one();
        Ok(())
    }

    /// Queues `item`, waiting while the queue is full.
    ///
    /// # Errors
    /// The item itself, once `closed` is cancelled (before it was queued).
    pub async fn push(&self, item: T, closed: &CancellationToken) -> Result<(), T> {
        let mut item = item;
        loop {
            if closed.is_cancelled() {
                return Err(item);
            }
            // Registered before the attempt, so room made in between still wakes us.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.try_push(item) {
                Ok(()) => return Ok(()),
                Err(back) => item = back,
            }
            tokio::select! {
                () = &mut room => {}
                () = closed.cancelled() => return Err(item),
            }
        }
    }

    /// Takes the oldest item, if any, without waiting.
    pub fn try_pop(&self) -> Option<T> {
        let item = self.lock().pop_front();
        if item.is_some() {
            self.room.notify_one();
        }
        item
    }

    /// Takes the oldest item, waiting for one; `None` once `closed` is cancelled and the queue
    /// is empty (items queued before the close still come out). For one reader at a time.
    pub async fn pop(&self, closed: &CancellationToken) -> Option<T> {
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Some(item) = self.try_pop() {
                return Some(item);
            }
            tokio::select! {
                biased;
                () = &mut arrived => {}
                () = closed.cancelled() => return None,
            }
        }
    }

    /// Items waiting now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    const LIMIT: Duration = Duration::from_secs(5);

    #[tokio::test]
    async fn keeps_order_waits_for_room_and_ends_on_close() {
        let queue = Arc::new(BoundedQueue::new(2));
        let closed = CancellationToken::new();
        queue.push(1, &closed).await.expect("room");
        queue.push(2, &closed).await.expect("room");
        assert_eq!(queue.try_push(9), Err(9), "full");
        // Full: a third writer waits until the reader takes one.
        let writer = {
            let (queue, closed) = (queue.clone(), closed.clone());
            tokio::spawn(async move { queue.push(3, &closed).await })
        };
        tokio::task::yield_now().await;
        assert!(!writer.is_finished(), "a full queue makes the writer wait");
        assert_eq!(queue.pop(&closed).await, Some(1));
        tokio::time::timeout(LIMIT, writer)
            .await
            .expect("the writer got room in time")
            .expect("join")
            .expect("queued");
        assert_eq!(queue.pop(&closed).await, Some(2));
        assert_eq!(queue.try_pop(), Some(3));
        assert!(queue.is_empty());
        closed.cancel();
        assert_eq!(queue.pop(&closed).await, None, "closed: the reader ends");
        assert_eq!(
            queue.push(4, &closed).await,
            Err(4),
            "and writers get their item back"
        );
    }

    #[tokio::test]
    async fn a_waiting_reader_wakes_for_a_new_item_and_a_waiting_writer_for_close() {
        let queue = Arc::new(BoundedQueue::new(1));
        let closed = CancellationToken::new();
        let reader = {
            let (queue, closed) = (queue.clone(), closed.clone());
            tokio::spawn(async move { queue.pop(&closed).await })
        };
        tokio::task::yield_now().await;
        queue.push(7, &closed).await.expect("room");
        let got = tokio::time::timeout(LIMIT, reader).await.expect("in time");
        assert_eq!(got.expect("join"), Some(7));
        queue.push(8, &closed).await.expect("room");
        let writer = {
            let (queue, closed) = (queue.clone(), closed.clone());
            tokio::spawn(async move { queue.push(9, &closed).await })
        };
        tokio::task::yield_now().await;
        closed.cancel();
        let back = tokio::time::timeout(LIMIT, writer).await.expect("in time");
        assert_eq!(back.expect("join"), Err(9));
    }
}
