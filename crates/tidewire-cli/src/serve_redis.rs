//! `tidewire serve --bind ADDR --redis URL`: the demo server as one replica of several behind a
//! load balancer, sharing through Redis its notification bus, its task store, the key that
//! seals a stateless request's state, and the peer tools' own state.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use tidewire_demo::DemoStore;
use tidewire_http::server::EventStoreLimits;
use tidewire_redis::{
    Redis, RedisBus, RedisEventStore, RedisTaskStore, RoutingLimits, SessionRouting,
    shared_key_ring,
};
use tidewire_server::tasks::TaskLimits;
use tidewire_server::{KeyRing, ServerBuilder};

use crate::demo_store::RedisDemoStore;

/// The namespace of the demo server's keys and channel in Redis.
const NAMESPACE: &str = "tidewire-demo";

#[derive(Debug, Args)]
pub(crate) struct RedisArgs {
    /// HTTP: run as one replica of several that share this Redis (redis://HOST:PORT), behind
    /// a load balancer without affinity: list changes and resource updates reach every
    /// replica's clients, any replica answers for any task, a stateless request's state opens
    /// on any replica, and a Streamable HTTP session's requests are forwarded to the replica
    /// holding it.
    #[arg(long, value_name = "URL")]
    pub(crate) redis: Option<String>,

    /// With --redis: this replica's name, unique among the replicas sharing the Redis (default:
    /// a random one). A replica refuses to start while another runs under its name.
    #[arg(long, value_name = "NAME", requires = "redis")]
    pub(crate) node_id: Option<String>,

    /// The id drawn when none is given: drawn once, so every part of the replica uses it.
    #[arg(skip)]
    drawn: std::sync::OnceLock<String>,

    /// With --redis: the most requests forwarded from other replicas that open streams (GETs,
    /// POSTed calls) this replica serves at once; past it they get 503.
    #[arg(long, value_name = "N", requires = "redis", default_value_t = RoutingLimits::DEFAULT_FORWARDED_STREAMS)]
    pub(crate) max_forwarded_streams: usize,

    /// With --redis: the most forwarded messages answered at once (POSTed responses and
    /// notifications, DELETEs) this replica serves at once; past it they get 503.
    #[arg(long, value_name = "N", requires = "redis", default_value_t = RoutingLimits::DEFAULT_FORWARDED_MESSAGES)]
    pub(crate) max_forwarded_messages: usize,
}

impl RedisArgs {
    /// This replica's name.
    pub(crate) fn node(&self) -> String {
        match &self.node_id {
            Some(node) => node.clone(),
            None => self
                .drawn
                .get_or_init(tidewire_redis::random_node_id)
                .clone(),
        }
    }

    /// The shared parts on Redis when `--redis` asks (`None` otherwise): the bus, the task
    /// store, the sealing key and the peer tools' state; for the session endpoints the session
    /// routing (sessions known for `session_ttl` after their last request) and the event store
    /// copying to Redis (within `limits` in memory).
    pub(crate) async fn connect(
        &self,
        session_ttl: Duration,
        limits: EventStoreLimits,
    ) -> Result<Option<RedisParts>, String> {
        let Some(url) = &self.redis else {
            return Ok(None);
        };
        let failed = |e: tidewire_redis::RedisError| format!("cannot use Redis at {url}: {e}");
        let redis = Redis::connect(url, NAMESPACE).await.map_err(failed)?;
        let bus = redis.bus().await.map_err(failed)?;
        let keys = shared_key_ring(&redis).await.map_err(failed)?;
        let limits_forwarded = RoutingLimits::default()
            .forwarded_streams(self.max_forwarded_streams)
            .forwarded_messages(self.max_forwarded_messages);
        let routing =
            SessionRouting::start_with(&redis, &self.node(), session_ttl, limits_forwarded)
                .await
                .map_err(failed)?;
        let events = Arc::new(RedisEventStore::new(&redis, session_ttl, limits));
        tracing::info!(node = %self.node(), "a replica on Redis");
        Ok(Some(RedisParts {
            store: Arc::new(RedisDemoStore::new(&redis)),
            tasks: Arc::new(RedisTaskStore::new(&redis, TaskLimits::default())),
            bus: Arc::new(bus),
            keys,
            replica: Replica { routing, events },
        }))
    }
}

/// What the replicas share through Redis.
pub(crate) struct RedisParts {
    /// The peer tools' state.
    pub(crate) store: Arc<dyn DemoStore>,
    tasks: Arc<RedisTaskStore>,
    bus: Arc<RedisBus>,
    keys: KeyRing,
    /// What the session endpoints (Streamable HTTP, legacy HTTP+SSE) need.
    pub(crate) replica: Replica,
}

impl RedisParts {
    /// `builder` with its bus, task store and state key on Redis.
    pub(crate) fn attach(&self, builder: ServerBuilder) -> ServerBuilder {
        builder
            .notification_bus(self.bus.clone())
            .task_store(self.tasks.clone())
            .state_keys(self.keys.clone())
    }
}

/// What the session endpoints of a replica on Redis need.
pub(crate) struct Replica {
    /// Forwards a session's requests to the replica holding it.
    pub(crate) routing: SessionRouting,
    /// Keeps stream events, copied to Redis.
    pub(crate) events: Arc<RedisEventStore>,
}
