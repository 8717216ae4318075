//! What an inbound request's handler gets: its id, its progress channel, its cancellation, and a
//! routed handle to the peer.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::Value;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use super::stream::{RequestStream, SendError, with_scratch};
use super::{CancelPolicy, Peer, RequestBuilder, SessionError};
use crate::jsonrpc::{ProgressToken, RequestId};
use crate::progress::{MonotonicGuard, Progress, ProgressError, ProgressWire};
use crate::schema::{NotificationType, RequestType, known_request_method};
use crate::transport::{Envelope, RequestLimits};

/// The context of one inbound request, handed to its handler.
///
/// Cloning is cheap; clones share the progress guard and the cancellation token.
#[derive(Clone, Debug)]
pub struct RequestContext {
    id: RequestId,
    inner: Arc<InFlight>,
    cancel_policy: CancelPolicy,
}

/// What every clone of a request's context shares, in one allocation: what the request is
/// (its method, `_meta`, what the transport knew of it) and where its reports go.
#[derive(Debug)]
struct InFlight {
    /// `'static` for a method tidewire knows, so most requests copy nothing.
    method: Cow<'static, str>,
    meta: Option<Value>,
    extensions: crate::Extensions,
    token: Option<ProgressToken>,
    outlet: Outlet,
    cancel: CancellationToken,
    /// The last value sent; a report is admitted and sent under this lock, so two concurrent
    /// reports reach the wire in the order they were admitted.
    guard: std::sync::Mutex<MonotonicGuard>,
    /// Held across the send to a peer (an `.await` on the engine's queue), which the `guard`,
    /// a lock not held across an `.await`, cannot be.
    peer_order: tokio::sync::Mutex<()>,
    limits: Option<RequestLimits>,
}

/// Where what a handler sends for its request goes.
#[derive(Debug)]
enum Outlet {
    /// The connection, routed to the request (a session, or a message stream).
    Peer(Peer),
    /// The request's own response stream (served without a session).
    Stream(RequestStream),
}

impl RequestContext {
    pub(crate) fn new(
        id: RequestId,
        method: &str,
        params: Option<&Value>,
        extensions: crate::Extensions,
        peer: Peer,
        cancel: CancellationToken,
        cancel_policy: CancelPolicy,
    ) -> Self {
        let meta = params
            .and_then(|p| p.get("_meta"))
            .filter(|m| m.is_object())
            .cloned();
        Self::with_outlet(
            id,
            method,
            meta,
            extensions,
            Outlet::Peer(peer),
            cancel,
            cancel_policy,
        )
    }

    /// The context of a request served without a session (the 2026-07-28 wire over HTTP):
    /// what its handler sends goes to `stream`, its response's own stream; it has no peer to
    /// send requests to ([`request`](Self::request) fails with `NotSupported`), and `cancel`
    /// fires when the transport drops the request's [`RequestRun`](super::RequestRun).
    ///
    /// `meta` is the request's `params._meta`, taken out of its params by the caller (it is
    /// moved here, not copied; anything but an object counts as none).
    pub fn for_stream(
        id: RequestId,
        method: &str,
        meta: Option<Value>,
        extensions: crate::Extensions,
        stream: RequestStream,
        cancel: CancellationToken,
        cancel_policy: CancelPolicy,
    ) -> Self {
        Self::with_outlet(
            id,
            method,
            meta.filter(Value::is_object),
            extensions,
            Outlet::Stream(stream),
            cancel,
            cancel_policy,
        )
    }

    /// `meta`: the request's `_meta` object, if any.
    fn with_outlet(
        id: RequestId,
        method: &str,
        meta: Option<Value>,
        extensions: crate::Extensions,
        outlet: Outlet,
        cancel: CancellationToken,
        cancel_policy: CancelPolicy,
    ) -> Self {
        let token = meta
            .as_ref()
            .and_then(|m| m.get("progressToken"))
            .and_then(RequestId::from_json);
        let limits = extensions.get::<RequestLimits>().cloned();
        Self {
            id,
            inner: Arc::new(InFlight {
                method: known_request_method(method)
                    .map_or_else(|| Cow::Owned(method.to_owned()), Cow::Borrowed),
                meta,
                extensions,
                token,
                outlet,
                cancel,
                guard: std::sync::Mutex::new(MonotonicGuard::default()),
                peer_order: tokio::sync::Mutex::new(()),
                limits,
            }),
            cancel_policy,
        }
    }

    /// A context for work done on a peer's behalf that did not come as a request on this
    /// connection: a stateless (2026-07-28) server asks its questions inside a result, and the
    /// client answers them with the same handlers a session-era request would reach. It has no
    /// progress token (reports are inert), and it is cancelled when the connection closes.
    pub fn detached(id: RequestId, method: &str, params: Option<&Value>, peer: &Peer) -> Self {
        let cancel = peer.shared.closed.child_token();
        Self::new(
            id,
            method,
            params,
            crate::Extensions::new(),
            peer.clone(),
            cancel,
            peer.shared.options.cancel_policy,
        )
    }

    /// What a cancellation of this request does to its handler: under
    /// [`CancelPolicy::Abort`] the task is aborted at its next `.await` (drop guards run, code
    /// after the `.await` does not); under [`CancelPolicy::Cooperative`] only
    /// [`cancelled`](Self::cancelled) fires and the handler decides when to stop. Set per
    /// connection ([`SessionOptions::cancel_policy`](super::SessionOptions::cancel_policy)) or per
    /// request by the handler ([`Handler::cancel_policy`](super::Handler::cancel_policy)).
    pub fn cancel_policy(&self) -> CancelPolicy {
        self.cancel_policy
    }

    /// Runs `cleanup` when this request is cancelled, whatever the policy: the returned guard
    /// runs it when dropped after a cancellation (an aborted task drops it; a cooperative
    /// handler drops it as it returns), and does nothing when dropped after the request ended
    /// otherwise. Keep the guard alive for as long as the work it cleans up after
    /// (`let _cleanup = ctx.on_cancel(..)`). The cleanup cannot `.await`: spawn a task from it
    /// for async work.
    pub fn on_cancel(&self, cleanup: impl FnOnce() + Send + 'static) -> OnCancel {
        OnCancel {
            cancel: self.inner.cancel.clone(),
            cleanup: Some(Box::new(cleanup)),
        }
    }

    /// The JSON-RPC id of the request.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The method of the request.
    pub fn method(&self) -> &str {
        &self.inner.method
    }

    /// The request's `params._meta` object, if it had one.
    pub fn meta(&self) -> Option<&Value> {
        self.inner.meta.as_ref()
    }

    /// What the transport attached to the request (HTTP session, auth, headers).
    pub fn extensions(&self) -> &crate::Extensions {
        &self.inner.extensions
    }

    /// The progress token the requester asked for progress with, if any.
    pub fn progress_token(&self) -> Option<&ProgressToken> {
        self.inner.token.as_ref()
    }

    /// A handle to the peer whose messages are marked as related to this request (on Streamable
    /// HTTP they travel on this request's stream); `None` for a request served without a
    /// session, which has only its response stream ([`notify`](Self::notify) reaches it).
    pub fn peer(&self) -> Option<&Peer> {
        match &self.inner.outlet {
            Outlet::Peer(peer) => Some(peer),
            Outlet::Stream(_) => None,
        }
    }

    /// Reports progress to the requester.
    ///
    /// Inert (returns `Ok`) when the requester asked for no progress. `message` is dropped for
    /// peers on 2024-11-05, which lacks it.
    ///
    /// # Errors
    /// [`ProgressError::NotIncreasing`] when `progress` does not exceed the last value sent
    /// (nothing is sent), [`ProgressError::Cancelled`] once the request is cancelled,
    /// [`ProgressError::Closed`] when the connection is gone.
    pub async fn report_progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> Result<(), ProgressError> {
        self.inner
            .report(Progress {
                progress,
                total,
                message,
            })
            .await
    }

    /// A tracker that accumulates progress deltas: each [`ProgressTracker::advance`] adds to the
    /// running total and reports it.
    pub fn progress_tracker(&self, total: Option<f64>) -> ProgressTracker {
        ProgressTracker {
            reporter: self.inner.clone(),
            done: Arc::new(std::sync::Mutex::new(0.0)),
            total,
        }
    }

    /// Resolves when the requester cancels the request (or the connection closes).
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.inner.cancel.cancelled()
    }

    /// True once the request is cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// `Err(Cancelled)` once the request is cancelled: `ctx.check_cancelled()?` between two
    /// steps of a cooperative handler.
    ///
    /// # Errors
    /// [`Cancelled`](super::Cancelled) once the request is cancelled.
    pub fn check_cancelled(&self) -> Result<(), super::Cancelled> {
        if self.is_cancelled() {
            Err(super::Cancelled)
        } else {
            Ok(())
        }
    }

    /// The request's cancellation token (to hand to other tasks).
    pub fn cancellation_token(&self) -> CancellationToken {
        self.inner.cancel.clone()
    }

    /// Sends a notification related to this request.
    ///
    /// # Errors
    /// [`SessionError::Cancelled`] once the request is cancelled (nothing more may be sent for
    /// it); `Closed` when the connection is gone.
    pub async fn notify<N: NotificationType>(&self, params: N::Params) -> Result<(), SessionError> {
        if self.is_cancelled() {
            return Err(SessionError::Cancelled(
                "the request was cancelled".to_owned(),
            ));
        }
        if let Some(limits) = self.limits()
            && !limits.related_notifications
        {
            return Err(SessionError::NotSupported(format!(
                "notifications related to a request on this transport ({})",
                limits.reason
            )));
        }
        match &self.inner.outlet {
            Outlet::Peer(peer) => peer.notify::<N>(params).await,
            Outlet::Stream(stream) => stream.notify(N::METHOD, Some(&params)).await,
        }
    }

    /// Sends a notification for any method, related to this request, with raw params: as
    /// [`notify`](Self::notify), without a type for the method.
    ///
    /// # Errors
    /// As [`notify`](Self::notify).
    pub async fn notify_raw(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<(), SessionError> {
        if self.is_cancelled() {
            return Err(SessionError::Cancelled(
                "the request was cancelled".to_owned(),
            ));
        }
        match &self.inner.outlet {
            Outlet::Peer(peer) => peer.notify_raw(method, params).await,
            Outlet::Stream(stream) => stream.notify(method, params.as_ref()).await,
        }
    }

    /// Sends a request back to the peer, related to this request (sampling, elicitation, roots).
    /// It can ask for progress and be cancelled like any request.
    ///
    /// When the transport cannot carry requests to the peer for this request (see
    /// [`RequestLimits`]), awaiting the builder fails with [`SessionError::NotSupported`].
    pub fn request<R: RequestType>(&self, params: R::Params) -> RequestBuilder<R::Result> {
        let Outlet::Peer(peer) = &self.inner.outlet else {
            return RequestBuilder::unsendable(
                R::METHOD,
                SessionError::NotSupported(
                    "requests to the peer from a request served without a session".to_owned(),
                ),
            );
        };
        let builder = peer.request::<R>(params);
        match self.limits() {
            Some(limits) if !limits.peer_requests => builder.refuse(SessionError::NotSupported(
                format!("requests to the peer on this transport ({})", limits.reason),
            )),
            _ => builder,
        }
    }

    /// Ends the transport stream carrying this request's messages, without ending the request,
    /// when the transport supports it (Streamable HTTP's SSE polling): the client reconnects and
    /// resumes, and receives what comes after — including the response. Returns false (and does
    /// nothing) on transports without the notion.
    pub fn close_stream(&self) -> bool {
        match self
            .inner
            .extensions
            .get::<crate::transport::StreamCloser>()
        {
            Some(closer) => {
                closer.close();
                true
            }
            None => false,
        }
    }

    /// What the transport cannot carry for this request, if anything.
    pub fn limits(&self) -> Option<&RequestLimits> {
        self.inner.limits.as_ref()
    }
}

impl InFlight {
    /// The last value sent, locked (never across an `.await`).
    fn guard(&self) -> std::sync::MutexGuard<'_, MonotonicGuard> {
        self.guard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn report(&self, progress: Progress) -> Result<(), ProgressError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        if let Some(limits) = &self.limits
            && !limits.related_notifications
        {
            return Err(ProgressError::Unsupported(limits.reason));
        }
        if self.cancel.is_cancelled() {
            return Err(ProgressError::Cancelled);
        }
        // Written straight from the report and the token, with no `Value` tree; the transport
        // sends the bytes as they are.
        let peer = match &self.outlet {
            Outlet::Peer(peer) => peer,
            Outlet::Stream(stream) => {
                let wire = ProgressWire {
                    token,
                    progress: &progress,
                };
                // Framed in the thread's buffer and copied into the stream's: no allocation.
                // Admitted and added under the stream's lock: what is admitted first is sent
                // first.
                let admit = || self.guard().admit(progress.progress);
                let full = with_scratch(|out| {
                    wire.frame_into(out).map_err(|_| ProgressError::Closed)?;
                    stream.try_send_or_copy(out, admit).map_err(stream_refusal)
                })?;
                return match full {
                    None => Ok(()),
                    Some(text) => stream.send(&text, admit).await.map_err(stream_refusal),
                };
            }
        };
        let mut progress = progress;
        if peer
            .protocol_version()
            .is_some_and(|v| !v.has_progress_message())
        {
            progress.message = None;
        }
        let wire = ProgressWire {
            token,
            progress: &progress,
        };
        // Framed in the thread's buffer and copied out at its length: one allocation, which
        // the sender frees at once (a `Bytes` made from a `Vec` with room to spare allocates a
        // second, for its shared header).
        let wire = with_scratch(|out| {
            wire.frame_into(out)
                .map(|()| Bytes::copy_from_slice(out))
                .map_err(|_| ProgressError::Closed)
        })?;
        // Refused before it is admitted, so a shorter report of the same value may follow.
        if let Some(limit) = peer.transport_profile().max_message_size
            && wire.len() > limit
        {
            return Err(ProgressError::TooLarge {
                size: wire.len(),
                limit,
            });
        }
        let envelope = peer.wire_envelope("notifications/progress", wire);
        // The usual case, with no `.await`: no other report holds the order lock and the
        // engine's queue has room. The lock's future would spend the task's cooperative budget
        // (a burst of reports yielded every 128, before the queue was full, and went out in
        // twice as many writes), and the waiting paths, boxed, keep this future small: it is
        // made, and moved, once per report.
        let Ok(order) = self.peer_order.try_lock() else {
            return Box::pin(self.report_in_turn(peer, progress.progress, envelope)).await;
        };
        self.guard().admit(progress.progress)?;
        match peer.try_queue(envelope) {
            Ok(()) => Ok(()),
            // Full: wait for room, still holding the order.
            Err(Some(queued)) => Box::pin(async move {
                let _order = order;
                peer.queue(queued).await
            })
            .await
            .map_err(|_| ProgressError::Closed),
            Err(None) => Err(ProgressError::Closed),
        }
    }

    /// A report that found another one holding the order lock: it waits its turn, then is
    /// admitted and queued under the lock.
    async fn report_in_turn(
        &self,
        peer: &Peer,
        value: f64,
        envelope: Envelope,
    ) -> Result<(), ProgressError> {
        let _order = self.peer_order.lock().await;
        self.guard().admit(value)?;
        peer.send_envelope(envelope)
            .await
            .map_err(|_| ProgressError::Closed)
    }
}

/// The progress error for a report over the transport's size limit, if that is why it failed.
fn too_large(error: &SessionError) -> Option<ProgressError> {
    match error {
        SessionError::Transport(e) => e
            .too_large_sizes()
            .map(|(size, limit)| ProgressError::TooLarge { size, limit }),
        _ => None,
    }
}

/// Why a report was not added to a request's stream: refused by the guard (not rising), over
/// the size limit, or the stream closed.
fn stream_refusal(error: SendError<ProgressError>) -> ProgressError {
    match error {
        SendError::Refused(refused) => refused,
        SendError::Stream(e) => too_large(&e).unwrap_or(ProgressError::Closed),
    }
}

/// Accumulates progress deltas for one request and reports the running sum.
///
/// ```no_run
/// # async fn demo(ctx: tidewire_core::session::RequestContext) -> Result<(), tidewire_core::progress::ProgressError> {
/// let tracker = ctx.progress_tracker(Some(3.0));
/// for step in ["fetch", "parse", "store"] {
///     tracker.advance(1.0, Some(format!("{step} done"))).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ProgressTracker {
    reporter: Arc<InFlight>,
    done: Arc<std::sync::Mutex<f64>>,
    total: Option<f64>,
}

impl ProgressTracker {
    /// Adds `delta` (which must be positive) and reports the new sum. Returns the sum.
    ///
    /// # Errors
    /// As [`RequestContext::report_progress`]; a delta that is not positive is refused with
    /// `NotIncreasing` and not added.
    pub async fn advance(&self, delta: f64, message: Option<String>) -> Result<f64, ProgressError> {
        if delta.is_nan() || delta <= 0.0 {
            return Err(ProgressError::NotIncreasing {
                last: self.done(),
                attempted: self.done() + delta,
            });
        }
        let next = {
            let done = self
                .done
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *done + delta
        };
        self.reporter
            .report(Progress {
                progress: next,
                total: self.total,
                message,
            })
            .await?;
        let mut done = self
            .done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *done = done.max(next);
        Ok(*done)
    }

    /// The sum reported so far.
    pub fn done(&self) -> f64 {
        *self
            .done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Changes the total reported with the next delta.
    pub fn set_total(&mut self, total: Option<f64>) {
        self.total = total;
    }
}

/// Runs a cleanup when dropped after its request was cancelled ([`RequestContext::on_cancel`]).
#[must_use = "the cleanup runs when this guard is dropped: bind it (`let _cleanup = ...`)"]
pub struct OnCancel {
    cancel: CancellationToken,
    cleanup: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for OnCancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnCancel")
            .field("cancelled", &self.cancel.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl OnCancel {
    /// A guard that runs `cleanup` when dropped after `cancel` has fired: for work that is
    /// cancelled by a token of its own (a task's, say).
    pub fn new(cancel: CancellationToken, cleanup: impl FnOnce() + Send + 'static) -> Self {
        Self {
            cancel,
            cleanup: Some(Box::new(cleanup)),
        }
    }
}

impl Drop for OnCancel {
    fn drop(&mut self) {
        if self.cancel.is_cancelled()
            && let Some(cleanup) = self.cleanup.take()
        {
            cleanup();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::session::stream::request_stream;

    fn context(stream: RequestStream) -> RequestContext {
        RequestContext::for_stream(
            RequestId::Number(1),
            "tools/call",
            Some(serde_json::json!({"progressToken": "t"})),
            crate::Extensions::new(),
            stream,
            CancellationToken::new(),
            CancelPolicy::Abort,
        )
    }

    fn progress_of(bytes: &[u8]) -> f64 {
        let message: Value = serde_json::from_slice(bytes).expect("JSON");
        message["params"]["progress"].as_f64().expect("a number")
    }

    /// Concurrent reports through a stream with room for one: what reaches the stream rises,
    /// whatever order the reporters won the room in (a report that lost the race is refused).
    #[tokio::test]
    async fn concurrent_reports_reach_the_stream_rising() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(1, 1 << 20);
            let ctx = context(stream);
            let reporters: Vec<_> = (0..4)
                .map(|k| {
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        let mut sent = 0;
                        for i in 0..200 {
                            let value = f64::from(i * 4 + k);
                            match ctx.report_progress(value, None, None).await {
                                Ok(()) => sent += 1,
                                Err(ProgressError::NotIncreasing { .. }) => {}
                                Err(other) => panic!("unexpected: {other}"),
                            }
                        }
                        sent
                    })
                })
                .collect();
            drop(ctx);
            let mut seen = Vec::new();
            while let Some(bytes) = rx.recv().await {
                seen.push(progress_of(&bytes));
            }
            let mut sent = 0;
            for reporter in reporters {
                sent += reporter.await.expect("reporter");
            }
            assert_eq!(seen.len(), sent);
            assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_report_on_a_closed_stream_fails_and_a_falling_one_is_refused() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(4, 1 << 20);
            let ctx = context(stream);
            ctx.report_progress(2.0, Some(4.0), None)
                .await
                .expect("sent");
            assert!(matches!(
                ctx.report_progress(1.0, None, None).await,
                Err(ProgressError::NotIncreasing { .. })
            ));
            let first = rx.recv().await.expect("one report");
            assert_eq!(
                std::str::from_utf8(&first).expect("text"),
                r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":2,"total":4}}"#
            );
            drop(rx);
            assert_eq!(
                ctx.report_progress(3.0, None, None).await,
                Err(ProgressError::Closed)
            );
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn a_report_over_the_size_limit_says_so_and_the_next_one_goes() {
        tokio::time::timeout(Duration::from_secs(10), async {
            let (stream, mut rx) = request_stream(4, 200);
            let ctx = context(stream);
            let refused = ctx
                .report_progress(1.0, None, Some("x".repeat(500)))
                .await
                .expect_err("too large");
            let ProgressError::TooLarge { size, limit } = refused else {
                panic!("{refused:?}");
            };
            assert!(size > 500 && limit == 200, "{size} {limit}");
            assert!(refused.to_string().contains("not sent"), "{refused}");
            // Nothing was admitted for the refused report: the same value goes next.
            ctx.report_progress(1.0, None, Some("page 1".into()))
                .await
                .expect("a short report goes");
            assert_eq!(progress_of(&rx.recv().await.expect("one report")), 1.0);
        })
        .await
        .expect("in time");
    }
}
