//! Where the events of SSE streams are kept, so a client that lost a stream can resume it.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;

use futures::future::BoxFuture;

/// The number of a stream within its session (`0` is the standalone GET stream).
pub type StreamId = u64;

/// A table keyed by stream number. Stream numbers are handed out by the server (1, 2, 3, …), never
/// chosen by a peer, so a multiplicative hash serves where SipHash's flood resistance would only
/// cost time on every event.
pub(crate) type StreamTable<V> = HashMap<StreamId, V, BuildHasherDefault<StreamIdHasher>>;

/// Hashes a [`StreamId`] by one multiplication (Fibonacci hashing).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct StreamIdHasher(u64);

impl Hasher for StreamIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        // Only u64 keys are hashed here; any other input still hashes, byte by byte.
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// One event of a stream: its sequence number (1, 2, …) and the JSON-RPC message as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event's number in its stream; its SSE id is `<stream>-<seq>`.
    pub seq: u64,
    /// The message, compact JSON (UTF-8, one line).
    pub data: Bytes,
    /// The response that completes a POST stream.
    pub last: bool,
}

/// Keeps recent events per stream for resumption (`Last-Event-ID`).
///
/// The server numbers events and decides when a stream is finished; a store only keeps them. The
/// default, [`MemoryEventStore`], keeps a bounded number per stream in this process; a shared
/// store (Redis, a database) can implement this trait so several server processes can resume
/// each other's streams. Methods are asynchronous for that reason.
pub trait EventStore: Send + Sync + 'static {
    /// Keeps `event` as the newest of `stream` in `session`. A bounded store drops its oldest
    /// events to make room.
    fn append<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        event: StoredEvent,
    ) -> BoxFuture<'a, ()>;

    /// The kept events of `stream` in `session` whose `seq` exceeds `after`, oldest first.
    fn after<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        after: u64,
    ) -> BoxFuture<'a, Vec<StoredEvent>>;

    /// Forgets one stream of a session, or (`None`) every stream of it.
    fn forget<'a>(&'a self, session: &'a str, stream: Option<StreamId>) -> BoxFuture<'a, ()>;
}

/// The default [`EventStore`]: the last `per_stream` events of each stream, in memory.
#[derive(Debug)]
pub struct MemoryEventStore {
    per_stream: usize,
    streams: Mutex<HashMap<String, StreamTable<VecDeque<StoredEvent>>>>,
}

impl MemoryEventStore {
    /// A store keeping at most `per_stream` events of each stream.
    pub fn new(per_stream: usize) -> Self {
        Self {
            per_stream: per_stream.max(1),
            streams: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, StreamTable<VecDeque<StoredEvent>>>> {
        self.streams
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Events kept in all, over every session (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock()
            .values()
            .flat_map(HashMap::values)
            .map(VecDeque::len)
            .sum()
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl EventStore for MemoryEventStore {
    fn append<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        event: StoredEvent,
    ) -> BoxFuture<'a, ()> {
        let mut all = self.lock();
        let streams = match all.get_mut(session) {
            Some(streams) => streams,
            // The session's key is allocated once, not per event.
            None => all.entry(session.to_owned()).or_default(),
        };
        let events = streams.entry(stream).or_default();
        while events.len() >= self.per_stream {
            events.pop_front();
        }
        events.push_back(event);
        Box::pin(std::future::ready(()))
    }

    fn after<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        after: u64,
    ) -> BoxFuture<'a, Vec<StoredEvent>> {
        let found = self
            .lock()
            .get(session)
            .and_then(|s| s.get(&stream))
            .map(|events| {
                // Kept in `seq` order: find the first newer one instead of scanning them all.
                let start = events.partition_point(|e| e.seq <= after);
                events.range(start..).cloned().collect()
            })
            .unwrap_or_default();
        Box::pin(std::future::ready(found))
    }

    fn forget<'a>(&'a self, session: &'a str, stream: Option<StreamId>) -> BoxFuture<'a, ()> {
        let mut all = self.lock();
        match stream {
            None => {
                all.remove(session);
            }
            Some(stream) => {
                // A session with nothing kept costs nothing here (idle sessions are many).
                if let Some(streams) = all.get_mut(session) {
                    streams.remove(&stream);
                    if streams.is_empty() {
                        all.remove(session);
                    }
                }
            }
        }
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: u64) -> StoredEvent {
        StoredEvent {
            seq,
            data: Bytes::from(format!("{seq}")),
            last: false,
        }
    }

    #[tokio::test]
    async fn keeps_the_newest_events_per_stream_and_forgets_on_demand() {
        let store = MemoryEventStore::new(3);
        for seq in 1..=5 {
            store.append("s", 1, event(seq)).await;
        }
        store.append("s", 2, event(1)).await;
        store.append("t", 1, event(1)).await;
        let kept: Vec<u64> = store.after("s", 1, 0).await.iter().map(|e| e.seq).collect();
        assert_eq!(kept, vec![3, 4, 5], "bounded: the oldest went");
        let after: Vec<u64> = store.after("s", 1, 4).await.iter().map(|e| e.seq).collect();
        assert_eq!(after, vec![5]);
        assert!(store.after("s", 9, 0).await.is_empty());
        store.forget("s", Some(1)).await;
        assert!(store.after("s", 1, 0).await.is_empty());
        assert_eq!(store.len(), 2);
        store.forget("s", None).await;
        assert_eq!(store.len(), 1, "other sessions untouched");
    }
}
