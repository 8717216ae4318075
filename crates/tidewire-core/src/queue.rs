//! A bounded queue between tasks: any number of writers, one reader, until it is closed.
//!
//! Every connection holds two of these for its whole life (the engine's outbound queue, and on
//! Streamable HTTP and legacy SSE the session's inbound one). A `tokio::sync::mpsc` channel
//! costs about 800 bytes before its first message (a cache-padded channel state and a block of
//! 32 slots, more when the slots are large); an
//! idle connection is what a server holds thousands of, so this queue is a `VecDeque` that
//! allocates on first use and two [`Notify`]s. Order is first in, first out; a writer that finds
//! the queue full waits for room (backpressure), or gets its item back from
//! [`try_push`](BoundedQueue::try_push). Taking an item that is already there touches neither
//! `Notify`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use tidewire_core::queue::BoundedQueue;
//!
//! let queue = BoundedQueue::new(2);
//! queue.push("a").await.unwrap();
//! assert!(queue.try_push("b").is_ok());
//! assert_eq!(queue.try_push("c"), Err("c")); // full
//! assert_eq!(queue.pop().await, Some("a"));
//! queue.close();
//! assert_eq!(queue.push("d").await, Err("d")); // closed: nothing more goes in
//! assert_eq!(queue.pop().await, Some("b")); // what was queued still comes out
//! assert_eq!(queue.pop().await, None);
//! # }
//! ```

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

/// A bounded first-in, first-out queue with one reader; see the [module docs](self).
#[derive(Debug)]
pub struct BoundedQueue<T> {
    inner: Mutex<Inner<T>>,
    capacity: usize,
    /// Woken when an item arrives or the queue closes (the reader waits on it).
    arrived: Notify,
    /// Woken when the reader takes one or the queue closes (full writers wait on it).
    room: Notify,
}

#[derive(Debug)]
struct Inner<T> {
    items: VecDeque<T>,
    closed: bool,
}

impl<T> BoundedQueue<T> {
    /// A queue holding at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                items: VecDeque::new(),
                closed: false,
            }),
            capacity: capacity.max(1),
            arrived: Notify::new(),
            room: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<T>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `item` if there is room and the queue is open.
    ///
    /// # Errors
    /// The item itself, when the queue is full or closed (see [`is_closed`](Self::is_closed)).
    pub fn try_push(&self, item: T) -> Result<(), T> {
        let mut inner = self.lock();
        if inner.closed || inner.items.len() >= self.capacity {
            return Err(item);
        }
        inner.items.push_back(item);
        drop(inner);
        self.arrived.notify_one();
        Ok(())
    }

    /// Queues `item`, waiting while the queue is full.
    ///
    /// # Errors
    /// The item itself, when the queue is closed (before it was queued).
    pub async fn push(&self, item: T) -> Result<(), T> {
        // With room, as it usually is, no waiter is registered (a registration is a lock of the
        // `Notify` to add it and another to take it out, twice a request on a session).
        let mut item = match self.try_push(item) {
            Ok(()) => return Ok(()),
            Err(back) if self.is_closed() => return Err(back),
            Err(back) => back,
        };
        loop {
            // Registered before the attempt, so room made in between still wakes us.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            match self.try_push(item) {
                Ok(()) => return Ok(()),
                Err(back) if self.is_closed() => return Err(back),
                Err(back) => item = back,
            }
            room.await;
        }
    }

    /// Takes the oldest item, if any, without waiting.
    pub fn try_pop(&self) -> Option<T> {
        let item = self.lock().items.pop_front();
        if item.is_some() {
            self.room.notify_one();
        }
        item
    }

    /// Takes the oldest item, waiting for one; `None` once the queue is closed and empty (items
    /// queued before the close still come out). For one reader at a time.
    pub async fn pop(&self) -> Option<T> {
        loop {
            if let Some(item) = self.try_pop() {
                return Some(item);
            }
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            {
                let mut inner = self.lock();
                if let Some(item) = inner.items.pop_front() {
                    drop(inner);
                    self.room.notify_one();
                    return Some(item);
                }
                if inner.closed {
                    return None;
                }
            }
            arrived.await;
        }
    }

    /// Closes the queue: writers fail from now on (waiting ones wake and fail); the reader gets
    /// what is left, then `None`.
    pub fn close(&self) {
        self.lock().closed = true;
        self.arrived.notify_waiters();
        self.room.notify_waiters();
    }

    /// Closes the queue and takes what it still holds, for a reader that will read no more:
    /// the caller drops the items (outside the queue's lock), so whatever they hold goes now.
    pub fn close_and_take(&self) -> std::collections::VecDeque<T> {
        let taken = {
            let mut inner = self.lock();
            inner.closed = true;
            std::mem::take(&mut inner.items)
        };
        self.arrived.notify_waiters();
        self.room.notify_waiters();
        taken
    }

    /// Whether [`close`](Self::close) was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Items waiting now.
    pub fn len(&self) -> usize {
        self.lock().items.len()
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
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let queue = Arc::new(BoundedQueue::new(2));
            queue.push(1).await.expect("room");
            queue.push(2).await.expect("room");
            assert_eq!(queue.try_push(9), Err(9), "full");
            // Full: a third writer waits until the reader takes one.
            let writer = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.push(3).await })
            };
            tokio::task::yield_now().await;
            assert!(!writer.is_finished(), "a full queue makes the writer wait");
            assert_eq!(queue.pop().await, Some(1));
            tokio::time::timeout(LIMIT, writer)
                .await
                .expect("the writer got room in time")
                .expect("join")
                .expect("queued");
            assert_eq!(queue.pop().await, Some(2));
            assert_eq!(queue.try_pop(), Some(3));
            assert!(queue.is_empty());
            queue.close();
            assert!(queue.is_closed());
            assert_eq!(queue.pop().await, None, "closed and empty: the reader ends");
            assert_eq!(
                queue.push(4).await,
                Err(4),
                "and writers get their item back"
            );
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn waiting_readers_and_writers_wake_for_items_room_and_close() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let queue = Arc::new(BoundedQueue::new(1));
            let reader = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.pop().await })
            };
            tokio::task::yield_now().await;
            queue.push(7).await.expect("room");
            let got = tokio::time::timeout(LIMIT, reader).await.expect("in time");
            assert_eq!(got.expect("join"), Some(7));
            queue.push(8).await.expect("room");
            let writer = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.push(9).await })
            };
            tokio::task::yield_now().await;
            queue.close();
            let back = tokio::time::timeout(LIMIT, writer).await.expect("in time");
            assert_eq!(
                back.expect("join"),
                Err(9),
                "a waiting writer fails on close"
            );
            assert_eq!(queue.pop().await, Some(8));
            let reader = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.pop().await })
            };
            let ended = tokio::time::timeout(LIMIT, reader).await.expect("in time");
            assert_eq!(ended.expect("join"), None);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn a_reader_waiting_on_an_empty_queue_wakes_on_close() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let queue = Arc::new(BoundedQueue::<u8>::new(1));
            let reader = {
                let queue = queue.clone();
                tokio::spawn(async move { queue.pop().await })
            };
            tokio::task::yield_now().await;
            queue.close();
            let ended = tokio::time::timeout(LIMIT, reader).await.expect("in time");
            assert_eq!(ended.expect("join"), None);
        })
        .await
        .expect("the test took longer than its limit");
    }
}
