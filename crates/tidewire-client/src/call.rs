//! [`CallToolBuilder`]: one `tools/call`, with its timeout, progress and cancellation: a typed
//! [`RequestBuilder`] that also knows how to run the call in rounds on the stateless revision.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;
use tidewire_core::jsonrpc::RequestId;
use tidewire_core::progress::Progress;
use tidewire_core::schema::{
    CallTool, CallToolParams, CallToolResult, JsonObject, Meta, RequestType,
};
use tidewire_core::session::{
    CancelHandle, InFlight, ProgressStream, RequestBuilder, RequestSettings, SessionError,
};

use crate::client::Client;
use crate::error::ClientError;
use crate::rounds::{self, Cancel};
use crate::task::TaskStart;

/// The progress reports of one tool call, in order; made by
/// [`CallToolBuilder::progress_stream`]. It holds every report that arrived before the result
/// (up to the session's progress buffer; more are counted by `lagged()`), across every round of
/// a stateless call, and ends when the call completes, or at once if it is never sent.
pub type ToolProgress = ProgressStream;

impl Client {
    /// Starts a call of the tool `name` with `arguments` (anything that serialises to a JSON
    /// object, or `()` for none). Set options on the builder, then `.await` it, or
    /// [`send`](CallToolBuilder::send) it for a handle with the request id and a cancel handle.
    ///
    /// ```no_run
    /// # async fn demo(client: tidewire_client::Client) -> Result<(), tidewire_client::ClientError> {
    /// use std::time::Duration;
    ///
    /// let result = client
    ///     .call_tool("crawl", serde_json::json!({ "url": "https://example.com" }))
    ///     .timeout(Duration::from_secs(30))
    ///     .on_progress(|p| println!("{} / {:?}", p.progress, p.total))
    ///     .await?;
    /// # let _ = result; Ok(()) }
    /// ```
    pub fn call_tool(&self, name: impl Into<String>, arguments: impl Serialize) -> CallToolBuilder {
        CallToolBuilder::new(self.clone(), name.into(), &arguments)
    }
}

/// A tool call being prepared; made by [`Client::call_tool`](crate::Client::call_tool).
///
/// `.await` it for the [`CallToolResult`], or call [`send`](Self::send) for a [`ToolCall`]
/// handle with the request id and a cancel handle. A tool that fails reports it inside the
/// result (`is_error()`); a `ClientError` means the call itself failed.
///
/// Its options are the ones of the [`RequestBuilder`] it wraps, and mean the same; on the
/// stateless revision one timeout, one progress callback or stream and one cancel span every
/// round of the call.
///
/// # Cancel safety
/// Dropping the future (or the [`ToolCall`]) before the result arrives cancels the call: the
/// server receives `notifications/cancelled` and a late result is ignored. A timeout does the
/// same.
#[must_use = "a tool call does nothing until it is awaited or sent"]
#[derive(Debug)]
pub struct CallToolBuilder {
    client: Client,
    request: RequestBuilder<CallToolResult>,
}

impl CallToolBuilder {
    fn new(client: Client, name: String, arguments: &impl Serialize) -> Self {
        let mut params = CallToolParams::new(name);
        let arguments = tool_arguments(arguments);
        if let Ok(arguments) = &arguments {
            params.arguments.clone_from(arguments);
        }
        let mut request = client.inner.peer.request::<CallTool>(params);
        if let Err(error) = arguments {
            request = request.refuse(error);
        }
        Self { client, request }
    }

    fn with(
        self,
        change: impl FnOnce(RequestBuilder<CallToolResult>) -> RequestBuilder<CallToolResult>,
    ) -> Self {
        Self {
            client: self.client,
            request: change(self.request),
        }
    }

    /// Gives up after `timeout` without a result (the server receives
    /// `notifications/cancelled`). Overrides the session's default timeout.
    pub fn timeout(self, timeout: Duration) -> Self {
        self.with(|r| r.timeout(timeout))
    }

    /// Waits as long as it takes.
    pub fn no_timeout(self) -> Self {
        self.with(RequestBuilder::no_timeout)
    }

    /// Restarts the timeout whenever progress arrives, but never waits longer than `hard_max`
    /// in all. Asks the server for progress.
    pub fn reset_timeout_on_progress(self, hard_max: Duration) -> Self {
        self.with(|r| r.reset_timeout_on_progress(hard_max))
    }

    /// Asks the server for progress and calls `callback` with each report, in order, as it
    /// arrives (on a task of its own: whether or not the call is being awaited); every report
    /// that came before the result has been heard when the call resolves. Replaces an earlier
    /// callback or [`progress_stream`](Self::progress_stream).
    pub fn on_progress(self, callback: impl FnMut(Progress) + Send + 'static) -> Self {
        self.with(|r| r.on_progress(callback))
    }

    /// As [`on_progress`](Self::on_progress), with a handle that cancels this call, so the
    /// callback can stop it (after the third report, say: the example is
    /// `RequestBuilder::on_progress_with_cancel`'s). On the stateless revision the handle is the
    /// running round's, and cancelling it ends the call.
    pub fn on_progress_with_cancel(
        self,
        callback: impl FnMut(Progress, &CancelHandle) + Send + 'static,
    ) -> Self {
        self.with(|r| r.on_progress_with_cancel(callback))
    }

    /// Asks the server for progress and returns a stream of the reports, in order (see
    /// [`ToolProgress`]). The reports flow into it as they arrive, whether or not the call is
    /// being awaited. Replaces an earlier [`on_progress`](Self::on_progress).
    pub fn progress_stream(self) -> (Self, ToolProgress) {
        let (request, stream) = self.request.progress_stream();
        (
            Self {
                client: self.client,
                request,
            },
            stream,
        )
    }

    /// Adds `meta` to the request's `_meta` (beside the progress token the client adds when
    /// progress is asked for).
    pub fn meta(self, meta: Meta) -> Self {
        self.with(|r| r.merge_meta(meta.into_inner()))
    }

    /// Asks for the call to run as a task (see [`task`](crate::task)): on the stateless
    /// revision by declaring the tasks extension in this request's capabilities, on a session
    /// with `params.task` where the server offers tasks. The server decides: the answer is
    /// the task, or the call's result.
    ///
    /// # Errors
    /// As [`send`](Self::send), and the call's own errors when the server answers directly.
    pub async fn as_task(self) -> Result<TaskStart, ClientError> {
        crate::task::start(self.client, self.request.into_settings()).await
    }

    /// Sends the call and returns a handle to its result.
    ///
    /// # Errors
    /// [`ClientError::Session`] when the arguments did not serialise to a JSON object
    /// (`InvalidParams`), the connection is closed, or too many requests are pending.
    pub async fn send(self) -> Result<ToolCall, ClientError> {
        if self.client.inner.envelope.is_some() {
            return send_stateless(self.client, self.request.into_settings()).await;
        }
        let inner = self.request.send().await?;
        Ok(ToolCall {
            id: inner.id().clone(),
            cancel: inner.cancel_handle(),
            state: CallState::Single(inner),
        })
    }
}

/// The stateless revision: the first round now, the others (if the server asks questions)
/// inside the returned call.
async fn send_stateless(
    client: Client,
    settings: RequestSettings,
) -> Result<ToolCall, ClientError> {
    let params = settings
        .params?
        .unwrap_or_else(|| Value::Object(JsonObject::new()));
    let options = rounds::Options {
        timeout: settings.timeout,
        reset_max: settings.reset_max,
        progress: settings
            .progress
            .map(|callback| Arc::new(Mutex::new(callback))),
        started: Instant::now(),
        meta: None,
    };
    let first = rounds::send_round(&client, CallTool::METHOD, &params, &options).await?;
    let id = first.id().clone();
    let handle = first.cancel_handle();
    let cancel = Arc::new(Cancel::default());
    cancel.cancel_on(handle.clone());
    let rounds_cancel = cancel.clone();
    // The rounds run as a task of their own, so progress reaches the caller as it comes (the
    // engine hands reports over while a request's future is polled) even before the call is
    // awaited; dropping the call aborts the task, which cancels the running round.
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
        serde_json::from_value::<CallToolResult>(result).map_err(|e| ClientError::InvalidResponse {
            method: CallTool::METHOD.to_owned(),
            reason: e.to_string(),
        })
    });
    Ok(ToolCall {
        id,
        cancel: handle,
        state: CallState::Rounds { task, cancel },
    })
}

impl IntoFuture for CallToolBuilder {
    type Output = Result<CallToolResult, ClientError>;
    type IntoFuture = BoxFuture<'static, Result<CallToolResult, ClientError>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move { self.send().await?.await })
    }
}

/// Serialises tool arguments: `null` (from `()` or `None`) means none; otherwise a JSON object.
fn tool_arguments(arguments: &impl Serialize) -> Result<Option<JsonObject>, SessionError> {
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
