//! Tasks, the caller's side: a tool call that runs as a task ([`TaskHandle`]), in both eras.
//!
//! [`CallToolBuilder::as_task`](crate::CallToolBuilder::as_task) asks for one: on the
//! stateless revision (2026-07-28) by declaring the tasks extension
//! (`io.modelcontextprotocol/tasks`) in that request's capabilities, on a session
//! (2025-11-25) with `params.task` where the server says it runs tool calls as tasks. The
//! server decides: the answer is a task, or the result itself ([`TaskStart`]).
//!
//! A handle is only the task's id and the client: [`Client::task`] rebuilds one from an id on
//! any connection, so a program that restarts picks its tasks up again. Awaiting a task polls
//! `tasks/get` at the interval the server suggests (or, on a session, waits on `tasks/result`);
//! watching one hears its changes pushed through `subscriptions/listen` on the stateless
//! revision, and polls on a session. On the stateless revision the
//! questions a task asks (`input_required`) are answered with the client's handlers, as in a
//! call, and sent with `tasks/update`; on a session the server asks them as requests.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};
use tidewire_core::schema::{
    CallToolResult, CancelTask, GetTask, GetTaskPayload, JsonObject, ServerNotification,
    SubscriptionFilter, Task, TaskDetails, TaskIdParams, TaskState, TaskStatus, result_type,
};
use tidewire_core::session::{RequestSettings, SessionError};

use crate::client::Client;
use crate::error::ClientError;
use crate::listen::Listen;
use crate::rounds::{self, Options};

/// How often to poll a task whose server suggests no interval.
const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// The least time between two polls, whatever the server suggests.
const MIN_POLL: Duration = Duration::from_millis(20);

/// What asking for a task came to: the server ran the call as a task, or answered it at once.
#[derive(Debug)]
pub enum TaskStart {
    /// A task: follow it with the handle.
    Task(TaskHandle),
    /// The server answered the call directly (the tool does not run as a task, or the server
    /// chose not to).
    Done(CallToolResult),
}

impl TaskStart {
    /// The task, or an error when the server answered directly: for a caller that wants a task
    /// or nothing.
    ///
    /// # Errors
    /// [`ClientError::InvalidResponse`] when there is no task.
    pub fn task(self) -> Result<TaskHandle, ClientError> {
        match self {
            Self::Task(handle) => Ok(handle),
            Self::Done(_) => Err(ClientError::InvalidResponse {
                method: "tools/call".to_owned(),
                reason: "the server answered the call directly, not with a task".to_owned(),
            }),
        }
    }

    /// The call's result either way: at once, or once the task has completed.
    ///
    /// # Errors
    /// As [`TaskHandle::result`].
    pub async fn result(self) -> Result<CallToolResult, ClientError> {
        match self {
            Self::Task(handle) => handle.result().await,
            Self::Done(result) => Ok(result),
        }
    }
}

/// A task on the server: its id, and the client that reaches it. Cheap to clone; dropping it
/// leaves the task running.
#[derive(Debug, Clone)]
pub struct TaskHandle {
    client: Client,
    id: String,
}

impl Client {
    /// The task `id` (from an earlier [`TaskHandle::id`], on this connection or another), to
    /// watch it, await its result or cancel it.
    pub fn task(&self, id: impl Into<String>) -> TaskHandle {
        TaskHandle {
            client: self.clone(),
            id: id.into(),
        }
    }
}

impl TaskHandle {
    /// The task's id, to pick it up again later ([`Client::task`]).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The task as the server has it now (one `tasks/get`).
    ///
    /// # Errors
    /// As any request: `-32602` (a [`remote`](ClientError::remote) error) for a task the
    /// server does not know, or no longer keeps.
    pub async fn state(&self) -> Result<TaskState, ClientError> {
        Ok(self.details().await?.task)
    }

    /// The task as it changes (its state, and its last progress report with
    /// [`TaskDetails::progress`] from a tidewire server), until it has ended (the last item is
    /// the ended task).
    ///
    /// On the stateless revision the changes are pushed: the watch opens a
    /// `subscriptions/listen` naming the task and reads `notifications/tasks`, with a
    /// `tasks/get` now and then in case one was missed (every ten poll intervals, at least
    /// 5 s), and polls instead if the server will not listen. On a session it polls `tasks/get`
    /// at the interval the server suggests. Questions the task asks are answered with the
    /// client's handlers as they come (on a session the server asks them as requests).
    pub fn watch(&self) -> impl Stream<Item = Result<TaskDetails, ClientError>> + Send + 'static {
        let watch = Watch {
            handle: self.clone(),
            last: None,
            pushed: None,
            opened: false,
        };
        futures::stream::unfold(Some(watch), |watch| async move {
            let mut watch = watch?;
            match watch.next().await {
                Ok(details) if details.task.status.is_terminal() => Some((Ok(details), None)),
                Ok(details) => Some((Ok(details), Some(watch))),
                Err(error) => Some((Err(error), None)),
            }
        })
    }

    /// Waits for the task to end and returns the call's result (a tool error included, as
    /// `is_error()`).
    ///
    /// # Errors
    /// The error the task failed with (a [`remote`](ClientError::remote) error);
    /// `SessionError::Cancelled` when it was cancelled; as any request.
    pub async fn result(&self) -> Result<CallToolResult, ClientError> {
        if !self.modern() {
            return self.legacy_result().await;
        }
        loop {
            let details = self.step().await?;
            match details.task.status {
                TaskStatus::Completed => {
                    return details.result.ok_or_else(|| ClientError::InvalidResponse {
                        method: "tasks/get".to_owned(),
                        reason: "a completed task without its result".to_owned(),
                    });
                }
                TaskStatus::Failed => return Err(failed(details.error)),
                TaskStatus::Cancelled => return Err(cancelled()),
                _ => tokio::time::sleep(poll_interval(&details.task)).await,
            }
        }
    }

    /// Asks the server to cancel the task. It is `cancelled` from then on, unless it had
    /// already ended (then nothing changes, and this is not an error).
    ///
    /// # Errors
    /// As any request.
    pub async fn cancel(&self) -> Result<(), ClientError> {
        if self.modern() {
            self.extension_request("tasks/cancel", json!({ "taskId": self.id }))
                .await?;
            return Ok(());
        }
        match self
            .client
            .request::<CancelTask>(TaskIdParams::new(self.id.clone()))
            .await
        {
            Ok(_) => Ok(()),
            // 2025-11-25 answers -32602 for a task that has ended: nothing to cancel.
            Err(SessionError::Remote(error)) if error.code == -32602 => {
                let ended = self.state().await.is_ok_and(|s| s.status.is_terminal());
                if ended {
                    Ok(())
                } else {
                    Err(ClientError::Session(SessionError::Remote(error)))
                }
            }
            Err(error) => Err(error.into()),
        }
    }

    fn modern(&self) -> bool {
        self.client.inner.envelope.is_some()
    }

    /// One look at the task; on the stateless revision, answers its questions if it asks.
    async fn step(&self) -> Result<TaskDetails, ClientError> {
        let details = self.details().await?;
        if self.modern()
            && details.task.status == TaskStatus::InputRequired
            && let Some(questions) = &details.input_requests
            && !questions.is_empty()
        {
            let asked = json!({ "inputRequests": questions });
            let answers = rounds::answer_all(&self.client, &asked).await?;
            self.extension_request(
                "tasks/update",
                json!({ "taskId": self.id, "inputResponses": answers }),
            )
            .await?;
        }
        Ok(details)
    }

    async fn details(&self) -> Result<TaskDetails, ClientError> {
        if self.modern() {
            let value = self
                .extension_request("tasks/get", json!({ "taskId": self.id }))
                .await?;
            return decode("tasks/get", value);
        }
        let got = self
            .client
            .request::<GetTask>(TaskIdParams::new(self.id.clone()))
            .await?;
        Ok(TaskDetails {
            task: from_legacy(got.task),
            result_type: result_type::COMPLETE.to_owned(),
            input_requests: None,
            result: None,
            error: None,
            meta: got.meta,
        })
    }

    /// `tasks/result` (2025-11-25): the server answers once the task has ended.
    async fn legacy_result(&self) -> Result<CallToolResult, ClientError> {
        let payload = self
            .client
            .request::<GetTaskPayload>(TaskIdParams::new(self.id.clone()))
            .no_timeout()
            .await?;
        payload.decode().map_err(|e| ClientError::InvalidResponse {
            method: "tasks/result".to_owned(),
            reason: e.to_string(),
        })
    }

    /// A request of the tasks extension: its capabilities declare the extension.
    async fn extension_request(&self, method: &str, params: Value) -> Result<Value, ClientError> {
        let request = self
            .client
            .request_raw(method, params)
            .merge_meta(self.client.declaring_tasks());
        Ok(request.await?)
    }
}

/// A [`TaskHandle::watch`] in progress.
struct Watch {
    handle: TaskHandle,
    /// The state last handed out.
    last: Option<TaskState>,
    /// The listen that pushes the task's changes (stateless revision), while it lasts.
    pushed: Option<Listen>,
    opened: bool,
}

/// Without a pushed change for this many poll intervals (and at least [`MIN_CHECK`]), a
/// watch looks itself, in case a notification was lost.
const CHECK_EVERY: u32 = 10;
const MIN_CHECK: Duration = Duration::from_secs(5);

impl Watch {
    /// The task's next state that differs from the last one handed out.
    async fn next(&mut self) -> Result<TaskDetails, ClientError> {
        if !self.opened {
            self.opened = true;
            self.pushed = open(&self.handle).await;
        }
        loop {
            let details = match &self.last {
                None => self.handle.step().await?,
                Some(last) => {
                    let interval = poll_interval(last);
                    self.wait(interval).await?
                }
            };
            if details.task.status.is_terminal() || self.last.as_ref() != Some(&details.task) {
                self.last = Some(details.task.clone());
                return Ok(details);
            }
        }
    }

    /// The next look at the task: pushed, or polled after `interval`.
    async fn wait(&mut self, interval: Duration) -> Result<TaskDetails, ClientError> {
        if let Some(listen) = &mut self.pushed {
            let check = (interval * CHECK_EVERY).max(MIN_CHECK);
            match tokio::time::timeout(check, pushed(listen, &self.handle.id)).await {
                // A question needs answering: `step` looks again and answers it.
                Ok(Pushed::Task(details)) if details.task.status != TaskStatus::InputRequired => {
                    return Ok(*details);
                }
                Ok(Pushed::Task(_) | Pushed::Missed) | Err(_) => return self.handle.step().await,
                Ok(Pushed::Ended) => {
                    tracing::debug!("the task's listen ended: polling");
                    self.pushed = None;
                }
            }
        }
        tokio::time::sleep(interval).await;
        self.handle.step().await
    }
}

/// A listen for the task's changes, on the stateless revision, if the server holds one. It is
/// opened before the first look, so no change between the two is missed.
async fn open(handle: &TaskHandle) -> Option<Listen> {
    if !handle.modern() {
        return None;
    }
    let id = handle.id.clone();
    let filter = SubscriptionFilter {
        task_ids: Some(vec![id.clone()]),
        ..SubscriptionFilter::default()
    };
    match handle.client.listen(filter).await {
        Ok(listen)
            if listen
                .honoured()
                .task_ids
                .as_ref()
                .is_some_and(|ids| ids.contains(&id)) =>
        {
            Some(listen)
        }
        Ok(_) => {
            tracing::debug!("the server does not push this task's changes: polling");
            None
        }
        Err(error) => {
            tracing::debug!(%error, "no listen for the task's changes: polling");
            None
        }
    }
}

/// What a task's listen brought.
enum Pushed {
    /// The task as `tasks/get` would show it.
    Task(Box<TaskDetails>),
    /// Notifications were lost (the stream lagged): look.
    Missed,
    /// The listen is over.
    Ended,
}

/// The next `notifications/tasks` for the task `id` on `listen`.
async fn pushed(listen: &mut Listen, id: &str) -> Pushed {
    while let Some(item) = listen.next().await {
        match item {
            Ok(ServerNotification::Other { method, params }) if method == TASKS_NOTIFICATION => {
                match params.map(serde_json::from_value::<TaskDetails>) {
                    Some(Ok(details)) if details.task.task_id == id => {
                        return Pushed::Task(Box::new(details));
                    }
                    Some(Ok(_)) => {}
                    Some(Err(error)) => {
                        tracing::debug!(%error, "a notifications/tasks that does not decode");
                        return Pushed::Missed;
                    }
                    None => return Pushed::Missed,
                }
            }
            Ok(_) => {}
            Err(_lagged) => return Pushed::Missed,
        }
    }
    Pushed::Ended
}

/// The tasks extension's push of a task's state, over `subscriptions/listen`.
const TASKS_NOTIFICATION: &str = "notifications/tasks";

/// Starts the call `settings` describe as a task where the server allows it.
pub(crate) async fn start(
    client: Client,
    settings: RequestSettings,
) -> Result<TaskStart, ClientError> {
    let mut params = settings
        .params?
        .unwrap_or_else(|| Value::Object(JsonObject::new()));
    let value = if client.inner.envelope.is_some() {
        let options = Options {
            timeout: settings.timeout,
            reset_max: settings.reset_max,
            progress: settings
                .progress
                .map(|callback| std::sync::Arc::new(std::sync::Mutex::new(callback))),
            started: std::time::Instant::now(),
            meta: Some(client.declaring_tasks()),
        };
        rounds::run(&client, "tools/call", params, options).await?
    } else {
        let offered = client
            .server_capabilities()
            .tasks
            .and_then(|t| t.requests)
            .and_then(|r| r.tools)
            .and_then(|t| t.call)
            .is_some();
        if offered && let Value::Object(map) = &mut params {
            map.insert("task".to_owned(), json!({}));
        }
        let mut request = client.request_raw("tools/call", params);
        match settings.timeout {
            Some(Some(timeout)) => request = request.timeout(timeout),
            Some(None) => request = request.no_timeout(),
            None => {}
        }
        request.await?
    };
    if value.get("resultType").and_then(Value::as_str)
        == Some(tidewire_core::schema::RESULT_TYPE_TASK)
        || value.get("task").is_some_and(Value::is_object)
    {
        let id = value
            .get("taskId")
            .or_else(|| value.get("task").and_then(|t| t.get("taskId")))
            .and_then(Value::as_str)
            .ok_or_else(|| ClientError::InvalidResponse {
                method: "tools/call".to_owned(),
                reason: "a task without a taskId".to_owned(),
            })?;
        return Ok(TaskStart::Task(client.task(id)));
    }
    decode("tools/call", value).map(TaskStart::Done)
}

fn poll_interval(state: &TaskState) -> Duration {
    state
        .poll_interval_ms
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .max(MIN_POLL)
}

fn from_legacy(task: Task) -> TaskState {
    TaskState {
        task_id: task.task_id,
        status: task.status,
        status_message: task.status_message,
        created_at: task.created_at,
        last_updated_at: task.last_updated_at,
        ttl_ms: task.ttl,
        poll_interval_ms: task.poll_interval,
    }
}

fn failed(error: Option<tidewire_core::jsonrpc::ErrorObject>) -> ClientError {
    match error {
        Some(error) => ClientError::Session(SessionError::Remote(error)),
        None => ClientError::InvalidResponse {
            method: "tasks/get".to_owned(),
            reason: "a failed task without its error".to_owned(),
        },
    }
}

fn cancelled() -> ClientError {
    ClientError::Session(SessionError::Cancelled("the task was cancelled".to_owned()))
}

fn decode<T: serde::de::DeserializeOwned>(method: &str, value: Value) -> Result<T, ClientError> {
    serde_json::from_value(value).map_err(|e| ClientError::InvalidResponse {
        method: method.to_owned(),
        reason: e.to_string(),
    })
}
