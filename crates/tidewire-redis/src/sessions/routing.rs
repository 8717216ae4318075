//! [`SessionRouting`], the handle a replica makes once, and the tasks it starts: the reader of
//! its subscription, the server of requests forwarded to it, its heartbeat, and the keeper of
//! its sessions' places.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use tidewire_http::server::StreamableHttp;

use super::forward::Forwarded;
use super::pieces::pieces;
use super::shared::{ALIVE_FOR, INBOX_BYTES, RELAY_QUEUE, Routing, millis};
use crate::{Redis, RedisError};

/// How often a replica says it is alive.
pub(super) const HEARTBEAT: Duration = Duration::from_secs(1);
/// Deletes each of `KEYS` (session places) whose owner is `ARGV[1]` (this replica): a place
/// another replica took over since is left alone. Returns how many went.
const GIVE_UP: &str = "local n = 0 \
    for _, key in ipairs(KEYS) do \
        if redis.call('HGET', key, 'owner') == ARGV[1] then \
            n = n + redis.call('DEL', key) \
        end \
    end \
    return n";
/// Places given up in one script call.
const GIVE_UP_AT_ONCE: usize = 512;
/// The longest wait between two tries to subscribe again while Redis is away: once it is
/// back, forwarding works again within this.
const RESUBSCRIBE_AT_MOST: Duration = Duration::from_secs(1);
/// How often a replica writes the places of its sessions again (so they are back within this
/// long after Redis restarts, and kept while the sessions are used).
const KEEP_EVERY: Duration = Duration::from_secs(5);
/// How many requests forwarded from other replicas one replica serves at once; past either
/// bound, the next of that kind is answered `503` with `Retry-After: 1` at once (the client
/// sees the 503; nothing else is affected).
///
/// There are two budgets because forwarded requests are of two kinds. A *stream* — a `GET`, or
/// a `POST` carrying a JSON-RPC request — may stay open as long as its call runs, and a call
/// may wait on its client (an elicitation, a sampling request). A *message* — a `POST` of
/// responses or notifications, a legacy HTTP+SSE `POST`, a `DELETE` — is answered at once.
/// With one budget, calls waiting on their clients could hold every permit and refuse the very
/// answers they wait for.
///
/// ```
/// use tidewire_redis::RoutingLimits;
///
/// let limits = RoutingLimits::default().forwarded_streams(256);
/// assert_eq!(limits.streams(), 256);
/// assert_eq!(limits.messages(), RoutingLimits::DEFAULT_FORWARDED_MESSAGES);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoutingLimits {
    streams: usize,
    messages: usize,
}

impl Default for RoutingLimits {
    fn default() -> Self {
        Self {
            streams: Self::DEFAULT_FORWARDED_STREAMS,
            messages: Self::DEFAULT_FORWARDED_MESSAGES,
        }
    }
}

impl RoutingLimits {
    /// Forwarded streams served at once by default: 1,024.
    pub const DEFAULT_FORWARDED_STREAMS: usize = 1024;
    /// Forwarded messages served at once by default: 1,024.
    pub const DEFAULT_FORWARDED_MESSAGES: usize = 1024;

    /// At most this many forwarded streams at once (at least 1).
    #[must_use]
    pub fn forwarded_streams(mut self, streams: usize) -> Self {
        self.streams = streams.max(1);
        self
    }

    /// At most this many forwarded messages at once (at least 1).
    #[must_use]
    pub fn forwarded_messages(mut self, messages: usize) -> Self {
        self.messages = messages.max(1);
        self
    }

    /// The bound on forwarded streams.
    pub fn streams(&self) -> usize {
        self.streams
    }

    /// The bound on forwarded messages.
    pub fn messages(&self) -> usize {
        self.messages
    }
}

/// Routes each session-era request to the replica that owns its session (see the module
/// docs). Made once per replica with [`SessionRouting::start`], then wrapped around the
/// Streamable HTTP router with [`wrap`](Self::wrap).
#[derive(Clone)]
pub struct SessionRouting {
    shared: Arc<Routing>,
}

impl std::fmt::Debug for SessionRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRouting")
            .field("node", &self.shared.node)
            .finish_non_exhaustive()
    }
}

impl SessionRouting {
    /// Requests this replica has forwarded to the replica owning their session, since it
    /// started (those sent on their way; refused ones are not counted).
    pub fn requests_forwarded(&self) -> u64 {
        self.shared
            .forwarded_out
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests other replicas have forwarded here, since it started.
    pub fn forwarded_requests_served(&self) -> u64 {
        self.shared
            .forwarded_in
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts this replica's routing: it listens for requests forwarded to `node`, says every
    /// second that it is alive, and keeps each session it opens known for `session_ttl` after
    /// its last request (the sessions' idle timeout).
    ///
    /// # Errors
    /// [`RedisError::Redis`] when the subscription cannot be made.
    pub async fn start(
        redis: &Redis,
        node: &str,
        session_ttl: Duration,
    ) -> Result<Self, RedisError> {
        Self::start_with(redis, node, session_ttl, RoutingLimits::default()).await
    }

    /// [`start`](Self::start), serving at most what `limits` allow of the requests other
    /// replicas forward here.
    ///
    /// # Errors
    /// [`RedisError::Redis`] when the subscription cannot be made.
    pub async fn start_with(
        redis: &Redis,
        node: &str,
        session_ttl: Duration,
        limits: RoutingLimits,
    ) -> Result<Self, RedisError> {
        // This node id is this replica's alone: its heartbeat is claimed, not just written.
        let claimed: Option<String> = redis::cmd("SET")
            .arg(redis.key(&format!("node:{node}:alive")))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(millis(ALIVE_FOR))
            .query_async(&mut redis.connection())
            .await?;
        if claimed.is_none() {
            return Err(RedisError::NodeTaken {
                node: node.to_owned(),
                within: ALIVE_FOR,
            });
        }
        // Redis holds places from now on (see `settling`): a first replica opens no window.
        let _: Option<String> = redis::cmd("SET")
            .arg(redis.key("places:epoch"))
            .arg(1)
            .arg("NX")
            .query_async(&mut redis.connection())
            .await?;
        let (sink, mut stream) = redis.client().get_async_pubsub().await?.split();
        let shared = Arc::new(Routing {
            redis: redis.clone(),
            node: node.to_owned(),
            session_ttl,
            sink: Mutex::new(sink),
            routes: Mutex::new(HashMap::new()),
            local: OnceLock::new(),
            admission: OnceLock::new(),
            places: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
            heart: Mutex::new(Vec::new()),
            leaving: std::sync::atomic::AtomicBool::new(false),
            forwarded_out: std::sync::atomic::AtomicU64::new(0),
            forwarded_in: std::sync::atomic::AtomicU64::new(0),
        });
        let inbox = shared.inbox();
        let (tx, mut forwarded) = pieces(RELAY_QUEUE, INBOX_BYTES);
        shared.route(&inbox, tx);
        shared.sink().subscribe(&inbox).await?;
        let weak = Arc::downgrade(&shared);
        let reader = tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                // A subscription that went silent is noticed by its pings, then made again.
                let Some(sink) = weak.upgrade().map(|shared| shared.sink()) else {
                    return;
                };
                let mut lost = std::pin::pin!(crate::liveness::lost(sink));
                loop {
                    let message = tokio::select! {
                        message = stream.next() => message,
                        () = &mut lost => None,
                    };
                    let Some(message) = message else { break };
                    let Some(shared) = weak.upgrade() else { return };
                    let channel = message.get_channel_name().to_owned();
                    let payload = message.get_payload_bytes().to_vec();
                    let target = shared.routes().get(&channel).cloned();
                    if let Some(target) = target
                        && target.try_send(payload).is_err()
                    {
                        if channel == inbox {
                            // The inbox stays: only this request is lost (its relay answers
                            // 503 when no head comes).
                            tracing::warn!("too many forwarded requests queued; one is dropped");
                        } else {
                            // A reader too slow to keep up: its relay ends (the client resumes).
                            shared.routes().remove(&channel);
                        }
                    }
                }
                tracing::warn!(
                    "the session routing's subscription to Redis was lost; making it again"
                );
                // Again, with every channel still waited on; what was published meanwhile is
                // lost (a relay then breaks, and its client resumes).
                loop {
                    let Some(shared) = weak.upgrade() else { return };
                    match shared.resubscribe().await {
                        Ok(again) => {
                            // Redis may have restarted empty: this replica's places, at once.
                            shared.keep_places().await;
                            stream = again;
                            pause = Duration::from_millis(100);
                            break;
                        }
                        Err(error) => {
                            tracing::warn!(%error, "cannot subscribe again yet");
                            drop(shared);
                            tokio::time::sleep(pause).await;
                            pause = (pause * 2).min(RESUBSCRIBE_AT_MOST);
                        }
                    }
                }
            }
        });
        let weak = Arc::downgrade(&shared);
        let streams = Arc::new(tokio::sync::Semaphore::new(limits.streams));
        let messages = Arc::new(tokio::sync::Semaphore::new(limits.messages));
        let server = tokio::spawn(async move {
            while let Some(payload) = forwarded.recv().await {
                let Some(shared) = weak.upgrade() else { return };
                let (streams, messages) = (streams.clone(), messages.clone());
                // Read off the inbox's loop: a body may be megabytes.
                tokio::spawn(async move {
                    let Some(request) = Forwarded::parse(&payload) else {
                        tracing::warn!("not a forwarded request; dropped");
                        return;
                    };
                    let budget = if request.brief { messages } else { streams };
                    match budget.try_acquire_owned() {
                        Ok(_permit) => shared.serve(request).await,
                        Err(_) => shared.refuse(request).await,
                    }
                });
            }
        });
        let weak = Arc::downgrade(&shared);
        let heart = tokio::spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT);
            loop {
                every.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                shared.beat().await;
            }
        });
        let weak = Arc::downgrade(&shared);
        let keep_every = KEEP_EVERY
            .min(session_ttl / 3)
            .max(Duration::from_millis(100));
        let keeper = tokio::spawn(async move {
            let mut every = tokio::time::interval(keep_every);
            loop {
                every.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                shared.keep_places().await;
            }
        });
        shared
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([reader.abort_handle(), server.abort_handle()]);
        shared
            .heart
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([heart.abort_handle(), keeper.abort_handle()]);
        // Alive from the start (the claim above), not a heartbeat later.
        Ok(Self { shared })
    }

    /// Gives up this replica's sessions, for a drain: their places leave Redis (those that
    /// still name this replica), so a request for one that reaches another replica is answered
    /// 404 at once and its client starts a new session there, instead of being forwarded here
    /// until this replica's heartbeat runs out. This replica writes no place from now on; its
    /// heartbeat goes on, so what it still serves or relays is followed until
    /// [`stop`](Self::stop). Returns how many places were given up.
    pub async fn leave(&self) -> usize {
        let shared = &self.shared;
        shared
            .leaving
            .store(true, std::sync::atomic::Ordering::Release);
        let ids: Vec<String> = shared.places().drain().map(|(id, _)| id).collect();
        let mut given_up = 0;
        let script = redis::Script::new(GIVE_UP);
        for chunk in ids.chunks(GIVE_UP_AT_ONCE) {
            let mut invocation = script.prepare_invoke();
            for id in chunk {
                invocation.key(shared.session_key(id));
            }
            invocation.arg(&shared.node);
            match invocation
                .invoke_async::<usize>(&mut shared.redis.connection())
                .await
            {
                Ok(removed) => given_up += removed,
                Err(error) => {
                    tracing::warn!(%error, "this replica's sessions' places could not be given up");
                }
            }
        }
        tracing::info!(given_up, "this replica gave up its sessions' places");
        given_up
    }

    /// Stops this replica's heartbeat and says it is gone, so the streams it relayed are
    /// replayed through another replica at once: the last step of a drain, when it serves
    /// nothing any more.
    pub async fn stop(&self) {
        let shared = &self.shared;
        for task in shared
            .heart
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            task.abort();
        }
        let gone: Result<(), _> = redis::cmd("DEL")
            .arg(shared.alive_key(&shared.node))
            .query_async(&mut shared.redis.connection())
            .await;
        if let Err(error) = gone {
            tracing::warn!(%error, "cannot tell Redis this replica is gone");
        }
    }

    /// `router` (the Streamable HTTP endpoint, and the legacy HTTP+SSE one merged into it) with
    /// each request for a session another replica owns forwarded there; the rest, and
    /// forwarded requests, it serves itself. A legacy session is the stream its `GET` opened,
    /// so its place is forgotten when that stream ends.
    ///
    /// A request is forwarded only once it has passed `endpoint`'s own admission checks here,
    /// as if it were served here: its `Host`/`Origin`, and its body read within the endpoint's
    /// limits (size, read timeout, the bytes of bodies read at once).
    pub fn wrap(&self, endpoint: &StreamableHttp, router: axum::Router) -> axum::Router {
        let _ = self.shared.local.set(router.clone());
        let _ = self.shared.admission.set(endpoint.admission());
        router.layer(axum::middleware::from_fn_with_state(
            self.shared.clone(),
            super::route::route,
        ))
    }
}
