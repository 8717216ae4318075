//! The tasks this process runs: starting one (its record in the store, its handler on a tokio
//! task of its own), its questions and their answers, its progress, its cancellation, its end.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime};

use serde_json::Value;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
use tidewire_core::schema::{
    CallToolResult, InputRequest, JsonObject, TaskStatus, TaskStatusNotification,
};
use tidewire_core::session::{CancelPolicy, Peer, SessionError};
use tidewire_core::text::excerpt;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::record::TaskRecord;
use super::store::{TaskStore, TaskStoreError};
use crate::bus::{BusEvent, BusRefused, NotificationBus, Subscription};

/// The tasks of one server: its store, and the ones running in this process.
#[derive(Debug)]
pub(crate) struct Tasks {
    store: Arc<dyn TaskStore>,
    /// Where changes are announced, to `subscriptions/listen` streams (set as the server is
    /// built).
    bus: OnceLock<Arc<dyn NotificationBus>>,
    /// This process's ear on the bus, for cancels and answers taken by other processes.
    heard: OnceLock<Subscription>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// The tasks this process ended (it wrote their last status), by status.
    ended: Ended,
    /// The poll interval suggested to clients.
    pub(crate) poll_interval: Duration,
    /// How long a running task's lease lasts; it is renewed every third of it.
    pub(crate) lease: Duration,
}

/// The tasks a server runs in this process, by status, and those this process ended
/// ([`Server::task_counts`](crate::Server::task_counts)). With a shared task store, each
/// replica counts its own: the ones it runs, and the ends it wrote (a task failed because its
/// replica died is counted by the replica that found it lost).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskCounts {
    /// Running here, not waiting for an answer.
    pub working: u64,
    /// Running here, waiting for the client to answer a question.
    pub input_required: u64,
    /// Ended `completed` by this process since the server was built.
    pub completed: u64,
    /// Ended `failed` by this process since the server was built.
    pub failed: u64,
    /// Ended `cancelled` by this process since the server was built.
    pub cancelled: u64,
}

/// The ends a process wrote, by status.
#[derive(Debug, Default)]
struct Ended {
    completed: AtomicU64,
    failed: AtomicU64,
    cancelled: AtomicU64,
}

impl Ended {
    fn count(&self, status: &TaskStatus) {
        let counter = match status {
            TaskStatus::Completed => &self.completed,
            TaskStatus::Failed => &self.failed,
            TaskStatus::Cancelled => &self.cancelled,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// How long a lease lasts unless the server says otherwise.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(15);

/// A task running in this process: what reaches its handler.
#[derive(Debug)]
pub(crate) struct Live {
    pub(crate) id: String,
    /// Fired by `tasks/cancel`.
    pub(crate) cancel: CancellationToken,
    /// Serialises the changes this process makes to the record (read, change, write).
    edit: tokio::sync::Mutex<()>,
    /// The questions asked and not answered yet.
    waiters: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    /// Numbers the questions asked without a key.
    next_key: AtomicU64,
    /// The session that started it (2025-11-25), told of each change of status.
    requester: Option<Peer>,
    /// Fired once the task has ended here (for `tasks/result` waiting on it).
    pub(crate) done: CancellationToken,
}

impl Tasks {
    pub(crate) fn new(store: Arc<dyn TaskStore>, poll_interval: Duration, lease: Duration) -> Self {
        Self {
            lease: lease.max(Duration::from_millis(30)),
            store,
            bus: OnceLock::new(),
            heard: OnceLock::new(),
            live: Mutex::new(HashMap::new()),
            ended: Ended::default(),
            poll_interval,
        }
    }

    /// Announces changes on `bus` from now on, and hears there the cancels and answers that
    /// other processes took for tasks running here (a shared bus, behind a load balancer).
    pub(crate) fn attach_bus(self: &Arc<Self>, bus: Arc<dyn NotificationBus>) {
        let tasks = Arc::downgrade(self);
        let subscription = bus.subscribe(Arc::new(move |event: &BusEvent| {
            if let Some(tasks) = tasks.upgrade() {
                tasks.hear(event);
            }
        }));
        let _ = self.heard.set(subscription);
        let _ = self.bus.set(bus);
    }

    /// A cancel or answers for a task running here, taken by another process.
    fn hear(self: &Arc<Self>, event: &BusEvent) {
        let (task_id, answers) = match event {
            BusEvent::TaskCancelled { task_id } => (task_id, None),
            BusEvent::TaskAnswered { task_id, responses } => (task_id, Some(responses.clone())),
            _ => return,
        };
        let Some(live) = self.live_tasks().get(task_id).cloned() else {
            return;
        };
        match answers {
            None => {
                // The record says cancelled already: the process that took the cancel wrote it.
                live.cancel.cancel();
                live.done.cancel();
            }
            Some(responses) => {
                let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                    return;
                };
                let tasks = self.clone();
                runtime.spawn(async move {
                    if let Err(error) = tasks.apply_answers(&live, responses).await {
                        tracing::warn!(error = %error.message, "answers from another process were not recorded");
                    }
                });
            }
        }
    }

    /// Tells whoever listens that `record` changed: listen streams through the bus, and the
    /// session that started it (`notifications/tasks/status`, 2025-11-25) when its status did.
    fn changed(&self, live: Option<&Live>, record: &TaskRecord, status_changed: bool) {
        if status_changed {
            self.ended.count(&record.status);
        }
        if let Some(bus) = self.bus.get() {
            bus.publish(BusEvent::TaskChanged {
                task_id: record.id.clone(),
            });
        }
        if status_changed && let Some(peer) = live.and_then(|l| l.requester.as_ref()) {
            // Never waits: a requester that does not keep up polls instead.
            let _ = peer.try_notify::<TaskStatusNotification>(record.task().into());
        }
    }

    /// The tasks running in this process by status, and those it ended.
    pub(crate) fn counts(&self) -> TaskCounts {
        let (mut working, mut input_required) = (0, 0);
        for live in self.live_tasks().values() {
            let waiting = !live
                .waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty();
            if waiting {
                input_required += 1;
            } else {
                working += 1;
            }
        }
        TaskCounts {
            working,
            input_required,
            completed: self.ended.completed.load(Ordering::Relaxed),
            failed: self.ended.failed.load(Ordering::Relaxed),
            cancelled: self.ended.cancelled.load(Ordering::Relaxed),
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> Arc<dyn TaskStore> {
        self.store.clone()
    }

    fn live_tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Live>>> {
        self.live.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts a task of `tool` for `owner`, kept `ttl` (the store's default when `None`): its
    /// record is in the store before this returns, so a `tasks/get` right after finds it.
    ///
    /// # Errors
    /// `-32001` when the store is full; `-32603` when it fails or no id can be drawn.
    pub(crate) async fn start(
        &self,
        tool: &str,
        ttl: Option<Duration>,
        owner: Option<String>,
        requester: Option<Peer>,
    ) -> Result<(TaskRecord, Arc<Live>), ErrorObject> {
        let id = tidewire_core::random_id()
            .ok_or_else(|| ErrorObject::internal("no randomness to draw a task id from"))?;
        let mut record = TaskRecord::new(id.clone(), tool.to_owned(), ttl, owner);
        record.poll_interval = Some(self.poll_interval);
        record.lease_until = Some(std::time::SystemTime::now() + self.lease);
        self.store
            .insert(record.clone())
            .await
            .map_err(store_error)?;
        let kept = self
            .store
            .get(&id)
            .await
            .map_err(store_error)?
            .unwrap_or(record);
        let live = Arc::new(Live {
            id: id.clone(),
            cancel: CancellationToken::new(),
            edit: tokio::sync::Mutex::new(()),
            waiters: Mutex::new(HashMap::new()),
            next_key: AtomicU64::new(1),
            done: CancellationToken::new(),
            requester,
        });
        self.live_tasks().insert(id, live.clone());
        Ok((kept, live))
    }

    /// Runs `handler` as task `live` to its end, on a tokio task of its own: its result
    /// completes the task (a tool error too), a protocol error fails it. Under
    /// [`CancelPolicy::Abort`] a cancellation drops the handler at its next `.await`; under
    /// [`CancelPolicy::Cooperative`] it only fires the handler's `cancelled()`.
    pub(crate) fn run(
        self: &Arc<Self>,
        live: Arc<Live>,
        policy: CancelPolicy,
        tool_errors_fail: bool,
        handler: impl Future<Output = Result<CallToolResult, ErrorObject>> + Send + 'static,
    ) {
        let tasks = self.clone();
        tokio::spawn(async move {
            let work = async {
                match policy {
                    CancelPolicy::Cooperative => Some(handler.await),
                    _ => tokio::select! {
                        outcome = handler => Some(outcome),
                        () = live.cancel.cancelled() => None,
                    },
                }
            };
            // While it runs, its lease is renewed: a process that dies leaves it to lapse.
            let renewing = async {
                let mut every = tokio::time::interval(tasks.lease / 3);
                every.tick().await;
                loop {
                    every.tick().await;
                    tasks.renew(&live).await;
                }
            };
            let outcome = tokio::select! {
                outcome = work => outcome,
                () = renewing => None,
            };
            if let Some(outcome) = outcome {
                tasks.finish(&live, outcome, tool_errors_fail).await;
            }
            tasks.live_tasks().remove(&live.id);
            live.done.cancel();
        });
    }

    /// Records how task `live` ended, unless it had ended already (cancelled meanwhile). A tool
    /// error completes it, or fails it with the result kept when `tool_errors_fail` (the
    /// session era's rule).
    async fn finish(
        &self,
        live: &Live,
        outcome: Result<CallToolResult, ErrorObject>,
        tool_errors_fail: bool,
    ) {
        let _edit = live.edit.lock().await;
        let Ok(Some(mut record)) = self.store.get(&live.id).await else {
            return;
        };
        let status = match &outcome {
            Ok(result) if tool_errors_fail && result.is_error == Some(true) => TaskStatus::Failed,
            Ok(_) => TaskStatus::Completed,
            Err(_) => TaskStatus::Failed,
        };
        if !record.set_status(status) {
            return;
        }
        record.input_requests.clear();
        match outcome {
            Ok(result) => record.result = Some(result),
            Err(error) => {
                record.status_message = Some(excerpt(&error.message));
                record.error = Some(error);
            }
        }
        if let Err(error) = self.store.update(record.clone()).await {
            // A result over the store's limit fails the task, saying so.
            record.result = None;
            record.status = TaskStatus::Failed;
            record.status_message = Some(error.to_string());
            record.error = Some(ErrorObject::internal(error.to_string()));
            if let Err(error) = self.store.update(record.clone()).await {
                tracing::warn!(%error, "a task's end could not be recorded");
                return;
            }
        }
        self.changed(Some(live), &record, true);
    }

    /// Extends task `live`'s lease; when its record has ended meanwhile (cancelled through
    /// another process, or failed by one that found its lease lapsed), its handler is stopped.
    async fn renew(&self, live: &Live) {
        let _edit = live.edit.lock().await;
        let Ok(Some(mut record)) = self.store.get(&live.id).await else {
            return;
        };
        if record.is_terminal() {
            live.cancel.cancel();
            live.done.cancel();
            return;
        }
        record.lease_until = Some(std::time::SystemTime::now() + self.lease);
        if let Err(error) = self.store.update(record).await {
            tracing::warn!(%error, task = %excerpt(&live.id), "a task's lease could not be renewed");
        }
    }

    /// When the lease of task `id` runs out, if it runs in another process and has not ended:
    /// the moment a reader could find it lost ([`find`](Self::find) then fails it). `None`
    /// for a task that has ended, runs here, has no lease, or cannot be read.
    pub(crate) async fn lapse(&self, id: &str) -> Option<SystemTime> {
        if self.live_tasks().contains_key(id) {
            return None;
        }
        let record = self.store.get(id).await.ok()??;
        self.lapse_of(&record)
    }

    /// [`lapse`](Self::lapse), from a record already read (as [`find`](Self::find) returns
    /// it): no second read of the store.
    pub(crate) fn lapse_of(&self, record: &TaskRecord) -> Option<SystemTime> {
        if record.is_terminal() || self.live_tasks().contains_key(record.id.as_str()) {
            return None;
        }
        record.lease_until
    }

    /// The task `id`, as `principal` may see it. A task whose process is gone (its lease ran
    /// out, and it does not run here) is failed first, saying so.
    ///
    /// # Errors
    /// `-32602` for a task that is unknown, expired, or someone else's (they read the same);
    /// `-32603` when the store fails.
    pub(crate) async fn find(
        &self,
        id: &str,
        principal: Option<&str>,
    ) -> Result<TaskRecord, ErrorObject> {
        let record = match self.store.get(id).await.map_err(store_error)? {
            Some(record) if record.visible_to(principal) => record,
            _ => return Err(unknown_task(id)),
        };
        let now = std::time::SystemTime::now();
        if !record.lost(now) || self.live_tasks().contains_key(id) {
            return Ok(record);
        }
        let mut failed = record.clone();
        let lapsed = failed
            .lease_until
            .map(|at| humantime::format_rfc3339_millis(at).to_string())
            .unwrap_or_default();
        failed.set_status(TaskStatus::Failed);
        failed.input_requests.clear();
        let reason =
            format!("the server process running this task stopped (its lease ran out at {lapsed})");
        failed.status_message = Some(reason.clone());
        failed.error = Some(ErrorObject::internal(reason));
        match self
            .store
            .update(failed.clone())
            .await
            .map_err(store_error)?
        {
            true => {
                self.changed(None, &failed, true);
                Ok(failed)
            }
            // Ended meanwhile, by its process or another reader: what the store has now.
            false => match self.store.get(id).await.map_err(store_error)? {
                Some(record) => Ok(record),
                None => Err(unknown_task(id)),
            },
        }
    }

    /// The tasks `principal` may see, a page of `limit` after the task `after`.
    pub(crate) async fn list(
        &self,
        principal: Option<&str>,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<TaskRecord>, ErrorObject> {
        self.store
            .list(principal, after, limit)
            .await
            .map_err(store_error)
    }

    /// Asks the client `question` for task `live` under `key` (the next number when `None`):
    /// the task waits on it in `input_required` until `tasks/update` answers it.
    ///
    /// # Errors
    /// `Cancelled` when the task is cancelled first; `Closed` when its record is gone.
    pub(crate) async fn ask(
        &self,
        live: &Live,
        key: Option<&str>,
        question: InputRequest,
    ) -> Result<Value, SessionError> {
        let key = match key {
            Some(key) => key.to_owned(),
            None => live.next_key.fetch_add(1, Ordering::Relaxed).to_string(),
        };
        let (tx, rx) = oneshot::channel();
        {
            let _edit = live.edit.lock().await;
            let mut record = self.current(live).await?;
            record.input_requests.insert(key.clone(), question);
            let was = record.status.clone();
            record.set_status(TaskStatus::InputRequired);
            // Waiting before the record says so, so no reader sees the question without its
            // waiter (answers come under the same lock, so none can come before this ends).
            live.waiters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(key.clone(), tx);
            if let Err(error) = self.store.update(record.clone()).await {
                live.waiters
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&key);
                return Err(SessionError::Closed(error.to_string()));
            }
            self.changed(Some(live), &record, was != record.status);
        }
        tokio::select! {
            answer = rx => answer.map_err(|_| SessionError::Closed("the task ended".to_owned())),
            () = live.cancel.cancelled() => {
                Err(SessionError::Cancelled("the task was cancelled".to_owned()))
            }
        }
    }

    /// Answers the questions of task `id` that `responses` names; other keys are ignored. The
    /// record has changed (answered questions gone, back to `working` when none is left)
    /// before this returns.
    ///
    /// # Errors
    /// As [`find`](Self::find); `-32602` for answers too large to reach the replica running
    /// the task, `-32001` when the bus cannot take them now.
    pub(crate) async fn answer(
        &self,
        id: &str,
        principal: Option<&str>,
        responses: JsonObject,
    ) -> Result<(), ErrorObject> {
        let record = self.find(id, principal).await?;
        let Some(live) = self.live_tasks().get(id).cloned() else {
            // Not running here: the process that runs it (if one does) hears them on the bus.
            if !record.is_terminal()
                && !record.input_requests.is_empty()
                && let Some(bus) = self.bus.get()
            {
                // Acknowledged only once on its way: answers the bus cannot carry are refused
                // here, not lost there.
                bus.try_publish(BusEvent::TaskAnswered {
                    task_id: record.id.clone(),
                    responses,
                })
                .map_err(|refused| match refused {
                    BusRefused::TooLarge { .. } => ErrorObject::invalid_params(format!(
                        "the task runs on another replica, and its answers cannot reach it: \
                         {refused}"
                    )),
                    other => ErrorObject::new(
                        ErrorCode::SERVER_BUSY,
                        format!(
                            "the task runs on another replica, and its answers cannot reach it \
                             now ({other}); retry"
                        ),
                    ),
                })?;
            }
            return Ok(());
        };
        self.apply_answers(&live, responses).await
    }

    /// Hands `responses` to the questions task `live` waits on, and records that they were
    /// answered.
    async fn apply_answers(&self, live: &Live, responses: JsonObject) -> Result<(), ErrorObject> {
        let _edit = live.edit.lock().await;
        let mut record = self
            .current(live)
            .await
            .map_err(|e| ErrorObject::internal(e.to_string()))?;
        let mut wake = Vec::new();
        {
            let mut waiters = live.waiters.lock().unwrap_or_else(PoisonError::into_inner);
            for (key, answer) in responses {
                if let Some(waiter) = waiters.remove(&key) {
                    record.input_requests.remove(&key);
                    wake.push((waiter, answer));
                }
            }
        }
        if wake.is_empty() {
            return Ok(());
        }
        let resumed = record.input_requests.is_empty();
        if resumed {
            record.set_status(TaskStatus::Working);
        } else {
            record.updated_at = std::time::SystemTime::now();
        }
        self.store
            .update(record.clone())
            .await
            .map_err(store_error)?;
        self.changed(Some(live), &record, resumed);
        for (waiter, answer) in wake {
            let _ = waiter.send(answer);
        }
        Ok(())
    }

    /// Cancels task `id`: `cancelled` from now on (an ended task stays as it ended), and its
    /// handler, when it runs here, is told.
    ///
    /// # Errors
    /// As [`find`](Self::find).
    pub(crate) async fn cancel(
        &self,
        id: &str,
        principal: Option<&str>,
    ) -> Result<TaskRecord, ErrorObject> {
        let record = self.find(id, principal).await?;
        if record.is_terminal() {
            return Ok(record);
        }
        let live = self.live_tasks().get(id).cloned();
        let record = {
            let _edit = match &live {
                Some(live) => Some(live.edit.lock().await),
                None => None,
            };
            let mut record = self.find(id, principal).await?;
            if record.set_status(TaskStatus::Cancelled) {
                record.input_requests.clear();
                record.status_message = Some("cancelled by the client".to_owned());
                self.store
                    .update(record.clone())
                    .await
                    .map_err(store_error)?;
                self.changed(live.as_deref(), &record, true);
            }
            record
        };
        match live {
            Some(live) => {
                live.cancel.cancel();
                live.done.cancel();
            }
            // Run by another process, if by any: it hears of it on the bus.
            None => {
                if let Some(bus) = self.bus.get() {
                    bus.publish(BusEvent::TaskCancelled {
                        task_id: record.id.clone(),
                    });
                }
            }
        }
        Ok(record)
    }

    /// Records a progress report of task `live` (its status message says it in words).
    pub(crate) async fn progress(
        &self,
        live: &Live,
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    ) -> Result<(), SessionError> {
        let _edit = live.edit.lock().await;
        let mut record = self.current(live).await?;
        if record.is_terminal() {
            return Err(SessionError::Cancelled("the task has ended".to_owned()));
        }
        let of = total.map(|t| format!("/{t}")).unwrap_or_default();
        let text = match message {
            Some(message) => format!("{progress}{of}: {message}"),
            None => format!("{progress}{of}"),
        };
        record.progress = Some((progress, total));
        record.status_message = Some(text);
        record.updated_at = std::time::SystemTime::now();
        self.store
            .update(record.clone())
            .await
            .map_err(|e| SessionError::Closed(e.to_string()))?;
        self.changed(Some(live), &record, false);
        Ok(())
    }

    /// Waits until task `id` has ended (`tasks/result`, 2025-11-25): at once for one running
    /// here, polling the store every poll interval for one run elsewhere.
    ///
    /// # Errors
    /// As [`find`](Self::find).
    pub(crate) async fn ended(
        &self,
        id: &str,
        principal: Option<&str>,
    ) -> Result<TaskRecord, ErrorObject> {
        loop {
            let record = self.find(id, principal).await?;
            if record.is_terminal() {
                return Ok(record);
            }
            let live = self.live_tasks().get(id).cloned();
            match live {
                Some(live) => live.done.cancelled().await,
                None => tokio::time::sleep(self.poll_interval).await,
            }
        }
    }

    async fn current(&self, live: &Live) -> Result<TaskRecord, SessionError> {
        self.store
            .get(&live.id)
            .await
            .map_err(|e| SessionError::Closed(e.to_string()))?
            .ok_or_else(|| SessionError::Closed("the task expired".to_owned()))
    }
}

/// `-32602` for a task nobody may see.
pub(crate) fn unknown_task(id: &str) -> ErrorObject {
    ErrorObject::invalid_params(format!(
        "unknown task {:?} (it never existed, has expired, or is not yours)",
        excerpt(id)
    ))
}

fn store_error(error: TaskStoreError) -> ErrorObject {
    match error {
        TaskStoreError::Full(_)
        | TaskStoreError::OwnerFull(_)
        | TaskStoreError::BytesFull { .. } => {
            ErrorObject::new(ErrorCode::SERVER_BUSY, error.to_string())
        }
        other => ErrorObject::internal(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use tidewire_core::schema::InputRequest;

    use super::*;
    use crate::bus::Subscriber;
    use crate::tasks::MemoryTaskStore;

    /// A shared bus that carries nothing as large as a task's answers.
    #[derive(Debug)]
    struct Narrow;

    impl NotificationBus for Narrow {
        fn publish(&self, _: BusEvent) {}

        fn subscribe(&self, _: Subscriber) -> Subscription {
            Subscription::new(|| {})
        }

        fn try_publish(&self, _: BusEvent) -> Result<(), BusRefused> {
            Err(BusRefused::TooLarge {
                size: 70_000,
                max: 65_536,
            })
        }
    }

    /// Issue 26, item 10: answers for a task running on another replica were acknowledged
    /// though the bus dropped them (too large), and the task stayed `input_required`.
    #[tokio::test]
    async fn answers_the_bus_cannot_carry_are_refused_not_acknowledged() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let store = Arc::new(MemoryTaskStore::default());
            let tasks = Arc::new(Tasks::new(
                store.clone(),
                Duration::from_millis(500),
                crate::tasks::DEFAULT_LEASE,
            ));
            tasks.attach_bus(Arc::new(Narrow));
            // Waiting for input, and run by another replica: nothing of it is live here.
            let mut record = TaskRecord::new("t-1".into(), "crawl".into(), None, None);
            record.status = TaskStatus::InputRequired;
            record
                .input_requests
                .insert("q".into(), InputRequest::ListRoots);
            store.insert(record).await.expect("stored");
            let mut responses = serde_json::Map::new();
            responses.insert("q".into(), Value::String("x".repeat(70_000)));
            let refused = tokio::time::timeout(
                Duration::from_secs(30),
                tasks.answer("t-1", None, responses),
            )
            .await
            .expect("in time")
            .expect_err("refused");
            assert_eq!(refused.code, ErrorCode::INVALID_PARAMS.0, "{refused}");
            assert!(refused.message.contains("65536"), "{refused}");
        })
        .await
        .expect("the test took longer than its limit");
    }
}
