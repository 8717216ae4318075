//! The tasks extension of the stateless revision (2026-07-28): `io.modelcontextprotocol/tasks`
//! (SEP-2663). A server may answer a `tools/call` with a task ([`StartedTask`], `resultType:
//! "task"`) when the request declares the extension among its client capabilities; the client
//! then follows it with `tasks/get` ([`TaskDetails`]), answers its questions with `tasks/update`
//! ([`UpdateTaskParams`]) and may stop it with `tasks/cancel`. Every one of those acknowledges
//! with an empty `resultType: "complete"` result, except `tasks/get`.
//!
//! The session era's tasks (2025-11-25, [`Task`](super::Task)) name the same things differently
//! (`ttl`, `pollInterval`, a nested `task`); this module is the extension's wire only.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    CallToolResult, ClientCapabilities, InputRequest, JsonObject, Meta, ServerCapabilities,
    TaskStatus,
};
use crate::jsonrpc::ErrorObject;

/// The extension's identifier, under `capabilities.extensions` on both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The `resultType` of a result that is a task.
pub const RESULT_TYPE_TASK: &str = "task";

/// The `_meta` key under which a tidewire server puts a task's last progress report
/// (`{"progress", "total"?, "message"?}`) on `tasks/get` (both eras) and `notifications/tasks`:
/// the extension carries progress only in words (`statusMessage`), and a progress bar wants the
/// numbers.
pub const TASK_PROGRESS_META: &str = "dev.tidewire/progress";

/// A task as the extension puts it on the wire: its members at the top level of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskState {
    /// The task's id, chosen by the server (unguessable).
    pub task_id: String,
    /// Where the task stands.
    pub status: TaskStatus,
    /// A human-readable word on the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When the task was created (RFC 3339, UTC).
    pub created_at: String,
    /// When the task last changed (RFC 3339, UTC).
    pub last_updated_at: String,
    /// How long the task is kept after its creation, in milliseconds; `null`: without limit.
    /// Always on the wire.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
    /// How often to poll it, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<u64>,
}

/// The answer to a `tools/call` the server runs as a task: the task, and `resultType: "task"`.
/// It never carries the call's result, error or questions: `tasks/get` does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartedTask {
    /// The task.
    #[serde(flatten)]
    pub task: TaskState,
    /// `"task"`.
    pub result_type: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl From<TaskState> for StartedTask {
    fn from(task: TaskState) -> Self {
        Self {
            task,
            result_type: RESULT_TYPE_TASK.to_owned(),
            meta: None,
        }
    }
}

/// The result of `tasks/get`: the task, and what its status brings: the questions waiting for
/// answers (`input_required`), the call's result (`completed`, a tool error included) or the
/// protocol error it ended with (`failed`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskDetails {
    /// The task.
    #[serde(flatten)]
    pub task: TaskState,
    /// `"complete"`.
    pub result_type: String,
    /// The questions waiting for answers, by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<BTreeMap<String, InputRequest>>,
    /// The call's result, once `completed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallToolResult>,
    /// The error the task failed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl TaskDetails {
    /// The task's last progress report, when the server puts it in `_meta`
    /// ([`TASK_PROGRESS_META`]; tidewire servers do).
    pub fn progress(&self) -> Option<crate::progress::Progress> {
        let value = self.meta.as_ref()?.get(TASK_PROGRESS_META)?;
        serde_json::from_value(value.clone()).ok()
    }
}

/// Parameters of `tasks/update`: answers to some or all of a task's questions, by key. Keys the
/// task is not waiting for are ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task.
    pub task_id: String,
    /// The answers, by the keys of the task's `inputRequests`.
    #[serde(default)]
    pub input_responses: JsonObject,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl UpdateTaskParams {
    /// Answers for task `task_id`.
    pub fn new(task_id: impl Into<String>, input_responses: JsonObject) -> Self {
        Self {
            task_id: task_id.into(),
            input_responses,
            meta: None,
        }
    }
}

/// The empty acknowledgement of `tasks/update` and `tasks/cancel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskAck {
    /// `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

request_marker!(
    /// Answers a task's questions (tasks extension, 2026-07-28).
    UpdateTask,
    "tasks/update",
    UpdateTaskParams,
    TaskAck
);

/// The key of the declared extensions in a capabilities object.
const EXTENSIONS: &str = "extensions";

/// `has_extension` and `with_extension` on a capabilities object (both sides declare
/// extensions the same way, under `extensions` in their unknown members).
macro_rules! extension_methods {
    ($($caps:ty: $who:literal),+) => {$(
        impl $caps {
            #[doc = concat!("Whether the ", $who, " declares the extension `id` (`extensions[id]` is present).")]
            pub fn has_extension(&self, id: &str) -> bool {
                extension_in(&self.extra, id)
            }

            /// Declares the extension `id` with its settings (`{}` for none).
            #[must_use]
            pub fn with_extension(mut self, id: &str, settings: Value) -> Self {
                add_extension(&mut self.extra, id, settings);
                self
            }
        }
    )+};
}

extension_methods!(ClientCapabilities: "client", ServerCapabilities: "server");

fn extension_in(extra: &JsonObject, id: &str) -> bool {
    extra
        .get(EXTENSIONS)
        .and_then(Value::as_object)
        .is_some_and(|extensions| extensions.get(id).is_some_and(|v| !v.is_null()))
}

fn add_extension(extra: &mut JsonObject, id: &str, settings: Value) {
    let extensions = extra
        .entry(EXTENSIONS)
        .or_insert_with(|| Value::Object(JsonObject::new()));
    if !extensions.is_object() {
        *extensions = Value::Object(JsonObject::new());
    }
    if let Value::Object(map) = extensions {
        map.insert(id.to_owned(), settings);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn state() -> TaskState {
        TaskState {
            task_id: "t1".into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-12-02T10:00:00.000Z".into(),
            last_updated_at: "2026-12-02T10:00:00.000Z".into(),
            ttl_ms: None,
            poll_interval_ms: None,
        }
    }

    #[test]
    fn a_started_task_is_flat_with_ttl_ms_always_and_no_result() {
        let wire = serde_json::to_value(StartedTask::from(state())).expect("JSON");
        assert_eq!(wire["resultType"], "task");
        assert_eq!(wire["taskId"], "t1");
        assert!(wire.get("ttlMs").is_some_and(Value::is_null));
        for absent in [
            "task",
            "ttl",
            "pollInterval",
            "pollIntervalMs",
            "result",
            "error",
        ] {
            assert!(wire.get(absent).is_none(), "{absent} in {wire}");
        }
    }

    #[test]
    fn extensions_are_declared_and_found_on_both_sides() {
        let caps = ClientCapabilities::default().with_extension(TASKS_EXTENSION, json!({}));
        assert!(caps.has_extension(TASKS_EXTENSION));
        assert!(!ClientCapabilities::default().has_extension(TASKS_EXTENSION));
        let read: ClientCapabilities =
            serde_json::from_value(json!({"extensions": {TASKS_EXTENSION: {}}})).expect("caps");
        assert!(read.has_extension(TASKS_EXTENSION));
        let server = ServerCapabilities::default().with_extension(TASKS_EXTENSION, json!({}));
        let wire = serde_json::to_value(&server).expect("JSON");
        assert_eq!(wire["extensions"][TASKS_EXTENSION], json!({}));
    }
}
