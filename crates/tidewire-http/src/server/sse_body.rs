//! SSE response bodies: a session's stream read into frames (`event`, `id`, `retry`, `data`),
//! in chunks, with keep-alive comments; and the guard that ends a stateless request's one-shot
//! session when its reply goes.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, header};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};

use super::event_store::{StoredEvent, StreamId};
use super::session::HttpSession;
use super::state::{State, StatelessSlot};

/// Ends a session when dropped: a stateless request's one-shot session, owned by the request
/// and then by its reply's stream (with its place among the stateless requests, if counted).
pub(crate) struct EndOnDrop {
    session: Arc<HttpSession>,
    /// Freed after the session is closed.
    _slot: Option<StatelessSlot>,
}

impl EndOnDrop {
    pub(crate) fn new(session: Arc<HttpSession>, slot: Option<StatelessSlot>) -> Self {
        Self {
            session,
            _slot: slot,
        }
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.session.close();
    }
}

/// An SSE response reading `stream` from `cursor` (the reader is already attached).
pub(crate) fn sse(
    state: &Arc<State>,
    session: Arc<HttpSession>,
    stream: StreamId,
    cursor: u64,
    retry: Option<Duration>,
    one_shot: Option<EndOnDrop>,
) -> Response {
    let reader = Reader {
        session,
        stream,
        cursor,
        pending: VecDeque::new(),
        priming: retry,
        done: false,
        _one_shot: one_shot,
        keep_alive: state.config.limits.keep_alive,
        numbered: true,
        framer: Framer::default(),
    };
    sse_response(reader)
}

/// An SSE response for a stateless request's stream, starting with `taken` (events already
/// taken from it): events carry no ids, since this wire has no resumption.
pub(crate) fn sse_from(
    state: &Arc<State>,
    session: Arc<HttpSession>,
    stream: StreamId,
    taken: Vec<StoredEvent>,
    one_shot: EndOnDrop,
) -> Response {
    let cursor = taken.last().map_or(0, |e| e.seq);
    let reader = Reader {
        session,
        stream,
        cursor,
        pending: taken.into(),
        priming: None,
        done: false,
        _one_shot: Some(one_shot),
        keep_alive: state.config.limits.keep_alive,
        numbered: false,
        framer: Framer::default(),
    };
    sse_response(reader)
}

fn sse_response(reader: Reader) -> Response {
    let frames = futures::stream::unfold(reader, Reader::next_frame);
    with_sse_headers(Response::new(Body::from_stream(frames)))
}

/// An SSE response replaying `events` of `stream` (each with its id `<stream>-<seq>`), then
/// ending: what a process that does not hold a session serves from a shared copy of its
/// events when the process that held it is gone (see `tidewire_redis`). `data` of each event
/// is compact JSON, one line, as the server stored it.
pub fn replay(stream: StreamId, events: &[StoredEvent]) -> Response {
    let mut body = Vec::with_capacity(events.iter().map(|e| e.data.len() + 48).sum());
    for event in events {
        push_frame(&mut body, Some((stream, event.seq)), &event.data, None);
    }
    with_sse_headers(Response::new(Body::from(body)))
}

/// Asks a proxy (nginx) not to buffer the stream. A `HeaderName` made once: inserting by `&str`
/// checks and lowers the name's every byte first.
const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");

/// `response` as an event stream: its content type, no caching, no proxy buffering.
pub(crate) fn with_sse_headers(mut response: Response) -> Response {
    // Sized for what goes in: a long-lived stream keeps its response head.
    let mut headers = HeaderMap::with_capacity(3);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(X_ACCEL_BUFFERING, HeaderValue::from_static("no"));
    *response.headers_mut() = headers;
    response
}

/// Appends one SSE event in wire form to `out`, with the id `<stream>-<seq>` when `id` is given.
/// `data` never holds a newline (messages are compact JSON).
pub(crate) fn push_frame(
    out: &mut impl BufMut,
    id: Option<(StreamId, u64)>,
    data: &[u8],
    retry: Option<Duration>,
) {
    let mut number = itoa::Buffer::new();
    if retry.is_none() {
        out.put_slice(b"event: message\n");
    }
    if let Some((stream, seq)) = id {
        out.put_slice(b"id: ");
        out.put_slice(number.format(stream).as_bytes());
        out.put_u8(b'-');
        out.put_slice(number.format(seq).as_bytes());
        out.put_u8(b'\n');
    }
    if let Some(retry) = retry {
        out.put_slice(b"retry: ");
        out.put_slice(number.format(retry.as_millis()).as_bytes());
        out.put_u8(b'\n');
    }
    out.put_slice(b"data: ");
    out.put_slice(data);
    out.put_slice(b"\n\n");
}

/// Bytes of frames handed to the body in one chunk, at most (the event that crosses it is the
/// last): a burst of progress goes out in few large writes. A bound in events (64) made a
/// burst of 10,000 small notifications 156 chunks and 76 `writev` calls.
const CHUNK_BYTES: usize = 64 * 1024;

/// Bytes of framing buffer a stream keeps while it waits for events.
const QUIET_KEPT: usize = 16 * 1024;

/// The most a frame adds to its event's data: `event: message`, an id of two 20-digit numbers,
/// `data: ` and the line ends.
const FRAME_OVERHEAD: usize = 72;

/// Where a reader frames its chunks: one buffer, from which each chunk is split off and handed
/// to the body; once the body has written and dropped it, the next chunk reuses the same memory.
/// A buffer made and freed per chunk (64 KiB in a burst) had the allocator give pages back to
/// the kernel and fault them in again: an eighth of the server's time in a session-era progress
/// burst was the kernel clearing those pages.
#[derive(Debug, Default)]
struct Framer {
    out: BytesMut,
    /// The most room `out` was given since it was last given back (after a split, its
    /// `capacity` says only what is left of the buffer it shares).
    grown: usize,
}

impl Framer {
    /// Frames events from `pending` (up to [`CHUNK_BYTES`], the event that crosses it the last)
    /// after what is already framed, numbered on `stream` when given; returns the chunk, and
    /// whether it holds the stream's last event.
    fn frame(
        &mut self,
        pending: &mut VecDeque<StoredEvent>,
        stream: Option<StreamId>,
    ) -> (Bytes, bool) {
        // Sized once for what goes in, not grown frame by frame.
        let mut need = 0;
        for event in pending.iter() {
            if self.out.len() + need >= CHUNK_BYTES {
                break;
            }
            need += event.data.len() + FRAME_OVERHEAD;
        }
        self.out.reserve(need);
        self.grown = self.grown.max(self.out.capacity());
        let mut last = false;
        while self.out.len() < CHUNK_BYTES
            && let Some(event) = pending.pop_front()
        {
            last |= event.last;
            push_frame(
                &mut self.out,
                stream.map(|s| (s, event.seq)),
                &event.data,
                None,
            );
        }
        (self.out.split().freeze(), last)
    }

    /// Frames the 2025-11-25 priming event (an id to resume from, `retry`, empty data) for
    /// [`frame`](Self::frame) to send with whatever follows it.
    fn priming(&mut self, stream: StreamId, retry: Duration) {
        // Room for the priming event and a quick answer, made once.
        self.out.reserve(256);
        push_frame(&mut self.out, Some((stream, 0)), b"", Some(retry));
    }

    /// Before waiting for events: a buffer a burst grew past [`QUIET_KEPT`] is given back.
    fn quiet(&mut self) {
        if self.grown > QUIET_KEPT {
            self.release();
        }
    }

    /// Keeps no buffer.
    fn release(&mut self) {
        self.out = BytesMut::new();
        self.grown = 0;
    }
}

/// Reads one stream of a session into SSE frames; detaches when dropped.
struct Reader {
    session: Arc<HttpSession>,
    stream: StreamId,
    cursor: u64,
    pending: VecDeque<StoredEvent>,
    priming: Option<Duration>,
    done: bool,
    /// A stateless request's session, ended when this reader goes (after it detaches).
    _one_shot: Option<EndOnDrop>,
    keep_alive: Duration,
    /// Events carry ids (`<stream>-<seq>`) for resumption; not on the stateless wire.
    numbered: bool,
    /// Where chunks are framed.
    framer: Framer,
}

impl Reader {
    /// Frames the events already taken (up to a bound) after what the framer holds, numbered
    /// on `stream` when this stream can be resumed, noting the last one; returns the chunk.
    fn frame_pending(&mut self, stream: Option<StreamId>) -> Bytes {
        let (chunk, last) = self.framer.frame(&mut self.pending, stream);
        self.done |= last;
        chunk
    }

    async fn next_frame(mut self) -> Option<(Result<Bytes, Infallible>, Self)> {
        let (numbered, stream) = (self.numbered, self.stream);
        if let Some(retry) = self.priming.take() {
            // The 2025-11-25 priming event: an id to resume from, `retry`, and empty data; with
            // whatever is already there, in one chunk.
            self.framer.priming(self.stream, retry);
            if let Some(events) = self.session.streams.take(self.stream, self.cursor).await {
                self.cursor = events.last().map_or(self.cursor, |e| e.seq);
                self.pending.extend(events);
            }
            let chunk = self.frame_pending(numbered.then_some(stream));
            // A one-off: a stream that now waits (a GET stream, mostly) keeps no buffer.
            self.framer.release();
            return Some((Ok(chunk), self));
        }
        loop {
            if !self.pending.is_empty() {
                // Everything already taken goes out in one chunk (up to a bound), so a burst of
                // progress costs few writes.
                let chunk = self.frame_pending(numbered.then_some(stream));
                return Some((Ok(chunk), self));
            }
            if self.done {
                self.session.streams.finish(self.stream).await;
                return None;
            }
            if self.session.streams.take_interrupt(self.stream) {
                return None;
            }
            // What is there is taken without registering for a change (a quick answer is
            // there when the body is first polled); only a reader that finds nothing registers,
            // then looks again, so an event added in between still wakes it.
            let mut events = self.session.streams.take(self.stream, self.cursor).await;
            if events.as_ref().is_some_and(Vec::is_empty) {
                let changed = self.session.streams.notifier(self.stream)?;
                let notified = changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                events = self.session.streams.take(self.stream, self.cursor).await;
                if events.as_ref().is_some_and(Vec::is_empty) {
                    self.framer.quiet();
                    // A session that ends wakes this too (its streams are closed), and the
                    // stream is then gone.
                    tokio::select! {
                        () = &mut notified => {}
                        () = tokio::time::sleep(self.keep_alive) => {
                            // A comment keeps proxies and clients from timing the stream out.
                            return Some((Ok(Bytes::from_static(b":\n\n")), self));
                        }
                    }
                    continue;
                }
            }
            let Some(events) = events else {
                // Past the stream's end (its requests were cancelled), or the stream is gone.
                self.session.streams.finish(self.stream).await;
                return None;
            };
            self.cursor = events.last().map_or(self.cursor, |e| e.seq);
            self.pending.extend(events);
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.session.streams.detach(self.stream);
        // `one_shot`, if any, ends its session as it drops, after this.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(from: u64, count: u64, bytes: usize) -> VecDeque<StoredEvent> {
        (from..from + count)
            .map(|seq| StoredEvent {
                seq,
                data: Bytes::from(vec![b'x'; bytes]),
                last: false,
            })
            .collect()
    }

    #[test]
    fn chunks_are_framed_in_one_buffer_reused_once_the_body_drops_them() {
        let mut framer = Framer::default();
        let mut pending = events(1, 3, 10);
        let (first, last) = framer.frame(&mut pending, Some(4));
        assert!(!last && pending.is_empty());
        let expected: Vec<u8> = (1..=3)
            .flat_map(|seq| {
                format!("event: message\nid: 4-{seq}\ndata: xxxxxxxxxx\n\n").into_bytes()
            })
            .collect();
        assert_eq!(first, expected);
        let at = first.as_ptr();
        // Written and dropped by the body: the next chunk is framed where the first one was.
        drop(first);
        let mut pending = events(4, 3, 10);
        let (second, _) = framer.frame(&mut pending, Some(4));
        assert_eq!(second.as_ptr(), at, "the same memory, not a new buffer");
        // Still held by the body: the next chunk does not write over it.
        let mut pending = events(7, 1, 10);
        let (third, _) = framer.frame(&mut pending, None);
        let expected: Vec<u8> = (4..=6)
            .flat_map(|seq| {
                format!("event: message\nid: 4-{seq}\ndata: xxxxxxxxxx\n\n").into_bytes()
            })
            .collect();
        assert_eq!(second, expected);
        assert_eq!(third, &b"event: message\ndata: xxxxxxxxxx\n\n"[..]);
    }

    #[test]
    fn a_chunk_stops_past_its_bound_and_a_waiting_reader_gives_back_a_large_buffer() {
        let mut framer = Framer::default();
        let mut pending = events(1, 100, 1000);
        let (chunk, _) = framer.frame(&mut pending, Some(1));
        assert!(chunk.len() >= CHUNK_BYTES && chunk.len() < CHUNK_BYTES + 1100);
        assert!(!pending.is_empty(), "the rest waits for the next chunk");
        drop(chunk);
        framer.quiet();
        assert_eq!(
            framer.out.capacity(),
            0,
            "a burst's buffer is not kept while waiting"
        );
        // A small one is kept.
        let mut pending = events(1, 2, 10);
        let (chunk, _) = framer.frame(&mut pending, Some(1));
        drop(chunk);
        framer.quiet();
        assert!(framer.grown > 0 && framer.grown <= QUIET_KEPT);
        // The last event says so.
        let mut pending = events(3, 1, 10);
        pending[0].last = true;
        assert!(framer.frame(&mut pending, Some(1)).1);
    }
}
