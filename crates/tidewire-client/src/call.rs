//! [`CallToolBuilder`]: one `tools/call`, with its timeout, progress and cancellation.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use futures::Stream;
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tidewire_core::jsonrpc::RequestId;
use tidewire_core::progress::Progress;
use tidewire_core::schema::{CallTool, CallToolParams, CallToolResult, Meta, RequestType};

use tidewire_core::session::{CancelHandle, InFlight, ProgressStream, SessionError};
use tokio::sync::{mpsc, oneshot};

use crate::client::Client;
use crate::error::ClientError;
use crate::rounds::{self, Cancel};

/// Progress reports a stateless call's stream holds before it counts them as lagged.
const ROUNDS_PROGRESS_BUFFER: usize = 1024;

/// What a [`ToolProgress`] reads once the call is sent.
#[derive(Debug)]
enum Handover {
    /// The engine's stream of one request (the session era).
    Engine(ProgressStream),
    /// Reports of every round of a stateless call.
    Rounds(mpsc::Receiver<Progress>, Arc<AtomicU64>),
}

/// How the caller wants the call's progress.
/// A progress callback, with the handle that cancels its call.
type Callback = Box<dyn FnMut(Progress, &CancelHandle) + Send>;

enum ProgressMode {
    None,
    Callback(Callback),
    /// The progress stream is handed to the [`ToolProgress`] when the call is sent.
    Stream(oneshot::Sender<Handover>),
}

/// A tool call being prepared; made by [`Client::call_tool`](crate::Client::call_tool).
///
/// `.await` it for the [`CallToolResult`], or call [`send`](Self::send) for a [`ToolCall`]
/// handle with the request id and a cancel handle. A tool that fails reports it inside the
/// result (`is_error()`); a `ClientError` means the call itself failed.
///
/// # Cancel safety
/// Dropping the future (or the [`ToolCall`]) before the result arrives cancels the call: the
/// server receives `notifications/cancelled` and a late result is ignored. A timeout does the
/// same.
#[must_use = "a tool call does nothing until it is awaited or sent"]
pub struct CallToolBuilder {
    client: Client,
    params: Result<CallToolParams, SessionError>,
    timeout: Option<Option<Duration>>,
    reset_max: Option<Duration>,
    progress: ProgressMode,
}

impl std::fmt::Debug for CallToolBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallToolBuilder")
            .field("params", &self.params)
            .field("timeout", &self.timeout)
            .field("reset_max", &self.reset_max)
            .field("progress", &!matches!(self.progress, ProgressMode::None))
            .finish_non_exhaustive()
    }
}

impl CallToolBuilder {
    pub(crate) fn new(client: Client, name: String, arguments: &impl Serialize) -> Self {
        let params = tool_arguments(arguments).map(|arguments| {
            let mut params = CallToolParams::new(name);
            params.arguments = arguments;
            params
        });
        Self {
            client,
            params,
            timeout: None,
            reset_max: None,
            progress: ProgressMode::None,
        }
    }

    /// Gives up after `timeout` without a result (the server receives
    /// `notifications/cancelled`). Overrides the session's default timeout.
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
    /// in all. Asks the server for progress.
    pub fn reset_timeout_on_progress(mut self, hard_max: Duration) -> Self {
        self.reset_max = Some(hard_max);
        self
    }

    /// Asks the server for progress and calls `callback` with each report, in order, as it
    /// arrives (on a task of its own: whether or not the call is being awaited); every report
    /// that came before the result has been heard when the call resolves. Replaces an earlier
    /// callback or [`progress_stream`](Self::progress_stream).
    pub fn on_progress(mut self, mut callback: impl FnMut(Progress) + Send + 'static) -> Self {
        self.progress = ProgressMode::Callback(Box::new(move |p, _| callback(p)));
        self
    }

    /// As [`on_progress`](Self::on_progress), with a handle that cancels this call, so the
    /// callback can stop it (after the third report, say: the example is
    /// `RequestBuilder::on_progress_with_cancel`'s). On the stateless revision the handle is the
    /// running round's, and cancelling it ends the call.
    pub fn on_progress_with_cancel(
        mut self,
        callback: impl FnMut(Progress, &CancelHandle) + Send + 'static,
    ) -> Self {
        self.progress = ProgressMode::Callback(Box::new(callback));
        self
    }

    /// Asks the server for progress and returns a stream of the reports, in order. The reports
    /// flow into it as they arrive, whether or not the call is being awaited; it holds every
    /// report that arrived before the result (up to the session's progress buffer; more are
    /// counted by [`ToolProgress::lagged`]) and ends when the call completes, or at once if the
    /// call is never sent. Replaces an earlier [`on_progress`](Self::on_progress).
    pub fn progress_stream(mut self) -> (Self, ToolProgress) {
        let (tx, rx) = oneshot::channel();
        self.progress = ProgressMode::Stream(tx);
        (
            self,
            ToolProgress {
                state: StreamState::Waiting(rx),
            },
        )
    }

    /// Sets `_meta` on the request (merged with the progress token the client adds when
    /// progress is asked for).
    pub fn meta(mut self, meta: Meta) -> Self {
        if let Ok(params) = &mut self.params {
            params.meta = Some(meta);
        }
        self
    }

    /// Sends the call and returns a handle to its result.
    ///
    /// # Errors
    /// [`ClientError::Session`] when the arguments did not serialise to a JSON object
    /// (`InvalidParams`), the connection is closed, or too many requests are pending.
    pub async fn send(self) -> Result<ToolCall, ClientError> {
        if self.client.inner.envelope.is_some() {
            return self.send_stateless().await;
        }
        let mut request = self.client.request::<CallTool>(self.params?);
        match self.timeout {
            Some(Some(timeout)) => request = request.timeout(timeout),
            Some(None) => request = request.no_timeout(),
            None => {}
        }
        if let Some(hard_max) = self.reset_max {
            request = request.reset_timeout_on_progress(hard_max);
        }
        match self.progress {
            ProgressMode::None => {}
            ProgressMode::Callback(callback) => {
                request = request.on_progress_with_cancel(callback);
            }
            ProgressMode::Stream(handover) => {
                let (with_stream, stream) = request.progress_stream();
                request = with_stream;
                // The receiver may be gone (the caller dropped the stream); nothing to do then.
                let _ = handover.send(Handover::Engine(stream));
            }
        }
        let inner = request.send().await?;
        Ok(ToolCall {
            id: inner.id().clone(),
            cancel: inner.cancel_handle(),
            state: CallState::Single(inner),
        })
    }

    /// The stateless revision: the first round now, the others (if the server asks questions)
    /// inside the returned call.
    async fn send_stateless(self) -> Result<ToolCall, ClientError> {
        let params = serde_json::to_value(self.params?).map_err(|e| {
            ClientError::Session(SessionError::InvalidParams {
                method: CallTool::METHOD.to_owned(),
                reason: e.to_string(),
            })
        })?;
        let progress: Option<rounds::ProgressSink> = match self.progress {
            ProgressMode::None => None,
            ProgressMode::Callback(callback) => Some(Arc::new(Mutex::new(callback))),
            ProgressMode::Stream(handover) => {
                let (tx, rx) = mpsc::channel(ROUNDS_PROGRESS_BUFFER);
                let lagged = Arc::new(AtomicU64::new(0));
                let counted = lagged.clone();
                let _ = handover.send(Handover::Rounds(rx, lagged));
                Some(Arc::new(Mutex::new(Box::new(
                    move |p: Progress, _: &CancelHandle| {
                        if tx.try_send(p).is_err() {
                            counted.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                ))))
            }
        };
        let options = rounds::Options {
            timeout: self.timeout,
            reset_max: self.reset_max,
            progress,
            started: Instant::now(),
        };
        let client = self.client;
        let first = rounds::send_round(&client, CallTool::METHOD, &params, &options).await?;
        let id = first.id().clone();
        let handle = first.cancel_handle();
        let cancel = Arc::new(Cancel::default());
        cancel.cancel_on(handle.clone());
        let rounds_cancel = cancel.clone();
        // The rounds run as a task of their own, so progress reaches the caller as it comes
        // (the engine hands reports over while a request's future is polled) even before the
        // call is awaited; dropping the call aborts the task, which cancels the running round.
        let task = tokio::spawn(async move {
            let result = first.await?;
            let result = rounds::finish(
                &client,
                CallTool::METHOD,
                params,
                result,
                options,
                rounds_cancel,
            )
            .await?;
            serde_json::from_value::<CallToolResult>(result).map_err(|e| {
                ClientError::InvalidResponse {
                    method: CallTool::METHOD.to_owned(),
                    reason: e.to_string(),
                }
            })
        });
        Ok(ToolCall {
            id,
            cancel: handle,
            state: CallState::Rounds { task, cancel },
        })
    }
}

impl IntoFuture for CallToolBuilder {
    type Output = Result<CallToolResult, ClientError>;
    type IntoFuture = BoxFuture<'static, Result<CallToolResult, ClientError>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.send().await?.await })
    }
}

/// Serialises tool arguments: `null` (from `()` or `None`) means none; otherwise a JSON object.
fn tool_arguments(
    arguments: &impl Serialize,
) -> Result<Option<tidewire_core::schema::JsonObject>, SessionError> {
    let invalid = |reason: String| SessionError::InvalidParams {
        method: CallTool::METHOD.to_owned(),
        reason,
    };
    match serde_json::to_value(arguments).map_err(|e| invalid(e.to_string()))? {
        Value::Null => Ok(None),
        Value::Object(map) => Ok(Some(map)),
        other => Err(invalid(format!(
            "tool arguments must be a JSON object, got {other}"
        ))),
    }
}

/// A tool call that has been sent: a future of its result, with its id and a cancel handle.
///
/// Dropping it before it completes cancels the call.
#[must_use = "dropping a ToolCall cancels it"]
pub struct ToolCall {
    id: RequestId,
    cancel: CancelHandle,
    state: CallState,
}

enum CallState {
    /// One request (the session era).
    Single(InFlight<CallToolResult>),
    /// The rounds of a stateless call (2026-07-28), the first one sent.
    Rounds {
        task: tokio::task::JoinHandle<Result<CallToolResult, ClientError>>,
        cancel: Arc<Cancel>,
    },
}

impl Drop for ToolCall {
    fn drop(&mut self) {
        // Dropping the call cancels it, as in the session era: the task's running round is
        // dropped with it, which tells the server.
        if let CallState::Rounds { task, .. } = &self.state {
            task.abort();
        }
    }
}

impl ToolCall {
    /// The JSON-RPC id of the request (also its progress token, if progress was asked for). On
    /// the stateless revision, the first round's: each retry has a new id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// A handle that cancels this call from anywhere (cheap to clone). On the stateless
    /// revision it reaches the first round only; [`cancel`](Self::cancel) and dropping the call
    /// reach every round.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// Cancels the call: the server receives `notifications/cancelled` with `reason` (on
    /// Streamable HTTP's stateless wire, the request's stream closes instead), and this future
    /// resolves to a cancelled error. Returns false if the call had already completed.
    pub fn cancel(&self, reason: &str) -> bool {
        match &self.state {
            CallState::Single(_) => self.cancel.cancel(reason),
            CallState::Rounds { cancel, .. } => cancel.cancel(reason),
        }
    }
}

impl Future for ToolCall {
    type Output = Result<CallToolResult, ClientError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            CallState::Single(inner) => Pin::new(inner).poll(cx).map_err(ClientError::from),
            CallState::Rounds { task, .. } => match ready!(Pin::new(task).poll(cx)) {
                Ok(outcome) => Poll::Ready(outcome),
                Err(joined) if joined.is_cancelled() => Poll::Ready(Err(ClientError::Session(
                    SessionError::Cancelled("the call was dropped".to_owned()),
                ))),
                Err(joined) => Poll::Ready(Err(ClientError::Session(SessionError::Closed(
                    format!("the call's task failed: {joined}"),
                )))),
            },
        }
    }
}

impl std::fmt::Debug for ToolCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCall")
            .field("id", self.id())
            .finish_non_exhaustive()
    }
}

/// The progress reports of one tool call, in order; made by
/// [`CallToolBuilder::progress_stream`]. Ends when the call completes.
#[derive(Debug)]
pub struct ToolProgress {
    state: StreamState,
}

#[derive(Debug)]
enum StreamState {
    /// The call has not been sent yet.
    Waiting(oneshot::Receiver<Handover>),
    Connected(ProgressStream),
    /// Every round of a stateless call.
    Rounds(mpsc::Receiver<Progress>, Arc<AtomicU64>),
    Done,
}

impl ToolProgress {
    /// Reports dropped so far because this stream was not read fast enough.
    pub fn lagged(&self) -> u64 {
        match &self.state {
            StreamState::Connected(stream) => stream.lagged(),
            StreamState::Rounds(_, lagged) => lagged.load(Ordering::Relaxed),
            StreamState::Waiting(_) | StreamState::Done => 0,
        }
    }
}

impl Stream for ToolProgress {
    type Item = Progress;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Progress>> {
        loop {
            match &mut self.state {
                StreamState::Waiting(rx) => {
                    self.state = match ready!(Pin::new(rx).poll(cx)) {
                        Ok(Handover::Engine(stream)) => StreamState::Connected(stream),
                        Ok(Handover::Rounds(rx, lagged)) => StreamState::Rounds(rx, lagged),
                        // The builder was dropped without sending the call.
                        Err(_) => StreamState::Done,
                    };
                }
                StreamState::Connected(stream) => return Pin::new(stream).poll_next(cx),
                StreamState::Rounds(rx, _) => return rx.poll_recv(cx),
                StreamState::Done => return Poll::Ready(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn arguments_must_be_an_object_or_nothing() {
        assert_eq!(tool_arguments(&()).ok(), Some(None));
        assert_eq!(tool_arguments(&None::<Value>).ok(), Some(None));
        let map = tool_arguments(&json!({"a": 1})).ok().flatten();
        assert_eq!(map.and_then(|m| m.get("a").cloned()), Some(json!(1)));
        let err = tool_arguments(&[1, 2]).err();
        assert!(
            matches!(err, Some(SessionError::InvalidParams { .. })),
            "{err:?}"
        );
    }
}
