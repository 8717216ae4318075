//! Where the events of SSE streams are kept, so a client that lost a stream can resume it.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::{Mutex, MutexGuard};
use std::task::{Context, Poll};

use futures::future::BoxFuture;

mod event;
mod kept;

pub use event::StoredEvent;

use kept::Kept;
#[cfg(test)]
use kept::{EVENT_OVERHEAD, SMALLEST_BUFFER, cost};

/// The future of a store method that did its work at once (a store in memory does, for every
/// method): it is zero-sized, so boxing it allocates nothing (`Box::pin(std::future::ready(()))`
/// allocates a byte at each call).
pub fn done() -> BoxFuture<'static, ()> {
    Box::pin(Done)
}

/// See [`done`].
struct Done;

impl Future for Done {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }
}

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

    /// Keeps `event` as [`append`](Self::append) does, if this store can without waiting;
    /// else hands it back, for `append`. A store in memory answers here, so a burst of events
    /// makes no future per event. The default hands every event back.
    ///
    /// # Errors
    /// The event, when it must go through `append`.
    fn try_append(
        &self,
        session: &str,
        stream: StreamId,
        event: StoredEvent,
    ) -> Result<(), StoredEvent> {
        let _ = (session, stream);
        Err(event)
    }

    /// The kept events of `stream` in `session` whose `seq` exceeds `after`, oldest first.
    fn after<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        after: u64,
    ) -> BoxFuture<'a, Vec<StoredEvent>>;

    /// The events [`after`](Self::after) would give, if this store can read them without
    /// waiting; else `None`, for `after`. A store in memory answers here, so a reader's every
    /// take makes no future. The default answers `None`.
    fn try_after(&self, session: &str, stream: StreamId, after: u64) -> Option<Vec<StoredEvent>> {
        let _ = (session, stream, after);
        None
    }

    /// Forgets one stream of a session, or (`None`) every stream of it.
    fn forget<'a>(&'a self, session: &'a str, stream: Option<StreamId>) -> BoxFuture<'a, ()>;

    /// Tells the store that a reader has taken the events of `stream` up to `seq`. What is at
    /// or below it is kept only for resumption, so a bounded store drops it before events
    /// nobody has read. The default ignores the hint.
    fn delivered<'a>(&'a self, session: &'a str, stream: StreamId, seq: u64) -> BoxFuture<'a, ()> {
        let _ = (session, stream, seq);
        done()
    }

    /// The bytes this store holds in this process, as its limits count them, when it keeps
    /// events in memory; `None` (the default) for a store that does not say. Read by
    /// [`StreamableHttp::event_store_bytes`](super::StreamableHttp::event_store_bytes).
    fn bytes_held(&self) -> Option<usize> {
        None
    }
}

/// The bounds of a [`MemoryEventStore`], in events and bytes. Past any of them the oldest
/// events go first: of the stream, then of the session, then of the largest sessions in the
/// store. An event a reader has not taken yet can go too (the reader then sees a gap), which is
/// what keeps a stream nobody reads from holding memory.
///
/// ```
/// use tidewire_http::server::EventStoreLimits;
///
/// let limits = EventStoreLimits::default()
///     .bytes_per_session(4 << 20)
///     .total_bytes(256 << 20);
/// assert_eq!(limits.total(), 256 << 20);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventStoreLimits {
    events_per_stream: usize,
    bytes_per_stream: usize,
    bytes_per_session: usize,
    total_bytes: usize,
}

impl Default for EventStoreLimits {
    fn default() -> Self {
        Self {
            events_per_stream: Self::DEFAULT_EVENTS_PER_STREAM,
            bytes_per_stream: Self::DEFAULT_BYTES_PER_STREAM,
            bytes_per_session: Self::DEFAULT_BYTES_PER_SESSION,
            total_bytes: Self::DEFAULT_TOTAL_BYTES,
        }
    }
}

impl EventStoreLimits {
    /// Events kept per stream by default: 16,384.
    pub const DEFAULT_EVENTS_PER_STREAM: usize = 16_384;
    /// Bytes kept per stream by default: 8 MiB (one event larger than that is still kept,
    /// alone).
    pub const DEFAULT_BYTES_PER_STREAM: usize = 8 << 20;
    /// Bytes kept per session by default, over all its streams: 16 MiB.
    pub const DEFAULT_BYTES_PER_SESSION: usize = 16 << 20;
    /// Bytes kept in the whole store by default: 64 MiB.
    pub const DEFAULT_TOTAL_BYTES: usize = 64 << 20;

    /// At most this many events per stream (at least 1).
    #[must_use]
    pub fn events_per_stream(mut self, events: usize) -> Self {
        self.events_per_stream = events.max(1);
        self
    }

    /// At most this many bytes per stream.
    #[must_use]
    pub fn bytes_per_stream(mut self, bytes: usize) -> Self {
        self.bytes_per_stream = bytes;
        self
    }

    /// At most this many bytes per session, over all its streams.
    #[must_use]
    pub fn bytes_per_session(mut self, bytes: usize) -> Self {
        self.bytes_per_session = bytes;
        self
    }

    /// At most this many bytes in the whole store.
    #[must_use]
    pub fn total_bytes(mut self, bytes: usize) -> Self {
        self.total_bytes = bytes;
        self
    }

    /// The limit on events per stream.
    pub fn per_stream(&self) -> usize {
        self.events_per_stream
    }

    /// The limit on bytes in the whole store.
    pub fn total(&self) -> usize {
        self.total_bytes
    }
}

/// One session's streams.
#[derive(Debug, Default)]
struct SessionEvents {
    streams: StreamTable<Kept>,
    bytes: usize,
}

/// What an eviction may take, in the order events go: what a reader has taken already (kept
/// only for resumption), then unread notifications of the standalone stream (related to no
/// request), then anything unread (a POST stream's events, a response waiting for its reader
/// last of all).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Victim {
    Read,
    Standalone,
    Any,
}

impl Victim {
    const ORDER: [Victim; 3] = [Victim::Read, Victim::Standalone, Victim::Any];
}

impl SessionEvents {
    /// Drops one event of the session, unless only one is left, and returns the bytes freed:
    /// the first of the [`Victim`] classes that has one, the oldest in it.
    fn evict_oldest(&mut self) -> usize {
        if !self.keeps_more_than_one() {
            return 0;
        }
        Victim::ORDER
            .into_iter()
            .map(|class| self.take_oldest_of(class))
            .find(|freed| *freed > 0)
            .unwrap_or(0)
    }

    /// Drops the oldest event of `class` (none when the session keeps one event or fewer), and
    /// returns the bytes freed.
    fn evict_oldest_of(&mut self, class: Victim) -> usize {
        if !self.keeps_more_than_one() {
            return 0;
        }
        self.take_oldest_of(class)
    }

    /// Whether the session keeps more than one event (its last one is never dropped: a
    /// reader needs it).
    fn keeps_more_than_one(&self) -> bool {
        self.streams
            .values()
            .map(|k| k.events().len())
            .sum::<usize>()
            > 1
    }

    /// Drops the oldest event of `class`, if it has one, and returns the bytes freed.
    fn take_oldest_of(&mut self, class: Victim) -> usize {
        let chosen = match class {
            Victim::Read => self
                .streams
                .iter()
                .filter_map(|(id, k)| k.oldest_read().map(|order| (order, *id)))
                .min()
                .map(|(_, id)| id),
            Victim::Standalone => self
                .streams
                .get(&0)
                .is_some_and(|k| !k.is_empty())
                .then_some(0),
            Victim::Any => self
                .streams
                .iter()
                .filter_map(|(id, k)| k.events().front().map(|e| (e.order, *id)))
                .min()
                .map(|(_, id)| id),
        };
        let Some(stream) = chosen else {
            return 0;
        };
        let Some(kept) = self.streams.get_mut(&stream) else {
            return 0;
        };
        let Some((event, freed)) = kept.pop_front() else {
            return 0;
        };
        if event.seq > kept.delivered {
            tracing::debug!(
                stream,
                seq = event.seq,
                "an unread event was dropped to stay within the store's byte budget"
            );
        }
        if kept.is_empty() {
            self.streams.remove(&stream);
        }
        self.bytes -= freed;
        freed
    }
}

#[derive(Debug, Default)]
struct Inner {
    /// By session id, hashed by foldhash (seeded per store): SipHash of the id (32 hex
    /// digits) was three hashes per session-era request. The server makes the ids; only a
    /// session it knows reaches its store.
    sessions: HashMap<String, SessionEvents, foldhash::fast::RandomState>,
    bytes: usize,
    /// Counts appends: the order of arrival across streams.
    order: u64,
}

/// The default [`EventStore`]: recent events of each stream, in memory, within
/// [`EventStoreLimits`] (by default 16,384 events and 8 MiB per stream, 16 MiB per session,
/// 64 MiB in all).
#[derive(Debug)]
pub struct MemoryEventStore {
    limits: EventStoreLimits,
    inner: Mutex<Inner>,
}

impl MemoryEventStore {
    /// A store keeping at most `per_stream` events of each stream, with the default byte
    /// limits.
    pub fn new(per_stream: usize) -> Self {
        Self::with_limits(EventStoreLimits::default().events_per_stream(per_stream))
    }

    /// A store within `limits`.
    pub fn with_limits(limits: EventStoreLimits) -> Self {
        Self {
            limits,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// The store's limits.
    pub fn limits(&self) -> EventStoreLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Events kept in all, over every session (for tests and metrics).
    pub fn len(&self) -> usize {
        self.lock()
            .sessions
            .values()
            .flat_map(|s| s.streams.values())
            .map(|k| k.events().len())
            .sum()
    }

    /// Bytes kept in all, as the limits count them (each event: its data's buffer and a fixed
    /// cost for its bookkeeping).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Bytes kept for one session.
    pub fn session_bytes(&self, session: &str) -> usize {
        self.lock().sessions.get(session).map_or(0, |s| s.bytes)
    }

    /// True when nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Brings the whole store back under its limit, to 7/8 of it so that the scan is not
    /// repeated for every event. Class by class over every session (largest first within a
    /// class): what readers took goes from every session before any unread notification, and
    /// those before any unread POST event, so one large session's response waiting for its
    /// reader is not dropped while another holds what was read already.
    fn shrink(inner: &mut Inner, limit: usize) {
        let target = limit - limit / 8;
        let mut largest: Vec<(usize, String)> = inner
            .sessions
            .iter()
            .map(|(key, s)| (s.bytes, key.clone()))
            .collect();
        largest.sort_unstable_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
        for class in Victim::ORDER {
            for (_, key) in &largest {
                if inner.bytes <= target {
                    return;
                }
                let Some(session) = inner.sessions.get_mut(key) else {
                    continue;
                };
                while inner.bytes > target {
                    let freed = session.evict_oldest_of(class);
                    if freed == 0 {
                        break;
                    }
                    inner.bytes -= freed;
                }
            }
        }
    }
}

impl MemoryEventStore {
    /// The kept events of `stream` in `session` whose `seq` exceeds `after`, oldest first
    /// ([`EventStore::after`], without a future).
    fn after_now(&self, session: &str, stream: StreamId, after: u64) -> Vec<StoredEvent> {
        self.lock()
            .sessions
            .get(session)
            .and_then(|s| s.streams.get(&stream))
            .map(|kept| {
                // Kept in `seq` order: find the first newer one instead of scanning them all.
                let events = kept.events();
                let start = events.partition_point(|e| e.event.seq <= after);
                events.range(start..).map(|e| e.event.clone()).collect()
            })
            .unwrap_or_default()
    }

    /// Appends `event` to `stream` of `session` at once (what [`EventStore::append`] does),
    /// and returns the `seq` of the oldest event that stream keeps afterwards: everything
    /// older was dropped to stay within the limits, so a copy kept elsewhere may drop it too.
    pub fn append_now(&self, session: &str, stream: StreamId, event: StoredEvent) -> Option<u64> {
        let limits = self.limits;
        let mut guard = self.lock();
        let inner = &mut *guard;
        inner.order += 1;
        let order = inner.order;
        let events = match inner.sessions.get_mut(session) {
            Some(events) => events,
            // The session's key is allocated once, not per event.
            None => inner.sessions.entry(session.to_owned()).or_default(),
        };
        let kept = events.streams.entry(stream).or_default();
        while !kept.is_empty()
            && (kept.events().len() >= limits.events_per_stream
                || kept.bytes() + kept.charge_for(&event) > limits.bytes_per_stream)
        {
            if let Some((_, freed)) = kept.pop_front() {
                events.bytes -= freed;
                inner.bytes -= freed;
            }
        }
        let change = kept.push(order, event);
        events.bytes = events.bytes + change.added - change.freed;
        inner.bytes = inner.bytes + change.added - change.freed;
        while events.bytes > limits.bytes_per_session {
            let freed = events.evict_oldest();
            if freed == 0 {
                break;
            }
            inner.bytes -= freed;
        }
        if inner.bytes > limits.total_bytes {
            Self::shrink(inner, limits.total_bytes);
        }
        let kept = inner.sessions.get(session)?.streams.get(&stream)?;
        kept.events().front().map(|e| e.event.seq)
    }
}

impl EventStore for MemoryEventStore {
    fn bytes_held(&self) -> Option<usize> {
        Some(self.bytes())
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        event: StoredEvent,
    ) -> BoxFuture<'a, ()> {
        self.append_now(session, stream, event);
        done()
    }

    fn try_append(
        &self,
        session: &str,
        stream: StreamId,
        event: StoredEvent,
    ) -> Result<(), StoredEvent> {
        self.append_now(session, stream, event);
        Ok(())
    }

    fn after<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        after: u64,
    ) -> BoxFuture<'a, Vec<StoredEvent>> {
        Box::pin(std::future::ready(self.after_now(session, stream, after)))
    }

    fn try_after(&self, session: &str, stream: StreamId, after: u64) -> Option<Vec<StoredEvent>> {
        Some(self.after_now(session, stream, after))
    }

    fn delivered<'a>(&'a self, session: &'a str, stream: StreamId, seq: u64) -> BoxFuture<'a, ()> {
        if let Some(kept) = self
            .lock()
            .sessions
            .get_mut(session)
            .and_then(|s| s.streams.get_mut(&stream))
        {
            kept.delivered = kept.delivered.max(seq);
        }
        done()
    }

    fn forget<'a>(&'a self, session: &'a str, stream: Option<StreamId>) -> BoxFuture<'a, ()> {
        let mut guard = self.lock();
        let inner = &mut *guard;
        match stream {
            None => {
                if let Some(gone) = inner.sessions.remove(session) {
                    inner.bytes -= gone.bytes;
                }
            }
            Some(stream) => {
                // A session with nothing kept costs nothing here (idle sessions are many).
                if let Some(events) = inner.sessions.get_mut(session) {
                    if let Some(gone) = events.streams.remove(&stream) {
                        events.bytes -= gone.bytes();
                        inner.bytes -= gone.bytes();
                    }
                    if events.streams.is_empty() {
                        inner.sessions.remove(session);
                    }
                }
            }
        }
        done()
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn a_finished_store_call_is_zero_sized_and_ready_at_once() {
        // Zero-sized: `Box::pin` of it allocates nothing.
        assert_eq!(std::mem::size_of::<Done>(), 0);
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert_eq!(done().as_mut().poll(&mut cx), Poll::Ready(()));
    }

    /// An event kept in its own allocation (as a response is), so each counts alike:
    /// [`cost`] of its length. The policies below are about which event goes, not about
    /// blocks (see `kept`'s tests, and the test of notifications below).
    fn event(seq: u64) -> StoredEvent {
        StoredEvent {
            seq,
            data: Bytes::from(format!("{seq}")),
            last: true,
        }
    }

    #[tokio::test]
    async fn keeps_the_newest_events_per_stream_and_forgets_on_demand() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryEventStore::new(3);
            for seq in 1..=3 {
                store.append("s", 1, event(seq)).await;
            }
            // What the HTTP server calls: the same, without a future per event.
            for seq in 4..=5 {
                store.try_append("s", 1, event(seq)).expect("never waits");
            }
            store.append("s", 2, event(1)).await;
            store.append("t", 1, event(1)).await;
            let kept: Vec<u64> = store.after("s", 1, 0).await.iter().map(|e| e.seq).collect();
            assert_eq!(kept, vec![3, 4, 5], "bounded: the oldest went");
            let after: Vec<u64> = store.after("s", 1, 4).await.iter().map(|e| e.seq).collect();
            assert_eq!(after, vec![5]);
            // What the HTTP server reads first: the same, without a future.
            let now: Option<Vec<u64>> = store
                .try_after("s", 1, 4)
                .map(|events| events.iter().map(|e| e.seq).collect());
            assert_eq!(now, Some(vec![5]));
            assert!(store.after("s", 9, 0).await.is_empty());
            store.forget("s", Some(1)).await;
            assert!(store.after("s", 1, 0).await.is_empty());
            assert_eq!(store.len(), 2);
            store.forget("s", None).await;
            assert_eq!(store.len(), 1, "other sessions untouched");
            assert_eq!(store.bytes(), SMALLEST_BUFFER + EVENT_OVERHEAD);
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// See [`event`].
    fn sized(seq: u64, bytes: usize) -> StoredEvent {
        StoredEvent {
            seq,
            data: Bytes::from(vec![b'x'; bytes]),
            last: true,
        }
    }

    /// A notification: its text goes into its stream's blocks.
    fn note(seq: u64, bytes: usize) -> StoredEvent {
        StoredEvent {
            seq,
            data: Bytes::from(format!("{seq:0bytes$}")),
            last: false,
        }
    }

    #[tokio::test]
    async fn notifications_in_blocks_stay_within_every_limit_and_read_back_whole() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async move {
            let limits = EventStoreLimits::default()
                .bytes_per_stream(40 << 10)
                .bytes_per_session(64 << 10)
                .total_bytes(100 << 10);
            let store = MemoryEventStore::with_limits(limits);
            for session in ["a", "b", "c"] {
                for stream in 0..3 {
                    for seq in 1..=400 {
                        store
                            .try_append(session, stream, note(seq, 120))
                            .expect("at once");
                        let held = store.bytes();
                        assert!(held <= 100 << 10, "{held} bytes past the store's limit");
                        let mine = store.session_bytes(session);
                        assert!(mine <= 64 << 10, "{mine} bytes past the session's limit");
                    }
                }
            }
            let sessions: usize = ["a", "b", "c"].iter().map(|s| store.session_bytes(s)).sum();
            assert_eq!(
                store.bytes(),
                sessions,
                "the store counts what its sessions count"
            );
            // What is kept is the newest of each stream, each text as it was sent.
            let kept = store.after("c", 2, 0).await;
            assert!(!kept.is_empty());
            assert_eq!(kept.last().map(|e| e.seq), Some(400));
            for (event, seq) in kept.iter().zip(kept[0].seq..) {
                assert_eq!(event.seq, seq, "no gap inside what is kept");
                assert_eq!(event.data, note(seq, 120).data);
            }
            for session in ["a", "b", "c"] {
                store.forget(session, Some(1)).await;
                store.forget(session, None).await;
            }
            assert_eq!(store.bytes(), 0);
            assert!(store.is_empty());
        })
        .await
        .expect("the test took longer than its limit");
    }

    /// Found by the soak: the whole store gave way session by session, largest first, and a
    /// large session lost the responses its readers were about to take (the calls ended
    /// without them) while smaller ones kept events read long ago.
    #[tokio::test]
    async fn the_store_gives_up_what_was_read_anywhere_before_a_response_waiting_for_its_reader() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async move {
            let unit = 1024 + EVENT_OVERHEAD;
            let store =
                MemoryEventStore::with_limits(EventStoreLimits::default().total_bytes(6 * unit));
            for seq in 1..=4 {
                store.append("waiting", 1, sized(seq, 1000)).await;
            }
            for seq in 1..=2 {
                store.append("read", 1, sized(seq, 1000)).await;
            }
            store.delivered("read", 1, 2).await;
            // Past the budget: down to 7/8 of it, from what was read.
            store.append("read", 1, sized(3, 1000)).await;
            assert_eq!(
                store.after("waiting", 1, 0).await.len(),
                4,
                "nothing unread went"
            );
            let read: Vec<u64> = store
                .after("read", 1, 0)
                .await
                .iter()
                .map(|e| e.seq)
                .collect();
            assert_eq!(read, vec![3]);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[test]
    fn an_event_costs_the_buffer_the_encoder_made_for_it() {
        assert_eq!(cost(&sized(1, 0)), SMALLEST_BUFFER + EVENT_OVERHEAD);
        assert_eq!(cost(&sized(1, 129)), 256 + EVENT_OVERHEAD);
        assert_eq!(cost(&sized(1, 4096)), 4096 + EVENT_OVERHEAD);
    }

    #[tokio::test]
    async fn bytes_are_bounded_per_stream_per_session_and_in_all() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let unit = 1024 + EVENT_OVERHEAD;
            let store = MemoryEventStore::with_limits(
                EventStoreLimits::default()
                    .bytes_per_stream(3 * unit)
                    .bytes_per_session(5 * unit)
                    .total_bytes(8 * unit),
            );
            for seq in 1..=10 {
                store.append("a", 1, sized(seq, 1000)).await;
            }
            let kept: Vec<u64> = store.after("a", 1, 0).await.iter().map(|e| e.seq).collect();
            assert_eq!(kept, vec![8, 9, 10], "a stream keeps its newest 3 KB");
            for seq in 1..=3 {
                store.append("a", 2, sized(seq, 1000)).await;
            }
            assert_eq!(store.session_bytes("a"), 5 * unit, "a session keeps 5 KB");
            let first: Vec<u64> = store.after("a", 1, 0).await.iter().map(|e| e.seq).collect();
            assert_eq!(first, vec![9, 10], "the session's oldest event went first");
            // Another session pushes the store past 8 KB: the largest session gives way, down to
            // 7/8 of the limit.
            for seq in 1..=3 {
                store.append("b", 1, sized(seq, 1000)).await;
            }
            store.append("b", 2, sized(1, 1000)).await;
            assert_eq!(store.bytes(), 7 * unit);
            assert!(store.after("a", 1, 0).await.is_empty(), "a's oldest went");
            assert_eq!(store.after("a", 2, 0).await.len(), 3);
            assert_eq!(store.session_bytes("b"), 4 * unit, "the newcomer keeps all");
            // One event larger than a stream's budget is still kept, alone: a reader needs it.
            store.append("c", 1, sized(1, 5000)).await;
            assert_eq!(store.after("c", 1, 0).await.len(), 1);
            store.forget("a", None).await;
            store.forget("b", None).await;
            store.forget("c", None).await;
            assert_eq!(store.bytes(), 0);
            assert!(store.is_empty());
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn what_a_reader_took_goes_before_what_nobody_read() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let unit = 1024 + EVENT_OVERHEAD;
            let store = MemoryEventStore::with_limits(
                EventStoreLimits::default().bytes_per_session(4 * unit),
            );
            // Stream 1 (a POST reply) has two unread events; stream 0 two read ones, newer.
            store.append("s", 1, sized(1, 1000)).await;
            store.append("s", 1, sized(2, 1000)).await;
            store.append("s", 0, sized(1, 1000)).await;
            store.append("s", 0, sized(2, 1000)).await;
            store.delivered("s", 0, 2).await;
            store.append("s", 0, sized(3, 1000)).await;
            let zero: Vec<u64> = store.after("s", 0, 0).await.iter().map(|e| e.seq).collect();
            let one: Vec<u64> = store.after("s", 1, 0).await.iter().map(|e| e.seq).collect();
            assert_eq!(zero, vec![2, 3], "the oldest read event went");
            assert_eq!(one, vec![1, 2], "the unread reply is whole");
            // With nothing read left, unread notifications (stream 0) go before a reply.
            store.append("s", 0, sized(4, 1000)).await;
            store.append("s", 0, sized(5, 1000)).await;
            let one: Vec<u64> = store.after("s", 1, 0).await.iter().map(|e| e.seq).collect();
            assert_eq!(one, vec![1, 2]);
            assert_eq!(store.session_bytes("s"), 4 * unit);
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
