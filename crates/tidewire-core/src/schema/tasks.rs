//! Tasks (2025-11-25, experimental): durable requests whose results are fetched later.
//!
//! A requester adds `task` ([`TaskMetadata`]) to `tools/call`, `sampling/createMessage` or
//! `elicitation/create`; the receiver answers at once with a [`CreateTaskResult`] and the real
//! result is fetched with `tasks/result`. Tasks left the core protocol in 2026-07-28.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Cursor, JsonObject, Meta, PaginatedParams};

/// The `task` member of a task-augmented request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskMetadata {
    /// How long, in milliseconds, the requester wants the task kept after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
}

open_string_enum! {
    /// The state of a task.
    pub enum TaskStatus {
        /// Being worked on.
        Working = "working",
        /// Waiting for input from the requester.
        InputRequired = "input_required",
        /// Finished successfully.
        Completed = "completed",
        /// Finished with an error.
        Failed = "failed",
        /// Cancelled before finishing.
        Cancelled = "cancelled",
    }
}

impl TaskStatus {
    /// True for `completed`, `failed` and `cancelled`, which never change again.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// The state of a task, as the receiver reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// The task's id, chosen by the receiver.
    pub task_id: String,
    /// The current status.
    pub status: TaskStatus,
    /// A human-readable description of the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When the task was created (ISO 8601).
    pub created_at: String,
    /// When the task last changed (ISO 8601).
    pub last_updated_at: String,
    /// How long, in milliseconds, the task is kept after creation; `null` for no limit. Always
    /// sent (as `null` when `None`), as the schema requires.
    #[serde(default)]
    pub ttl: Option<u64>,
    /// The suggested delay between polls, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<u64>,
}

impl Task {
    /// A task in `status`, created and last updated at `now` (ISO 8601).
    pub fn new(task_id: impl Into<String>, status: TaskStatus, now: impl Into<String>) -> Self {
        let now = now.into();
        Self {
            task_id: task_id.into(),
            status,
            status_message: None,
            created_at: now.clone(),
            last_updated_at: now,
            ttl: None,
            poll_interval: None,
        }
    }
}

/// The `_meta["io.modelcontextprotocol/related-task"]` value that ties a message to a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedTaskMetadata {
    /// The task's id.
    pub task_id: String,
}

impl Meta {
    /// The related task, if `_meta` names one.
    pub fn related_task(&self) -> Option<RelatedTaskMetadata> {
        self.0
            .get(Self::RELATED_TASK)
            .and_then(|v| RelatedTaskMetadata::deserialize(v).ok())
    }

    /// Ties the message to `task_id`.
    pub fn set_related_task(&mut self, task_id: impl Into<String>) {
        let mut inner = JsonObject::new();
        inner.insert("taskId".to_owned(), Value::String(task_id.into()));
        self.0
            .insert(Self::RELATED_TASK.to_owned(), Value::Object(inner));
    }
}

/// Parameters naming one task (`tasks/get`, `tasks/result`, `tasks/cancel`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskIdParams {
    /// The task's id.
    pub task_id: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl TaskIdParams {
    /// Names `task_id`.
    pub fn new(task_id: impl Into<String>) -> Self {
        Self {
            task_id: task_id.into(),
            meta: None,
        }
    }
}

/// Parameters of `tasks/get`.
pub type GetTaskParams = TaskIdParams;
/// Parameters of `tasks/result`.
pub type GetTaskPayloadParams = TaskIdParams;
/// Parameters of `tasks/cancel`.
pub type CancelTaskParams = TaskIdParams;

/// A result that is a task's state (`tasks/get`, `tasks/cancel`): the task's members at the top
/// level of the result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskResult {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl From<Task> for TaskResult {
    fn from(task: Task) -> Self {
        Self {
            task,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// Result of `tasks/get`.
pub type GetTaskResult = TaskResult;
/// Result of `tasks/cancel`.
pub type CancelTaskResult = TaskResult;

/// Result of `tasks/result`: the underlying request's result, verbatim, with the related-task
/// `_meta`. Decode it with [`GetTaskPayloadResult::decode`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetTaskPayloadResult {
    /// Protocol metadata (carries the related task).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// The members of the underlying result.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl GetTaskPayloadResult {
    /// Wraps an underlying result (a JSON object; anything else gives an empty payload).
    pub fn from_result<T: Serialize>(result: &T) -> Result<Self, serde_json::Error> {
        serde_json::from_value(serde_json::to_value(result)?)
    }

    /// Decodes the underlying result, e.g. as a [`CallToolResult`](super::CallToolResult).
    pub fn decode<T: DeserializeOwned>(self) -> Result<T, serde_json::Error> {
        let mut map = self.extra;
        if let Some(meta) = self.meta {
            map.insert("_meta".to_owned(), Value::Object(meta.0));
        }
        serde_json::from_value(Value::Object(map))
    }
}

/// Result of `tasks/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListTasksResult {
    /// This page of tasks.
    pub tasks: Vec<Task>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The immediate answer to a task-augmented request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateTaskResult {
    /// The new task.
    pub task: Task,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl From<Task> for CreateTaskResult {
    fn from(task: Task) -> Self {
        Self {
            task,
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

/// Parameters of `notifications/tasks/status`: the task's members at the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatusNotificationParams {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl From<Task> for TaskStatusNotificationParams {
    fn from(task: Task) -> Self {
        Self { task, meta: None }
    }
}

/// `tasks.requests.sampling` in client capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskSamplingRequests {
    /// `sampling/createMessage` may run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create_message: Option<JsonObject>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tasks.requests.elicitation` in client capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskElicitationRequests {
    /// `elicitation/create` may run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub create: Option<JsonObject>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tasks.requests` in client capabilities: which incoming requests may run as tasks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientTaskRequests {
    /// Sampling requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<TaskSamplingRequests>,
    /// Elicitation requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<TaskElicitationRequests>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The client's `tasks` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientTasksCapability {
    /// The client answers `tasks/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<JsonObject>,
    /// The client answers `tasks/cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<JsonObject>,
    /// Which requests may run as tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ClientTaskRequests>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tasks.requests.tools` in server capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskToolsRequests {
    /// `tools/call` may run as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<JsonObject>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `tasks.requests` in server capabilities.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTaskRequests {
    /// Tool calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<TaskToolsRequests>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The server's `tasks` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTasksCapability {
    /// The server answers `tasks/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list: Option<JsonObject>,
    /// The server answers `tasks/cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<JsonObject>,
    /// Which requests may run as tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ServerTaskRequests>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl_has_meta!(
    TaskIdParams,
    TaskResult,
    GetTaskPayloadResult,
    ListTasksResult,
    CreateTaskResult,
    TaskStatusNotificationParams,
);

request_marker!(
    /// Gets a task's state. Both directions.
    GetTask,
    "tasks/get",
    GetTaskParams,
    GetTaskResult
);
request_marker!(
    /// Waits for a task to finish and returns its result. Both directions.
    GetTaskPayload,
    "tasks/result",
    GetTaskPayloadParams,
    GetTaskPayloadResult
);
request_marker!(
    /// Lists tasks (paginated). Both directions.
    ListTasks,
    "tasks/list",
    PaginatedParams,
    ListTasksResult
);
request_marker!(
    /// Cancels a task. Both directions.
    CancelTask,
    "tasks/cancel",
    CancelTaskParams,
    CancelTaskResult
);
notification_marker!(
    /// A task's status changed. Both directions; optional.
    TaskStatusNotification,
    "notifications/tasks/status",
    TaskStatusNotificationParams
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::schema::CallToolResult;

    fn task() -> Task {
        let mut t = Task::new("t-1", TaskStatus::Working, "2025-11-25T10:00:00Z");
        t.poll_interval = Some(500);
        t
    }

    #[test]
    fn task_ttl_is_always_sent() {
        let v = serde_json::to_value(task()).expect("ser");
        assert_eq!(
            v,
            json!({"taskId": "t-1", "status": "working", "createdAt": "2025-11-25T10:00:00Z",
                   "lastUpdatedAt": "2025-11-25T10:00:00Z", "ttl": null, "pollInterval": 500})
        );
        assert_eq!(serde_json::from_value::<Task>(v).expect("de"), task());
    }

    #[test]
    fn task_result_is_flat_and_open() {
        let mut r = TaskResult::from(task());
        r.extra.insert("future".into(), json!(1));
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(v["taskId"], json!("t-1"));
        assert_eq!(v["future"], json!(1));
        let back: TaskResult = serde_json::from_value(v).expect("de");
        assert_eq!(back, r);
        assert!(!back.extra.contains_key("taskId"));
    }

    #[test]
    fn status_notification_and_unknown_status() {
        let p: TaskStatusNotificationParams = serde_json::from_value(json!({
            "taskId": "t", "status": "paused", "createdAt": "a", "lastUpdatedAt": "b", "ttl": 5
        }))
        .expect("de");
        assert_eq!(p.task.status, TaskStatus::Other("paused".into()));
        assert!(!p.task.status.is_terminal());
        assert!(TaskStatus::Failed.is_terminal());
        assert_eq!(p.task.ttl, Some(5));
    }

    #[test]
    fn payload_decodes_underlying_result() {
        let mut payload =
            GetTaskPayloadResult::from_result(&CallToolResult::text("done")).expect("wrap");
        payload
            .meta
            .get_or_insert_with(Meta::new)
            .set_related_task("t-1");
        let v = serde_json::to_value(&payload).expect("ser");
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/related-task"],
            json!({"taskId": "t-1"})
        );
        let back: GetTaskPayloadResult = serde_json::from_value(v).expect("de");
        assert_eq!(
            back.meta.as_ref().and_then(Meta::related_task),
            Some(RelatedTaskMetadata {
                task_id: "t-1".into()
            })
        );
        let result: CallToolResult = back.decode().expect("decode");
        assert_eq!(result.content[0].as_text(), Some("done"));
    }

    #[test]
    fn create_task_result_round_trip() {
        let r = CreateTaskResult::from(task());
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(v["task"]["status"], json!("working"));
        assert_eq!(
            serde_json::from_value::<CreateTaskResult>(v).expect("de"),
            r
        );
    }
}
