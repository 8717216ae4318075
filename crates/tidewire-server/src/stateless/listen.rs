//! `subscriptions/listen` (2026-07-28): a long-lived request whose stream carries the
//! notifications the client opted in to, each tagged with the listen request's id.
//!
//! The listener subscribes to the server's bus before it acknowledges, so nothing published in
//! between is lost. It ends when the client cancels (closing the stream on HTTP,
//! `notifications/cancelled` elsewhere) — then nothing more is sent — or when the server ends
//! every subscription ([`Server::end_subscriptions`](crate::Server::end_subscriptions)), with the
//! `complete` result.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};
use tidewire_core::schema::{
    AcknowledgedParams, ListenParams, Meta, NotificationType, SubscriptionFilter,
    SubscriptionsAcknowledged, meta_keys, result_type,
};
use tidewire_core::session::RequestContext;
use tidewire_core::transport::Principal;
use tokio::sync::Notify;

use crate::bus::BusEvent;
use crate::connection::MAX_SUBSCRIBED_URI;
use crate::context::ServerInner;
use crate::tasks::TaskRefused;

/// Events one listener holds for its stream before it owes list changes instead.
const QUEUE: usize = 256;
/// How long after a listened task's lease runs out the listener reads it (clocks of replicas
/// differ a little).
const LAPSE_MARGIN: Duration = Duration::from_millis(100);
/// The shortest wait before the listener reads its tasks' leases again.
const LAPSE_RECHECK: Duration = Duration::from_millis(250);
/// The most bytes of resource URIs and task ids one listen may name, all together: what a
/// listen holds for as long as it runs is bounded in bytes, not only in count.
pub(crate) const MAX_LISTEN_FILTER_BYTES: usize = 256 * 1024;

/// Serves one `subscriptions/listen` until it ends.
pub(crate) async fn listen(
    server: &Arc<ServerInner>,
    params: ListenParams,
    ctx: &RequestContext,
    tasks_declared: bool,
) -> Result<Value, ErrorObject> {
    // The params are moved into the filter, not copied, and nothing else of them is kept.
    let accepted = honoured(
        server,
        params.notifications,
        tasks_declared,
        ctx.extensions().get::<Principal>(),
    )?;
    let principal = ctx
        .extensions()
        .get::<Principal>()
        .map(|p| p.subject.clone());
    let _slot = ListenerSlot::take(server)?;
    let id = ctx.id().to_json();
    let mut tag = Meta::new();
    tag.insert(meta_keys::SUBSCRIPTION_ID.to_owned(), id.clone());

    let mut ack = AcknowledgedParams {
        notifications: accepted,
        meta: Some(tag.clone()),
    };
    let ack_value = serde_json::to_value(&ack).map_err(ErrorObject::internal)?;
    let queue = Arc::new(Queue::new(Filter::from(std::mem::take(
        &mut ack.notifications,
    ))));
    drop(ack);
    let mut ended = server.listen_epoch.subscribe();
    let subscription = server.bus.subscribe({
        let queue = queue.clone();
        Arc::new(move |event: &BusEvent| queue.offer(event))
    });
    let ack = ack_value;
    ctx.notify_raw(SubscriptionsAcknowledged::METHOD, Some(ack))
        .await
        .map_err(ErrorObject::from)?;
    // A task whose process died is failed only when someone reads it: the listener reads its
    // tasks when their leases run out, so the failure is pushed instead of waiting for a poll.
    let mut lapse = next_lapse(server, &queue.filter.task_ids).await;
    loop {
        let event = tokio::select! {
            event = queue.next() => event,
            // The engine sends nothing for a cancelled request: this error goes nowhere.
            () = ctx.cancelled() => return Err(ErrorObject::internal("the listen was cancelled")),
            _ = ended.changed() => break,
            () = until(lapse) => {
                let mut soonest = None;
                for id in &queue.filter.task_ids {
                    // Fails a lost task, which publishes its change (to this queue too); the
                    // record it returns says when to look again.
                    if let Ok(record) = server.tasks.find(id, principal.as_deref()).await {
                        soonest = earliest(soonest, server.tasks.lapse_of(&record));
                    }
                }
                lapse = wake_at(soonest);
                continue;
            }
        };
        let (method, mut params) = match &event {
            // A task is sent as `tasks/get` would show it now, if the listener may see it.
            BusEvent::TaskChanged { task_id } => {
                match server.tasks.find(task_id, principal.as_deref()).await {
                    Ok(record) => (
                        "notifications/tasks",
                        serde_json::to_value(record.details()).map_err(ErrorObject::internal)?,
                    ),
                    Err(_) => continue,
                }
            }
            other => wire_form(other),
        };
        // The subscription's tag joins what `_meta` already holds (a task's progress).
        if let Value::Object(map) = &mut params {
            let meta = map
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            match meta {
                Value::Object(meta) => meta.extend(tag.clone().into_inner()),
                other => *other = Value::Object(tag.clone().into_inner()),
            }
        }
        ctx.notify_raw(method, Some(params))
            .await
            .map_err(ErrorObject::from)?;
    }
    drop(subscription);
    Ok(json!({
        "resultType": result_type::COMPLETE,
        "_meta": { meta_keys::SUBSCRIPTION_ID: id },
    }))
}

/// The part of `asked` this server honours (what it can ever send), or `-32602` for a
/// resource or task list over the limits (in count, in the length of each, in bytes all
/// together) or a resource this server does not offer; `-32003` for a resource `principal`
/// may not read.
fn honoured(
    server: &ServerInner,
    asked: SubscriptionFilter,
    tasks_declared: bool,
    principal: Option<&Principal>,
) -> Result<SubscriptionFilter, ErrorObject> {
    let named: usize = asked
        .resource_subscriptions
        .iter()
        .chain(asked.task_ids.iter())
        .flatten()
        .map(String::len)
        .sum();
    if named > MAX_LISTEN_FILTER_BYTES {
        return Err(ErrorObject::invalid_params(format!(
            "one listen names {named} bytes of resource URIs and task ids; the limit is \
             {MAX_LISTEN_FILTER_BYTES}"
        )));
    }
    let task_ids = match asked.task_ids {
        Some(_) if !tasks_declared => return Err(TaskRefused::missing_extension().into_error()),
        Some(ids) if ids.len() > server.max_subscriptions => {
            return Err(ErrorObject::invalid_params(format!(
                "too many tasks in one listen ({}; the limit is {})",
                ids.len(),
                server.max_subscriptions
            )));
        }
        Some(ids) if ids.iter().any(|id| id.len() > MAX_SUBSCRIBED_URI) => {
            return Err(ErrorObject::invalid_params(
                "a task id to listen to is too long",
            ));
        }
        Some(ids) if !ids.is_empty() => Some(ids),
        _ => None,
    };
    let has_resources = !server.resources.is_empty() || !server.templates.is_empty();
    let yes = |flag: Option<bool>, offered: bool| (flag == Some(true) && offered).then_some(true);
    let uris = match asked.resource_subscriptions {
        Some(uris) if has_resources => {
            if uris.len() > server.max_subscriptions {
                return Err(ErrorObject::invalid_params(format!(
                    "too many resource subscriptions in one listen ({}; the limit is {})",
                    uris.len(),
                    server.max_subscriptions
                )));
            }
            if let Some(long) = uris.iter().find(|u| u.len() > MAX_SUBSCRIBED_URI) {
                return Err(ErrorObject::invalid_params(format!(
                    "a URI to subscribe to is {} bytes; the limit is {MAX_SUBSCRIBED_URI}",
                    long.len()
                )));
            }
            // What `resources/read` would find first: a resource this server offers.
            if let Some(unknown) = uris.iter().find(|u| !offers(server, u)) {
                return Err(ErrorObject::invalid_params(format!(
                    "this server offers no resource {:?} to listen to",
                    tidewire_core::text::excerpt(unknown)
                )));
            }
            // And one the principal may read, as `resources/read` would check.
            for uri in &uris {
                crate::calls::check_resource_scopes(server, uri, principal)?;
            }
            (!uris.is_empty()).then_some(uris)
        }
        _ => None,
    };
    Ok(SubscriptionFilter {
        tools_list_changed: yes(asked.tools_list_changed, true),
        prompts_list_changed: yes(asked.prompts_list_changed, !server.prompts.is_empty()),
        resources_list_changed: yes(asked.resources_list_changed, has_resources),
        resource_subscriptions: uris,
        task_ids,
    })
}

/// Whether `uri` names a resource this server offers: one of its resources, or a match of one
/// of its templates (as `resources/read` finds one).
fn offers(server: &ServerInner, uri: &str) -> bool {
    server.resources.get(uri).is_some()
        || server
            .templates
            .snapshot()
            .iter()
            .any(|entry| entry.parsed.matches(uri).is_some())
}

/// What one listener wants, kept compactly for as long as it listens: flags, and sets of the
/// resource URIs and task ids it names.
struct Filter {
    tools_list_changed: bool,
    prompts_list_changed: bool,
    resources_list_changed: bool,
    uris: std::collections::HashSet<Box<str>>,
    task_ids: std::collections::HashSet<Box<str>>,
}

impl From<SubscriptionFilter> for Filter {
    fn from(accepted: SubscriptionFilter) -> Self {
        let set = |items: Option<Vec<String>>| {
            items
                .into_iter()
                .flatten()
                .map(String::into_boxed_str)
                .collect()
        };
        Self {
            tools_list_changed: accepted.tools_list_changed == Some(true),
            prompts_list_changed: accepted.prompts_list_changed == Some(true),
            resources_list_changed: accepted.resources_list_changed == Some(true),
            uris: set(accepted.resource_subscriptions),
            task_ids: set(accepted.task_ids),
        }
    }
}

/// The method and params (without `_meta`) an event travels as.
fn wire_form(event: &BusEvent) -> (&'static str, Value) {
    match event {
        BusEvent::ToolsListChanged => ("notifications/tools/list_changed", json!({})),
        BusEvent::PromptsListChanged => ("notifications/prompts/list_changed", json!({})),
        BusEvent::ResourcesListChanged => ("notifications/resources/list_changed", json!({})),
        BusEvent::ResourceUpdated { uri } => {
            ("notifications/resources/updated", json!({ "uri": uri }))
        }
        // Read from the store as it is sent (see `listen`); never reaches here.
        BusEvent::TaskChanged { task_id } => ("notifications/tasks", json!({ "taskId": task_id })),
        // Between replicas only; `wants` never queues them.
        BusEvent::TaskCancelled { task_id } | BusEvent::TaskAnswered { task_id, .. } => {
            ("notifications/tasks", json!({ "taskId": task_id }))
        }
    }
}

/// A listener's place among the server's listeners, bounded by `max_listeners`.
struct ListenerSlot(Arc<AtomicUsize>);

impl ListenerSlot {
    fn take(server: &ServerInner) -> Result<Self, ErrorObject> {
        let count = server.listeners.clone();
        let before = count.fetch_add(1, Ordering::AcqRel);
        let slot = Self(count);
        if before >= server.max_listeners {
            return Err(ErrorObject::new(
                ErrorCode::SERVER_BUSY,
                format!(
                    "the server holds its most listen streams ({}); retry later",
                    server.max_listeners
                ),
            ));
        }
        Ok(slot)
    }
}

impl Drop for ListenerSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The soonest moment one of `task_ids` (running in another process) could be found lost: a
/// little after its lease runs out, and never sooner than [`LAPSE_RECHECK`] from now (a lease
/// that has run out but was not failed yet is looked at again then, not in a busy loop).
async fn next_lapse(
    server: &ServerInner,
    task_ids: &std::collections::HashSet<Box<str>>,
) -> Option<tokio::time::Instant> {
    let mut soonest = None;
    for id in task_ids {
        soonest = earliest(soonest, server.tasks.lapse(id).await);
    }
    wake_at(soonest)
}

/// The earlier of two moments, either of which may be missing.
fn earliest(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// When to read the tasks again, for a lease that runs out at `soonest` (see [`next_lapse`]).
fn wake_at(soonest: Option<SystemTime>) -> Option<tokio::time::Instant> {
    let wait = soonest?
        .duration_since(SystemTime::now())
        .unwrap_or(Duration::ZERO)
        .saturating_add(LAPSE_MARGIN)
        .max(LAPSE_RECHECK);
    Some(tokio::time::Instant::now() + wait)
}

/// Sleeps until `at`; never, without one.
async fn until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The events waiting for one listener's stream. Bounded: when full, a list change is owed
/// (one of each kind is sent once there is room; one tells all) and a resource update is lost.
struct Queue {
    filter: Filter,
    events: Mutex<VecDeque<BusEvent>>,
    owed: AtomicU8,
    ready: Notify,
}

impl Queue {
    fn new(filter: Filter) -> Self {
        Self {
            filter,
            events: Mutex::new(VecDeque::new()),
            owed: AtomicU8::new(0),
            ready: Notify::new(),
        }
    }

    fn wants(&self, event: &BusEvent) -> bool {
        match event {
            BusEvent::ToolsListChanged => self.filter.tools_list_changed,
            BusEvent::PromptsListChanged => self.filter.prompts_list_changed,
            BusEvent::ResourcesListChanged => self.filter.resources_list_changed,
            BusEvent::ResourceUpdated { uri } => self.filter.uris.contains(uri.as_str()),
            BusEvent::TaskChanged { task_id } => self.filter.task_ids.contains(task_id.as_str()),
            BusEvent::TaskCancelled { .. } | BusEvent::TaskAnswered { .. } => false,
        }
    }

    /// Called by the bus: queues the event if this listener wants it, never waiting.
    fn offer(&self, event: &BusEvent) {
        if !self.wants(event) {
            return;
        }
        let mut events = self.lock();
        if events.len() < QUEUE {
            events.push_back(event.clone());
        } else if let Some(bit) = owed_bit(event) {
            self.owed.fetch_or(bit, Ordering::AcqRel);
        } else {
            tracing::debug!("a listen stream that does not keep up lost a resource update");
        }
        drop(events);
        self.ready.notify_one();
    }

    async fn next(&self) -> BusEvent {
        loop {
            let ready = self.ready.notified();
            if let Some(event) = self.lock().pop_front() {
                return event;
            }
            let owed = self.owed.swap(0, Ordering::AcqRel);
            if owed != 0 {
                // Put back all but the first owed kind; the loop hands them out in turn.
                let mut events = self.lock();
                let kinds = [
                    BusEvent::ToolsListChanged,
                    BusEvent::PromptsListChanged,
                    BusEvent::ResourcesListChanged,
                ];
                for kind in kinds {
                    if owed_bit(&kind).is_some_and(|bit| owed & bit != 0) {
                        events.push_back(kind);
                    }
                }
                if let Some(event) = events.pop_front() {
                    return event;
                }
            }
            ready.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<BusEvent>> {
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn owed_bit(event: &BusEvent) -> Option<u8> {
    match event {
        BusEvent::ToolsListChanged => Some(1),
        BusEvent::PromptsListChanged => Some(2),
        BusEvent::ResourcesListChanged => Some(4),
        BusEvent::ResourceUpdated { .. }
        | BusEvent::TaskChanged { .. }
        | BusEvent::TaskCancelled { .. }
        | BusEvent::TaskAnswered { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_owes_list_changes_and_drops_updates() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let queue = Queue::new(Filter::from(SubscriptionFilter {
                tools_list_changed: Some(true),
                resource_subscriptions: Some(vec!["a://x".into()]),
                ..SubscriptionFilter::default()
            }));
            queue.offer(&BusEvent::PromptsListChanged); // not asked for
            for _ in 0..QUEUE {
                queue.offer(&BusEvent::ResourceUpdated {
                    uri: "a://x".into(),
                });
            }
            queue.offer(&BusEvent::ToolsListChanged); // owed
            queue.offer(&BusEvent::ResourceUpdated {
                uri: "a://x".into(),
            }); // lost
            let mut seen = Vec::new();
            for _ in 0..=QUEUE {
                seen.push(
                    tokio::time::timeout(std::time::Duration::from_secs(5), queue.next())
                        .await
                        .expect("an event is ready"),
                );
            }
            assert_eq!(seen.last(), Some(&BusEvent::ToolsListChanged));
            assert!(!seen.contains(&BusEvent::PromptsListChanged));
            assert!(queue.lock().is_empty());
        })
        .await
        .expect("the test took longer than its limit");
    }
}
