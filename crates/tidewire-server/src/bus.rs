//! The notification bus: how list changes and resource updates reach every client of a server,
//! whichever era it speaks — session-era connections and `subscriptions/listen` streams alike.
//!
//! [`Server::notify_tools_changed`](crate::Server::notify_tools_changed) and its siblings publish
//! a [`BusEvent`]; every subscriber of the bus gets it. A server process subscribes once for its
//! session-era connections, and once per open listen stream. The default [`MemoryBus`] reaches
//! this process only; a bus shared by several processes (behind a load balancer) implements the
//! same trait, delivering each event to the subscribers of every process, the publisher's too.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Something every interested client should hear about.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum BusEvent {
    /// The tool list changed.
    ToolsListChanged,
    /// The prompt list changed.
    PromptsListChanged,
    /// The resource list changed.
    ResourcesListChanged,
    /// The resource at `uri` changed.
    ResourceUpdated {
        /// The resource.
        uri: String,
    },
    /// The task `task_id` changed (its status, message, questions or outcome).
    TaskChanged {
        /// The task.
        task_id: String,
    },
    /// The task `task_id` was cancelled by the replica that took the `tasks/cancel`: the one
    /// running it stops its handler. Not for clients.
    TaskCancelled {
        /// The task.
        task_id: String,
    },
    /// Answers to the questions of task `task_id`, taken by a replica that does not run it:
    /// the one running it hands them to the handler. Not for clients.
    TaskAnswered {
        /// The task.
        task_id: String,
        /// The answers by question key.
        responses: serde_json::Map<String, serde_json::Value>,
    },
}

/// What a subscriber runs for each event. It is called on the publisher's task (or the bus's
/// reader): it must not block, only queue.
pub type Subscriber = Arc<dyn Fn(&BusEvent) + Send + Sync>;

/// A subscription to a bus; dropping it unsubscribes.
#[must_use = "dropping a subscription ends it"]
pub struct Subscription(Option<Box<dyn FnOnce() + Send + Sync>>);

impl Subscription {
    /// A subscription that runs `end` when dropped.
    pub fn new(end: impl FnOnce() + Send + Sync + 'static) -> Self {
        Self(Some(Box::new(end)))
    }
}

impl fmt::Debug for Subscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Subscription")
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(end) = self.0.take() {
            end();
        }
    }
}

/// Why a bus could not take an event that must not be lost silently.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BusRefused {
    /// The event is larger than one message of the bus may be.
    #[error("the event is {size} bytes; the bus carries at most {max} bytes")]
    TooLarge {
        /// The event's size, encoded.
        size: usize,
        /// The bus's limit.
        max: usize,
    },
    /// The bus cannot take it now (its connection is gone, or its outbox is full).
    #[error("the bus cannot take it now: {0}")]
    Unavailable(String),
}

/// Carries [`BusEvent`]s to every subscriber, in this process or (for a shared bus) in every
/// process serving the same MCP server.
pub trait NotificationBus: Send + Sync + fmt::Debug + 'static {
    /// Delivers `event` to every subscriber, without waiting on any. An event the bus cannot
    /// carry is dropped (and logged): for one that must not be, see
    /// [`try_publish`](Self::try_publish).
    fn publish(&self, event: BusEvent);

    /// Delivers `event` as [`publish`](Self::publish) does, or says why it cannot: for an event
    /// whose loss the caller must report (a task's answers, acknowledged to a client only once
    /// they are on their way). The default publishes and succeeds (an in-process bus carries
    /// everything).
    ///
    /// # Errors
    /// [`BusRefused`] when the event is too large for the bus or the bus cannot take it now.
    fn try_publish(&self, event: BusEvent) -> Result<(), BusRefused> {
        self.publish(event);
        Ok(())
    }

    /// Adds a subscriber until the returned [`Subscription`] drops.
    fn subscribe(&self, subscriber: Subscriber) -> Subscription;
}

/// The in-process bus (the default): `publish` calls every subscriber before it returns.
#[derive(Default)]
pub struct MemoryBus {
    subscribers: Arc<Mutex<HashMap<u64, Subscriber>>>,
    next: AtomicU64,
}

impl MemoryBus {
    /// An empty bus.
    pub fn new() -> Self {
        Self::default()
    }

    /// Subscribers now.
    pub fn subscriber_count(&self) -> usize {
        lock(&self.subscribers).len()
    }
}

impl fmt::Debug for MemoryBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryBus")
            .field("subscribers", &self.subscriber_count())
            .finish()
    }
}

fn lock(
    map: &Mutex<HashMap<u64, Subscriber>>,
) -> std::sync::MutexGuard<'_, HashMap<u64, Subscriber>> {
    map.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl NotificationBus for MemoryBus {
    fn publish(&self, event: BusEvent) {
        // Called outside the lock: a subscriber may subscribe or unsubscribe meanwhile.
        let subscribers: Vec<Subscriber> = lock(&self.subscribers).values().cloned().collect();
        for subscriber in subscribers {
            subscriber(&event);
        }
    }

    fn subscribe(&self, subscriber: Subscriber) -> Subscription {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.subscribers).insert(id, subscriber);
        let subscribers = Arc::downgrade(&self.subscribers);
        Subscription::new(move || {
            if let Some(subscribers) = subscribers.upgrade() {
                lock(&subscribers).remove(&id);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subscriber_hears_each_event_until_it_unsubscribes() {
        let bus = MemoryBus::new();
        let heard = Arc::new(Mutex::new(Vec::new()));
        let first = {
            let heard = heard.clone();
            bus.subscribe(Arc::new(move |e: &BusEvent| {
                heard.lock().expect("lock").push((1, e.clone()));
            }))
        };
        let second = {
            let heard = heard.clone();
            bus.subscribe(Arc::new(move |e: &BusEvent| {
                heard.lock().expect("lock").push((2, e.clone()));
            }))
        };
        bus.publish(BusEvent::ToolsListChanged);
        drop(first);
        bus.publish(BusEvent::ResourceUpdated {
            uri: "a://b".into(),
        });
        let mut heard = heard.lock().expect("lock").clone();
        heard.sort_by_key(|(n, e)| (*n, format!("{e:?}")));
        assert_eq!(
            heard,
            vec![
                (1, BusEvent::ToolsListChanged),
                (
                    2,
                    BusEvent::ResourceUpdated {
                        uri: "a://b".into()
                    }
                ),
                (2, BusEvent::ToolsListChanged),
            ]
        );
        assert_eq!(bus.subscriber_count(), 1);
        drop(second);
        assert_eq!(bus.subscriber_count(), 0);
    }

    #[test]
    fn events_serialise_with_their_kind() {
        let value = serde_json::to_value(BusEvent::ResourceUpdated { uri: "x".into() })
            .expect("serialises");
        assert_eq!(
            value,
            serde_json::json!({"kind": "resource_updated", "uri": "x"})
        );
    }
}
