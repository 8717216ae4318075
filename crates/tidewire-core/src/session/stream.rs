//! The response stream of a request served without a session (the 2026-07-28 wire over HTTP):
//! [`RequestStream`], where its handler's notifications go, and [`RequestStreamReceiver`], the
//! transport's end.
//!
//! The stream is one buffer of JSON texts, not a channel of messages: a sender copies its text
//! into the buffer under a lock, and the transport takes everything written so far in one swap
//! and frames it in one pass. The two buffers trade places, so once they have grown to a burst's
//! size a notification costs no allocation, and a burst of progress leaves in a few writes.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::task::AtomicWaker;
use serde::Serialize;
use tokio::sync::Notify;

use super::error::SessionError;
use crate::transport::TransportError;

/// The response stream of one request served without a session: what its handler sends before
/// the response (progress, logs, a listen's notifications) goes here, encoded as JSON-RPC
/// notifications, in order.
///
/// Bounded in messages (a handler that sends faster than the client reads waits for room) and
/// in the size of each (a notification over the limit is refused, as a codec would). Once the
/// transport has dropped the other end (the client closed the response, which cancels the
/// request), every send fails with [`SessionError::Closed`]: nothing more is sent for it.
pub struct RequestStream {
    shared: Arc<Shared>,
}

/// The transport's end of a [`RequestStream`]: the encoded notifications, one JSON text each,
/// in the order they were sent.
pub struct RequestStreamReceiver {
    shared: Arc<Shared>,
    /// The texts last taken from the stream, each after its length.
    taken: Vec<u8>,
    /// How far into `taken` the transport has read.
    read: usize,
}

/// What both ends share.
struct Shared {
    buffer: Mutex<Buffer>,
    /// The receiver, when it waits for a text.
    reader: AtomicWaker,
    /// Senders waiting for room.
    room: Notify,
    /// The most messages written and not yet read (at least one).
    capacity: usize,
    max_message_size: usize,
}

/// The texts written and not yet taken, and what the two ends know of each other.
struct Buffer {
    /// Each text after its length (four bytes, little-endian).
    texts: Vec<u8>,
    /// How many texts `texts` holds.
    waiting: usize,
    /// How many texts the receiver has taken and not yet read: they still count against the
    /// capacity, so what is written and unread never passes it.
    taken: usize,
    /// Live [`RequestStream`] handles; at none, the stream ends once read.
    senders: usize,
    /// The receiver is gone: every send fails.
    closed: bool,
}

/// A request's stream holding at most `capacity` messages (at least one) of at most
/// `max_message_size` bytes each, and the transport's end of it.
pub fn request_stream(
    capacity: usize,
    max_message_size: usize,
) -> (RequestStream, RequestStreamReceiver) {
    let shared = Arc::new(Shared {
        buffer: Mutex::new(Buffer {
            texts: Vec::new(),
            waiting: 0,
            taken: 0,
            senders: 1,
            closed: false,
        }),
        reader: AtomicWaker::new(),
        room: Notify::new(),
        capacity: capacity.max(1),
        max_message_size,
    });
    (
        RequestStream {
            shared: Arc::clone(&shared),
        },
        RequestStreamReceiver {
            shared,
            taken: Vec::new(),
            read: 0,
        },
    )
}

/// How many bytes go before each text in the buffer: its length.
const LENGTH: usize = 4;

/// The most each of a stream's two buffers keeps once everything written is read, in bytes.
const BUFFER_KEPT: usize = 64 * 1024;

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Buffer> {
        self.buffer.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn closed() -> SessionError {
    SessionError::Closed("the client closed the request's stream".into())
}

/// A notification in wire form, written straight from its parameters' type (no `Value` tree).
#[derive(Serialize)]
struct Wire<'a, P: ?Sized> {
    jsonrpc: &'static str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
}

/// The most a thread's framing buffer keeps between messages, in bytes.
pub(crate) const SCRATCH_KEPT: usize = 16 * 1024;

thread_local! {
    /// Where this thread writes a message before it is copied into a stream.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with this thread's framing buffer, empty; a buffer grown past [`SCRATCH_KEPT`] is
/// not kept. Called again from inside `f` (nothing here does), it gives a new buffer.
pub(crate) fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
        Ok(mut out) => {
            out.clear();
            let result = f(&mut out);
            if out.capacity() > SCRATCH_KEPT {
                *out = Vec::new();
            }
            result
        }
        Err(_) => f(&mut Vec::new()),
    })
}

/// How many bytes this thread's framing buffer keeps.
#[cfg(test)]
pub(crate) fn scratch_capacity() -> usize {
    SCRATCH.with(|scratch| scratch.borrow().capacity())
}

impl RequestStream {
    /// Sends a notification `method` with `params` on the stream, waiting for room.
    ///
    /// # Errors
    /// [`SessionError::Closed`] once the client has closed the response;
    /// [`SessionError::InvalidParams`] when the params do not serialize;
    /// [`SessionError::Transport`] ([`is_too_large`](crate::transport::TransportError::is_too_large))
    /// when the message is over the size limit (nothing is sent either way; the stream goes on).
    pub async fn notify<P: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&P>,
    ) -> Result<(), SessionError> {
        let wire = Wire {
            jsonrpc: "2.0",
            method,
            params,
        };
        let full = with_scratch(|out| {
            serde_json::to_writer(&mut *out, &wire).map_err(|e| SessionError::InvalidParams {
                method: method.to_owned(),
                reason: e.to_string(),
            })?;
            self.try_send_or_copy(out, || Ok::<(), SessionError>(()))
                .map_err(SendError::into_session)
        })?;
        match full {
            None => Ok(()),
            Some(text) => self
                .send(&text, || Ok::<(), SessionError>(()))
                .await
                .map_err(SendError::into_session),
        }
    }

    /// Sends `text`, one JSON message, once there is room; `admit` runs under the stream's lock
    /// just before the text is added, and its error sends nothing (so what is admitted first is
    /// sent first).
    ///
    /// # Errors
    /// `admit`'s error; the stream's when the text is over the size limit or the client has
    /// closed the response.
    pub(crate) async fn send<E>(
        &self,
        text: &[u8],
        mut admit: impl FnMut() -> Result<(), E>,
    ) -> Result<(), SendError<E>> {
        loop {
            let room = self.shared.room.notified();
            tokio::pin!(room);
            // Registered before looking, so room made after the look wakes this.
            room.as_mut().enable();
            match self.try_send(text, &mut admit)? {
                Sent::Done => return Ok(()),
                Sent::Full => room.await,
            }
        }
    }

    /// [`try_send`](Self::try_send), copying `text` out when there is no room: the copy is
    /// what a caller framing in a borrowed buffer waits with ([`send`](Self::send)); `None`
    /// when the text was added.
    ///
    /// # Errors
    /// As [`try_send`](Self::try_send).
    pub(crate) fn try_send_or_copy<E>(
        &self,
        text: &[u8],
        admit: impl FnOnce() -> Result<(), E>,
    ) -> Result<Option<Vec<u8>>, SendError<E>> {
        Ok(match self.try_send(text, admit)? {
            Sent::Done => None,
            Sent::Full => Some(text.to_vec()),
        })
    }

    /// Adds `text` when there is room (after `admit` accepts it), without waiting.
    ///
    /// # Errors
    /// `admit`'s error (nothing is added); the stream's when the text is over the size limit or
    /// the client has closed the response.
    pub(crate) fn try_send<E>(
        &self,
        bytes: &[u8],
        admit: impl FnOnce() -> Result<(), E>,
    ) -> Result<Sent, SendError<E>> {
        let limit = self.shared.max_message_size;
        let length = u32::try_from(bytes.len())
            .ok()
            .filter(|_| bytes.len() <= limit)
            .ok_or_else(|| {
                SendError::Stream(SessionError::Transport(TransportError::too_large(
                    bytes.len(),
                    limit,
                    false,
                )))
            })?;
        let mut buffer = self.shared.lock();
        if buffer.closed {
            return Err(SendError::Stream(closed()));
        }
        if buffer.waiting + buffer.taken >= self.shared.capacity {
            return Ok(Sent::Full);
        }
        admit().map_err(SendError::Refused)?;
        let was_empty = buffer.waiting == 0;
        buffer.texts.extend_from_slice(&length.to_le_bytes());
        buffer.texts.extend_from_slice(bytes);
        buffer.waiting += 1;
        drop(buffer);
        if was_empty {
            // A receiver that found nothing registered before it looked; later texts find it
            // already woken.
            self.shared.reader.wake();
        }
        Ok(Sent::Done)
    }

    /// True once the transport has dropped the other end.
    pub fn is_closed(&self) -> bool {
        self.shared.lock().closed
    }
}

/// What [`RequestStream::try_send`] did: added the text, or found no room.
pub(crate) enum Sent {
    /// Added.
    Done,
    /// No room: nothing added.
    Full,
}

/// Why a text was not added to a stream.
#[derive(Debug)]
pub(crate) enum SendError<E> {
    /// Over the size limit, or the client has closed the response.
    Stream(SessionError),
    /// The caller's `admit` refused it.
    Refused(E),
}

impl SendError<SessionError> {
    fn into_session(self) -> SessionError {
        match self {
            Self::Stream(e) | Self::Refused(e) => e,
        }
    }
}

impl Clone for RequestStream {
    fn clone(&self) -> Self {
        self.shared.lock().senders += 1;
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for RequestStream {
    fn drop(&mut self) {
        let mut buffer = self.shared.lock();
        buffer.senders -= 1;
        let last = buffer.senders == 0;
        drop(buffer);
        if last {
            self.shared.reader.wake();
        }
    }
}

impl std::fmt::Debug for RequestStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestStream")
            .field("capacity", &self.shared.capacity)
            .field("max_message_size", &self.shared.max_message_size)
            .finish_non_exhaustive()
    }
}

/// What the receiver found when it looked in the stream.
enum Found {
    /// Texts to read.
    Texts,
    /// Nothing yet.
    Nothing,
    /// Nothing, and no sender is left.
    End,
}

impl RequestStreamReceiver {
    /// Reads up to `max` texts already in the stream, in order, each passed to `each`;
    /// returns how many.
    pub fn try_drain(&mut self, max: usize, mut each: impl FnMut(&[u8])) -> usize {
        let mut count = 0;
        while count < max {
            if let Some(text) = self.next_taken() {
                each(text);
                count += 1;
                continue;
            }
            if !matches!(self.take(), Found::Texts) {
                break;
            }
        }
        count
    }

    /// As [`try_drain`](Self::try_drain), waiting for at least one text: `Ready(Some(n))` with
    /// `n > 0` texts read, `Ready(None)` once every sender is gone and all is read.
    pub fn poll_drain(
        &mut self,
        cx: &mut Context<'_>,
        max: usize,
        mut each: impl FnMut(&[u8]),
    ) -> Poll<Option<usize>> {
        if max == 0 {
            return Poll::Ready(Some(0));
        }
        let read = self.try_drain(max, &mut each);
        if read > 0 {
            return Poll::Ready(Some(read));
        }
        self.shared.reader.register(cx.waker());
        // Looked at again after registering: a text written since wakes nobody.
        match self.take() {
            Found::Texts => Poll::Ready(Some(self.try_drain(max, each))),
            Found::Nothing => Poll::Pending,
            Found::End => Poll::Ready(None),
        }
    }

    /// Resolves once there is a text to read, or every sender is gone (reading nothing).
    pub async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.poll_ready(cx)).await;
    }

    /// Polls for [`ready`](Self::ready).
    pub fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !matches!(self.take(), Found::Nothing) {
            return Poll::Ready(());
        }
        self.shared.reader.register(cx.waker());
        match self.take() {
            Found::Nothing => Poll::Pending,
            Found::Texts | Found::End => Poll::Ready(()),
        }
    }

    /// The next notification; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<Bytes> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Polls for the next notification (see [`recv`](Self::recv)). Each is copied out on its
    /// own; [`poll_drain`](Self::poll_drain) reads them in place.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let mut next = None;
        self.poll_drain(cx, 1, |text| next = Some(Bytes::copy_from_slice(text)))
            .map(|read| read.and(next))
    }

    /// A notification already there, without waiting.
    pub fn try_recv(&mut self) -> Option<Bytes> {
        let mut next = None;
        self.try_drain(1, |text| next = Some(Bytes::copy_from_slice(text)));
        next
    }

    /// The next text of those taken, if one is left.
    fn next_taken(&mut self) -> Option<&[u8]> {
        let rest = self.taken.get(self.read..)?;
        let (length, rest) = rest.split_first_chunk::<LENGTH>()?;
        let length = u32::from_le_bytes(*length) as usize;
        let text = rest.get(..length)?;
        self.read += LENGTH + length;
        Some(text)
    }

    /// Gives back what was taken (all of it read) and takes what was written since: the two
    /// buffers trade places, so neither is made anew.
    fn take(&mut self) -> Found {
        if self.read < self.taken.len() {
            return Found::Texts;
        }
        self.taken.clear();
        self.read = 0;
        let mut buffer = self.shared.lock();
        let freed = std::mem::take(&mut buffer.taken) > 0;
        let found = if buffer.waiting > 0 {
            std::mem::swap(&mut buffer.texts, &mut self.taken);
            buffer.taken = std::mem::take(&mut buffer.waiting);
            Found::Texts
        } else {
            // Quiet (everything read): buffers a burst grew past `BUFFER_KEPT` go, so a stream
            // that stays open (a listen) does not hold a burst's memory for its whole life.
            if buffer.texts.capacity() > BUFFER_KEPT {
                buffer.texts = Vec::new();
            }
            if self.taken.capacity() > BUFFER_KEPT {
                self.taken = Vec::new();
            }
            if buffer.senders == 0 {
                Found::End
            } else {
                Found::Nothing
            }
        };
        drop(buffer);
        if freed {
            self.shared.room.notify_waiters();
        }
        found
    }
}

impl Drop for RequestStreamReceiver {
    fn drop(&mut self) {
        let mut buffer = self.shared.lock();
        buffer.closed = true;
        buffer.texts = Vec::new();
        buffer.waiting = 0;
        drop(buffer);
        self.shared.room.notify_waiters();
    }
}

impl std::fmt::Debug for RequestStreamReceiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestStreamReceiver")
            .field("capacity", &self.shared.capacity)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn text(n: usize) -> Vec<u8> {
        format!("{{\"n\":{n}}}").into_bytes()
    }

    fn drain_all(rx: &mut RequestStreamReceiver) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        rx.try_drain(usize::MAX, |t| seen.push(t.to_vec()));
        seen
    }

    #[test]
    fn the_scratch_buffer_called_inside_itself_gives_a_new_one() {
        let both = with_scratch(|outer| {
            outer.extend_from_slice(b"outer");
            let inner = with_scratch(|inner| {
                inner.extend_from_slice(b"inner");
                inner.clone()
            });
            (outer.clone(), inner)
        });
        assert_eq!(both, (b"outer".to_vec(), b"inner".to_vec()));
        assert!(with_scratch(|again| again.is_empty()), "handed out empty");
    }

    #[tokio::test]
    async fn texts_come_out_in_order_in_batches_and_the_stream_ends_with_its_senders() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(8, 1 << 10);
            let other = stream.clone();
            for n in 0..3 {
                stream
                    .send(&text(n), || Ok::<(), ()>(()))
                    .await
                    .expect("room");
            }
            other
                .send(&text(3), || Ok::<(), ()>(()))
                .await
                .expect("room");
            let mut first = Vec::new();
            assert_eq!(rx.try_drain(2, |t| first.push(t.to_vec())), 2);
            assert_eq!(first, [text(0), text(1)]);
            // What was taken and not read is read before anything written later.
            stream
                .send(&text(4), || Ok::<(), ()>(()))
                .await
                .expect("room");
            assert_eq!(drain_all(&mut rx), [text(2), text(3), text(4)]);
            drop(stream);
            assert!(rx.try_recv().is_none());
            let pending = std::future::poll_fn(|cx| Poll::Ready(rx.poll_drain(cx, 4, |_| {})));
            assert!(pending.await.is_pending(), "a sender is left");
            drop(other);
            assert_eq!(rx.recv().await, None, "no sender left, all read");
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_stream_that_falls_quiet_gives_back_what_a_burst_grew() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(1 << 16, 1 << 20);
            let big = vec![b'x'; 1000];
            for _ in 0..200 {
                stream.send(&big, || Ok::<(), ()>(())).await.expect("room");
            }
            assert_eq!(rx.try_drain(10, |_| {}), 10);
            let held = |rx: &RequestStreamReceiver| {
                rx.taken.capacity() + rx.shared.lock().texts.capacity()
            };
            assert!(held(&rx) > BUFFER_KEPT, "a burst's buffer, in use");
            assert_eq!(drain_all(&mut rx).len(), 190);
            assert!(
                held(&rx) <= 2 * BUFFER_KEPT,
                "quiet: {} bytes held",
                held(&rx)
            );
            // Small texts keep their buffers: no allocation per burst once grown.
            stream
                .send(&text(1), || Ok::<(), ()>(()))
                .await
                .expect("room");
            assert_eq!(drain_all(&mut rx), [text(1)]);
            stream
                .send(&text(2), || Ok::<(), ()>(()))
                .await
                .expect("room");
            let kept = held(&rx);
            assert!(kept > 0);
            assert_eq!(drain_all(&mut rx), [text(2)]);
            assert_eq!(held(&rx), kept, "buffers under the limit stay");
        })
        .await
        .expect("in time");
    }

    /// The capacity counts what the receiver took and has not read: a sender waits until the
    /// transport has read, and goes on then.
    #[tokio::test]
    async fn a_sender_waits_while_the_unread_texts_fill_the_capacity() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(2, 1 << 10);
            stream
                .send(&text(0), || Ok::<(), ()>(()))
                .await
                .expect("room");
            stream
                .send(&text(1), || Ok::<(), ()>(()))
                .await
                .expect("room");
            let mut one = Vec::new();
            assert_eq!(rx.try_drain(1, |t| one.push(t.to_vec())), 1);
            // One read, one taken and unread: still full.
            assert!(matches!(
                stream.try_send(&text(2), || Ok::<(), ()>(())),
                Ok(Sent::Full)
            ));
            let sender = tokio::spawn(async move {
                stream
                    .send(&text(2), || Ok::<(), ()>(()))
                    .await
                    .expect("room");
                stream
                    .send(&text(3), || Ok::<(), ()>(()))
                    .await
                    .expect("room");
            });
            let mut seen = one;
            while let Some(t) = rx.recv().await {
                seen.push(t.to_vec());
            }
            sender.await.expect("sender");
            assert_eq!(seen, [text(0), text(1), text(2), text(3)]);
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_closed_receiver_fails_every_send_and_wakes_a_waiting_one() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, rx) = request_stream(1, 1 << 10);
            stream
                .send(&text(0), || Ok::<(), ()>(()))
                .await
                .expect("room");
            let waiting = {
                let stream = stream.clone();
                tokio::spawn(async move { stream.send(&text(1), || Ok::<(), ()>(())).await })
            };
            tokio::task::yield_now().await;
            drop(rx);
            assert!(matches!(
                waiting.await.expect("task"),
                Err(SendError::Stream(SessionError::Closed(_)))
            ));
            assert!(stream.is_closed());
            assert!(matches!(
                stream.notify("notifications/message", Some(&1)).await,
                Err(SessionError::Closed(_))
            ));
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn an_oversized_or_refused_text_sends_nothing_and_the_stream_goes_on() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(4, 64);
            let error = stream
                .notify("notifications/message", Some(&"x".repeat(100)))
                .await
                .expect_err("over the limit");
            assert!(
                matches!(&error, SessionError::Transport(e) if e.is_too_large()),
                "{error}"
            );
            assert!(matches!(
                stream.send(&text(1), || Err::<(), &str>("no")).await,
                Err(SendError::Refused("no"))
            ));
            stream
                .notify("notifications/message", Some(&2))
                .await
                .expect("within the limit");
            assert_eq!(
                drain_all(&mut rx),
                [br#"{"jsonrpc":"2.0","method":"notifications/message","params":2}"#.to_vec()]
            );
        })
        .await
        .expect("in time");
    }
}
