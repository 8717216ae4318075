//! The handle to the other side of a connection: send requests and notifications.

use std::borrow::Cow;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::SessionOptions;
use super::error::SessionError;
use super::state::{Pending, ProgressSink, Refusal, State};
use crate::ProtocolVersion;
use crate::jsonrpc::{ErrorObject, Message, Notification, Request, RequestId};
use crate::progress::Progress;
use crate::queue::BoundedQueue;
use crate::schema::{NotificationType, RequestType};
use crate::transport::text::excerpt;
use crate::transport::{Envelope, Exchange, Route, Settle};

/// An envelope waiting for the writer. Boxed so the queue's slots stay small (8 bytes each).
pub(crate) type Queued = Box<Envelope>;

/// What a connection shares between its peer handles, its driver and its handler tasks.
pub(crate) struct Shared {
    pub(crate) outbound: Arc<BoundedQueue<Queued>>,
    pub(crate) state: Mutex<State>,
    pub(crate) options: SessionOptions,
    /// Asks the driver to stop.
    pub(crate) closing: CancellationToken,
    /// Fired when the driver has stopped.
    pub(crate) closed: CancellationToken,
    pub(crate) close_reason: Mutex<Option<String>>,
    /// Set when the peer has closed its side: nothing it could answer will come.
    pub(crate) remote_closed: std::sync::atomic::AtomicBool,
    /// Woken whenever the last running inbound request finishes.
    pub(crate) idle: Notify,
    next_id: AtomicI64,
    /// 0 = not negotiated; otherwise 1 + index into `ProtocolVersion::ALL`.
    version: AtomicU8,
    /// What the transport asked of the engine.
    pub(crate) wiring: Wiring,
    /// Counts the sessions the server ended under a live connection.
    pub(crate) sessions_ended: watch::Sender<u64>,
}

/// What a transport asks of the engine besides the messages (see
/// [`Transport::tracks_requests`](crate::transport::Transport::tracks_requests) and
/// [`Transport::cancels_by_closing`](crate::transport::Transport::cancels_by_closing)).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Wiring {
    pub(crate) tracks_requests: bool,
    pub(crate) cancels_by_closing: bool,
}

impl Settle for Shared {
    fn fail_pending(&self, id: &RequestId, error: ErrorObject) {
        if let Some(pending) = self.state().take_pending(id) {
            let _ = pending.responder.send(Err(SessionError::Remote(error)));
        }
    }
}

impl Shared {
    pub(crate) fn new(options: SessionOptions, wiring: Wiring) -> Self {
        Self {
            outbound: Arc::new(BoundedQueue::new(options.outbound_queue)),
            state: Mutex::new(State::new(
                options.max_pending_outbound,
                options.max_inflight_inbound,
            )),
            options,
            closing: CancellationToken::new(),
            closed: CancellationToken::new(),
            close_reason: Mutex::new(None),
            remote_closed: std::sync::atomic::AtomicBool::new(false),
            idle: Notify::new(),
            next_id: AtomicI64::new(1),
            version: AtomicU8::new(0),
            wiring,
            sessions_ended: watch::channel(0).0,
        }
    }

    /// Asks the driver to stop: the writer sends what is queued, then ends; nothing more is
    /// queued.
    pub(crate) fn begin_closing(&self) {
        self.closing.cancel();
        self.outbound.close();
    }

    /// Locks the tables. A poisoned lock (a panic while holding it) is recovered: the tables are
    /// plain maps that stay consistent between statements.
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Frees the slot of an inbound request whose task has stopped (see
    /// [`State::finish_inbound`]) and wakes a drain waiting for idle.
    pub(crate) fn finish_inbound(&self, id: &RequestId, generation: u64) {
        let mut state = self.state();
        state.finish_inbound(id, generation);
        if state.inbound_len() == 0 {
            self.idle.notify_waiters();
        }
    }

    /// The negotiated protocol revision, once known.
    pub(crate) fn protocol_version(&self) -> Option<ProtocolVersion> {
        match self.version.load(Ordering::Acquire) {
            0 => None,
            n => ProtocolVersion::ALL.get(usize::from(n) - 1).copied(),
        }
    }

    pub(crate) fn close_reason(&self) -> String {
        self.close_reason
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| "the session ended".to_owned())
    }

    /// Queues a message without waiting (for use in `Drop`). Falls back to a spawned send when the
    /// queue is full; drops the message only when no runtime is running.
    pub(crate) fn enqueue_nowait(&self, envelope: Envelope) {
        if self.closed.is_cancelled() {
            return;
        }
        if let Err(envelope) = self.outbound.try_push(Box::new(envelope))
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            let queue = self.outbound.clone();
            handle.spawn(async move {
                let _ = queue.push(envelope).await;
            });
        }
    }

    /// Abandons an outbound request: removes it and, if it was still pending, tells the peer.
    /// Returns whether it was still pending.
    pub(crate) fn cancel_outbound(&self, id: &RequestId, method: &str, reason: &str) -> bool {
        let Some(pending) = self.state().take_pending(id) else {
            return false;
        };
        let _ = pending
            .responder
            .send(Err(SessionError::Cancelled(reason.to_owned())));
        // The spec forbids cancelling `initialize`. A transport that cancels by closing the
        // request's exchange has done so as the entry went.
        if method != "initialize" && !self.wiring.cancels_by_closing && !self.closed.is_cancelled()
        {
            let params = serde_json::json!({ "requestId": id, "reason": reason });
            self.enqueue_nowait(Envelope::new(Notification::new(
                "notifications/cancelled",
                Some(params),
            )));
        }
        true
    }
}

/// A cheap, cloneable handle to the peer on the other end of a connection.
///
/// Use it to send requests ([`request`](Self::request)) and notifications
/// ([`notify`](Self::notify)). Clones share the connection (an `Arc` inside). A handle obtained
/// from a request's context is *routed*: what it sends is marked as related to that request, so
/// Streamable HTTP delivers it on that request's stream.
#[derive(Clone)]
pub struct Peer {
    pub(crate) shared: Arc<Shared>,
    pub(crate) route: Route,
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("route", &self.route)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

impl Peer {
    /// Starts a typed request. Await the builder to send it and wait for the result, or set
    /// options first:
    ///
    /// ```no_run
    /// # async fn demo(peer: tidewire_core::session::Peer) -> Result<(), tidewire_core::session::SessionError> {
    /// use std::time::Duration;
    /// use tidewire_core::schema::{CallTool, CallToolParams};
    ///
    /// let result = peer
    ///     .request::<CallTool>(CallToolParams::new("crawl"))
    ///     .timeout(Duration::from_secs(10))
    ///     .on_progress(|p| println!("{}/{:?} {:?}", p.progress, p.total, p.message))
    ///     .await?;
    /// # let _ = result; Ok(()) }
    /// ```
    pub fn request<R: RequestType>(&self, params: R::Params) -> RequestBuilder<R::Result> {
        let params = serde_json::to_value(&params).map_err(|e| SessionError::InvalidParams {
            method: R::METHOD.to_owned(),
            reason: e.to_string(),
        });
        RequestBuilder::new(self.clone(), Cow::Borrowed(R::METHOD), params.map(Some))
    }

    /// Starts a request for any method, with raw JSON params and result.
    pub fn request_raw(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> RequestBuilder<Value> {
        RequestBuilder::new(self.clone(), Cow::Owned(method.into()), Ok(params))
    }

    /// Sends a typed notification.
    ///
    /// # Errors
    /// [`SessionError::Closed`] when the connection is closed; `InvalidParams` when the params
    /// do not serialise.
    pub async fn notify<N: NotificationType>(&self, params: N::Params) -> Result<(), SessionError> {
        let params = to_params(N::METHOD, &params)?;
        self.notify_raw(N::METHOD, params).await
    }

    /// Sends a notification for any method.
    ///
    /// # Errors
    /// [`SessionError::Closed`] when the connection is closed.
    pub async fn notify_raw(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), SessionError> {
        let envelope =
            Envelope::new(Notification::new(method, params)).with_route(self.route.clone());
        self.send_envelope(envelope).await
    }

    /// Sends a typed notification if the outbound queue has room now; never waits.
    ///
    /// For a message that may be lost rather than wait on a peer that does not keep up: a
    /// broadcast to many connections, where one slow reader must not hold up the others.
    ///
    /// # Errors
    /// [`SessionError::QueueFull`] when the queue is full (nothing was sent);
    /// [`SessionError::Closed`] when the connection is closed; `InvalidParams` when the params do
    /// not serialise.
    pub fn try_notify<N: NotificationType>(&self, params: N::Params) -> Result<(), SessionError> {
        let params = to_params(N::METHOD, &params)?;
        self.try_notify_raw(N::METHOD, params)
    }

    /// Sends a notification for any method if the outbound queue has room now; never waits.
    /// See [`try_notify`](Self::try_notify).
    ///
    /// # Errors
    /// [`SessionError::QueueFull`] when the queue is full (nothing was sent);
    /// [`SessionError::Closed`] when the connection is closed.
    pub fn try_notify_raw(
        &self,
        method: impl Into<String>,
        params: Option<Value>,
    ) -> Result<(), SessionError> {
        let shared = &self.shared;
        if shared.closed.is_cancelled() || shared.closing.is_cancelled() {
            return Err(SessionError::Closed(shared.close_reason()));
        }
        let envelope =
            Envelope::new(Notification::new(method, params)).with_route(self.route.clone());
        let queue = &shared.outbound;
        match queue.try_push(Box::new(envelope)) {
            Ok(()) => Ok(()),
            Err(_) if queue.is_closed() => Err(SessionError::Closed(shared.close_reason())),
            Err(_) => Err(SessionError::QueueFull(shared.options.outbound_queue)),
        }
    }

    /// Rewrites outgoing params for an older negotiated revision (see [`crate::schema::compat`]).
    fn adapt_params(&self, method: &str, params: &mut Option<Value>) {
        if let (Some(version), Some(value)) = (self.protocol_version(), params.as_mut()) {
            crate::schema::compat::adapt_outgoing(
                version,
                method,
                crate::schema::compat::PayloadKind::Params,
                value,
            );
        }
    }

    /// Queues a message the engine itself answers with (a ping reply, a refusal) without
    /// waiting. When the queue is full the message comes back, for the caller to wait for room
    /// (the reader does, which keeps a flooding peer in check); when the connection is closed,
    /// it is dropped.
    pub(crate) fn try_send_envelope(&self, envelope: Envelope) -> Option<Queued> {
        if self.shared.closed.is_cancelled() {
            return None;
        }
        let queue = &self.shared.outbound;
        queue
            .try_push(Box::new(envelope))
            .err()
            .filter(|_| !queue.is_closed())
    }

    pub(crate) async fn send_envelope(&self, envelope: Envelope) -> Result<(), SessionError> {
        if self.shared.closed.is_cancelled() || self.shared.closing.is_cancelled() {
            return Err(SessionError::Closed(self.shared.close_reason()));
        }
        self.shared
            .outbound
            .push(Box::new(envelope))
            .await
            .map_err(|_| SessionError::Closed(self.shared.close_reason()))
    }

    /// The same peer, with what it sends marked as related to `route`.
    #[must_use]
    pub fn with_route(&self, route: Route) -> Self {
        Self {
            shared: self.shared.clone(),
            route,
        }
    }

    /// The route of this handle.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The protocol revision negotiated on this connection, once known.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.shared.protocol_version()
    }

    /// Records the negotiated protocol revision (the server and client APIs do this during
    /// `initialize`); it decides, for example, whether progress carries a `message`.
    pub fn set_protocol_version(&self, version: ProtocolVersion) {
        let index = ProtocolVersion::ALL
            .iter()
            .position(|v| *v == version)
            .unwrap_or(0);
        let code = u8::try_from(index + 1).unwrap_or(0);
        self.shared.version.store(code, Ordering::Release);
    }

    /// Counts the sessions the server ended while the connection went on (Streamable HTTP: a
    /// 404 to a request carrying the session id). Wait on
    /// [`changed`](watch::Receiver::changed) to start a new session when it happens (the client
    /// API does so on its own).
    pub fn sessions_ended(&self) -> watch::Receiver<u64> {
        self.shared.sessions_ended.subscribe()
    }

    /// Asks the connection to close: queued messages are flushed, the transport is closed,
    /// in-flight requests fail with [`SessionError::Closed`] and running handlers are cancelled.
    pub fn close(&self) {
        self.shared.begin_closing();
    }

    /// True once the connection has stopped.
    pub fn is_closed(&self) -> bool {
        self.shared.closed.is_cancelled()
    }

    /// Waits until the connection has stopped.
    pub async fn closed(&self) {
        self.shared.closed.cancelled().await;
    }

    /// Why the connection stopped, once it has.
    pub fn close_reason(&self) -> Option<String> {
        self.is_closed().then(|| self.shared.close_reason())
    }

    /// Outbound requests waiting for their responses.
    pub fn pending_requests(&self) -> usize {
        self.shared.state().pending_len()
    }

    /// Inbound requests whose handlers are running.
    pub fn inflight_requests(&self) -> usize {
        self.shared.state().inbound_len()
    }
}

fn to_params<P: Serialize>(method: &str, params: &P) -> Result<Option<Value>, SessionError> {
    serde_json::to_value(params)
        .map(Some)
        .map_err(|e| SessionError::InvalidParams {
            method: method.to_owned(),
            reason: e.to_string(),
        })
}

enum ProgressMode {
    None,
    /// Progress asked for with nobody to hear it (a timeout that resets on progress).
    Ask,
    Callback(ProgressCallback),
    Stream(mpsc::Sender<Progress>, Arc<AtomicU64>),
}

/// A progress callback, with the handle that cancels its call.
type ProgressCallback = Box<dyn FnMut(Progress, &CancelHandle) + Send>;

/// An outbound request being prepared. Await it to send and wait for the result, or call
/// [`send`](Self::send) to get an [`InFlight`] handle with the id and a cancel handle.
///
/// Dropping the future returned by `.await` (or an [`InFlight`]) before the response arrives
/// cancels the request: the peer receives `notifications/cancelled`.
#[must_use = "a request does nothing until it is awaited or sent"]
pub struct RequestBuilder<T> {
    peer: Peer,
    method: Cow<'static, str>,
    params: Result<Option<Value>, SessionError>,
    timeout: Option<Option<Duration>>,
    reset_max: Option<Duration>,
    progress: ProgressMode,
    /// Goes into the request's envelope, for the transport.
    extensions: http::Extensions,
    _result: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for RequestBuilder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBuilder")
            .field("method", &self.method)
            .field("timeout", &self.timeout)
            .field("reset_max", &self.reset_max)
            .finish_non_exhaustive()
    }
}

impl<T: DeserializeOwned + Send + 'static> RequestBuilder<T> {
    fn new(
        peer: Peer,
        method: Cow<'static, str>,
        params: Result<Option<Value>, SessionError>,
    ) -> Self {
        Self {
            peer,
            method,
            params,
            timeout: None,
            reset_max: None,
            progress: ProgressMode::None,
            extensions: http::Extensions::new(),
            _result: PhantomData,
        }
    }

    /// The method of the request.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params as they stand (`None` when there are none, or they did not serialise).
    pub fn params(&self) -> Option<&Value> {
        self.params.as_ref().ok().and_then(Option::as_ref)
    }

    /// Puts `value` into the request's envelope extensions, for the transport (for example the
    /// HTTP headers a stateless request carries on Streamable HTTP).
    pub fn extension<X: Clone + Send + Sync + 'static>(mut self, value: X) -> Self {
        self.extensions.insert(value);
        self
    }

    /// Makes sending fail with `error`, without sending anything: for an API that hands out a
    /// builder when a check before sending may fail (the caller then meets the error where it
    /// awaits, with one `?`).
    pub fn refuse(mut self, error: SessionError) -> Self {
        self.params = Err(error);
        self
    }

    /// Adds `entries` to the request's `params._meta` (creating both when absent): the
    /// per-request envelope of the stateless revision, for one. A progress token asked for
    /// later is added beside them.
    pub fn merge_meta(mut self, entries: Map<String, Value>) -> Self {
        if let Ok(params) = &mut self.params {
            let object = params.get_or_insert_with(|| Value::Object(Map::new()));
            match object {
                Value::Object(map) => {
                    let meta = map
                        .entry("_meta")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !meta.is_object() {
                        *meta = Value::Object(Map::new());
                    }
                    if let Value::Object(meta) = meta {
                        meta.extend(entries);
                    }
                }
                _ => {
                    self.params = Err(SessionError::InvalidParams {
                        method: self.method.to_string(),
                        reason: "params must be an object to carry _meta".to_owned(),
                    });
                }
            }
        }
        self
    }

    /// Gives up after `timeout` without a response (sending `notifications/cancelled`).
    /// Overrides the session's default timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(Some(timeout));
        self
    }

    /// Waits as long as it takes.
    pub fn no_timeout(mut self) -> Self {
        self.timeout = Some(None);
        self
    }

    /// Restarts the timeout whenever progress arrives, but never waits longer than `hard_max`
    /// in all. Asks the peer for progress.
    pub fn reset_timeout_on_progress(mut self, hard_max: Duration) -> Self {
        self.reset_max = Some(hard_max);
        if matches!(self.progress, ProgressMode::None) {
            self.progress = ProgressMode::Ask;
        }
        self
    }

    /// Asks the peer for progress (`_meta.progressToken`) and calls `callback` with each report,
    /// in order, as it arrives: on a task of its own, so it runs whether or not the request's
    /// future is being polled (after [`send`](Self::send), while the caller awaits something
    /// else). Every report that arrived before the response has been handed to it by the time
    /// the request's future resolves. To cancel the call from the callback, use
    /// [`on_progress_with_cancel`](Self::on_progress_with_cancel).
    pub fn on_progress(mut self, mut callback: impl FnMut(Progress) + Send + 'static) -> Self {
        self.progress = ProgressMode::Callback(Box::new(move |p, _| callback(p)));
        self
    }

    /// As [`on_progress`](Self::on_progress), with the call's [`CancelHandle`], so the callback
    /// can cancel its own call (after the third report, say):
    ///
    /// ```no_run
    /// # async fn demo(peer: tidewire_core::session::Peer) {
    /// use tidewire_core::schema::{CallTool, CallToolParams};
    ///
    /// let mut reports = 0;
    /// let outcome = peer
    ///     .request::<CallTool>(CallToolParams::new("crawl"))
    ///     .on_progress_with_cancel(move |_progress, call| {
    ///         reports += 1;
    ///         if reports == 3 {
    ///             call.cancel("three reports are enough");
    ///         }
    ///     })
    ///     .await;
    /// assert!(outcome.is_err_and(|e| e.is_cancelled()));
    /// # }
    /// ```
    pub fn on_progress_with_cancel(
        mut self,
        callback: impl FnMut(Progress, &CancelHandle) + Send + 'static,
    ) -> Self {
        self.progress = ProgressMode::Callback(Box::new(callback));
        self
    }

    /// Asks the peer for progress and returns a stream of the reports. The stream ends when the
    /// request completes; it holds every report that arrived before the response.
    pub fn progress_stream(mut self) -> (Self, ProgressStream) {
        let (tx, rx) = mpsc::channel(self.peer.shared.options.progress_buffer);
        let lagged = Arc::new(AtomicU64::new(0));
        self.progress = ProgressMode::Stream(tx, lagged.clone());
        (self, ProgressStream { rx, lagged })
    }

    /// Sends the request and returns a handle to its response.
    ///
    /// The timeout starts now: it covers the wait for room in the outbound queue (which a peer
    /// that stopped reading, or a transport that cannot write, keeps full) as well as the wait
    /// for the response.
    ///
    /// # Errors
    /// `Closed` when the connection is closed, `TooManyRequests` when the pending table is full,
    /// `InvalidParams` when the params did not serialise, `Timeout` when the request could not
    /// even be queued in time (it was not sent; the peer is told nothing).
    pub async fn send(self) -> Result<InFlight<T>, SessionError> {
        let started = Instant::now();
        let shared = self.peer.shared.clone();
        if shared.closed.is_cancelled() || shared.closing.is_cancelled() {
            return Err(SessionError::Closed(shared.close_reason()));
        }
        if shared.remote_closed.load(Ordering::Acquire) {
            return Err(SessionError::Closed(
                "the peer closed the connection".to_owned(),
            ));
        }
        let mut params = self.params?;
        let id = RequestId::Number(shared.next_id.fetch_add(1, Ordering::Relaxed));
        let timeout = self.timeout.unwrap_or(shared.options.default_timeout);
        let activity = self.reset_max.map(|_| Arc::new(Notify::new()));

        let (sink, callback) = match self.progress {
            ProgressMode::None => (None, None),
            ProgressMode::Ask => {
                // Nobody hears the reports: the engine drops them into a closed channel, and
                // `activity` still resets the timeout.
                let (tx, rx) = mpsc::channel(1);
                drop(rx);
                let lagged = Arc::new(AtomicU64::new(0));
                (Some(ProgressSink::new(tx, activity.clone(), lagged)), None)
            }
            ProgressMode::Callback(cb) => {
                let (tx, rx) = mpsc::channel(shared.options.progress_buffer);
                let lagged = Arc::new(AtomicU64::new(0));
                (
                    Some(ProgressSink::new(tx, activity.clone(), lagged)),
                    Some((cb, rx)),
                )
            }
            ProgressMode::Stream(tx, lagged) => {
                (Some(ProgressSink::new(tx, activity.clone(), lagged)), None)
            }
        };
        if sink.is_some() {
            set_progress_token(&mut params, &id);
        }
        self.peer.adapt_params(&self.method, &mut params);
        let (responder, response) = oneshot::channel();
        let (over, exchange) = if shared.wiring.tracks_requests {
            let token = CancellationToken::new();
            let owner: Weak<dyn Settle> = Arc::downgrade(&shared) as Weak<dyn Settle>;
            let exchange = Exchange::new(id.clone(), token.clone(), owner);
            (Some(token.drop_guard()), Some(exchange))
        } else {
            (None, None)
        };
        shared
            .state()
            .add_pending(
                id.clone(),
                Pending {
                    responder,
                    progress: sink,
                    _over: over,
                },
            )
            .map_err(|refusal| match refusal {
                Refusal::Full(limit) => SessionError::TooManyRequests(limit),
                Refusal::Duplicate => SessionError::Closed("request id collision".to_owned()),
            })?;
        let mut guard = CancelGuard {
            shared: Arc::downgrade(&shared),
            id: id.clone(),
            method: self.method.clone(),
            notify_peer: false,
        };
        let request = Request {
            id: id.clone(),
            method: self.method.clone().into_owned(),
            params,
        };
        let mut envelope =
            Envelope::new(Message::Request(request)).with_route(self.peer.route.clone());
        envelope.exchange = exchange;
        envelope.extensions = self.extensions;
        let queued = Box::new(envelope);
        // Most often there is room, and no timer is needed.
        if let Err(queued) = shared.outbound.try_push(queued) {
            let deadline = first_deadline(started, timeout, self.reset_max);
            // On error `guard` drops unarmed for the peer: the entry goes, nothing is sent.
            Box::pin(wait_for_room(&shared, queued, started, deadline)).await?;
        }
        guard.notify_peer = true;

        let method = self.method;
        let cancel = CancelHandle {
            shared: Arc::downgrade(&shared),
            id: id.clone(),
            method: method.clone(),
        };
        // The callback runs on a task of its own, fed as reports arrive; it ends once the
        // request's entry is gone (its sender with it) and the reports queued before are heard.
        let reporter = callback.map(|(mut callback, mut rx)| {
            let handle = cancel.clone();
            tokio::spawn(async move {
                while let Some(progress) = rx.recv().await {
                    callback(progress, &handle);
                }
            })
        });
        let wait = wait_for_response::<T>(
            guard,
            method.clone(),
            response,
            started,
            timeout,
            self.reset_max,
            activity,
            reporter,
        );
        Ok(InFlight {
            cancel,
            id,
            future: Box::pin(wait),
        })
    }
}

impl<T: DeserializeOwned + Send + 'static> IntoFuture for RequestBuilder<T> {
    type Output = Result<T, SessionError>;
    type IntoFuture = BoxFuture<'static, Result<T, SessionError>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.send().await?.await })
    }
}

fn set_progress_token(params: &mut Option<Value>, token: &RequestId) {
    let object = match params {
        Some(Value::Object(map)) => map,
        _ => {
            *params = Some(Value::Object(Map::new()));
            match params {
                Some(Value::Object(map)) => map,
                _ => return,
            }
        }
    };
    let meta = object
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    if let Value::Object(meta) = meta {
        meta.insert("progressToken".to_owned(), token.to_json());
    }
}

/// Queues a request once the outbound queue has room, giving up at `deadline`.
///
/// # Errors
/// `Timeout` (counted from `started`) when no room came in time, `Closed` when the connection
/// closed meanwhile.
async fn wait_for_room(
    shared: &Shared,
    queued: Queued,
    started: Instant,
    deadline: Option<Instant>,
) -> Result<(), SessionError> {
    let push = shared.outbound.push(queued);
    let pushed = match deadline {
        Some(deadline) => tokio::time::timeout_at(deadline, push)
            .await
            .map_err(|_| SessionError::Timeout(started.elapsed()))?,
        None => push.await,
    };
    pushed.map_err(|_| SessionError::Closed(shared.close_reason()))
}

/// When a request that started at `started` gives up unless progress resets its timer: after
/// its timeout, and never after the hard maximum of a timer that resets on progress. `None`
/// waits forever (as does a duration too large to add).
fn first_deadline(
    started: Instant,
    timeout: Option<Duration>,
    reset_max: Option<Duration>,
) -> Option<Instant> {
    let soft = timeout.and_then(|t| started.checked_add(t));
    let hard = reset_max.and_then(|m| started.checked_add(m));
    match (soft, hard) {
        (Some(soft), Some(hard)) => Some(soft.min(hard)),
        (soft, hard) => soft.or(hard),
    }
}

#[allow(clippy::too_many_arguments)]
async fn wait_for_response<T: DeserializeOwned>(
    mut guard: CancelGuard,
    method: Cow<'static, str>,
    mut response: oneshot::Receiver<Result<Value, SessionError>>,
    started: Instant,
    timeout: Option<Duration>,
    reset_max: Option<Duration>,
    activity: Option<Arc<Notify>>,
    reporter: Option<tokio::task::JoinHandle<()>>,
) -> Result<T, SessionError> {
    // `started` is when the request was made, before it waited for room in the queue: the
    // timeout covers the whole call.
    let hard_deadline = reset_max.and_then(|m| started.checked_add(m));
    let cap = |d: Instant| hard_deadline.map_or(d, |h| d.min(h));
    let mut deadline = first_deadline(started, timeout, reset_max);
    let outcome = loop {
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d).await,
                None => std::future::pending().await,
            }
        };
        let progressed = async {
            match &activity {
                Some(activity) => activity.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            biased;
            outcome = &mut response => break outcome,
            () = progressed => {
                if reset_max.is_some() {
                    deadline = timeout
                        .and_then(|t| Instant::now().checked_add(t))
                        .map(cap)
                        .or(hard_deadline);
                }
            }
            () = sleep => {
                let waited = started.elapsed();
                guard.fire(&format!("timed out after {} ms", waited.as_millis()));
                return Err(SessionError::Timeout(waited));
            }
        }
    };
    guard.disarm();
    // Reports that arrived before the response may still be queued: the callback hears them
    // before the caller hears the outcome (the entry is gone, so its task ends once they are).
    if let Some(reporter) = reporter
        && let Err(error) = reporter.await
        && error.is_panic()
    {
        tracing::warn!("a progress callback panicked");
    }
    let value = match outcome {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => return Err(e),
        Err(_) => {
            let reason = guard
                .shared
                .upgrade()
                .map_or_else(|| "the session ended".to_owned(), |s| s.close_reason());
            return Err(SessionError::Closed(reason));
        }
    };
    serde_json::from_value(value).map_err(|e| SessionError::InvalidResult {
        method: method.into_owned(),
        // serde quotes what it could not read, and the peer wrote that.
        reason: excerpt(&e.to_string()),
    })
}

/// Cancels the request when dropped while armed.
struct CancelGuard {
    shared: Weak<Shared>,
    id: RequestId,
    method: Cow<'static, str>,
    /// False until the request was handed to the writer; before that, dropping only unregisters.
    notify_peer: bool,
}

impl CancelGuard {
    fn fire(&mut self, reason: &str) {
        if let Some(shared) = self.shared.upgrade() {
            if self.notify_peer {
                shared.cancel_outbound(&self.id, &self.method, reason);
            } else {
                shared.state().take_pending(&self.id);
            }
        }
        self.disarm();
    }

    fn disarm(&mut self) {
        self.shared = Weak::new();
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        self.fire("the caller dropped the request");
    }
}

/// A request that has been sent: a future of its result, with its id and a cancel handle.
///
/// Dropping it before it completes cancels the request.
#[must_use = "dropping an InFlight request cancels it"]
pub struct InFlight<T> {
    id: RequestId,
    cancel: CancelHandle,
    future: BoxFuture<'static, Result<T, SessionError>>,
}

impl<T> InFlight<T> {
    /// The JSON-RPC id of the request (also its progress token, if progress was asked for).
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// A handle that cancels this request from anywhere.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }
}

impl<T> Future for InFlight<T> {
    type Output = Result<T, SessionError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.future.as_mut().poll(cx)
    }
}

impl<T> std::fmt::Debug for InFlight<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InFlight")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Cancels one outbound request: its future resolves to [`SessionError::Cancelled`] and the peer
/// receives `notifications/cancelled`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct CancelHandle {
    shared: Weak<Shared>,
    id: RequestId,
    method: Cow<'static, str>,
}

impl CancelHandle {
    /// Cancels the request. Returns false if it had already completed (then nothing is sent).
    pub fn cancel(&self, reason: &str) -> bool {
        self.shared
            .upgrade()
            .is_some_and(|shared| shared.cancel_outbound(&self.id, &self.method, reason))
    }

    /// The id of the request this handle cancels.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
}

/// The progress reports of one outbound request, in order. Ends when the request completes.
#[derive(Debug)]
pub struct ProgressStream {
    rx: mpsc::Receiver<Progress>,
    lagged: Arc<AtomicU64>,
}

impl ProgressStream {
    /// Reports dropped so far because this stream was not read fast enough.
    pub fn lagged(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }
}

impl futures::Stream for ProgressStream {
    type Item = Progress;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        self.rx.poll_recv(cx)
    }
}
