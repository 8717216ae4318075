//! A task's record: what a [`TaskStore`](super::TaskStore) keeps of it, whichever process runs
//! it, and the wire forms of both eras made from it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::schema::{
    CallToolResult, InputRequest, Meta, TASK_PROGRESS_META, Task, TaskDetails, TaskState,
    TaskStatus, result_type,
};

/// Everything known of one task. Plain data, so a store may keep it anywhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRecord {
    /// The task's id: 128 random bits, in hex.
    pub id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// A word on the status: the last progress report, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// When it was created.
    pub created_at: SystemTime,
    /// When it last changed.
    pub updated_at: SystemTime,
    /// How long it is kept after its creation (`None`: until the store needs the room).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<Duration>,
    /// How often a client should poll it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval: Option<Duration>,
    /// Who started it (the authenticated principal, when there is one): only they see it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The tool it runs.
    pub tool: String,
    /// The questions it waits on, by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_requests: BTreeMap<String, InputRequest>,
    /// The call's result, once it finished (a tool error included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<CallToolResult>,
    /// The protocol error it failed with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
    /// The last progress report: `(progress, total)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<(f64, Option<f64>)>,
    /// Until when the process running it vouches for it: it renews this while the handler
    /// runs. A task not ended whose lease has run out lost its process, and is failed by
    /// whichever process reads it next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until: Option<SystemTime>,
}

impl TaskRecord {
    /// A task of `tool` that starts now, `working`.
    pub fn new(id: String, tool: String, ttl: Option<Duration>, owner: Option<String>) -> Self {
        let now = SystemTime::now();
        Self {
            id,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            updated_at: now,
            ttl,
            poll_interval: None,
            owner,
            tool,
            input_requests: BTreeMap::new(),
            result: None,
            error: None,
            progress: None,
            lease_until: None,
        }
    }

    /// Whether it has not ended and its lease ran out before `now`.
    pub fn lost(&self, now: SystemTime) -> bool {
        !self.is_terminal() && self.lease_until.is_some_and(|until| until < now)
    }

    /// Whether the task has ended (`completed`, `failed`, `cancelled`): its record no longer
    /// changes.
    pub fn is_terminal(&self) -> bool {
        self.status.is_terminal()
    }

    /// Whether its ttl has run out at `now`.
    pub fn is_expired(&self, now: SystemTime) -> bool {
        self.ttl.is_some_and(|ttl| {
            now.duration_since(self.created_at)
                .is_ok_and(|age| age >= ttl)
        })
    }

    /// Whether `principal` may see it: anyone when it has no owner, else its owner only.
    pub fn visible_to(&self, principal: Option<&str>) -> bool {
        self.owner.is_none() || self.owner.as_deref() == principal
    }

    /// Moves it to `status` now, unless it has ended (an ended task never changes).
    pub(crate) fn set_status(&mut self, status: TaskStatus) -> bool {
        if self.is_terminal() {
            return false;
        }
        self.status = status;
        self.updated_at = SystemTime::now();
        true
    }

    /// The task on the 2026-07-28 wire (the extension's names).
    pub fn state(&self) -> TaskState {
        TaskState {
            task_id: self.id.clone(),
            status: self.status.clone(),
            status_message: self.status_message.clone(),
            created_at: rfc3339(self.created_at),
            last_updated_at: rfc3339(self.updated_at),
            ttl_ms: self.ttl.map(millis),
            poll_interval_ms: self.poll_interval.map(millis),
        }
    }

    /// The `tasks/get` answer of the 2026-07-28 wire: the task, and what its status brings.
    pub fn details(&self) -> TaskDetails {
        let waiting = self.status == TaskStatus::InputRequired && !self.input_requests.is_empty();
        TaskDetails {
            task: self.state(),
            result_type: result_type::COMPLETE.to_owned(),
            input_requests: waiting.then(|| self.input_requests.clone()),
            result: (self.status == TaskStatus::Completed)
                .then(|| self.result.clone())
                .flatten(),
            error: (self.status == TaskStatus::Failed)
                .then(|| self.error.clone())
                .flatten(),
            meta: self.progress_meta(),
        }
    }

    /// The last progress report, in `_meta` ([`TASK_PROGRESS_META`]).
    pub fn progress_meta(&self) -> Option<Meta> {
        let (progress, total) = self.progress?;
        let mut meta = Meta::new();
        meta.insert(
            TASK_PROGRESS_META.to_owned(),
            json!({ "progress": progress, "total": total }),
        );
        Some(meta)
    }

    /// The task on the 2025-11-25 wire (`ttl`, `pollInterval`).
    pub fn task(&self) -> Task {
        Task {
            task_id: self.id.clone(),
            status: self.status.clone(),
            status_message: self.status_message.clone(),
            created_at: rfc3339(self.created_at),
            last_updated_at: rfc3339(self.updated_at),
            ttl: self.ttl.map(millis),
            poll_interval: self.poll_interval.map(millis),
        }
    }

    /// Bytes it takes in a store, roughly: what its result and questions take as JSON.
    pub(crate) fn weight(&self) -> usize {
        let result = self
            .result
            .as_ref()
            .and_then(|r| serde_json::to_vec(r).ok())
            .map_or(0, |v| v.len());
        let questions = serde_json::to_vec(&self.input_requests).map_or(0, |v| v.len());
        let error = self.error.as_ref().map_or(0, |e| {
            e.message.len() + e.data.as_ref().map_or(0, |d| d.to_string().len())
        });
        result + questions + error + self.status_message.as_ref().map_or(0, String::len)
    }
}

/// Whole milliseconds, saturating.
fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// `time` in RFC 3339, UTC, to the millisecond.
fn rfc3339(time: SystemTime) -> String {
    humantime::format_rfc3339_millis(time).to_string()
}
