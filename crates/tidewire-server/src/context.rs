//! What a tool, resource or prompt handler gets: the request, the connection and the server.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::progress::ProgressError;
use tidewire_core::schema::{
    ClientCapabilities, CreateMessage, CreateMessageParams, CreateMessageResult, Elicit,
    ElicitParams, ElicitResult, EmptyParams, Implementation, InputRequest, InputRequiredResult,
    JsonObject, ListRoots, ListRootsResult, LoggingLevel, LoggingMessageNotification,
    LoggingMessageParams, Meta, meta_keys,
};
use tidewire_core::session::{
    CancelPolicy, Cancelled, OnCancel, Peer, ProgressTracker, RequestBuilder, RequestContext,
    SessionError,
};
use tokio_util::sync::WaitForCancellationFuture;

use tidewire_core::stateless::RequestMeta;

use crate::connection::Connection;
use crate::rounds::Rounds;
use crate::state::ServerState;
use crate::tasks::{Live, TaskCall, TaskRefused};

/// The state of a server whose handlers take a [`Context`].
pub(crate) type ServerInner = ServerState<Context>;

/// What a stateless request's handler knows of it: its `_meta`, and its rounds of questions
/// when it may ask any.
#[derive(Debug)]
pub(crate) struct StatelessCall {
    pub(crate) meta: RequestMeta,
    pub(crate) rounds: Option<Rounds>,
}

/// The context of one request to the server, handed to tool, resource, prompt and completion
/// handlers.
///
/// It reports progress, notices cancellation, logs to the client, and sends requests back to the
/// client (sampling, elicitation, roots) — all related to this request, so on Streamable HTTP they
/// travel on its stream. Cheap to clone.
///
/// The same calls work in both eras. On a session (2025-11-25 and older) a question to the
/// client is a request to it; on a stateless request (2026-07-28) it makes the request answer
/// `input_required`, and the handler runs again from the start when the client retries with the
/// answers, getting each answered question's answer at once (see [`elicit`](Self::elicit)).
#[derive(Clone, Debug)]
pub struct Context {
    request: RequestContext,
    server: Arc<ServerInner>,
    connection: Arc<Connection>,
    stateless: Option<Arc<StatelessCall>>,
    /// Set when the call may run as a task (its tool supports tasks).
    task: Option<Arc<TaskCall>>,
}

impl Context {
    /// The context of a session-era request.
    pub(crate) fn new(
        request: RequestContext,
        server: Arc<ServerInner>,
        connection: Arc<Connection>,
    ) -> Self {
        Self {
            request,
            server,
            connection,
            stateless: None,
            task: None,
        }
    }

    /// The context of a stateless request.
    pub(crate) fn stateless(
        request: RequestContext,
        server: Arc<ServerInner>,
        connection: Arc<Connection>,
        call: Arc<StatelessCall>,
    ) -> Self {
        Self {
            request,
            server,
            connection,
            stateless: Some(call),
            task: None,
        }
    }

    /// This context, for a call that may run as a task.
    pub(crate) fn with_task(mut self, task: Arc<TaskCall>) -> Self {
        self.task = Some(task);
        self
    }

    /// The task this handler runs as, once it does.
    fn running_task(&self) -> Option<&Arc<Live>> {
        self.task.as_ref().and_then(|task| task.running())
    }

    /// The id of the task this handler runs as (see [`continue_as_task`](Self::continue_as_task));
    /// `None` while it answers its call directly.
    pub fn task_id(&self) -> Option<&str> {
        self.running_task().map(|live| live.id.as_str())
    }

    /// Answers the call with a task now and goes on as that task: what the handler returns
    /// becomes the task's result, its progress the task's status message, its questions the
    /// task's `input_required`, and `tasks/cancel` its cancellation. Questions asked before
    /// this are asked in the call itself (`input_required` rounds on the stateless wire), so a
    /// tool may gather what it needs first and then go on for as long as it takes.
    ///
    /// A tool with task support `optional` or `required` runs as a task from its first line
    /// when the client allows it; one named in `ServerBuilder::deferred_task` starts its task
    /// here. Once a task, a second call does nothing.
    ///
    /// # Errors
    /// [`TaskRefused`] when this call cannot become a task: its tool does not support tasks,
    /// or the client did not declare the tasks extension (2026-07-28) or ask for a task
    /// (2025-11-25). Returned from the handler with `?`, it answers `-32021` naming the
    /// extension (or `-32601` on the session era); a tool that can also work directly may go
    /// on instead.
    pub async fn continue_as_task(&self) -> Result<(), TaskRefused> {
        let Some(task) = &self.task else {
            return Err(TaskRefused::unsupported());
        };
        task.start().await?;
        // Let the dispatcher answer the call before this handler goes on.
        tokio::task::yield_now().await;
        Ok(())
    }

    /// The state of the server this request reached (`Context::server`, in the server module,
    /// makes it a `Server`).
    pub(crate) fn shared(&self) -> &Arc<ServerInner> {
        &self.server
    }

    /// True for a stateless (2026-07-28) request, false on a session.
    pub fn is_stateless(&self) -> bool {
        self.stateless.is_some()
    }

    /// The W3C trace context the request carries in its `_meta` (`traceparent`, `tracestate`,
    /// `baggage`), for joining the caller's trace. Empty when it carries none.
    pub fn trace_context(&self) -> Vec<(&'static str, String)> {
        let Some(meta) = self.request.meta() else {
            return Vec::new();
        };
        meta_keys::TRACE_CONTEXT
            .iter()
            .filter_map(|key| {
                meta.get(*key)
                    .and_then(Value::as_str)
                    .map(|value| (*key, value.to_owned()))
            })
            .collect()
    }

    /// Who the request acts for, as an authentication layer in front of the transport
    /// established it (the verified token's subject with `tidewire_auth::BearerLayer`); `None`
    /// when nothing authenticated it.
    pub fn principal(&self) -> Option<&str> {
        self.request()
            .extensions()
            .get::<tidewire_core::transport::Principal>()
            .map(|p| p.subject.as_str())
    }

    /// Who the request acts for and what it was granted (its token's scopes), as the
    /// authentication layer established it; `None` when nothing authenticated it. A handler
    /// checks a scope of its own with [`Principal::has_scope`].
    ///
    /// [`Principal::has_scope`]: tidewire_core::transport::Principal::has_scope
    pub fn auth(&self) -> Option<&tidewire_core::transport::Principal> {
        self.request()
            .extensions()
            .get::<tidewire_core::transport::Principal>()
    }

    /// The engine-level request context (id, `_meta`, transport extensions, raw peer).
    pub fn request(&self) -> &RequestContext {
        &self.request
    }

    /// The routed handle to the client: `None` for a stateless request served without a
    /// session (what it sends goes on its response's stream: [`log`](Self::log),
    /// [`report_progress`](Self::report_progress)).
    pub fn peer(&self) -> Option<&Peer> {
        self.request.peer()
    }

    /// The revision of this request: the one a stateless request names, or the one negotiated
    /// by `initialize` on a session.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        match &self.stateless {
            Some(call) => Some(call.meta.version),
            None => self.request.peer().and_then(Peer::protocol_version),
        }
    }

    /// The capabilities the client declared: in this request's `_meta` (stateless), or in
    /// `initialize` (session).
    pub fn client_capabilities(&self) -> Option<ClientCapabilities> {
        match &self.stateless {
            Some(call) => Some(call.meta.capabilities.clone()),
            None => self.connection.client_capabilities(),
        }
    }

    /// Who the client says it is.
    pub fn client_info(&self) -> Option<Implementation> {
        match &self.stateless {
            Some(call) => call.meta.client_info.clone(),
            None => self.connection.client_info(),
        }
    }

    /// Ends the stream carrying this request without ending the request, where the transport
    /// supports it (Streamable HTTP, 2025-11-25): the client resumes and gets the rest. See
    /// [`RequestContext::close_stream`].
    pub fn close_stream(&self) -> bool {
        self.request.close_stream()
    }

    /// Reports progress; inert when the client asked for none. See
    /// [`RequestContext::report_progress`].
    ///
    /// # Errors
    /// [`ProgressError::NotIncreasing`] or [`ProgressError::NotFinite`] for a bad value;
    /// [`ProgressError::Cancelled`] once the request is cancelled (nothing more is sent for it:
    /// [`ProgressError::is_cancelled`] tells a loop to stop); [`ProgressError::Closed`] when the
    /// connection is gone.
    pub async fn report_progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> Result<(), ProgressError> {
        // An event of the request's span (feature `otel`), as the report leaves.
        #[cfg(feature = "otel")]
        tracing::info!(
            target: "tidewire_otel",
            progress,
            total,
            "notifications/progress"
        );
        if let (Some(task), Some(live)) = (&self.task, self.running_task()) {
            return task
                .tasks
                .progress(live, progress, total, message)
                .await
                .map_err(|e| {
                    if e.is_cancelled() {
                        ProgressError::Cancelled
                    } else {
                        ProgressError::Closed
                    }
                });
        }
        self.request.report_progress(progress, total, message).await
    }

    /// Reports progress, written as a sentence: `ctx.progress(3).of(10).message("page 3").await`
    /// (the total and the message are optional). The same as
    /// [`report_progress`](Self::report_progress).
    ///
    /// # Errors
    /// As [`report_progress`](Self::report_progress), when awaited.
    pub fn progress(&self, progress: impl Into<f64>) -> ReportProgress<'_> {
        ReportProgress {
            ctx: self,
            progress: progress.into(),
            total: None,
            message: None,
        }
    }

    /// A tracker that accumulates progress deltas.
    pub fn progress_tracker(&self, total: Option<f64>) -> ProgressTracker {
        self.request.progress_tracker(total)
    }

    /// What a cancellation does to this handler: aborted at its next `.await`
    /// ([`CancelPolicy::Abort`], the default) or told through [`cancelled`](Self::cancelled)
    /// ([`CancelPolicy::Cooperative`]). Set by `ServerBuilder::cancel_policy` and
    /// `ServerBuilder::cancel_policy_for`.
    pub fn cancel_policy(&self) -> CancelPolicy {
        match (&self.task, self.running_task()) {
            (Some(task), Some(_)) => task.policy,
            _ => self.request.cancel_policy(),
        }
    }

    /// Runs `cleanup` if this request is cancelled, under either policy: keep the guard
    /// (`let _cleanup = ctx.on_cancel(..)`) for as long as the work it undoes. See
    /// [`RequestContext::on_cancel`].
    pub fn on_cancel(&self, cleanup: impl FnOnce() + Send + 'static) -> OnCancel {
        match self.running_task() {
            Some(live) => OnCancel::new(live.cancel.clone(), cleanup),
            None => self.request.on_cancel(cleanup),
        }
    }

    /// Resolves when the client cancels this request.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        match self.running_task() {
            Some(live) => live.cancel.cancelled(),
            None => self.request.cancelled(),
        }
    }

    /// True once the client has cancelled this request.
    pub fn is_cancelled(&self) -> bool {
        match self.running_task() {
            Some(live) => live.cancel.is_cancelled(),
            None => self.request.is_cancelled(),
        }
    }

    /// `Err(Cancelled)` once the client has cancelled this request, for a cooperative tool
    /// that stops between two steps: `ctx.check_cancelled()?` (it converts into a
    /// [`ToolError`](crate::ToolError); nothing is sent for a cancelled request either way).
    ///
    /// ```
    /// use tidewire_server::{CancelPolicy, Context, NoArgs, Server, ToolError};
    /// use tidewire_server::schema::{CallToolResult, Implementation};
    ///
    /// let server = Server::builder(Implementation::new("crawler", "1.0"))
    ///     .tool("crawl", "Crawls ten pages", |_: NoArgs, ctx: Context| async move {
    ///         for page in 1..=10 {
    ///             ctx.check_cancelled()?; // stops between two pages, never in one
    ///             // ... fetch `page` ...
    ///             let _ = ctx.progress(page).of(10).await;
    ///         }
    ///         Ok::<_, ToolError>(CallToolResult::text("done"))
    ///     })
    ///     .cancel_policy_for("crawl", CancelPolicy::Cooperative)
    ///     .build();
    /// # drop(server);
    /// ```
    ///
    /// # Errors
    /// [`Cancelled`](crate::Cancelled) once the request is cancelled.
    pub fn check_cancelled(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }

    /// Sends `notifications/message` to the client if `level` passes the level it set: with
    /// `logging/setLevel` on a session (by default `info` and above pass), or in this request's
    /// `_meta` `logLevel` on a stateless request (none set: nothing is sent).
    ///
    /// # Errors
    /// When the request is cancelled or the connection is gone.
    pub async fn log(
        &self,
        level: LoggingLevel,
        data: impl Into<Value>,
    ) -> Result<(), SessionError> {
        self.log_as(level, None, data).await
    }

    /// Like [`log`](Self::log), naming the logger.
    ///
    /// # Errors
    /// When the request is cancelled or the connection is gone.
    pub async fn log_as(
        &self,
        level: LoggingLevel,
        logger: Option<&str>,
        data: impl Into<Value>,
    ) -> Result<(), SessionError> {
        if self.running_task().is_some() {
            // Its call has been answered: a task's logs have nowhere to go.
            return Ok(());
        }
        let passes = match &self.stateless {
            Some(call) => call
                .meta
                .log_level
                .is_some_and(|threshold| level >= threshold),
            None => self.connection.should_log(level),
        };
        if !passes {
            return Ok(());
        }
        let mut params = LoggingMessageParams::new(level, data);
        if let Some(logger) = logger {
            params = params.with_logger(logger);
        }
        self.request
            .notify::<LoggingMessageNotification>(params)
            .await
    }

    /// Asks the client's model for a completion (`sampling/createMessage`), related to this
    /// request. Use [`create_message_request`](Self::create_message_request) to set a timeout or
    /// watch the client's progress (sessions only).
    ///
    /// On a stateless request the question travels in an `input_required` answer (see
    /// [`elicit`](Self::elicit)).
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare `sampling`
    /// ([`SessionError::MissingCapability`], answered `-32021`, on a stateless request);
    /// otherwise as any request.
    pub async fn create_message(
        &self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, SessionError> {
        self.ask(None, InputRequest::CreateMessage(Box::new(params)))
            .await
    }

    /// The `sampling/createMessage` request as a builder (timeout, progress, cancel); await it
    /// for the result.
    ///
    /// # Errors
    /// Awaiting it fails with [`SessionError::NotSupported`] when the client did not declare
    /// `sampling`, and on a stateless request always (use
    /// [`create_message`](Self::create_message)); nothing is sent then.
    pub fn create_message_request(
        &self,
        params: CreateMessageParams,
    ) -> RequestBuilder<CreateMessageResult> {
        let builder = self.request.request::<CreateMessage>(params);
        let checked = self
            .no_builder_when_stateless("create_message")
            .and_then(|()| self.require(|c| c.sampling.is_some(), "sampling"));
        match checked {
            Ok(()) => builder,
            Err(error) => builder.refuse(error),
        }
    }

    /// Asks the user for input through the client (`elicitation/create`).
    ///
    /// On a session this is a request to the client. On a stateless request (2026-07-28) the
    /// question makes the request answer `input_required`; when the client retries with the
    /// answer, the handler runs again from the start and this call returns the answer at once.
    /// So on the stateless wire a handler runs once per round: what it does before its last
    /// answered question is done again in each round (keep it free of side effects, or make
    /// them idempotent). Questions asked together (`futures::join!`) travel in one round. Only
    /// `tools/call`, `resources/read` and `prompts/get` may ask.
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare elicitation in the mode
    /// asked for ([`SessionError::MissingCapability`] on a stateless request), or the revision
    /// predates elicitation.
    pub async fn elicit(&self, params: ElicitParams) -> Result<ElicitResult, SessionError> {
        self.ask(None, InputRequest::Elicit(params)).await
    }

    /// The `elicitation/create` request as a builder (timeout, progress, cancel).
    ///
    /// # Errors
    /// Awaiting it fails as [`elicit`](Self::elicit) would, before sending anything; on a
    /// stateless request, always (there is no request to build: use [`elicit`](Self::elicit)).
    pub fn elicit_request(&self, params: ElicitParams) -> RequestBuilder<ElicitResult> {
        let url = matches!(params, ElicitParams::Url(_));
        let builder = self.request.request::<Elicit>(params);
        match self.check_elicit(url) {
            Ok(()) => builder,
            Err(error) => builder.refuse(error),
        }
    }

    fn check_elicit(&self, url: bool) -> Result<(), SessionError> {
        self.no_builder_when_stateless("elicit")?;
        if self
            .protocol_version()
            .is_some_and(|v| !v.has_elicitation())
        {
            return Err(SessionError::NotSupported(
                "elicitation (the negotiated revision predates it)".to_owned(),
            ));
        }
        if url {
            self.require(
                |c| c.elicitation.as_ref().is_some_and(|e| e.supports_url()),
                "URL-mode elicitation",
            )
        } else {
            self.require(
                |c| c.elicitation.as_ref().is_some_and(|e| e.supports_form()),
                "form-mode elicitation",
            )
        }
    }

    /// Asks the client for its roots (`roots/list`).
    ///
    /// # Errors
    /// [`SessionError::NotSupported`] when the client did not declare `roots`.
    pub async fn list_roots(&self) -> Result<ListRootsResult, SessionError> {
        self.ask(None, InputRequest::ListRoots).await
    }

    /// Names the next question: on a stateless request its answer travels under `key` in
    /// `inputRequests` / `inputResponses` (by default questions are numbered:
    /// `elicitation-1`, `sampling-2`, …). On a session the key is not used.
    pub fn with_input_key<'a>(&'a self, key: &'a str) -> KeyedQuestion<'a> {
        KeyedQuestion { ctx: self, key }
    }

    /// Answers this stateless request `input_required` with `result` as it stands: the low-level
    /// form of [`elicit`](Self::elicit) and friends, for a handler that keeps its own state.
    /// The `requestState` it sets comes back, unsealed, from
    /// [`request_state`](Self::request_state) on the retry (it travels sealed, so the client
    /// cannot alter it); the client's answers are in [`input_responses`](Self::input_responses).
    ///
    /// Where it applies, it never returns: the handler ends here. On a session, or for a method
    /// other than `tools/call`, `resources/read` and `prompts/get`, there is no such answer, and
    /// it returns at once the error to fail with:
    ///
    /// ```no_run
    /// # use tidewire_core::schema::{CallToolResult, InputRequiredResult};
    /// # async fn demo(ctx: tidewire_server::Context, asked: InputRequiredResult) -> Result<CallToolResult, tidewire_server::ToolError> {
    /// if ctx.request_state().is_none() {
    ///     return Err(ctx.input_required(asked).await.into());
    /// }
    /// # Ok(CallToolResult::text("done")) }
    /// ```
    pub async fn input_required(&self, result: InputRequiredResult) -> ErrorObject {
        match self.rounds() {
            Some(rounds) => {
                rounds.own_result(result);
                std::future::pending().await
            }
            None => ErrorObject::internal(
                "the handler answered input_required where it cannot apply (on a session, or \
                 for a method other than tools/call, resources/read and prompts/get)",
            ),
        }
    }

    /// The `requestState` this handler set in its last
    /// [`input_required`](Self::input_required) answer, on the client's retry.
    pub fn request_state(&self) -> Option<&str> {
        self.rounds().and_then(|r| r.user_state())
    }

    /// The client's `inputResponses` on a retry, as sent (the high-level calls read them for
    /// you).
    pub fn input_responses(&self) -> Option<&JsonObject> {
        self.rounds().and_then(|r| r.responses())
    }

    fn rounds(&self) -> Option<&Rounds> {
        self.stateless.as_ref().and_then(|c| c.rounds.as_ref())
    }

    fn no_builder_when_stateless(&self, instead: &str) -> Result<(), SessionError> {
        if self.stateless.is_some() {
            return Err(SessionError::NotSupported(format!(
                "a request builder: a stateless (2026-07-28) request cannot send requests to \
                 the client; use Context::{instead}"
            )));
        }
        Ok(())
    }

    /// Asks the client `question`, in the era's way.
    async fn ask<T: DeserializeOwned>(
        &self,
        key: Option<&str>,
        question: InputRequest,
    ) -> Result<T, SessionError> {
        let Some(call) = &self.stateless else {
            if let Some(live) = self.running_task() {
                return self.ask_session_task(live, question).await;
            }
            return self.ask_session(question).await;
        };
        let caps = &call.meta.capabilities;
        let (has, what, required) = match &question {
            InputRequest::CreateMessage(_) => (
                caps.sampling.is_some(),
                "sampling",
                serde_json::json!({ "sampling": {} }),
            ),
            InputRequest::Elicit(ElicitParams::Url(_)) => (
                caps.elicitation.as_ref().is_some_and(|e| e.supports_url()),
                "URL-mode elicitation",
                serde_json::json!({ "elicitation": { "url": {} } }),
            ),
            InputRequest::Elicit(_) => (
                caps.elicitation.as_ref().is_some_and(|e| e.supports_form()),
                "form-mode elicitation",
                serde_json::json!({ "elicitation": {} }),
            ),
            InputRequest::ListRoots => (
                caps.roots.is_some(),
                "roots",
                serde_json::json!({ "roots": {} }),
            ),
        };
        if !has {
            return Err(SessionError::MissingCapability {
                what: what.to_owned(),
                required,
            });
        }
        if let (Some(task), Some(live)) = (&self.task, self.running_task()) {
            let answer = task.tasks.ask(live, key, question).await?;
            return serde_json::from_value(answer).map_err(|e| SessionError::InvalidResult {
                method: "tasks/update".to_owned(),
                reason: e.to_string(),
            });
        }
        let Some(rounds) = &call.rounds else {
            return Err(SessionError::NotSupported(format!(
                "{what}: on the 2026-07-28 wire only tools/call, resources/read and prompts/get \
                 may ask the client for input"
            )));
        };
        match rounds.answer::<T>(key, question) {
            Some(answer) => Ok(answer),
            // Asked: this run ends here, and the request answers `input_required`.
            None => std::future::pending().await,
        }
    }

    /// The session-era form of a task's question: a request to the client on the connection,
    /// tied to the task (its call's stream is over).
    async fn ask_session_task<T: DeserializeOwned>(
        &self,
        live: &Live,
        question: InputRequest,
    ) -> Result<T, SessionError> {
        let peer = self
            .connection
            .peer()
            .ok_or_else(|| SessionError::Closed("the connection is gone".to_owned()))?;
        let (method, params) = match question {
            InputRequest::CreateMessage(params) => {
                ("sampling/createMessage", serde_json::to_value(params))
            }
            InputRequest::Elicit(params) => ("elicitation/create", serde_json::to_value(params)),
            InputRequest::ListRoots => ("roots/list", Ok(Value::Object(JsonObject::new()))),
        };
        let params = params.map_err(|e| SessionError::InvalidParams {
            method: method.to_owned(),
            reason: e.to_string(),
        })?;
        let mut related = Meta::new();
        related.set_related_task(live.id.clone());
        let answer = peer
            .request_raw(method, Some(params))
            .merge_meta(related.into_inner())
            .await?;
        serde_json::from_value(answer).map_err(|e| SessionError::InvalidResult {
            method: method.to_owned(),
            reason: e.to_string(),
        })
    }

    /// The session-era form of a question: a request to the client.
    async fn ask_session<T: DeserializeOwned>(
        &self,
        question: InputRequest,
    ) -> Result<T, SessionError> {
        let value: Value = match question {
            InputRequest::CreateMessage(params) => {
                serde_json::to_value(self.create_message_request(*params).await?)
            }
            InputRequest::Elicit(params) => {
                serde_json::to_value(self.elicit_request(params).await?)
            }
            InputRequest::ListRoots => {
                self.require(|c| c.roots.is_some(), "roots")?;
                serde_json::to_value(
                    self.request
                        .request::<ListRoots>(EmptyParams::new())
                        .await?,
                )
            }
        }
        .map_err(|e| SessionError::InvalidResult {
            method: "input".to_owned(),
            reason: e.to_string(),
        })?;
        serde_json::from_value(value).map_err(|e| SessionError::InvalidResult {
            method: "input".to_owned(),
            reason: e.to_string(),
        })
    }

    fn require(
        &self,
        has: impl Fn(&ClientCapabilities) -> bool,
        what: &str,
    ) -> Result<(), SessionError> {
        // What the transport cannot carry is the clearer reason, so it comes first.
        if let Some(limits) = self.request.limits()
            && !limits.peer_requests
        {
            return Err(SessionError::NotSupported(format!(
                "{what}: this transport cannot send requests to the client ({})",
                limits.reason
            )));
        }
        match self.connection.client_capabilities() {
            Some(caps) if has(&caps) => Ok(()),
            _ => Err(SessionError::NotSupported(what.to_owned())),
        }
    }
}

/// A question with a key of the handler's choosing (see [`Context::with_input_key`]).
#[derive(Debug, Clone, Copy)]
pub struct KeyedQuestion<'a> {
    ctx: &'a Context,
    key: &'a str,
}

impl KeyedQuestion<'_> {
    /// As [`Context::elicit`], under this key.
    ///
    /// # Errors
    /// As [`Context::elicit`].
    pub async fn elicit(self, params: ElicitParams) -> Result<ElicitResult, SessionError> {
        self.ctx
            .ask(Some(self.key), InputRequest::Elicit(params))
            .await
    }

    /// As [`Context::create_message`], under this key.
    ///
    /// # Errors
    /// As [`Context::create_message`].
    pub async fn create_message(
        self,
        params: CreateMessageParams,
    ) -> Result<CreateMessageResult, SessionError> {
        self.ctx
            .ask(
                Some(self.key),
                InputRequest::CreateMessage(Box::new(params)),
            )
            .await
    }

    /// As [`Context::list_roots`], under this key.
    ///
    /// # Errors
    /// As [`Context::list_roots`].
    pub async fn list_roots(self) -> Result<ListRootsResult, SessionError> {
        self.ctx.ask(Some(self.key), InputRequest::ListRoots).await
    }
}

/// One progress report being written ([`Context::progress`]); await it to send it.
#[derive(Debug)]
#[must_use = "a progress report is sent when awaited"]
pub struct ReportProgress<'a> {
    ctx: &'a Context,
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
}

impl ReportProgress<'_> {
    /// Out of `total`.
    pub fn of(mut self, total: impl Into<f64>) -> Self {
        self.total = Some(total.into());
        self
    }

    /// With a message for the user.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

impl<'a> std::future::IntoFuture for ReportProgress<'a> {
    type Output = Result<(), ProgressError>;
    type IntoFuture = futures::future::BoxFuture<'a, Result<(), ProgressError>>;

    fn into_future(self) -> Self::IntoFuture {
        // Through the context, so a handler running as a task reports to its task.
        Box::pin(
            self.ctx
                .report_progress(self.progress, self.total, self.message),
        )
    }
}
