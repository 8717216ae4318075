//! The SSE streams of one session: their numbering, their readers, and flow control. The events
//! themselves are kept by the [`EventStore`], from which connected responses read and from which
//! a reconnecting client resumes (`Last-Event-ID`).
//!
//! Stream 0 is the session's standalone (GET) stream; every POST that opens an SSE reply gets
//! the next number. An event id is `<stream>-<seq>`, so ids are unique in the session and say
//! which stream they belong to (H18); a resume replays that stream only (H19).

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Notify;
use tokio::time::Instant;

pub(crate) use super::event_store::StreamId;
use super::event_store::{EventStore, StoredEvent};
use super::stream_table::{Finishing, Table};

/// The standalone stream, opened by GET.
pub(crate) const STANDALONE: StreamId = 0;

/// Finished POST streams a session keeps for resumption, at most.
pub(crate) const FINISHED_KEPT: usize = 8;

/// How long a finished POST stream stays resumable. Its reader handed the last event to the
/// connection, but what sat in socket buffers when a connection was cut never arrived: a client
/// that lost it resumes within this time.
pub(crate) const FINISHED_GRACE: Duration = Duration::from_secs(30);

/// What this process knows of one stream (its events are in the store).
#[derive(Debug)]
struct Stream {
    /// The sequence number of the next event.
    next_seq: u64,
    /// The highest sequence number a reader has taken.
    delivered: u64,
    /// The highest sequence number in the store (numbered events reach it a moment later).
    stored: u64,
    /// A reader is attached.
    attached: bool,
    /// Responses still expected on this POST stream (more than one for a batch).
    awaiting: usize,
    /// The sequence number of the event that completes this POST stream, once stored.
    last: Option<u64>,
    /// The server asked the current reader to stop (SSE polling); the client resumes.
    interrupted: bool,
    /// A POST stream whose reader went away before its end: kept so the client can resume it,
    /// and the first to go when the session needs room for a new stream.
    kept: bool,
    /// When a reader passed the end of this POST stream: it stays resumable a while.
    finished_at: Option<Instant>,
    /// The engine said its request's answer comes later ([`Streams::nudge`]).
    answer_later: bool,
    /// Woken when events are added or taken, or the stream ends.
    changed: Arc<Notify>,
}

impl Stream {
    fn new() -> Self {
        Self {
            next_seq: 1,
            delivered: 0,
            stored: 0,
            attached: false,
            awaiting: 0,
            last: None,
            interrupted: false,
            kept: false,
            finished_at: None,
            answer_later: false,
            changed: Arc::new(Notify::new()),
        }
    }

    fn unread(&self) -> u64 {
        (self.next_seq - 1).saturating_sub(self.delivered)
    }

    /// Whether a POST stream may be dropped to make room: no reader, and nothing more will be
    /// written to it (its responses are in, or its requests were cancelled).
    fn evictable(&self) -> bool {
        !self.attached && self.awaiting == 0
    }
}

impl Finishing for Stream {
    fn finished_at(&self) -> Option<Instant> {
        self.finished_at
    }

    fn attached(&self) -> bool {
        self.attached
    }
}

/// The session already holds its most streams, each with a request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TooManyStreams(pub(crate) usize);

/// Whether a stream has room for one more event.
enum Admit {
    /// The stream is gone.
    Gone,
    /// Numbered and ready to store.
    Event(StoredEvent),
    /// A full window ahead of its reader; the data comes back.
    Full(Bytes),
}

/// Every stream of one session.
pub(crate) struct Streams {
    session: Arc<str>,
    store: Arc<dyn EventStore>,
    inner: Mutex<Table<Stream>>,
    next_id: Mutex<StreamId>,
    /// Events a writer may run ahead of the stream's reader before it waits.
    window: u64,
    /// How long a writer waits for a slow or absent reader before it goes on anyway (the
    /// store then drops what no reader took, oldest first).
    patience: Duration,
    /// The most POST streams held at once (in flight or kept for resumption).
    max_streams: usize,
    /// The session has ended ([`close_all`](Self::close_all)): a stream leaves the table as
    /// its reader finishes it.
    closed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Streams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streams")
            .field("session", &self.session)
            .finish_non_exhaustive()
    }
}

impl Streams {
    pub(crate) fn new(
        session: Arc<str>,
        store: Arc<dyn EventStore>,
        window: usize,
        patience: Duration,
        max_streams: usize,
    ) -> Self {
        let mut streams = Table::default();
        streams.insert(STANDALONE, Stream::new());
        Self {
            session,
            store,
            inner: Mutex::new(streams),
            next_id: Mutex::new(STANDALONE + 1),
            window: u64::try_from(window.max(1)).unwrap_or(u64::MAX),
            patience,
            max_streams: max_streams.max(1),
            closed: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table<Stream>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a stream for a POST reply. When the session holds its most streams, the oldest
    /// one kept only for resumption makes room (its events are forgotten); when every one has
    /// a request in flight, the new one is refused.
    pub(crate) fn open(&self) -> Result<StreamId, TooManyStreams> {
        let mut streams = self.lock();
        for gone in streams.expire(FINISHED_KEPT, FINISHED_GRACE) {
            self.forget_later(Some(gone));
        }
        // The standalone stream does not count.
        if streams.len() > self.max_streams {
            let oldest = streams
                .iter()
                .filter(|(id, s)| **id != STANDALONE && s.evictable())
                .map(|(id, _)| *id)
                .min();
            let Some(oldest) = oldest else {
                return Err(TooManyStreams(self.max_streams));
            };
            if let Some(gone) = streams.remove(&oldest) {
                gone.changed.notify_waiters();
            }
            tracing::debug!(
                stream = oldest,
                "a stream kept for resumption was dropped to make room"
            );
            self.forget_later(Some(oldest));
        }
        let id = {
            let mut next = self
                .next_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let id = *next;
            *next += 1;
            id
        };
        streams.insert(id, Stream::new());
        Ok(id)
    }

    /// Streams held now, besides the standalone one.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.lock().len().saturating_sub(1)
    }

    /// Removes a POST stream that was opened but never used (its request was refused, or
    /// never reached the engine).
    pub(crate) fn discard(&self, stream: StreamId) {
        let mut streams = self.lock();
        if stream != STANDALONE
            && streams
                .get(&stream)
                .is_some_and(|s| !s.attached && s.next_seq == 1)
        {
            streams.remove(&stream);
        }
    }

    /// Notes that a response expected on a POST stream will not come (its request was
    /// cancelled): when it was the last one awaited, the stream ends after what it holds.
    pub(crate) fn abandon_response(&self, stream: StreamId) {
        if let Some(s) = self.lock().get_mut(&stream) {
            s.awaiting = s.awaiting.saturating_sub(1);
            if s.awaiting == 0 && s.last.is_none() {
                s.last = Some(s.next_seq - 1);
                s.changed.notify_waiters();
            }
        }
    }

    /// Notes that one more response is expected on a POST stream.
    pub(crate) fn expect_response(&self, stream: StreamId) {
        if let Some(s) = self.lock().get_mut(&stream) {
            s.awaiting += 1;
        }
    }

    /// Appends a message to a stream, first waiting (within the patience) while it is a full
    /// window ahead of its reader. A `response` counts down the responses the stream awaits; the
    /// last one completes it. Returns false when the stream no longer exists.
    pub(crate) async fn push(&self, stream: StreamId, data: Bytes, response: bool) -> bool {
        let event = match self.admit(stream, data, response, false) {
            Admit::Gone => return false,
            Admit::Event(event) => event,
            // The slow path, boxed so its timer does not sit in every session's writer.
            Admit::Full(data) => match Box::pin(self.wait_for_room(stream, data, response)).await {
                Some(event) => event,
                None => return false,
            },
        };
        let seq = event.seq;
        if let Err(event) = self.store.try_append(&self.session, stream, event) {
            self.store.append(&self.session, stream, event).await;
        }
        let changed = self.lock().get_mut(&stream).map(|s| {
            s.stored = s.stored.max(seq);
            s.changed.clone()
        });
        if let Some(changed) = changed {
            changed.notify_waiters();
        }
        true
    }

    /// Numbers the next event of `stream` if the window has room (or `force`).
    fn admit(&self, stream: StreamId, data: Bytes, response: bool, force: bool) -> Admit {
        let mut streams = self.lock();
        let Some(s) = streams.get_mut(&stream) else {
            return Admit::Gone;
        };
        if s.unread() >= self.window && !force {
            return Admit::Full(data);
        }
        if s.unread() >= self.window {
            tracing::warn!(
                stream,
                "an SSE stream is a full window ahead of its reader (or has none); going on"
            );
        }
        let last = response && {
            s.awaiting = s.awaiting.saturating_sub(1);
            s.awaiting == 0
        };
        let seq = s.next_seq;
        s.next_seq += 1;
        if last {
            s.last = Some(seq);
        }
        Admit::Event(StoredEvent { seq, data, last })
    }

    /// Waits (within the patience) for the reader to make room, then numbers the event.
    async fn wait_for_room(
        &self,
        stream: StreamId,
        data: Bytes,
        response: bool,
    ) -> Option<StoredEvent> {
        let deadline = tokio::time::Instant::now() + self.patience;
        let mut data = data;
        loop {
            let changed = self.notifier(stream)?;
            // Registered before the check, so a reader taking events in between still wakes us.
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let out_of_patience = tokio::time::Instant::now() >= deadline;
            match self.admit(stream, data, response, out_of_patience) {
                Admit::Gone => return None,
                Admit::Event(event) => return Some(event),
                Admit::Full(back) => data = back,
            }
            tokio::select! {
                () = &mut notified => {}
                () = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Attaches a reader (one at a time per stream). Returns the cursor to start from: after
    /// `resume_after` when resuming, else after what was already delivered. `None` when the
    /// stream does not exist or already has a reader.
    pub(crate) fn attach(&self, stream: StreamId, resume_after: Option<u64>) -> Option<u64> {
        let mut streams = self.lock();
        let s = streams.get_mut(&stream)?;
        if s.attached {
            return None;
        }
        s.attached = true;
        s.kept = false;
        Some(resume_after.unwrap_or(s.delivered))
    }

    /// Detaches the reader. A POST stream stays for resumption, even when its reader had taken
    /// every event from the store: taken is not received, and a connection cut mid-stream
    /// leaves the rest of it unsent. Only [`finish`](Self::finish), after the reader passed the
    /// stream's end, forgets it.
    pub(crate) fn detach(&self, stream: StreamId) {
        let mut streams = self.lock();
        if let Some(s) = streams.get_mut(&stream) {
            s.attached = false;
            s.kept = stream != STANDALONE;
            s.changed.notify_waiters();
        }
    }

    /// Notes that a reader has passed the end of a POST stream (its response, or the point where
    /// its cancelled requests left it). The stream stays resumable for [`FINISHED_GRACE`],
    /// at most [`FINISHED_KEPT`] of them per session; older ones are forgotten here and, without
    /// a task of their own, in the store.
    pub(crate) async fn finish(&self, stream: StreamId) {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            // The session has ended: its last reader took what was left.
            let removed = self.lock().remove(&stream).is_some();
            if removed {
                self.store.forget(&self.session, Some(stream)).await;
            }
            return;
        }
        let expired = {
            let mut streams = self.lock();
            let Some(s) = streams.get_mut(&stream) else {
                return;
            };
            if stream == STANDALONE || s.last.is_none_or(|last| s.delivered < last) {
                return;
            }
            s.finished_at = Some(Instant::now());
            streams.note_finished(stream);
            streams.expire(FINISHED_KEPT, FINISHED_GRACE)
        };
        for gone in expired {
            self.store.forget(&self.session, Some(gone)).await;
        }
    }

    /// Forgets the finished POST streams whose grace is over (the session reaper calls this, so
    /// an idle session does not keep them until it expires).
    pub(crate) fn expire(&self) {
        let expired = self.lock().expire(FINISHED_KEPT, FINISHED_GRACE);
        for gone in expired {
            self.forget_later(Some(gone));
        }
    }

    fn forget_later(&self, stream: Option<StreamId>) {
        let store = self.store.clone();
        let session = self.session.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { store.forget(&session, stream).await });
        }
    }

    /// The stream's change signal (enable a `notified()` on it before [`take`](Self::take), so
    /// no change between the two is missed). `None` when the stream is gone.
    pub(crate) fn notifier(&self, stream: StreamId) -> Option<Arc<Notify>> {
        self.lock().get(&stream).map(|s| s.changed.clone())
    }

    /// Takes the events after `cursor`: `Some(events)` (empty means wait), or `None` when the
    /// stream is gone or a POST stream has delivered its response.
    pub(crate) async fn take(&self, stream: StreamId, cursor: u64) -> Option<Vec<StoredEvent>> {
        let (last, stored) = {
            let streams = self.lock();
            let s = streams.get(&stream)?;
            (s.last, s.stored)
        };
        if last.is_some_and(|last| cursor >= last) {
            return None;
        }
        let events = match self.store.try_after(&self.session, stream, cursor) {
            Some(events) => events,
            None => self.store.after(&self.session, stream, cursor).await,
        };
        match events.last() {
            Some(newest) => {
                let newest = newest.seq;
                {
                    let mut streams = self.lock();
                    let s = streams.get_mut(&stream)?;
                    s.delivered = s.delivered.max(newest);
                    s.changed.notify_waiters();
                }
                // What a reader took is kept only for resumption: the store drops it first.
                self.store.delivered(&self.session, stream, newest).await;
            }
            None => {
                if let Some(last) = last
                    && stored >= last
                {
                    // Complete, but the store no longer has what came after the cursor (its
                    // byte budget dropped it unread): the stream can only end here.
                    tracing::warn!(
                        stream,
                        cursor,
                        last,
                        "the rest of a stream was dropped from the event store before it was \
                         read; the stream ends without it"
                    );
                    if let Some(s) = self.lock().get_mut(&stream) {
                        s.delivered = s.delivered.max(last);
                    }
                    return None;
                }
            }
        }
        Some(events)
    }

    /// Ends the current reader of `stream` (not the stream): its client resumes with
    /// `Last-Event-ID`.
    pub(crate) fn interrupt(&self, stream: StreamId) {
        if let Some(s) = self.lock().get_mut(&stream)
            && s.attached
        {
            s.interrupted = true;
            s.changed.notify_waiters();
        }
    }

    /// Whether the reader was asked to stop; clears the request.
    pub(crate) fn take_interrupt(&self, stream: StreamId) -> bool {
        self.lock()
            .get_mut(&stream)
            .is_some_and(|s| std::mem::take(&mut s.interrupted))
    }

    /// Wakes whoever waits on `stream` without adding to it: its request will be answered
    /// later ([`wait_for_event`](Self::wait_for_event)).
    pub(crate) fn nudge(&self, stream: StreamId) {
        if let Some(s) = self.lock().get_mut(&stream) {
            s.answer_later = true;
            s.changed.notify_waiters();
        }
    }

    /// Waits until `stream` has an event after `cursor` (or is gone), or until `max` has passed
    /// since the engine said the answer comes later. Lets a reply that is ready at once leave
    /// with its response head in one write.
    ///
    /// `engine_has_it` says that the engine takes the request on its next turn (it was the
    /// only one in the session's inbox). Then no timer is armed until the engine wakes the
    /// wait: with the answer, or with [`nudge`](Self::nudge) when the handler did not answer
    /// at once. Neither a timer nor a yield is paid for a quick answer: a timer earlier than
    /// every other one costs the runtime an `eventfd` write to wake its I/O driver, and a
    /// yield (Tokio defers it until the worker has polled its I/O) one more `epoll_wait`, per
    /// request. Otherwise the timer starts at once.
    pub(crate) async fn wait_for_event(
        &self,
        stream: StreamId,
        cursor: u64,
        max: Duration,
        engine_has_it: bool,
    ) {
        // Read from the table after the wait is registered, so nothing said before is missed:
        // whether to stop waiting (an event, or the end: gone, or abandoned without one), and
        // whether the answer comes later.
        let state = |streams: &Self| {
            streams.lock().get(&stream).map_or((true, false), |s| {
                (s.next_seq - 1 > cursor || s.last.is_some(), s.answer_later)
            })
        };
        let mut deadline = (!engine_has_it).then(|| tokio::time::Instant::now() + max);
        // The stream's signal is its own for its life: fetched once, each turn locks the table
        // only to read the state.
        let Some(changed) = self.notifier(stream) else {
            return;
        };
        loop {
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (ready, later) = state(self);
            if ready {
                return;
            }
            if later && deadline.is_none() {
                deadline = Some(tokio::time::Instant::now() + max);
            }
            match deadline {
                None => {
                    notified.await;
                    deadline = Some(tokio::time::Instant::now() + max);
                }
                Some(deadline) => tokio::select! {
                    () = &mut notified => {}
                    () = tokio::time::sleep_until(deadline) => return,
                },
            }
            // Woken, most often by the answer itself: looked for before registering again.
            if state(self).0 {
                return;
            }
        }
    }

    /// Whether the stream exists.
    pub(crate) fn exists(&self, stream: StreamId) -> bool {
        self.lock().contains_key(&stream)
    }

    /// Whether any reader is attached (an idle session with an open stream is not expired).
    pub(crate) fn any_attached(&self) -> bool {
        self.lock().values().any(|s| s.attached)
    }

    /// Ends every stream: readers see the end once they have taken what is stored, writers
    /// see no stream; the store forgets them.
    pub(crate) fn close_all(&self) {
        let mut streams = self.lock();
        self.closed
            .store(true, std::sync::atomic::Ordering::Release);
        let mut gone = Vec::new();
        streams.retain(|id, s| {
            s.changed.notify_waiters();
            // A reader that has not yet taken everything stored (the session's last answers,
            // written just before the engine closed it) takes it, then ends the stream, which
            // leaves the table then ([`finish`](Self::finish)). Nothing more is added.
            let unread = s.attached && s.stored > s.delivered;
            if unread {
                s.last = Some(s.stored);
            } else {
                gone.push(*id);
            }
            unread
        });
        let all_gone = streams.is_empty();
        drop(streams);
        if all_gone {
            self.forget_later(None);
        } else {
            for stream in gone {
                self.forget_later(Some(stream));
            }
        }
    }
}

/// Parses an SSE event id of a session's stream, `<stream>-<seq>` (what a client sends back as
/// `Last-Event-ID`).
///
/// ```
/// assert_eq!(tidewire_http::server::parse_event_id("3-17"), Some((3, 17)));
/// assert_eq!(tidewire_http::server::parse_event_id("x-1"), None);
/// ```
pub fn parse_event_id(id: &str) -> Option<(StreamId, u64)> {
    let (stream, seq) = id.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// Formats an event id (the SSE writer formats them in place).
#[cfg(test)]
pub(crate) fn event_id(stream: StreamId, seq: u64) -> String {
    format!("{stream}-{seq}")
}

#[cfg(test)]
mod tests {
    use super::super::event_store::MemoryEventStore;
    use super::*;

    fn data(s: &'static str) -> Bytes {
        Bytes::from_static(s.as_bytes())
    }

    fn streams(window: usize, patience: Duration) -> (Streams, Arc<MemoryEventStore>) {
        let store = Arc::new(MemoryEventStore::new(16));
        (
            Streams::new("s".into(), store.clone(), window, patience, 4),
            store,
        )
    }

    #[tokio::test(start_paused = true)]
    async fn readers_resume_after_an_id_and_streams_end_after_their_response() {
        tokio::time::timeout(std::time::Duration::from_secs(3600), async {
            let (streams, store) = streams(8, Duration::from_millis(10));
            let s = streams.open().expect("room");
            streams.expect_response(s);
            assert!(streams.push(s, data("a"), false).await);
            assert!(streams.push(s, data("b"), false).await);
            let cursor = streams.attach(s, None).expect("attach");
            let first = streams.take(s, cursor).await.expect("events");
            assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
            streams.detach(s);
            assert!(streams.push(s, data("resp"), true).await);
            // A resume after event 1 replays 2 and the response, then ends.
            let cursor = streams.attach(s, Some(1)).expect("resume");
            let again = streams.take(s, cursor).await.expect("events");
            assert_eq!(again.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
            assert!(again[1].last);
            assert!(
                streams.take(s, 3).await.is_none(),
                "the stream ends after its response"
            );
            streams.finish(s).await;
            streams.detach(s);
            // What the reader handed over may not have arrived: the stream stays resumable a while.
            assert!(
                streams.exists(s),
                "a finished POST stream is kept for its grace"
            );
            let cursor = streams.attach(s, Some(2)).expect("resume again");
            let tail = streams.take(s, cursor).await.expect("events");
            assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![3]);
            streams.detach(s);
            tokio::time::advance(FINISHED_GRACE).await;
            let next = streams.open().expect("room");
            assert!(!streams.exists(s), "then it is forgotten");
            tokio::task::yield_now().await;
            assert!(store.is_empty(), "and so are its events");
            assert!(streams.exists(next));
            assert_eq!(parse_event_id(&event_id(s, 3)), Some((s, 3)));
            assert_eq!(parse_event_id("x-1"), None);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test(start_paused = true)]
    async fn a_writer_waits_a_window_ahead_of_its_reader_then_goes_on() {
        tokio::time::timeout(std::time::Duration::from_secs(3600), async {
            let (streams, store) = streams(2, Duration::from_millis(100));
            assert!(streams.push(STANDALONE, data("1"), false).await);
            assert!(streams.push(STANDALONE, data("2"), false).await);
            let started = tokio::time::Instant::now();
            // Nobody reads: the third push waits out the patience, then goes on.
            assert!(streams.push(STANDALONE, data("3"), false).await);
            assert!(started.elapsed() >= Duration::from_millis(100));
            let cursor = streams.attach(STANDALONE, None).expect("attach");
            let events = streams.take(STANDALONE, cursor).await.expect("events");
            assert_eq!(
                events.iter().map(|e| e.seq).collect::<Vec<_>>(),
                vec![1, 2, 3]
            );
            // Taken events open the window at once.
            let started = tokio::time::Instant::now();
            assert!(streams.push(STANDALONE, data("4"), false).await);
            assert!(streams.push(STANDALONE, data("5"), false).await);
            assert_eq!(started.elapsed(), Duration::ZERO);
            assert!(
                streams.attach(STANDALONE, None).is_none(),
                "one reader at a time"
            );
            assert_eq!(store.len(), 5);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn a_full_session_drops_kept_streams_but_never_ones_in_flight() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let (streams, _store) = streams(8, Duration::from_millis(10));
            // Four streams (the limit), each awaiting a response.
            let ids: Vec<StreamId> = (0..4)
                .map(|_| {
                    let s = streams.open().expect("room");
                    streams.expect_response(s);
                    s
                })
                .collect();
            assert_eq!(streams.held(), 4);
            assert_eq!(streams.open(), Err(TooManyStreams(4)), "all in flight");
            // The second one's request is cancelled and its reader went: kept, and evictable.
            streams.abandon_response(ids[1]);
            let fifth = streams.open().expect("room made");
            assert!(!streams.exists(ids[1]), "the kept stream made room");
            assert!(streams.exists(ids[0]) && streams.exists(fifth));
            assert_eq!(streams.held(), 4);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn an_abandoned_stream_ends_after_what_it_holds() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let (streams, _store) = streams(8, Duration::from_millis(10));
            let s = streams.open().expect("room");
            streams.expect_response(s);
            assert!(streams.push(s, data("progress"), false).await);
            let cursor = streams.attach(s, None).expect("attach");
            streams.abandon_response(s);
            let events = streams.take(s, cursor).await.expect("what it holds");
            assert_eq!(events.len(), 1);
            assert!(streams.take(s, 1).await.is_none(), "then its end");
            streams.finish(s).await;
            streams.detach(s);
            assert!(streams.exists(s), "kept for its grace");
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn a_session_keeps_only_its_newest_finished_streams() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = Arc::new(MemoryEventStore::new(16));
            let streams = Streams::new("s".into(), store.clone(), 8, Duration::ZERO, 64);
            let mut ids = Vec::new();
            for _ in 0..FINISHED_KEPT + 2 {
                let s = streams.open().expect("room");
                streams.expect_response(s);
                assert!(streams.push(s, data("response"), true).await);
                let cursor = streams.attach(s, None).expect("attach");
                assert_eq!(streams.take(s, cursor).await.expect("events").len(), 1);
                assert!(streams.take(s, 1).await.is_none());
                streams.finish(s).await;
                streams.detach(s);
                ids.push(s);
            }
            assert!(
                !streams.exists(ids[0]) && !streams.exists(ids[1]),
                "the oldest go"
            );
            assert!(ids[2..].iter().all(|s| streams.exists(*s)));
            assert_eq!(store.len(), FINISHED_KEPT, "and their events with them");
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// Found by the soak run: a POST stream whose response waited for its reader while
    /// unrelated notifications filled the session's byte budget lost the response, and its
    /// reader waited for ever. Unread notifications go first now, and a stream whose rest is
    /// gone ends instead of waiting.
    #[tokio::test]
    async fn a_response_waiting_for_its_reader_outlives_a_flood_of_notifications() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            use super::super::event_store::EventStoreLimits;
            let unit = 1000 + 64;
            let store = Arc::new(MemoryEventStore::with_limits(
                EventStoreLimits::default().bytes_per_session(10 * unit),
            ));
            let streams = Streams::new("s".into(), store.clone(), 1000, Duration::ZERO, 4);
            let post = streams.open().expect("room");
            streams.expect_response(post);
            assert!(
                streams
                    .push(post, Bytes::from(vec![b'r'; 1000]), true)
                    .await
            );
            for _ in 0..30 {
                assert!(
                    streams
                        .push(STANDALONE, Bytes::from(vec![b'n'; 1000]), false)
                        .await
                );
            }
            let cursor = streams.attach(post, None).expect("attach");
            let events = streams
                .take(post, cursor)
                .await
                .expect("the stream is there");
            assert_eq!(events.len(), 1, "the response survived");
            assert!(events[0].last);
            // Read history goes before unread notifications: take the standalone stream, and the
            // next flood drops what was read.
            let cursor = streams.attach(STANDALONE, None).expect("attach");
            let taken = streams.take(STANDALONE, cursor).await.expect("events");
            let newest = taken.last().expect("some").seq;
            assert!(
                streams
                    .push(STANDALONE, Bytes::from(vec![b'n'; 1000]), false)
                    .await
            );
            let left = streams.take(STANDALONE, 0).await.expect("events");
            assert_eq!(
                left.last().map(|e| e.seq),
                Some(newest + 1),
                "the new one is kept"
            );
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn a_stream_whose_rest_was_dropped_ends_instead_of_waiting() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            use super::super::event_store::EventStoreLimits;
            let store = Arc::new(MemoryEventStore::with_limits(
                EventStoreLimits::default().events_per_stream(2),
            ));
            let streams = Streams::new("s".into(), store, 1000, Duration::ZERO, 4);
            let post = streams.open().expect("room");
            streams.expect_response(post);
            for _ in 0..4 {
                assert!(streams.push(post, data("progress"), false).await);
            }
            assert!(streams.push(post, data("response"), true).await);
            // A reader resuming after event 1 finds 2 and 3 gone, 4 and 5 kept: it gets those.
            let cursor = streams.attach(post, Some(1)).expect("attach");
            let events = streams.take(post, cursor).await.expect("events");
            assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![4, 5]);
            streams.detach(post);
            // Had everything after the cursor gone, the stream would end, not wait for ever.
            store_drop_all(&streams).await;
            let cursor = streams.attach(post, Some(1)).expect("attach");
            assert!(streams.take(post, cursor).await.is_none(), "ends");
            streams.finish(post).await;
            streams.detach(post);
            assert!(streams.exists(post), "and is finished (kept for its grace)");
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    async fn store_drop_all(streams: &Streams) {
        streams.store.forget(&streams.session, None).await;
    }

    #[tokio::test]
    async fn only_an_unused_stream_is_discarded() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let (streams, _store) = streams(8, Duration::from_millis(10));
            let unused = streams.open().expect("room");
            streams.discard(unused);
            assert!(!streams.exists(unused), "a refused request's stream goes");
            let used = streams.open().expect("room");
            assert!(streams.push(used, data("progress"), false).await);
            streams.discard(used);
            assert!(streams.exists(used), "one that carries events stays");
            streams.discard(STANDALONE);
            assert!(streams.exists(STANDALONE));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
