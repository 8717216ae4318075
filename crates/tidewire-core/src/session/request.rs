//! One outbound request: [`RequestBuilder`] (timeout, progress, cancellation), the wait for its
//! response, and the handles it gives out ([`InFlight`], [`CancelHandle`], [`ProgressStream`]).

use std::borrow::Cow;
use std::future::{Future, IntoFuture};
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::error::SessionError;
use super::state::{Pending, ProgressSink, Refusal};
use crate::jsonrpc::{Message, Request, RequestId};
use crate::progress::Progress;
use crate::schema::RequestType;
use crate::text::excerpt;
use crate::transport::{Exchange, Settle};

use super::peer::{Connection, Peer, Queued};

// Starting a request belongs with the request: the handle itself lives in `peer`.
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
}

enum ProgressMode {
    None,
    /// Progress asked for with nobody to hear it (a timeout that resets on progress).
    Ask,
    Callback(ProgressCallback),
    Stream(mpsc::Sender<Progress>, Arc<AtomicU64>),
}

/// A progress callback, with the handle that cancels its call.
pub type ProgressCallback = Box<dyn FnMut(Progress, &CancelHandle) + Send>;

/// What a [`RequestBuilder`] was told, taken apart by [`RequestBuilder::into_settings`]: for a
/// caller that sends the request its own way. The client does, for a stateless call that takes
/// several rounds: each round is a request of its own, with these settings.
#[non_exhaustive]
pub struct RequestSettings {
    /// The method.
    pub method: Cow<'static, str>,
    /// The params, or why they cannot be sent.
    pub params: Result<Option<Value>, SessionError>,
    /// `Some(None)`: no timeout; `None`: the session's default.
    pub timeout: Option<Option<Duration>>,
    /// The hard maximum of a timeout that restarts on progress (progress is then asked for).
    pub reset_max: Option<Duration>,
    /// Who hears progress: the callback, or the feed of the builder's
    /// [`progress_stream`](RequestBuilder::progress_stream), which ends when this is dropped.
    /// `None`: nobody asked.
    pub progress: Option<ProgressCallback>,
    /// The envelope extensions, for the transport.
    pub extensions: crate::Extensions,
}

impl std::fmt::Debug for RequestSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestSettings")
            .field("method", &self.method)
            .field("params", &self.params)
            .field("timeout", &self.timeout)
            .field("reset_max", &self.reset_max)
            .field("progress", &self.progress.is_some())
            .finish_non_exhaustive()
    }
}

/// An outbound request being prepared. Await it to send and wait for the result, or call
/// [`send`](Self::send) to get an [`InFlight`] handle with the id and a cancel handle.
///
/// Dropping the future returned by `.await` (or an [`InFlight`]) before the response arrives
/// cancels the request: the peer receives `notifications/cancelled`.
#[must_use = "a request does nothing until it is awaited or sent"]
pub struct RequestBuilder<T> {
    /// `None` for a builder that can never be sent ([`unsendable`](Self::unsendable)).
    peer: Option<Peer>,
    method: Cow<'static, str>,
    params: Result<Option<Value>, SessionError>,
    timeout: Option<Option<Duration>>,
    reset_max: Option<Duration>,
    progress: ProgressMode,
    /// Goes into the request's envelope, for the transport.
    extensions: crate::Extensions,
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
    pub(crate) fn new(
        peer: Peer,
        method: Cow<'static, str>,
        params: Result<Option<Value>, SessionError>,
    ) -> Self {
        Self {
            peer: Some(peer),
            method,
            params,
            timeout: None,
            reset_max: None,
            progress: ProgressMode::None,
            extensions: crate::Extensions::new(),
            _result: PhantomData,
        }
    }

    /// A builder with no peer to send to, whose sending fails with `error`: what a request
    /// served without a session hands out for a request back to the client.
    pub(crate) fn unsendable(method: &'static str, error: SessionError) -> Self {
        Self {
            peer: None,
            method: Cow::Borrowed(method),
            params: Err(error),
            timeout: None,
            reset_max: None,
            progress: ProgressMode::None,
            extensions: crate::Extensions::new(),
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
        let buffer = self
            .peer
            .as_ref()
            .map_or(1, |peer| peer.shared.options.progress_buffer);
        let (tx, rx) = mpsc::channel(buffer);
        let lagged = Arc::new(AtomicU64::new(0));
        self.progress = ProgressMode::Stream(tx, lagged.clone());
        (self, ProgressStream { rx, lagged })
    }

    /// Takes the builder apart, to send the request another way (see [`RequestSettings`]). A
    /// [`progress_stream`](Self::progress_stream) asked for becomes a callback that feeds it.
    pub fn into_settings(self) -> RequestSettings {
        let progress = match self.progress {
            ProgressMode::None | ProgressMode::Ask => None,
            ProgressMode::Callback(callback) => Some(callback),
            ProgressMode::Stream(tx, lagged) => {
                let feed: ProgressCallback = Box::new(move |progress, _| {
                    if tx.try_send(progress).is_err() {
                        lagged.fetch_add(1, Ordering::Relaxed);
                    }
                });
                Some(feed)
            }
        };
        RequestSettings {
            method: self.method,
            params: self.params,
            timeout: self.timeout,
            reset_max: self.reset_max,
            progress,
            extensions: self.extensions,
        }
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
        let Some(peer) = self.peer else {
            // Made by `unsendable`, whose params always hold the error.
            return Err(self.params.err().unwrap_or_else(|| {
                SessionError::NotSupported("a request with no peer to send it to".to_owned())
            }));
        };
        let shared = peer.shared.clone();
        if shared.is_stopping() {
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
        peer.adapt_params(&self.method, &mut params);
        let observed = shared
            .options
            .observer
            .0
            .as_ref()
            .and_then(|observer| observer.sending(&self.method, &id, &mut params));
        let (responder, response) = oneshot::channel();
        let (over, exchange) = if shared.profile.tracks_requests {
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
        let mut envelope = peer.envelope(Message::Request(request));
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
        let value = wait_for_value(
            guard,
            response,
            started,
            timeout,
            self.reset_max,
            activity,
            reporter,
        );
        let wait = async move {
            let value = value.await;
            if let Some(observed) = observed {
                observed.ended(value.as_ref());
            }
            serde_json::from_value(value?).map_err(|e| SessionError::InvalidResult {
                method: method.into_owned(),
                // serde quotes what it could not read, and the peer wrote that.
                reason: excerpt(&e.to_string()),
            })
        };
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
    shared: &Connection,
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
async fn wait_for_value(
    mut guard: CancelGuard,
    mut response: oneshot::Receiver<Result<Value, SessionError>>,
    started: Instant,
    timeout: Option<Duration>,
    reset_max: Option<Duration>,
    activity: Option<Arc<Notify>>,
    reporter: Option<tokio::task::JoinHandle<()>>,
) -> Result<Value, SessionError> {
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
    match outcome {
        Ok(outcome) => outcome,
        Err(_) => {
            let reason = guard
                .shared
                .upgrade()
                .map_or_else(|| "the session ended".to_owned(), |s| s.close_reason());
            Err(SessionError::Closed(reason))
        }
    }
}

/// Cancels the request when dropped while armed.
struct CancelGuard {
    shared: Weak<Connection>,
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
    shared: Weak<Connection>,
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
