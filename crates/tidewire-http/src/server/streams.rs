//! The SSE streams of one session: a bounded ring of events per stream, from which connected
//! responses read and from which a reconnecting client resumes (`Last-Event-ID`).
//!
//! Stream 0 is the session's standalone (GET) stream; every POST that opens an SSE reply gets
//! the next number. An event id is `<stream>-<seq>`, so ids are unique in the session and say
//! which stream they belong to (H18); a resume replays that stream only (H19).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;

/// The number of a stream within its session.
pub(crate) type StreamId = u64;

/// The standalone stream, opened by GET.
pub(crate) const STANDALONE: StreamId = 0;

/// One stored event: its sequence number in the stream and the JSON-RPC message as text.
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) seq: u64,
    pub(crate) data: Arc<str>,
    /// The response that completes a POST stream.
    pub(crate) last: bool,
}

#[derive(Debug)]
struct Stream {
    events: VecDeque<Event>,
    next_seq: u64,
    /// The highest sequence number a reader has taken.
    delivered: u64,
    /// A reader is attached.
    attached: bool,
    /// Responses still expected on this POST stream (more than one for a batch).
    awaiting: usize,
    /// The final event (a POST's last response) has been stored.
    complete: bool,
    /// Woken when events are added, taken, or the stream is closed.
    changed: Arc<Notify>,
}

impl Stream {
    fn new() -> Self {
        Self {
            events: VecDeque::new(),
            next_seq: 1,
            delivered: 0,
            attached: false,
            awaiting: 0,
            complete: false,
            changed: Arc::new(Notify::new()),
        }
    }
}

/// Every stream of one session.
#[derive(Debug)]
pub(crate) struct Streams {
    inner: Mutex<HashMap<StreamId, Stream>>,
    next_id: Mutex<StreamId>,
    capacity: usize,
    /// How long a writer waits for a slow or absent reader before it drops the oldest event.
    patience: Duration,
}

impl Streams {
    pub(crate) fn new(capacity: usize, patience: Duration) -> Self {
        let mut streams = HashMap::new();
        streams.insert(STANDALONE, Stream::new());
        Self {
            inner: Mutex::new(streams),
            next_id: Mutex::new(STANDALONE + 1),
            capacity: capacity.max(1),
            patience,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<StreamId, Stream>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens a stream for a POST reply.
    pub(crate) fn open(&self) -> StreamId {
        let id = {
            let mut next = self
                .next_id
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let id = *next;
            *next += 1;
            id
        };
        self.lock().insert(id, Stream::new());
        id
    }

    /// Notes that one more response is expected on a POST stream.
    pub(crate) fn expect_response(&self, stream: StreamId) {
        if let Some(s) = self.lock().get_mut(&stream) {
            s.awaiting += 1;
        }
    }

    /// Appends a message to a stream, waiting (within the patience) while the ring is full of
    /// events no reader has taken. A `response` counts down the responses the stream awaits;
    /// the last one completes it. Returns false when the stream no longer exists.
    pub(crate) async fn push(&self, stream: StreamId, data: Arc<str>, response: bool) -> bool {
        let deadline = tokio::time::Instant::now() + self.patience;
        loop {
            let Some(changed) = self.notifier(stream) else {
                return false;
            };
            // Registered before the check, so a reader taking events in between still wakes us.
            let notified = changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut streams = self.lock();
                let Some(s) = streams.get_mut(&stream) else {
                    return false;
                };
                while s.events.len() >= self.capacity
                    && s.events.front().is_some_and(|e| e.seq <= s.delivered)
                {
                    s.events.pop_front();
                }
                let out_of_patience = tokio::time::Instant::now() >= deadline;
                if s.events.len() < self.capacity || out_of_patience {
                    if s.events.len() >= self.capacity {
                        s.events.pop_front();
                        tracing::warn!(
                            stream,
                            "an SSE stream's buffer is full and nobody reads it: dropped its oldest event"
                        );
                    }
                    let last = response && {
                        s.awaiting = s.awaiting.saturating_sub(1);
                        s.awaiting == 0
                    };
                    let seq = s.next_seq;
                    s.next_seq += 1;
                    s.events.push_back(Event { seq, data, last });
                    s.complete |= last;
                    s.changed.notify_waiters();
                    return true;
                }
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
        Some(resume_after.unwrap_or(s.delivered))
    }

    /// Detaches the reader; a POST stream whose response was taken is removed.
    pub(crate) fn detach(&self, stream: StreamId) {
        let mut streams = self.lock();
        let finished = match streams.get_mut(&stream) {
            Some(s) => {
                s.attached = false;
                s.changed.notify_waiters();
                stream != STANDALONE && s.complete && s.delivered >= s.next_seq - 1
            }
            None => false,
        };
        if finished {
            streams.remove(&stream);
        }
    }

    /// The stream's change signal (enable a `notified()` on it before [`take`](Self::take), so
    /// no change between the two is missed). `None` when the stream is gone.
    pub(crate) fn notifier(&self, stream: StreamId) -> Option<Arc<Notify>> {
        self.lock().get(&stream).map(|s| s.changed.clone())
    }

    /// Takes the events after `cursor`: `Some(events)` (empty means wait), or `None` when the
    /// stream is gone or a POST stream has delivered its response.
    pub(crate) fn take(&self, stream: StreamId, cursor: u64) -> Option<Vec<Event>> {
        let mut streams = self.lock();
        let s = streams.get_mut(&stream)?;
        let events: Vec<Event> = s
            .events
            .iter()
            .filter(|e| e.seq > cursor)
            .cloned()
            .collect();
        if let Some(last) = events.last() {
            s.delivered = s.delivered.max(last.seq);
            s.changed.notify_waiters();
            return Some(events);
        }
        if s.complete && stream != STANDALONE {
            return None;
        }
        Some(Vec::new())
    }

    /// Whether the stream exists.
    pub(crate) fn exists(&self, stream: StreamId) -> bool {
        self.lock().contains_key(&stream)
    }

    /// Whether any reader is attached (an idle session with an open stream is not expired).
    pub(crate) fn any_attached(&self) -> bool {
        self.lock().values().any(|s| s.attached)
    }

    /// Ends every stream: readers see the end, writers see no stream.
    pub(crate) fn close_all(&self) {
        let mut streams = self.lock();
        for s in streams.values() {
            s.changed.notify_waiters();
        }
        streams.clear();
    }
}

/// Parses an event id `<stream>-<seq>`.
pub(crate) fn parse_event_id(id: &str) -> Option<(StreamId, u64)> {
    let (stream, seq) = id.trim().split_once('-')?;
    Some((stream.parse().ok()?, seq.parse().ok()?))
}

/// Formats an event id.
pub(crate) fn event_id(stream: StreamId, seq: u64) -> String {
    format!("{stream}-{seq}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(s: &str) -> Arc<str> {
        Arc::from(s)
    }

    #[tokio::test]
    async fn readers_resume_after_an_id_and_streams_end_after_their_response() {
        let streams = Streams::new(8, Duration::from_millis(10));
        let s = streams.open();
        streams.expect_response(s);
        assert!(streams.push(s, data("a"), false).await);
        assert!(streams.push(s, data("b"), false).await);
        let cursor = streams.attach(s, None).expect("attach");
        let first = streams.take(s, cursor).expect("events");
        assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
        streams.detach(s);
        assert!(streams.push(s, data("resp"), true).await);
        // A resume after event 1 replays 2 and the response, then ends.
        let cursor = streams.attach(s, Some(1)).expect("resume");
        let again = streams.take(s, cursor).expect("events");
        assert_eq!(again.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        assert!(again[1].last);
        assert!(
            streams.take(s, 3).is_none(),
            "the stream ends after its response"
        );
        streams.detach(s);
        assert!(!streams.exists(s), "a finished POST stream is removed");
        assert_eq!(parse_event_id(&event_id(s, 3)), Some((s, 3)));
        assert_eq!(parse_event_id("x-1"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_ring_waits_for_its_reader_then_drops_the_oldest() {
        let streams = Streams::new(2, Duration::from_millis(100));
        assert!(streams.push(STANDALONE, data("1"), false).await);
        assert!(streams.push(STANDALONE, data("2"), false).await);
        // Nobody reads: the third push waits out the patience, then evicts event 1.
        assert!(streams.push(STANDALONE, data("3"), false).await);
        let cursor = streams.attach(STANDALONE, None).expect("attach");
        let events = streams.take(STANDALONE, cursor).expect("events");
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![2, 3]);
        // Taken events make room at once.
        assert!(streams.push(STANDALONE, data("4"), false).await);
        assert!(streams.push(STANDALONE, data("5"), false).await);
        assert!(
            streams.attach(STANDALONE, None).is_none(),
            "one reader at a time"
        );
    }
}
