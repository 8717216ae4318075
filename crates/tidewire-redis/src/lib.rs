//! # tidewire-redis
//!
//! Several tidewire server processes (replicas) behind one load balancer serve as one server
//! when they share, through Redis, what a single process keeps in memory:
//!
//! - [`RedisBus`]: the [`NotificationBus`](tidewire_server::bus::NotificationBus). A list
//!   change or resource update announced on any replica reaches the `subscriptions/listen`
//!   streams and the sessions of every replica, each once (Redis pub/sub, one subscription per
//!   replica, fanned out in the process). A task's changes travel on it too, so a cancel taken
//!   by one replica stops the handler running on another.
//! - [`RedisTaskStore`]: the [`TaskStore`](tidewire_server::tasks::TaskStore). Any replica
//!   answers `tasks/get`, `tasks/list`, `tasks/cancel` for a task another runs; records expire
//!   with their ttl, and an ended record is never replaced (checked inside Redis, by a script).
//! - [`shared_key_ring`]: one key for sealing a stateless request's `requestState`, so a
//!   retry may land on any replica.
//! - [`SessionRouting`]: the session era's Streamable HTTP. A session stays in the replica
//!   that opened it; a request naming it that lands elsewhere is forwarded there through Redis
//!   and its answer (an SSE stream included) relayed back, so no affinity is needed.
//! - [`RedisEventStore`]: the Streamable HTTP [`EventStore`](tidewire_http::server::EventStore).
//!   Events are read from the owner's memory and copied to Redis Streams, so a client whose
//!   session's replica died can still resume (`Last-Event-ID`) what was written, through any
//!   replica.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tidewire_redis::{Redis, RedisTaskStore};
//! use tidewire_server::{Server, schema::Implementation, tasks::TaskLimits};
//!
//! let redis = Redis::connect("redis://127.0.0.1:6379", "my-server").await?;
//! let server = Server::builder(Implementation::new("my-server", "1.0"))
//!     .notification_bus(Arc::new(redis.bus().await?))
//!     .task_store(Arc::new(RedisTaskStore::new(&redis, TaskLimits::default())))
//!     .state_keys(tidewire_redis::shared_key_ring(&redis).await?)
//!     .build();
//! # let _ = server;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod bus;
mod events;
mod keys;
mod liveness;
mod sessions;
mod tasks;

pub use bus::RedisBus;
pub use events::RedisEventStore;
pub use keys::shared_key_ring;
#[doc(hidden)]
pub use sessions::fuzz_forwarded as __fuzz_forwarded;
pub use sessions::{RoutingLimits, SessionRouting};
pub use tasks::RedisTaskStore;

/// The `redis` crate this one is built on, for an application's own commands on
/// [`Redis::connection`].
pub use redis;

use redis::aio::ConnectionManager;

/// Why Redis could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisError {
    /// The URL is not a Redis URL, or the server cannot be reached or refused.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// What Redis holds is not what tidewire wrote.
    #[error("redis holds {key:?} in a form tidewire did not write: {reason}")]
    Corrupt {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The shared key could not be made.
    #[error("the shared key: {0}")]
    Key(String),
    /// A live replica already runs under this node id (its heartbeat is in Redis): two replicas
    /// with one id would take each other's forwarded requests.
    #[error(
        "a live replica already runs as node {node:?} on this Redis: give this one another id          (or let it draw one), or wait {} s if that replica has just stopped",
        within.as_secs().max(1)
    )]
    NodeTaken {
        /// The node id.
        node: String,
        /// How long the other's heartbeat lasts after it stops.
        within: std::time::Duration,
    },
}

/// A node id no other replica will draw: `node-` and 64 random bits in hex. The default for a
/// replica that is not given one (a process id repeats across containers: PID 1 everywhere).
pub fn random_node_id() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("node-{hex}")
}

/// A connection to Redis for one MCP server: the client, a connection that reconnects by
/// itself, and the namespace every key and channel of this server lives under
/// (`tidewire:<namespace>:…`), so several servers can share one Redis.
#[derive(Clone)]
pub struct Redis {
    client: redis::Client,
    manager: ConnectionManager,
    namespace: String,
}

impl std::fmt::Debug for Redis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redis")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl Redis {
    /// Connects to the Redis at `url` (`redis://host:port/db`) for the server `namespace`.
    ///
    /// # Errors
    /// [`RedisError::Redis`] when the URL is not one or the first connection fails.
    pub async fn connect(url: &str, namespace: &str) -> Result<Self, RedisError> {
        use redis::IntoConnectionInfo as _;
        // Every connection notices a silent peer (keepalive, a user timeout), and every
        // command gives up after a while instead of waiting on a frozen path.
        let info = url
            .into_connection_info()?
            .set_tcp_settings(liveness::tcp_settings());
        let client = redis::Client::open(info)?;
        let manager = client
            .get_connection_manager_with_config(liveness::manager_config())
            .await?;
        Ok(Self {
            client,
            manager,
            namespace: namespace.to_owned(),
        })
    }

    /// The notification bus on this Redis (its subscriber starts now).
    ///
    /// # Errors
    /// As [`RedisBus::connect`].
    pub async fn bus(&self) -> Result<RedisBus, RedisError> {
        RedisBus::connect(self).await
    }

    /// The full name of `key` in this server's namespace (`tidewire:<namespace>:<key>`). An
    /// application keeping its own shared state beside tidewire's names its keys with it; the
    /// names tidewire uses are in `docs/scale-out.md`, an application's own are best kept
    /// under a prefix of its own (`app:…`).
    pub fn key(&self, key: &str) -> String {
        format!("tidewire:{}:{key}", self.namespace)
    }

    /// A handle on the shared connection, which reconnects by itself (cheap to clone: every
    /// handle multiplexes one connection). For an application's own commands beside tidewire's.
    pub fn connection(&self) -> ConnectionManager {
        self.manager.clone()
    }

    pub(crate) fn client(&self) -> &redis::Client {
        &self.client
    }
}
