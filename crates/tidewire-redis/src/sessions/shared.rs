//! What every part of the session routing shares: the replica's state, its Redis keys and
//! channels, the session a request names, and the answers it makes itself.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use super::pieces::PieceSender;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use http::StatusCode;
use redis::aio::PubSubSink;
pub(super) use tidewire_core::http::sessions::SESSION_ID_HEADER as SESSION_ID;

use crate::Redis;

/// Chunks a relay holds for a client that reads slowly; past it the relay ends (the client
/// resumes). Also the forwarded requests queued for this replica before it takes them.
pub(super) const RELAY_QUEUE: usize = 1024;
/// Bytes a relay holds for a client that reads slowly, all its chunks together; past it the
/// relay ends too.
pub(super) const RELAY_BYTES: usize = 16 * 1024 * 1024;
/// Bytes of forwarded requests queued for this replica before it takes them; past it the next
/// one is dropped (its relay answers 503).
pub(super) const INBOX_BYTES: usize = 64 * 1024 * 1024;
/// How long a replica counts as alive after its last heartbeat.
pub(super) const ALIVE_FOR: Duration = Duration::from_secs(3);

/// A session opened here, as this replica keeps its place.
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub(super) used: std::time::Instant,
    /// The subject it was opened for, when the request was verified.
    pub(super) subject: Option<String>,
}

/// One replica's routing state, shared by its tasks, its middleware and its relays.
pub(super) struct Routing {
    pub(super) redis: Redis,
    /// This replica's name: its inbox and heartbeat keys, and the owner in its places.
    pub(super) node: String,
    /// The sessions' idle timeout: how long a place outlives its session's last request.
    pub(super) session_ttl: Duration,
    /// Subscribes and unsubscribes; replaced when the subscription is made again.
    pub(super) sink: Mutex<PubSubSink>,
    /// By channel: who waits on its messages (relays here, forwarded requests served here).
    pub(super) routes: Mutex<HashMap<String, PieceSender>>,
    /// The router forwarded requests are served by (the one wrapped, without this layer).
    pub(super) local: OnceLock<axum::Router>,
    /// The endpoint's admission checks, applied to a request before it is forwarded.
    pub(super) admission: OnceLock<tidewire_http::server::Admission>,
    /// The sessions opened here: when each was last used, and for whom.
    pub(super) places: Mutex<HashMap<String, Place>>,
    /// The background tasks, stopped when the last handle goes.
    pub(super) tasks: Mutex<Vec<tokio::task::AbortHandle>>,
    /// The heartbeat and the keeper of places, stopped early by `SessionRouting::stop`.
    pub(super) heart: Mutex<Vec<tokio::task::AbortHandle>>,
    /// Set by `SessionRouting::leave`: this replica writes no place any more.
    pub(super) leaving: std::sync::atomic::AtomicBool,
    /// Requests this replica forwarded to the replica owning their session.
    pub(super) forwarded_out: std::sync::atomic::AtomicU64,
    /// Requests other replicas forwarded here that this replica served.
    pub(super) forwarded_in: std::sync::atomic::AtomicU64,
}

impl Drop for Routing {
    fn drop(&mut self) {
        for tasks in [&self.tasks, &self.heart] {
            for task in tasks.lock().unwrap_or_else(PoisonError::into_inner).iter() {
                task.abort();
            }
        }
    }
}

impl Routing {
    /// True once this replica gives up its sessions (`SessionRouting::leave`).
    pub(super) fn is_leaving(&self) -> bool {
        self.leaving.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// `duration` in whole milliseconds, as Redis takes it.
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A fresh id for a forwarded request (its reply channels).
pub(super) fn random_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Routing {
    pub(super) fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, PieceSender>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn route(&self, channel: &str, tx: PieceSender) {
        self.routes().insert(channel.to_owned(), tx);
    }

    pub(super) fn inbox(&self) -> String {
        self.redis.key(&format!("node:{}:inbox", self.node))
    }

    pub(super) fn alive_key(&self, node: &str) -> String {
        self.redis.key(&format!("node:{node}:alive"))
    }

    pub(super) fn session_key(&self, id: &str) -> String {
        self.redis.key(&format!("session:{id}"))
    }

    pub(super) fn sink(&self) -> PubSubSink {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A new subscription, to every channel waited on now; its sink replaces the old one.
    pub(super) async fn resubscribe(&self) -> Result<redis::aio::PubSubStream, redis::RedisError> {
        let (mut sink, stream) = self.redis.client().get_async_pubsub().await?.split();
        let channels: Vec<String> = self.routes().keys().cloned().collect();
        for channel in channels {
            sink.subscribe(&channel).await?;
        }
        *self.sink.lock().unwrap_or_else(PoisonError::into_inner) = sink;
        Ok(stream)
    }

    pub(super) async fn alive(&self, node: &str) -> bool {
        let alive: Result<bool, _> = redis::cmd("EXISTS")
            .arg(self.alive_key(node))
            .query_async(&mut self.redis.connection())
            .await;
        alive.unwrap_or(false)
    }
}

/// The session a request names: the `Mcp-Session-Id` header (Streamable HTTP), or the
/// `sessionId` query parameter of a legacy HTTP+SSE POST (`session_id`, as the Python SDK
/// spells it).
pub(super) fn session_named(request: &Request) -> Option<String> {
    if let Some(id) = request.headers().get(SESSION_ID) {
        return id.to_str().ok().map(str::to_owned);
    }
    request.uri().query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        matches!(name, "sessionId" | "session_id").then(|| value.to_owned())
    })
}

pub(super) fn status(code: StatusCode, why: &str) -> Response {
    let mut response = Response::new(Body::from(why.to_owned()));
    *response.status_mut() = code;
    response
}

pub(super) fn unavailable(why: &str) -> Response {
    status(StatusCode::SERVICE_UNAVAILABLE, why)
}
