//! Per-connection and per-request settings.

use std::time::Duration;

/// What happens to an inbound request's handler when the peer cancels it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CancelPolicy {
    /// Fire the request's cancellation token and abort the handler task at its next `.await`
    /// (the default). No response is sent.
    #[default]
    Abort,
    /// Only fire the token; the handler notices (`ctx.cancelled()` / `ctx.is_cancelled()`),
    /// cleans up and returns. Its return value is discarded: no response is sent.
    Cooperative,
}

/// Settings for one connection. Every table and queue has a limit.
///
/// ```
/// use std::time::Duration;
/// use tidewire_core::session::SessionOptions;
///
/// let options = SessionOptions::default()
///     .max_inflight_inbound(64)
///     .default_timeout(Some(Duration::from_secs(30)));
/// assert_eq!(options.inflight_inbound_limit(), 64);
/// ```
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub(crate) max_inflight_inbound: usize,
    pub(crate) max_pending_outbound: usize,
    pub(crate) outbound_queue: usize,
    pub(crate) progress_buffer: usize,
    pub(crate) default_timeout: Option<Duration>,
    pub(crate) cancel_policy: CancelPolicy,
    pub(crate) answer_ping: bool,
    pub(crate) drain_timeout: Duration,
    pub(crate) lifecycle: Option<crate::lifecycle::Lifecycle>,
    pub(crate) observer: super::observe::ObserverSlot,
}

impl Default for SessionOptions {
    fn default() -> Self {
        Self {
            max_inflight_inbound: 256,
            max_pending_outbound: 1024,
            outbound_queue: 256,
            progress_buffer: 256,
            default_timeout: Some(Duration::from_secs(60)),
            cancel_policy: CancelPolicy::Abort,
            answer_ping: true,
            drain_timeout: Duration::from_secs(5),
            lifecycle: None,
            observer: super::observe::ObserverSlot::default(),
        }
    }
}

impl SessionOptions {
    /// The most inbound requests that may run at once on this connection (default 256). Past it
    /// a request is answered at once with error `-32001` (server busy). A cancelled request
    /// counts until its handler has actually stopped, so cancelling never lifts the cap.
    #[must_use]
    pub fn max_inflight_inbound(mut self, limit: usize) -> Self {
        self.max_inflight_inbound = limit.max(1);
        self
    }

    /// Counts each inbound request in `lifecycle` from its arrival until its answer is queued
    /// (or its handler has stopped, when cancelled): a server's graceful drain waits on that
    /// count, and never closes a connection ahead of an answer. A `tidewire_server::Server`
    /// sets its own.
    #[must_use]
    pub fn track_in(mut self, lifecycle: crate::lifecycle::Lifecycle) -> Self {
        self.lifecycle = Some(lifecycle);
        self
    }

    /// Tells `observer` of every request this session sends, and how each ended (see
    /// [`RequestObserver`](super::RequestObserver)).
    #[must_use]
    pub fn observe_requests(
        mut self,
        observer: std::sync::Arc<dyn super::RequestObserver>,
    ) -> Self {
        self.observer = super::observe::ObserverSlot(Some(observer));
        self
    }

    /// The limit set by [`max_inflight_inbound`](Self::max_inflight_inbound).
    pub fn inflight_inbound_limit(&self) -> usize {
        self.max_inflight_inbound
    }

    /// The most outbound requests that may await responses at once (default 1024). Past it,
    /// sending fails with [`SessionError::TooManyRequests`](super::SessionError::TooManyRequests).
    #[must_use]
    pub fn max_pending_outbound(mut self, limit: usize) -> Self {
        self.max_pending_outbound = limit.max(1);
        self
    }

    /// Messages queued for the writer before senders wait (default 256). A request's timeout
    /// covers its wait for room here; [`Peer::try_notify`](super::Peer::try_notify) does not
    /// wait and fails with `QueueFull` instead.
    #[must_use]
    pub fn outbound_queue(mut self, capacity: usize) -> Self {
        self.outbound_queue = capacity.max(1);
        self
    }

    /// Progress reports buffered per outbound request before they are dropped and counted as
    /// lag (default 256).
    #[must_use]
    pub fn progress_buffer(mut self, capacity: usize) -> Self {
        self.progress_buffer = capacity.max(1);
        self
    }

    /// The timeout of outbound requests that set none (default 60 s; `None` waits forever).
    #[must_use]
    pub fn default_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.default_timeout = timeout;
        self
    }

    /// What a cancellation does to a running handler (default [`CancelPolicy::Abort`]).
    #[must_use]
    pub fn cancel_policy(mut self, policy: CancelPolicy) -> Self {
        self.cancel_policy = policy;
        self
    }

    /// What a cancellation does to a handler, unless its handler says otherwise (see
    /// [`cancel_policy`](Self::cancel_policy)).
    pub fn default_cancel_policy(&self) -> CancelPolicy {
        self.cancel_policy
    }

    /// How long, once the peer has closed its side of the connection (stdin EOF on a stdio
    /// server), the engine lets running handlers finish and sends their responses before it
    /// closes (default 5 s). Requests we sent that still await an answer fail at once then,
    /// since no answer can come. `Duration::ZERO` cancels running handlers at once.
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// Whether the engine answers `ping` itself (default true). When false, `ping` reaches the
    /// handler like any request.
    #[must_use]
    pub fn answer_ping(mut self, answer: bool) -> Self {
        self.answer_ping = answer;
        self
    }
}
