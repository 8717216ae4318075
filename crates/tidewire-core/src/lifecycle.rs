//! [`Lifecycle`]: whether a server takes new work, and how much work it has in flight — what a
//! graceful drain waits on and what a readiness check reports.
//!
//! A server (`tidewire_server::Server`) owns one and counts every request it serves in it
//! ([`Lifecycle::track`]); its transports get it through
//! [`Serve::lifecycle`](crate::session::Serve::lifecycle) when they are built and refuse new
//! sessions and new stateless requests while it drains (HTTP 503 with `Retry-After`, a
//! JSON-RPC error on a connection that is already open). Draining never ends: a server that
//! drained is on its way out.
//!
//! ```
//! use tidewire_core::lifecycle::Lifecycle;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let lifecycle = Lifecycle::new();
//! let request = lifecycle.track();
//! assert!(lifecycle.start_draining(), "the first call starts the drain");
//! assert!(lifecycle.is_draining());
//! assert_eq!(lifecycle.in_flight(), 1);
//! drop(request);
//! lifecycle.idle().await; // no request in flight any more
//! # }
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use tokio::sync::Notify;

use crate::jsonrpc::{ErrorCode, ErrorObject};

/// Whether a server drains, and its requests in flight. Cheap to clone; clones share the state.
#[derive(Clone, Default)]
pub struct Lifecycle {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    draining: AtomicBool,
    /// Set when the drain's deadline passed: what still runs is cancelled.
    cancelling: AtomicBool,
    in_flight: AtomicUsize,
    /// Woken when the count falls to zero, when the drain starts and when it cancels.
    changed: Notify,
    /// Messages refused, by [`RefusalReason`] (in its order).
    refused: [AtomicU64; 4],
}

/// Why a server's engine refused a message it was sent ([`Lifecycle::refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// Over the transport's message size limit.
    TooLarge,
    /// Not JSON, not JSON-RPC, or a request whose id is already in use.
    Malformed,
    /// Too many requests in flight on the connection.
    Busy,
    /// New work while the server drains.
    Draining,
}

/// How many messages a server's engine refused, by reason, since the server was built
/// ([`Lifecycle::refusals`]): on every transport, what the engine answered with an error
/// instead of serving. (An HTTP endpoint refuses most bad requests itself, before the engine,
/// with a status; those are not in here.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Refusals {
    /// Over the message size limit.
    pub too_large: u64,
    /// Malformed, or a request id already in use.
    pub malformed: u64,
    /// Too many requests in flight on the connection.
    pub busy: u64,
    /// New work while draining.
    pub draining: u64,
}

impl std::fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lifecycle")
            .field("draining", &self.is_draining())
            .field("cancelling", &self.is_cancelling())
            .field("in_flight", &self.in_flight())
            .finish()
    }
}

impl Lifecycle {
    /// A lifecycle taking new work, with nothing in flight.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once the drain has started: new sessions and new stateless requests are refused.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::Acquire)
    }

    /// Starts the drain; true for the call that started it (later calls change nothing).
    pub fn start_draining(&self) -> bool {
        let first = !self.inner.draining.swap(true, Ordering::AcqRel);
        if first {
            self.inner.changed.notify_waiters();
            tracing::info!(
                in_flight = self.in_flight(),
                "draining: new sessions and new stateless requests are refused"
            );
        }
        first
    }

    /// Requests being served now.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.load(Ordering::Acquire)
    }

    /// Counts one request in flight until the guard is dropped.
    pub fn track(&self) -> InFlight {
        self.inner.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight {
            lifecycle: self.clone(),
        }
    }

    /// Resolves when no request is in flight (at once if none is).
    pub async fn idle(&self) {
        self.until(|lifecycle| lifecycle.in_flight() == 0).await;
    }

    /// Counts one message refused for `reason`.
    pub fn refused(&self, reason: RefusalReason) {
        let index = match reason {
            RefusalReason::TooLarge => 0,
            RefusalReason::Malformed => 1,
            RefusalReason::Busy => 2,
            RefusalReason::Draining => 3,
        };
        self.inner.refused[index].fetch_add(1, Ordering::Relaxed);
    }

    /// The messages refused so far, by reason.
    pub fn refusals(&self) -> Refusals {
        let read = |i: usize| self.inner.refused[i].load(Ordering::Relaxed);
        Refusals {
            too_large: read(0),
            malformed: read(1),
            busy: read(2),
            draining: read(3),
        }
    }

    /// Resolves when the drain starts (at once if it has).
    pub async fn draining(&self) {
        self.until(Self::is_draining).await;
    }

    /// Cancels every request still in flight, as a drain does when its deadline passes (and
    /// starts the drain if it has not started). Each server-side request watches for it once
    /// it waits: one under [`CancelPolicy::Abort`](crate::session::CancelPolicy::Abort) is
    /// dropped and answered with [`draining_error`], so its client can retry elsewhere; one
    /// under [`CancelPolicy::Cooperative`](crate::session::CancelPolicy::Cooperative) is told
    /// (its context's cancellation fires) and runs on to its own return, and what it returns
    /// is its answer. True for the call that cancelled.
    pub fn cancel_in_flight(&self) -> bool {
        self.start_draining();
        let first = !self.inner.cancelling.swap(true, Ordering::AcqRel);
        if first {
            self.inner.changed.notify_waiters();
        }
        first
    }

    /// True once [`cancel_in_flight`](Self::cancel_in_flight) was called.
    pub fn is_cancelling(&self) -> bool {
        self.inner.cancelling.load(Ordering::Acquire)
    }

    /// Resolves when the requests in flight are cancelled (at once if they are).
    pub async fn cancelling(&self) {
        self.until(Self::is_cancelling).await;
    }

    /// Resolves once `done` holds, checked whenever the state changes.
    async fn until(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self) {
                return;
            }
            changed.await;
        }
    }
}

/// One request in flight, counted in its [`Lifecycle`] until dropped.
#[must_use = "the request counts as in flight only while this guard lives"]
pub struct InFlight {
    lifecycle: Lifecycle,
}

impl std::fmt::Debug for InFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight").finish_non_exhaustive()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let inner = &self.lifecycle.inner;
        if inner.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.changed.notify_waiters();
        }
    }
}

/// Seconds a refused client is told to wait (`Retry-After`) before it tries again, by which
/// time a load balancer has taken a draining server out of its pool.
pub const DRAINING_RETRY_AFTER_SECS: u64 = 1;

/// The JSON-RPC error for new work refused while a server drains (`-32000`, as a full session
/// table): over HTTP it goes with 503 and `Retry-After`.
pub fn draining_error() -> ErrorObject {
    ErrorObject::new(
        ErrorCode(-32000),
        "Service Unavailable: the server is shutting down and takes no new sessions or \
         stateless requests; retry, another server will answer",
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn idle_waits_for_the_last_request_in_flight() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let lifecycle = Lifecycle::new();
            let first = lifecycle.track();
            let second = lifecycle.track();
            assert_eq!(lifecycle.in_flight(), 2);
            let waiter = tokio::spawn({
                let lifecycle = lifecycle.clone();
                async move { lifecycle.idle().await }
            });
            drop(first);
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished(), "one request is still in flight");
            drop(second);
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("idle once the last request ends")
                .expect("the waiter ran");
            assert_eq!(lifecycle.in_flight(), 0);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn the_drain_starts_once_and_wakes_its_waiters() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let lifecycle = Lifecycle::new();
            assert!(!lifecycle.is_draining());
            let waiter = tokio::spawn({
                let lifecycle = lifecycle.clone();
                async move { lifecycle.draining().await }
            });
            tokio::task::yield_now().await;
            assert!(lifecycle.start_draining());
            assert!(!lifecycle.start_draining(), "a second call starts nothing");
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("woken by the drain")
                .expect("the waiter ran");
            assert!(lifecycle.clone().is_draining(), "clones share the state");
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test]
    async fn cancelling_what_runs_drains_too_and_wakes_its_waiters() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let lifecycle = Lifecycle::new();
            let waiter = tokio::spawn({
                let lifecycle = lifecycle.clone();
                async move { lifecycle.cancelling().await }
            });
            tokio::task::yield_now().await;
            assert!(!waiter.is_finished(), "nothing is cancelled yet");
            assert!(!lifecycle.is_cancelling());
            assert!(lifecycle.cancel_in_flight());
            assert!(
                !lifecycle.cancel_in_flight(),
                "a second call cancels nothing new"
            );
            assert!(lifecycle.is_draining(), "cancelling starts the drain");
            tokio::time::timeout(Duration::from_secs(5), waiter)
                .await
                .expect("woken by the cancellation")
                .expect("the waiter ran");
            tokio::time::timeout(Duration::from_secs(5), lifecycle.cancelling())
                .await
                .expect("at once, once cancelled");
        })
        .await
        .expect("the test took longer than its limit");
    }
}
