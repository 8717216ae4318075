//! [`RedisEventStore`]: a session's SSE events kept in its replica's memory, and copied to Redis
//! Streams so that what was written stays replayable when that replica is gone.
//!
//! The replica holding a session reads and resumes its streams from memory (the default
//! [`MemoryEventStore`], within its limits): no Redis round trip sits on the path of an event.
//! The events of a POST's stream are also queued, in order, for a writer that copies batches of
//! them to Redis: one Redis stream per session stream (`events:<session>:<stream>`, entry ids
//! `<seq>-0`, so an SSE id `<stream>-<seq>` names its entry), expiring with the session's idle
//! timeout, and trimmed as the memory copy is: each entry is added with the memory store's
//! oldest kept event of that stream as the `MINID`, so the copy holds no more events and no
//! more bytes than the store's limits let a stream hold in memory. Another replica replays that copy to a
//! client resuming with `Last-Event-ID` once the owner is dead
//! ([`SessionRouting`](crate::SessionRouting)).
//!
//! Not copied: a stream whose first event is its response (a quick call, answered in the POST's
//! own reply: a Redis stream costs some 4.7 KB however short it is), and the standalone GET
//! stream (notifications of a session that dies with its replica; the client's new session
//! lists again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tidewire_http::server::{
    EventStore, EventStoreLimits, MemoryEventStore, StoredEvent, StreamId, event_store_done,
};
use tokio::sync::{mpsc, oneshot};

use crate::{Redis, RedisError};

/// Events (and forgets) waiting to be copied, at most; past it a copy is dropped (counted,
/// logged) rather than slowing the stream down.
const COPY_QUEUE: usize = 65_536;
/// Writes sent to Redis in one pipeline, at most.
const BATCH: usize = 512;
/// Events one replay returns, at most (a resuming client asks again for the rest).
const REPLAY_MAX: usize = 16_384;

/// The standalone (GET) stream's number.
const STANDALONE: StreamId = 0;

/// One write for the copier.
enum Copy {
    Append {
        session: Arc<str>,
        stream: StreamId,
        event: StoredEvent,
        /// The oldest event of the stream still kept in memory once this one was: older
        /// entries of the copy go.
        oldest: u64,
    },
    /// Deletes these streams of the session.
    Forget {
        session: Arc<str>,
        streams: Vec<StreamId>,
    },
    /// Answered once what was queued before it has been sent.
    Flush(oneshot::Sender<()>),
}

/// The [`EventStore`] of a replica on Redis: memory first, copied to Redis Streams (see the
/// module docs).
///
/// ```no_run
/// # async fn run(redis: tidewire_redis::Redis) {
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tidewire_http::server::{EventStoreLimits, HttpConfig};
/// use tidewire_redis::RedisEventStore;
///
/// let idle = Duration::from_secs(30 * 60);
/// let events = RedisEventStore::new(&redis, idle, EventStoreLimits::default());
/// let config = HttpConfig::default().idle_timeout(idle).event_store(Arc::new(events));
/// # let _ = config; }
/// ```
pub struct RedisEventStore {
    redis: Redis,
    memory: MemoryEventStore,
    /// The streams of each session that have a copy (so only those are deleted).
    copied: Mutex<HashMap<Arc<str>, Vec<StreamId>>>,
    copies: mpsc::Sender<Copy>,
    dropped: Arc<AtomicU64>,
}

impl std::fmt::Debug for RedisEventStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEventStore")
            .field("limits", &self.memory.limits())
            .field("copies_dropped", &self.copies_dropped())
            .finish_non_exhaustive()
    }
}

impl RedisEventStore {
    /// A store within `limits` in memory, copying to `redis` streams that expire `ttl` after
    /// their last event (the sessions' idle timeout). Its copier runs on the current tokio
    /// runtime until the store is dropped.
    pub fn new(redis: &Redis, ttl: Duration, limits: EventStoreLimits) -> Self {
        let (copies, queue) = mpsc::channel(COPY_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        tokio::spawn(copier(redis.clone(), queue, ttl, dropped.clone()));
        Self {
            redis: redis.clone(),
            memory: MemoryEventStore::with_limits(limits),
            copied: Mutex::new(HashMap::new()),
            copies,
            dropped,
        }
    }

    /// Events whose copy to Redis was dropped (the queue was full, or Redis refused the
    /// batch): they stay in memory, but a replay after this replica dies would miss them.
    pub fn copies_dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every event appended (and every stream forgotten) before this call has
    /// been copied to Redis, or its copy dropped.
    pub async fn flush(&self) {
        let (done, copied) = oneshot::channel();
        if self.copies.send(Copy::Flush(done)).await.is_ok() {
            let _ = copied.await;
        }
    }

    /// The events of `stream` in `session` after `after` as copied to Redis, oldest first
    /// (at most 16,384): what another replica replays once this one is gone.
    ///
    /// # Errors
    /// [`RedisError::Redis`] when Redis cannot be asked; [`RedisError::Corrupt`] when an entry
    /// is not one tidewire wrote.
    pub async fn copied(
        &self,
        session: &str,
        stream: StreamId,
        after: u64,
    ) -> Result<Vec<StoredEvent>, RedisError> {
        replay(&self.redis, session, stream, after).await
    }

    fn copied_streams(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Vec<StreamId>>> {
        self.copied.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `event` of `stream` is copied, noting the stream as copied when it is: a POST's
    /// stream whose first event is not already its response.
    fn copies(&self, session: &str, stream: StreamId, event: &StoredEvent) -> Option<Arc<str>> {
        if stream == STANDALONE {
            return None;
        }
        let mut copied = self.copied_streams();
        if let Some((key, streams)) = copied.get_key_value(session)
            && streams.contains(&stream)
        {
            return Some(key.clone());
        }
        if event.seq == 1 && event.last {
            return None;
        }
        let key: Arc<str> = Arc::from(session);
        copied.entry(key.clone()).or_default().push(stream);
        Some(key)
    }

    fn copy(&self, write: Copy) {
        match self.copies.try_send(write) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(
                write @ (Copy::Forget { .. } | Copy::Flush(_)),
            )) => {
                // Forgetting is not dropped: it waits its turn, off the caller's path.
                let copies = self.copies.clone();
                tokio::spawn(async move {
                    let _ = copies.send(write).await;
                });
            }
            Err(mpsc::error::TrySendError::Full(Copy::Append { .. })) => {
                if self
                    .dropped
                    .fetch_add(1, Ordering::Relaxed)
                    .is_multiple_of(10_000)
                {
                    tracing::warn!(
                        "the copy of SSE events to Redis is behind; events are kept in memory \
                         but not all copied"
                    );
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

impl RedisEventStore {
    /// Keeps `event` in memory, and queues its copy to Redis when its stream is copied.
    fn append_here(&self, session: &str, stream: StreamId, event: StoredEvent) {
        let Some(key) = self.copies(session, stream, &event) else {
            self.memory.append_now(session, stream, event);
            return;
        };
        let seq = event.seq;
        let oldest = self
            .memory
            .append_now(session, stream, event.clone())
            .unwrap_or(seq);
        self.copy(Copy::Append {
            session: key,
            stream,
            event,
            oldest,
        });
    }
}

impl EventStore for RedisEventStore {
    /// What its memory copy holds (the copy in Redis is bounded per stream as that one is).
    fn bytes_held(&self) -> Option<usize> {
        Some(self.memory.bytes())
    }

    fn append<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        event: StoredEvent,
    ) -> BoxFuture<'a, ()> {
        self.append_here(session, stream, event);
        event_store_done()
    }

    /// Never waits: the copy to Redis is queued for the writer task.
    fn try_append(
        &self,
        session: &str,
        stream: StreamId,
        event: StoredEvent,
    ) -> Result<(), StoredEvent> {
        self.append_here(session, stream, event);
        Ok(())
    }

    fn after<'a>(
        &'a self,
        session: &'a str,
        stream: StreamId,
        after: u64,
    ) -> BoxFuture<'a, Vec<StoredEvent>> {
        self.memory.after(session, stream, after)
    }

    /// Never waits: the events are read from memory, as `after` reads them.
    fn try_after(&self, session: &str, stream: StreamId, after: u64) -> Option<Vec<StoredEvent>> {
        self.memory.try_after(session, stream, after)
    }

    fn forget<'a>(&'a self, session: &'a str, stream: Option<StreamId>) -> BoxFuture<'a, ()> {
        let forgotten = {
            let mut copied = self.copied_streams();
            match stream {
                None => copied.remove_entry(session),
                Some(stream) => match copied.get_key_value(session) {
                    Some((key, streams)) if streams.contains(&stream) => {
                        let key = key.clone();
                        let left = copied.get_mut(session).map(|streams| {
                            streams.retain(|s| *s != stream);
                            streams.is_empty()
                        });
                        if left == Some(true) {
                            copied.remove(session);
                        }
                        Some((key, vec![stream]))
                    }
                    _ => None,
                },
            }
        };
        if let Some((session, streams)) = forgotten {
            self.copy(Copy::Forget { session, streams });
        }
        self.memory.forget(session, stream)
    }

    fn delivered<'a>(&'a self, session: &'a str, stream: StreamId, seq: u64) -> BoxFuture<'a, ()> {
        self.memory.delivered(session, stream, seq)
    }
}

/// The Redis stream holding `stream` of `session`.
fn stream_key(redis: &Redis, session: &str, stream: StreamId) -> String {
    redis.key(&format!("events:{session}:{stream}"))
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// Copies what `queue` brings to Redis, in order, a batch per pipeline.
async fn copier(
    redis: Redis,
    mut queue: mpsc::Receiver<Copy>,
    ttl: Duration,
    dropped: Arc<AtomicU64>,
) {
    let mut batch = Vec::with_capacity(BATCH);
    while queue.recv_many(&mut batch, BATCH).await > 0 {
        let mut pipe = redis::pipe();
        let mut appended = 0u64;
        let mut touched: Vec<String> = Vec::new();
        let mut flushed = Vec::new();
        for write in batch.drain(..) {
            match write {
                Copy::Flush(done) => flushed.push(done),
                Copy::Append {
                    session,
                    stream,
                    event,
                    oldest,
                } => {
                    let key = stream_key(&redis, &session, stream);
                    pipe.cmd("XADD")
                        .arg(&key)
                        .arg("MINID")
                        .arg(format!("{oldest}-0"))
                        .arg(format!("{}-0", event.seq))
                        .arg("d")
                        .arg(event.data.as_ref())
                        .arg("l")
                        .arg(u8::from(event.last))
                        .ignore();
                    appended += 1;
                    if !touched.contains(&key) {
                        touched.push(key);
                    }
                }
                Copy::Forget { session, streams } => {
                    let keys: Vec<String> = streams
                        .iter()
                        .map(|stream| stream_key(&redis, &session, *stream))
                        .collect();
                    pipe.cmd("DEL").arg(&keys).ignore();
                    touched.retain(|k| !keys.contains(k));
                }
            }
        }
        for key in &touched {
            pipe.cmd("PEXPIRE").arg(key).arg(millis(ttl)).ignore();
        }
        if !pipe.is_empty() {
            let copied: Result<(), _> = pipe.query_async(&mut redis.connection()).await;
            if let Err(error) = copied {
                dropped.fetch_add(appended, Ordering::Relaxed);
                tracing::warn!(%error, "a batch of SSE events could not be copied to Redis");
            }
        }
        for done in flushed {
            let _ = done.send(());
        }
    }
}

/// The copied events of `stream` in `session` after `after`, oldest first (at most
/// [`REPLAY_MAX`]).
///
/// # Errors
/// [`RedisError::Redis`] when Redis cannot be asked; [`RedisError::Corrupt`] when an entry is
/// not one tidewire wrote.
pub(crate) async fn replay(
    redis: &Redis,
    session: &str,
    stream: StreamId,
    after: u64,
) -> Result<Vec<StoredEvent>, RedisError> {
    let key = stream_key(redis, session, stream);
    let entries: Vec<(String, Vec<Vec<u8>>)> = redis::cmd("XRANGE")
        .arg(&key)
        .arg(format!("({after}-0"))
        .arg("+")
        .arg("COUNT")
        .arg(REPLAY_MAX)
        .query_async(&mut redis.connection())
        .await?;
    let corrupt = |reason: &str| RedisError::Corrupt {
        key: key.clone(),
        reason: reason.to_owned(),
    };
    let mut events = Vec::with_capacity(entries.len());
    for (id, fields) in entries {
        let seq = id
            .strip_suffix("-0")
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| corrupt("an entry id that is not <seq>-0"))?;
        let (mut data, mut last) = (None, false);
        for pair in fields.chunks(2) {
            match pair {
                [name, value] if name == b"d" => data = Some(Bytes::copy_from_slice(value)),
                [name, value] if name == b"l" => last = value == b"1",
                _ => {}
            }
        }
        let data = data.ok_or_else(|| corrupt("an entry without its data"))?;
        // Written as one line of JSON: a line break would let what Redis holds forge frames.
        if data.iter().any(|b| matches!(b, b'\n' | b'\r')) {
            return Err(corrupt("an entry whose data holds a line break"));
        }
        events.push(StoredEvent { seq, data, last });
    }
    Ok(events)
}
