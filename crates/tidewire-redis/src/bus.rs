//! [`RedisBus`]: the notification bus over Redis pub/sub.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use tidewire_server::bus::{
    BusEvent, BusRefused, MemoryBus, NotificationBus, Subscriber, Subscription,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

use crate::{Redis, RedisError};

/// Events waiting to be published, at most; past it an event is dropped and logged.
const OUTBOX: usize = 4096;
/// The largest event read from the channel.
const MAX_EVENT: usize = 64 * 1024;
/// The longest wait between two attempts to subscribe again: once Redis is back, events flow
/// again within this.
const MOST_BACKOFF: Duration = Duration::from_secs(1);

/// Delivers each [`BusEvent`] published on any replica to the subscribers of every replica,
/// this one's included, once each.
///
/// `publish` queues the event (never waits; at most 4,096 queued, then it is dropped and
/// logged) for one task that publishes in order on the server's channel. One subscription per
/// replica reads the channel and hands each event to this process's subscribers. When Redis
/// goes away, events published meanwhile are lost (logged); the subscription is made again,
/// with a growing pause up to 1 s, and the publisher's connection reconnects by itself.
pub struct RedisBus {
    local: Arc<MemoryBus>,
    outbox: mpsc::Sender<String>,
    tasks: Vec<AbortHandle>,
    channel: String,
}

impl std::fmt::Debug for RedisBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisBus")
            .field("channel", &self.channel)
            .field("subscribers", &self.local.subscriber_count())
            .finish()
    }
}

impl Drop for RedisBus {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl RedisBus {
    /// Subscribes to the server's channel (returning once the subscription is in place, so
    /// nothing published after this returns is missed) and starts the publisher.
    ///
    /// # Errors
    /// [`RedisError::Redis`] when the first subscription fails.
    pub async fn connect(redis: &Redis) -> Result<Self, RedisError> {
        let channel = redis.key("bus");
        let local = Arc::new(MemoryBus::new());
        let (ready, subscribed) = oneshot::channel();
        let reader = tokio::spawn(read(
            redis.client().clone(),
            channel.clone(),
            local.clone(),
            ready,
        ));
        match subscribed.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                reader.abort();
                return Err(error.into());
            }
            Err(_) => {
                return Err(RedisError::Key("the bus's reader stopped".to_owned()));
            }
        }
        let (outbox, queued) = mpsc::channel(OUTBOX);
        let publisher = tokio::spawn(publish(redis.clone(), channel.clone(), queued));
        Ok(Self {
            local,
            outbox,
            tasks: vec![reader.abort_handle(), publisher.abort_handle()],
            channel,
        })
    }
}

/// Publishes the queued events in order.
async fn publish(redis: Redis, channel: String, mut queued: mpsc::Receiver<String>) {
    let mut connection = redis.connection();
    while let Some(event) = queued.recv().await {
        let sent: Result<i64, _> = redis::cmd("PUBLISH")
            .arg(&channel)
            .arg(&event)
            .query_async(&mut connection)
            .await;
        if let Err(error) = sent {
            tracing::warn!(%error, "an event could not be published on Redis; it is lost");
        }
    }
}

/// Reads the channel into `local`, subscribing again whenever the connection is lost.
async fn read(
    client: redis::Client,
    channel: String,
    local: Arc<MemoryBus>,
    ready: oneshot::Sender<redis::RedisResult<()>>,
) {
    let mut ready = Some(ready);
    let mut pause = Duration::from_millis(100);
    loop {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        }
        .await;
        let pubsub = match subscribed {
            Ok(pubsub) => pubsub,
            Err(error) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(error));
                    return;
                }
                tracing::warn!(%error, "cannot subscribe to the bus on Redis; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MOST_BACKOFF);
                continue;
            }
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(Ok(()));
        } else {
            tracing::info!("subscribed to the bus on Redis again");
        }
        pause = Duration::from_millis(100);
        let (sink, mut messages) = pubsub.split();
        // A connection that went silent is noticed by its pings, not waited on for ever.
        let mut lost = std::pin::pin!(crate::liveness::lost(sink));
        loop {
            let message = tokio::select! {
                message = messages.next() => message,
                () = &mut lost => None,
            };
            let Some(message) = message else { break };
            let payload = message.get_payload_bytes();
            if payload.len() > MAX_EVENT {
                tracing::warn!(
                    len = payload.len(),
                    "an event on the bus is too long; dropped"
                );
                continue;
            }
            match serde_json::from_slice::<BusEvent>(payload) {
                Ok(event) => local.publish(event),
                Err(error) => tracing::warn!(%error, "not an event on the bus; dropped"),
            }
        }
        tracing::warn!(
            "the bus's connection to Redis was lost; events published meanwhile are lost"
        );
    }
}

impl NotificationBus for RedisBus {
    fn publish(&self, event: BusEvent) {
        if let Err(refused) = self.try_publish(event) {
            tracing::warn!("an event is dropped: {refused}");
        }
    }

    /// Refuses an event over the size every replica reads (rather than publishing what they
    /// would drop), and one the outbox has no room for.
    fn try_publish(&self, event: BusEvent) -> Result<(), BusRefused> {
        let json = serde_json::to_string(&event)
            .map_err(|e| BusRefused::Unavailable(format!("the event does not encode: {e}")))?;
        if json.len() > MAX_EVENT {
            return Err(BusRefused::TooLarge {
                size: json.len(),
                max: MAX_EVENT,
            });
        }
        self.outbox.try_send(json).map_err(|_| {
            BusRefused::Unavailable("its outbox is full (Redis too slow or gone)".to_owned())
        })
    }

    fn subscribe(&self, subscriber: Subscriber) -> Subscription {
        self.local.subscribe(subscriber)
    }
}
