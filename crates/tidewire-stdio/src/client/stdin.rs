//! The child's stdin, which the sender writes and a handle may close at any time.
//!
//! Closing stdin is the first step of the shutdown sequence, but the sender that owns the writing
//! side usually lives in the session's writer task. So the pipe sits in a slot that the sender
//! borrows for the duration of each poll, and that [`StdinSlot::close`] can empty from anywhere.
//! The lock is never held across an await, only for one non-blocking poll.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::process::ChildStdin;

#[derive(Debug)]
struct SlotState {
    stdin: Option<ChildStdin>,
    /// The task waiting for the pipe to accept more bytes. Closing the pipe drops the
    /// registration that would have woken it, so `close` wakes it instead.
    waiting: Option<Waker>,
}

/// Holds the child's stdin until someone closes it.
#[derive(Debug)]
pub(crate) struct StdinSlot {
    state: Mutex<SlotState>,
}

impl StdinSlot {
    pub(crate) fn new(stdin: ChildStdin) -> Self {
        Self {
            state: Mutex::new(SlotState {
                stdin: Some(stdin),
                waiting: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // The state stays consistent even if a poll panicked while holding the lock.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the pipe, so the child reads end-of-file. Idempotent.
    pub(crate) fn close(&self) {
        let (stdin, waiting) = {
            let mut state = self.lock();
            (state.stdin.take(), state.waiting.take())
        };
        drop(stdin);
        if let Some(waker) = waiting {
            waker.wake();
        }
    }

    /// Runs one poll of the pipe, or fails with `BrokenPipe` once it is closed.
    fn poll_with<T>(
        &self,
        cx: &mut Context<'_>,
        poll: impl FnOnce(Pin<&mut ChildStdin>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        let mut state = self.lock();
        let SlotState { stdin, waiting } = &mut *state;
        let Some(stdin) = stdin.as_mut() else {
            return Poll::Ready(Err(closed()));
        };
        let result = poll(Pin::new(stdin), cx);
        if result.is_pending() {
            match waiting {
                Some(w) => w.clone_from(cx.waker()),
                None => *waiting = Some(cx.waker().clone()),
            }
        }
        result
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the server process's stdin is closed",
    )
}

/// The `AsyncWrite` the framed sender writes to.
#[derive(Debug)]
pub(crate) struct StdinWriter {
    pub(crate) slot: Arc<StdinSlot>,
}

impl AsyncWrite for StdinWriter {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.slot
            .poll_with(cx, |stdin, cx| stdin.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.slot.poll_with(cx, |stdin, cx| stdin.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A pipe has nothing to shut down but itself: flush, then drop our end so the child sees
        // end-of-file. Already closed counts as done.
        let flushed = self.slot.poll_with(cx, |stdin, cx| stdin.poll_flush(cx));
        match flushed {
            Poll::Pending => Poll::Pending,
            Poll::Ready(result) => {
                self.slot.close();
                match result {
                    Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Poll::Ready(Ok(())),
                    other => Poll::Ready(other),
                }
            }
        }
    }
}
