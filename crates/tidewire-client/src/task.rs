//! Tasks, the caller's side: a tool call that runs as a task ([`TaskHandle`]), in both eras.
//!
//! [`CallToolBuilder::as_task`](crate::CallToolBuilder::as_task) asks for one: on the
//! stateless revision (2026-07-28) by declaring the tasks extension
//! (`io.modelcontextprotocol/tasks`) in that request's capabilities, on a session
//! (2025-11-25) with `params.task` where the server says it runs tool calls as tasks. The
//! server decides: the answer is a task, or the result itself ([`TaskStart`]).
//!
//! A handle is only the task's id and the client: [`Client::task`] rebuilds one from an id on
//! any connection, so a program that restarts picks its tasks up again. Watching or awaiting a
//! task polls `tasks/get` at the interval the server suggests; on the stateless revision the
//! questions a task asks (`input_required`) are answered with the client's handlers, as in a
//! call, and sent with `tasks/update`; on a session the server asks them as requests.

use std::time::Duration;

use futures::Stream;
use serde_json::{Map, Value, json};
use tidewire_core::schema::{
    CallToolResult, CancelTask, GetTask, GetTaskPayload, JsonObject, TASKS_EXTENSION, Task,
    TaskDetails, TaskIdParams, TaskState, TaskStatus, meta_keys, result_type,
};
use tidewire_core::session::{RequestSettings, SessionError};

use crate::client::Client;
use crate::error::ClientError;
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

    /// The task as it changes (`tasks/get`: its state, and its last progress report with
    /// [`TaskDetails::progress`] from a tidewire server), polled at the interval the server
    /// suggests, until it has ended (the last item is the ended task). On the stateless
    /// revision, questions the task asks are answered with the client's handlers as they come.
    pub fn watch(&self) -> impl Stream<Item = Result<TaskDetails, ClientError>> + Send + 'static {
        let handle = self.clone();
        futures::stream::unfold(Some(None::<TaskState>), move |last| {
            let handle = handle.clone();
            async move {
                let mut last = last?;
                loop {
                    if let Some(seen) = &last {
                        tokio::time::sleep(poll_interval(seen)).await;
                    }
                    let details = match handle.step().await {
                        Ok(details) => details,
                        Err(error) => return Some((Err(error), None)),
                    };
                    if details.task.status.is_terminal() {
                        return Some((Ok(details), None));
                    }
                    if last.as_ref() != Some(&details.task) {
                        last = Some(details.task.clone());
                        return Some((Ok(details), Some(last)));
                    }
                }
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
            .merge_meta(declaring(&self.client));
        Ok(request.await?)
    }
}

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
            meta: Some(declaring(&client)),
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

/// The `_meta` entry that declares the tasks extension in a request's capabilities.
pub(crate) fn declaring(client: &Client) -> Map<String, Value> {
    let caps = client
        .inner
        .capabilities
        .clone()
        .with_extension(TASKS_EXTENSION, json!({}));
    let mut meta = Map::new();
    meta.insert(
        meta_keys::CLIENT_CAPABILITIES.to_owned(),
        serde_json::to_value(caps).unwrap_or_else(|_| json!({})),
    );
    meta
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
