//! Tasks: tool calls that outlive their request (and their connection), in both eras.
//!
//! A tool declares whether it runs as a task through its `execution.taskSupport`
//! ([`TaskSupport`](tidewire_core::schema::TaskSupport): `forbidden`, the default; `optional`;
//! `required`; see `ServerBuilder::task_support`). When the client allows it — it declares the
//! extension `io.modelcontextprotocol/tasks` on the stateless revision (2026-07-28), or sends
//! `params.task` on a session (2025-11-25) — the call is answered at once with a task, and the
//! same handler goes on detached from the request: its result completes the task, a protocol
//! error fails it, `tasks/cancel` cancels it, its questions (`ctx.elicit`, …) put it in
//! `input_required` until the client answers, its progress becomes the task's status message.
//! A tool named in `ServerBuilder::deferred_task` starts its task itself
//! ([`Context::continue_as_task`](crate::Context::continue_as_task)), after asking what it needs
//! in the call.
//!
//! The record of each task lives in a [`TaskStore`] (by default a bounded
//! [`MemoryTaskStore`]); what only the running process can do — cancel the handler, hand it
//! an answer — goes through that process.

mod record;
mod run;
mod store;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::json;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
use tidewire_core::schema::TASKS_EXTENSION;
use tidewire_core::session::{CancelPolicy, Peer, SessionError};
use tokio_util::sync::CancellationToken;

pub use record::TaskRecord;
pub use run::TaskCounts;
pub(crate) use run::{DEFAULT_LEASE, Live, Tasks};
pub use store::{MemoryTaskStore, TaskLimits, TaskStore, TaskStoreError};

/// Why a call cannot run as a task. Returned from a handler (with `?`), it answers the call
/// with its error: `-32021` naming the tasks extension on the stateless revision, `-32601` on a
/// session (2025-11-25 says so for a tool that requires a task).
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}", .error.message)]
pub struct TaskRefused {
    error: ErrorObject,
}

impl TaskRefused {
    /// The client did not declare the tasks extension (2026-07-28).
    pub(crate) fn missing_extension() -> Self {
        Self {
            error: ErrorObject::from(SessionError::MissingCapability {
                what: format!("the tasks extension ({TASKS_EXTENSION})"),
                required: json!({ "extensions": { TASKS_EXTENSION: {} } }),
            }),
        }
    }

    /// The client did not ask for a task (`params.task`, 2025-11-25).
    pub(crate) fn not_requested(tool: &str) -> Self {
        Self {
            error: ErrorObject::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "tool {} runs only as a task: call it with params.task",
                    tidewire_core::text::excerpt(tool)
                ),
            ),
        }
    }

    /// The tool does not run as a task at all.
    pub(crate) fn unsupported() -> Self {
        Self {
            error: ErrorObject::internal(
                "this tool does not run as a task (give it task support, or name it in \
                 ServerBuilder::deferred_task)",
            ),
        }
    }

    /// The task could not be started (the store is full, say).
    fn failed(error: ErrorObject) -> Self {
        Self { error }
    }

    /// The error it answers with.
    pub fn into_error(self) -> ErrorObject {
        self.error
    }
}

/// Whether the client allows a call to become a task. The refusal's error is built only when a
/// call is refused: most calls never ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TaskPermit {
    /// The client allows it.
    Allowed,
    /// The session era: the call carries no `params.task`.
    NotRequested,
    /// The stateless era: the request does not declare the tasks extension.
    MissingExtension,
}

impl TaskPermit {
    /// `Ok` when allowed; otherwise the refusal for a call of `tool`.
    fn check(self, tool: &str) -> Result<(), TaskRefused> {
        match self {
            Self::Allowed => Ok(()),
            Self::NotRequested => Err(TaskRefused::not_requested(tool)),
            Self::MissingExtension => Err(TaskRefused::missing_extension()),
        }
    }
}

/// What the era says of making this call a task.
#[derive(Debug, Clone)]
pub(crate) struct TaskOptIn {
    /// Whether the client allows it.
    pub(crate) allowed: TaskPermit,
    /// How long the client wants it kept (2025-11-25's `params.task.ttl`).
    pub(crate) ttl: Option<Duration>,
    /// Who calls (the authenticated principal).
    pub(crate) owner: Option<String>,
    /// The session era's rule: a tool error fails the task (2026-07-28 completes it).
    pub(crate) tool_errors_fail: bool,
    /// The session to tell of status changes (2025-11-25).
    pub(crate) requester: Option<Peer>,
}

/// One call of a tool that may run as a task.
#[derive(Debug)]
pub(crate) struct TaskCall {
    pub(crate) tasks: Arc<Tasks>,
    pub(crate) policy: CancelPolicy,
    tool: String,
    opt_in: TaskOptIn,
    started: OnceLock<(TaskRecord, Arc<Live>)>,
    starting: tokio::sync::Mutex<()>,
    signal: CancellationToken,
}

impl TaskCall {
    pub(crate) fn new(
        tasks: Arc<Tasks>,
        tool: &str,
        policy: CancelPolicy,
        opt_in: TaskOptIn,
    ) -> Self {
        Self {
            tasks,
            policy,
            tool: tool.to_owned(),
            opt_in,
            started: OnceLock::new(),
            starting: tokio::sync::Mutex::new(()),
            signal: CancellationToken::new(),
        }
    }

    /// The task, once the call runs as one.
    pub(crate) fn running(&self) -> Option<&Arc<Live>> {
        self.started.get().map(|(_, live)| live)
    }

    /// The task's record as it was created.
    pub(crate) fn record(&self) -> Option<&TaskRecord> {
        self.started.get().map(|(record, _)| record)
    }

    /// Whether a tool error fails the task (the session era) rather than completing it.
    pub(crate) fn tool_errors_fail(&self) -> bool {
        self.opt_in.tool_errors_fail
    }

    /// Makes the call a task, once.
    pub(crate) async fn start(&self) -> Result<(), TaskRefused> {
        if self.started.get().is_some() {
            return Ok(());
        }
        self.opt_in.allowed.check(&self.tool)?;
        let _one = self.starting.lock().await;
        if self.started.get().is_some() {
            return Ok(());
        }
        let started = self
            .tasks
            .start(
                &self.tool,
                self.opt_in.ttl,
                self.opt_in.owner.clone(),
                self.opt_in.requester.clone(),
            )
            .await
            .map_err(TaskRefused::failed)?;
        let _ = self.started.set(started);
        self.signal.cancel();
        Ok(())
    }

    /// Resolves once the call has become a task.
    pub(crate) async fn became_task(&self) {
        self.signal.cancelled().await;
    }
}
