//! [`SessionRouting`]: session-era Streamable HTTP behind a load balancer without affinity.
//!
//! A session lives in the process that opened it (its owner). Redis knows which process that
//! is, and for whom it was opened (`session:<id>`, a hash: `owner`, and `subject` when an
//! authorization layer verified the request that opened it; kept as long as the session is
//! used). A request naming a session
//! that another live replica owns is forwarded to it through Redis — the request whole, the
//! answer (status, headers, and each chunk of its body, an SSE stream included) back — so the
//! client sees one server whichever replica the balancer picked, and a stream it resumes with
//! `Last-Event-ID` through any replica is replayed by the owner's event store. When the owner
//! is dead, a resumption is replayed from the copy a [`RedisEventStore`](crate::RedisEventStore)
//! keeps in Redis (to the session's subject only), and every other request for the session is
//! answered 404.
//!
//! With an authorization layer in front of the router this wraps (a `BearerLayer`), the replica
//! a request lands on verifies its token; the [`Principal`] it found travels with the forwarded
//! request, so the owner holds the session to its subject and its handlers see it
//! (`ctx.auth()`), as if the request had landed there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures::StreamExt as _;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::BodyExt as _;
use redis::aio::PubSubSink;
use serde::{Deserialize, Serialize};
use tidewire_core::transport::Principal;
use tidewire_core::transport::sessions::SESSION_ID_HEADER as SESSION_ID;
use tokio::sync::mpsc;
use tower::ServiceExt as _;

use crate::{Redis, RedisError};

/// Chunks a relay holds for a client that reads slowly; past it the relay ends (the client
/// resumes).
const RELAY_QUEUE: usize = 1024;
/// Forwarded requests a replica serves at once; past it one is answered 503 at once.
const MAX_FORWARDED_IN_FLIGHT: usize = 1024;
/// The longest forwarded request body.
const MAX_FORWARDED_BODY: usize = 16 * 1024 * 1024;
/// How long a replica counts as alive after its last heartbeat.
const ALIVE_FOR: Duration = Duration::from_secs(3);
/// How often a replica says it is alive.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long the owner may take to start answering a forwarded request.
const HEAD_WITHIN: Duration = Duration::from_secs(30);
/// How long a relay waits on a quiet stream before it checks that the owner still lives.
const QUIET_CHECK: Duration = Duration::from_secs(2);
/// How often a replica writes the places of its sessions again (so they are back within this
/// long after Redis restarts, and kept while the sessions are used).
const KEEP_EVERY: Duration = Duration::from_secs(5);
/// The most sessions a replica keeps the places of; past it the least recently used is
/// forgotten (its requests then reach only this replica).
const MAX_PLACES: usize = 100_000;

/// Routes each session-era request to the replica that owns its session (see the module
/// docs). Made once per replica with [`SessionRouting::start`], then wrapped around the
/// Streamable HTTP router with [`wrap`](Self::wrap).
#[derive(Clone)]
pub struct SessionRouting {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SessionRouting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRouting")
            .field("node", &self.shared.node)
            .finish_non_exhaustive()
    }
}

struct Shared {
    redis: Redis,
    node: String,
    session_ttl: Duration,
    /// Subscribes and unsubscribes; replaced when the subscription is made again.
    sink: Mutex<PubSubSink>,
    /// By channel: who waits on its messages (relays here, forwarded requests served here).
    routes: Mutex<HashMap<String, mpsc::Sender<Vec<u8>>>>,
    /// The router forwarded requests are served by (the one wrapped, without this layer).
    local: OnceLock<axum::Router>,
    /// The sessions opened here: when each was last used, and for whom.
    places: Mutex<HashMap<String, Place>>,
    tasks: Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        for task in self
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            task.abort();
        }
    }
}

/// A session opened here, as this replica keeps its place.
#[derive(Debug, Clone)]
struct Place {
    used: std::time::Instant,
    /// The subject it was opened for, when the request was verified.
    subject: Option<String>,
}

/// A request, as it travels to its session's owner.
#[derive(Serialize, Deserialize)]
struct Forwarded {
    rid: String,
    /// The replica relaying the answer.
    from: String,
    method: String,
    uri: String,
    headers: Vec<(String, String)>,
    body: String,
    /// Whom the replica it landed on verified it for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    principal: Option<Principal>,
}

/// One piece of the owner's answer.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Piece {
    Head {
        status: u16,
        headers: Vec<(String, String)>,
    },
    Data(String),
    End,
}

impl SessionRouting {
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
        let (sink, mut stream) = redis.client().get_async_pubsub().await?.split();
        let shared = Arc::new(Shared {
            redis: redis.clone(),
            node: node.to_owned(),
            session_ttl,
            sink: Mutex::new(sink),
            routes: Mutex::new(HashMap::new()),
            local: OnceLock::new(),
            places: Mutex::new(HashMap::new()),
            tasks: Mutex::new(Vec::new()),
        });
        let inbox = shared.inbox();
        let (tx, mut forwarded) = mpsc::channel::<Vec<u8>>(RELAY_QUEUE);
        shared.route(&inbox, tx);
        shared.sink().subscribe(&inbox).await?;
        let weak = Arc::downgrade(&shared);
        let reader = tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                while let Some(message) = stream.next().await {
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
                            pause = (pause * 2).min(Duration::from_secs(5));
                        }
                    }
                }
            }
        });
        let weak = Arc::downgrade(&shared);
        let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_FORWARDED_IN_FLIGHT));
        let server = tokio::spawn(async move {
            while let Some(payload) = forwarded.recv().await {
                let Some(shared) = weak.upgrade() else { return };
                match in_flight.clone().try_acquire_owned() {
                    Ok(permit) => {
                        tokio::spawn(async move {
                            shared.serve(payload).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        tokio::spawn(async move { shared.refuse(payload).await });
                    }
                }
            }
        });
        let weak = Arc::downgrade(&shared);
        let heart = tokio::spawn(async move {
            let mut every = tokio::time::interval(HEARTBEAT);
            loop {
                every.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                let alive: Result<(), _> = redis::cmd("SET")
                    .arg(shared.alive_key(&shared.node))
                    .arg(1)
                    .arg("PX")
                    .arg(millis(ALIVE_FOR))
                    .query_async(&mut shared.redis.connection())
                    .await;
                if let Err(error) = alive {
                    tracing::warn!(%error, "cannot tell Redis this replica is alive");
                }
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
            .extend([
                reader.abort_handle(),
                server.abort_handle(),
                heart.abort_handle(),
                keeper.abort_handle(),
            ]);
        // Alive from the start, not a heartbeat later.
        let _: Result<(), _> = redis::cmd("SET")
            .arg(shared.alive_key(node))
            .arg(1)
            .arg("PX")
            .arg(millis(ALIVE_FOR))
            .query_async(&mut shared.redis.connection())
            .await;
        Ok(Self { shared })
    }

    /// `router` (the Streamable HTTP endpoint, and the legacy HTTP+SSE one merged into it) with
    /// each request for a session another replica owns forwarded there; the rest, and
    /// forwarded requests, it serves itself. A legacy session is the stream its `GET` opened,
    /// so its place is forgotten when that stream ends.
    pub fn wrap(&self, router: axum::Router) -> axum::Router {
        let _ = self.shared.local.set(router.clone());
        router.layer(axum::middleware::from_fn_with_state(self.clone(), route))
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn random_id() -> String {
    let mut bytes = [0u8; 16];
    let _ = getrandom::fill(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Shared {
    fn routes(&self) -> std::sync::MutexGuard<'_, HashMap<String, mpsc::Sender<Vec<u8>>>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn route(&self, channel: &str, tx: mpsc::Sender<Vec<u8>>) {
        self.routes().insert(channel.to_owned(), tx);
    }

    fn inbox(&self) -> String {
        self.redis.key(&format!("node:{}:inbox", self.node))
    }

    fn alive_key(&self, node: &str) -> String {
        self.redis.key(&format!("node:{node}:alive"))
    }

    fn session_key(&self, id: &str) -> String {
        self.redis.key(&format!("session:{id}"))
    }

    fn sink(&self) -> PubSubSink {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A new subscription, to every channel waited on now; its sink replaces the old one.
    async fn resubscribe(&self) -> Result<redis::aio::PubSubStream, redis::RedisError> {
        let (mut sink, stream) = self.redis.client().get_async_pubsub().await?.split();
        let channels: Vec<String> = self.routes().keys().cloned().collect();
        for channel in channels {
            sink.subscribe(&channel).await?;
        }
        *self.sink.lock().unwrap_or_else(PoisonError::into_inner) = sink;
        Ok(stream)
    }

    fn places(&self) -> std::sync::MutexGuard<'_, HashMap<String, Place>> {
        self.places.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes that the session `id`, opened here for `subject`, was just used.
    fn opened(&self, id: &str, subject: Option<String>) {
        let mut places = self.places();
        if places.len() >= MAX_PLACES && !places.contains_key(id) {
            let oldest = places
                .iter()
                .min_by_key(|(_, place)| place.used)
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                places.remove(&oldest);
                tracing::warn!("too many sessions to keep the places of; the oldest is forgotten");
            }
        }
        let used = std::time::Instant::now();
        places.insert(id.to_owned(), Place { used, subject });
    }

    /// Adds to `pipe` the commands that write the place of session `id`, for `subject`, for
    /// `ttl`.
    fn write_place(
        &self,
        pipe: &mut redis::Pipeline,
        id: &str,
        subject: Option<&str>,
        ttl: Duration,
    ) {
        let key = self.session_key(id);
        pipe.cmd("HSET").arg(&key).arg("owner").arg(&self.node);
        if let Some(subject) = subject {
            pipe.arg("subject").arg(subject);
        }
        pipe.ignore();
        pipe.cmd("PEXPIRE")
            .arg(&key)
            .arg(millis(ttl).max(1))
            .ignore();
    }

    /// Writes the place of every session used here within its ttl (each for what is left of
    /// it), and forgets the others.
    async fn keep_places(&self) {
        let now = std::time::Instant::now();
        let live: Vec<(String, Place, Duration)> = {
            let mut places = self.places();
            places.retain(|_, place| now.duration_since(place.used) < self.session_ttl);
            places
                .iter()
                .map(|(id, place)| {
                    let left = self.session_ttl - now.duration_since(place.used);
                    (id.clone(), place.clone(), left)
                })
                .collect()
        };
        if live.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        // Alive first: a place is only followed to a live replica.
        pipe.cmd("SET")
            .arg(self.alive_key(&self.node))
            .arg(1)
            .arg("PX")
            .arg(millis(ALIVE_FOR))
            .ignore();
        for (id, place, left) in &live {
            self.write_place(&mut pipe, id, place.subject.as_deref(), *left);
        }
        let kept: Result<(), _> = pipe.query_async(&mut self.redis.connection()).await;
        if let Err(error) = kept {
            tracing::warn!(%error, "the places of this replica's sessions could not be written");
        }
    }

    async fn alive(&self, node: &str) -> bool {
        let alive: Result<bool, _> = redis::cmd("EXISTS")
            .arg(self.alive_key(node))
            .query_async(&mut self.redis.connection())
            .await;
        alive.unwrap_or(false)
    }

    async fn publish(&self, channel: &str, piece: &Piece) -> Result<usize, redis::RedisError> {
        let json = serde_json::to_string(piece).unwrap_or_default();
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(json)
            .query_async(&mut self.redis.connection())
            .await
    }

    /// Answers a forwarded request 503: this replica serves its most forwarded requests now.
    async fn refuse(&self, payload: Vec<u8>) {
        let Ok(forwarded) = serde_json::from_slice::<Forwarded>(&payload) else {
            return;
        };
        tracing::warn!("too many forwarded requests at once; one is answered 503");
        let reply = self.redis.key(&format!("reply:{}", forwarded.rid));
        let pieces =
            [
                Piece::Head {
                    status: 503,
                    headers: vec![("retry-after".to_owned(), "1".to_owned())],
                },
                Piece::Data(STANDARD.encode(
                    "the replica holding this session is serving its most forwarded requests",
                )),
                Piece::End,
            ];
        self.publish_all(&reply, &pieces).await;
    }

    /// Publishes `pieces` on `channel` in order, in one round trip; whether someone heard each.
    async fn publish_all(&self, channel: &str, pieces: &[Piece]) -> bool {
        let mut pipe = redis::pipe();
        for piece in pieces {
            let json = serde_json::to_string(piece).unwrap_or_default();
            pipe.cmd("PUBLISH").arg(channel).arg(json);
        }
        let heard: Result<Vec<usize>, _> = pipe.query_async(&mut self.redis.connection()).await;
        heard.is_ok_and(|counts| counts.iter().all(|&n| n > 0))
    }

    /// Serves a request another replica forwarded here, sending the answer back piece by
    /// piece until it ends or the other replica's client has gone.
    async fn serve(self: Arc<Self>, payload: Vec<u8>) {
        let Ok(forwarded) = serde_json::from_slice::<Forwarded>(&payload) else {
            tracing::warn!("not a forwarded request; dropped");
            return;
        };
        let Some(local) = self.local.get().cloned() else {
            return;
        };
        let reply = self.redis.key(&format!("reply:{}", forwarded.rid));
        let gone = self.redis.key(&format!("gone:{}", forwarded.rid));
        let relay = forwarded.from.clone();
        let (tx, mut gone_rx) = mpsc::channel(1);
        self.route(&gone, tx);
        let request = match rebuild(forwarded) {
            Some(request) => request,
            None => {
                let head = Piece::Head {
                    status: 400,
                    headers: Vec::new(),
                };
                let _ = self.publish(&reply, &head).await;
                let _ = self.publish(&reply, &Piece::End).await;
                return;
            }
        };
        // Served while the subscription to `gone` is made: it is needed only once the answer
        // streams.
        let mut sink = self.sink();
        let session = session_named(&request);
        let asked = Asked::of(&request);
        let (_, Ok(response)) = tokio::join!(sink.subscribe(&gone), local.oneshot(request));
        if let Some(session) = &session {
            self.settle(session, &asked, response.status()).await;
        }
        let (parts, mut body) = response.into_parts();
        let head = Piece::Head {
            status: parts.status.as_u16(),
            headers: text_headers(&parts.headers),
        };
        // The head goes with whatever of the body is ready already (all of a quick answer),
        // in one round trip.
        let mut first = vec![head];
        let mut ended = false;
        while let Some(frame) = futures::FutureExt::now_or_never(body.frame()) {
            match frame {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        first.push(Piece::Data(STANDARD.encode(&data)));
                    }
                }
                Some(Err(_)) | None => {
                    first.push(Piece::End);
                    ended = true;
                    break;
                }
            }
        }
        // The stream is dropped — as when a client of this replica goes away, so it can be
        // resumed — once nobody relays it: its client left, or its replica died (no one hears
        // the next piece, or no heartbeat while it is quiet).
        if self.publish_all(&reply, &first).await && !ended {
            let mut check = tokio::time::interval(QUIET_CHECK);
            check.tick().await;
            loop {
                tokio::select! {
                    frame = body.frame() => match frame {
                        Some(Ok(frame)) => {
                            if let Ok(data) = frame.into_data() {
                                let piece = Piece::Data(STANDARD.encode(&data));
                                if !matches!(self.publish(&reply, &piece).await, Ok(n) if n > 0) {
                                    break;
                                }
                            }
                        }
                        Some(Err(_)) | None => {
                            let _ = self.publish(&reply, &Piece::End).await;
                            break;
                        }
                    },
                    _ = gone_rx.recv() => break,
                    _ = check.tick() => {
                        if !self.alive(&relay).await {
                            break;
                        }
                    }
                }
            }
        }
        self.routes().remove(&gone);
        let _ = self.sink().unsubscribe(&gone).await;
    }

    /// Forwards `request` to `owner` and relays its answer.
    async fn forward(self: Arc<Self>, request: Request, owner: String) -> Response {
        let rid = random_id();
        let reply = self.redis.key(&format!("reply:{rid}"));
        let (tx, mut pieces) = mpsc::channel(RELAY_QUEUE);
        self.route(&reply, tx);
        let cleanup = Cleanup {
            shared: self.clone(),
            rid: rid.clone(),
            finished: false,
        };
        if self.sink().subscribe(&reply).await.is_err() {
            return unavailable("cannot reach Redis to forward the request");
        }
        let (parts, body) = request.into_parts();
        let Ok(body) = http_body_util::Limited::new(body, MAX_FORWARDED_BODY)
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
        else {
            return status(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the request body is too long",
            );
        };
        let forwarded = Forwarded {
            rid,
            from: self.node.clone(),
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            headers: text_headers(&parts.headers),
            body: STANDARD.encode(&body),
            principal: parts.extensions.get::<Principal>().cloned(),
        };
        let inbox = self.redis.key(&format!("node:{owner}:inbox"));
        let json = serde_json::to_string(&forwarded).unwrap_or_default();
        let delivered: Result<usize, _> = redis::cmd("PUBLISH")
            .arg(&inbox)
            .arg(json)
            .query_async(&mut self.redis.connection())
            .await;
        if !matches!(delivered, Ok(n) if n > 0) {
            return unavailable("the replica holding this session cannot be reached");
        }
        let head = tokio::time::timeout(HEAD_WITHIN, pieces.recv()).await;
        let Ok(Some(head)) = head else {
            return unavailable("the replica holding this session did not answer");
        };
        let Ok(Piece::Head {
            status: code,
            headers,
        }) = serde_json::from_slice::<Piece>(&head)
        else {
            return unavailable("the replica holding this session answered something else");
        };
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
        for (name, value) in headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) && !hop_by_hop(&name)
            {
                response.headers_mut().append(name, value);
            }
        }
        let relay = Relay {
            pieces,
            shared: self.clone(),
            owner,
            cleanup,
        };
        *response.body_mut() = Body::from_stream(relayed(relay));
        response
    }
}

/// Tells the owner the client went away (unless the answer was whole), and stops listening,
/// when a relay ends.
struct Cleanup {
    shared: Arc<Shared>,
    rid: String,
    /// The owner sent the end: it has nothing left to drop.
    finished: bool,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let shared = self.shared.clone();
        let reply = shared.redis.key(&format!("reply:{}", self.rid));
        let gone = shared.redis.key(&format!("gone:{}", self.rid));
        shared.routes().remove(&reply);
        let finished = self.finished;
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if !finished {
                    let _: Result<usize, _> = redis::cmd("PUBLISH")
                        .arg(&gone)
                        .arg("gone")
                        .query_async(&mut shared.redis.connection())
                        .await;
                }
                let _ = shared.sink().unsubscribe(&reply).await;
            });
        }
    }
}

/// What a relay holds while its body is read.
struct Relay {
    pieces: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
    owner: String,
    cleanup: Cleanup,
}

/// The relayed body: each data piece as it comes, until the end; the owner's death or a
/// broken relay ends it with an error (the client then resumes, or starts over).
fn relayed(relay: Relay) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(relay), |relay| async move {
        let mut relay = relay?;
        let broken = |why: &str| Err(std::io::Error::other(why.to_owned()));
        loop {
            match tokio::time::timeout(QUIET_CHECK, relay.pieces.recv()).await {
                Ok(Some(piece)) => {
                    return match serde_json::from_slice::<Piece>(&piece) {
                        Ok(Piece::Data(data)) => match STANDARD.decode(data) {
                            Ok(bytes) => Some((Ok(Bytes::from(bytes)), Some(relay))),
                            Err(_) => Some((broken("a garbled piece"), None)),
                        },
                        Ok(Piece::End) => {
                            relay.cleanup.finished = true;
                            None
                        }
                        _ => Some((broken("the relay from the session's replica broke"), None)),
                    };
                }
                Ok(None) => return Some((broken("the relay fell behind and was dropped"), None)),
                // Quiet: go on waiting while the owner lives.
                Err(_) => {
                    if !relay.shared.alive(&relay.owner).await {
                        return Some((broken("the session's replica stopped"), None));
                    }
                }
            }
        }
    })
}

fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "transfer-encoding"
            | "upgrade"
            | "content-length"
            | "te"
            | "trailer"
            | "proxy-connection"
    )
}

fn text_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| !hop_by_hop(name))
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect()
}

fn rebuild(forwarded: Forwarded) -> Option<Request> {
    let body = STANDARD.decode(forwarded.body).ok()?;
    let mut request = Request::builder()
        .method(forwarded.method.as_str())
        .uri(forwarded.uri.as_str())
        .body(Body::from(body))
        .ok()?;
    for (name, value) in forwarded.headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            request.headers_mut().append(name, value);
        }
    }
    if let Some(principal) = forwarded.principal {
        request.extensions_mut().insert(principal);
    }
    Some(request)
}

fn status(code: StatusCode, why: &str) -> Response {
    let mut response = Response::new(Body::from(why.to_owned()));
    *response.status_mut() = code;
    response
}

fn unavailable(why: &str) -> Response {
    status(StatusCode::SERVICE_UNAVAILABLE, why)
}

/// A session's replica, whether it is alive, and the session's subject, in one round trip:
/// `{owner or nil, 0|1, subject or nil}`.
const OWNER_AND_ALIVE: &str = r"
local place = redis.call('HMGET', KEYS[1], 'owner', 'subject')
local owner = place[1]
if not owner then return {false, 0, false} end
return {owner, redis.call('EXISTS', ARGV[1] .. owner .. ':alive'), place[2]}
";

/// The middleware: a request for a session another live replica owns is forwarded there;
/// every other request is served here, and a session opened here is made known.
async fn route(State(routing): State<SessionRouting>, request: Request, next: Next) -> Response {
    let shared = routing.shared;
    let Some(id) = session_named(&request) else {
        let subject = request
            .extensions()
            .get::<Principal>()
            .map(|p| p.subject.clone());
        // A legacy HTTP+SSE stream (`GET /sse`) is its session: it ends with the stream.
        let legacy_stream = request.method() == http::Method::GET;
        let response = next.run(request).await;
        let Some(opened) = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
        else {
            return response;
        };
        shared.opened(&opened, subject.clone());
        let mut pipe = redis::pipe();
        shared.write_place(&mut pipe, &opened, subject.as_deref(), shared.session_ttl);
        let known: Result<(), _> = pipe.query_async(&mut shared.redis.connection()).await;
        if let Err(error) = known {
            tracing::warn!(%error, "a new session could not be made known on Redis");
        }
        if !legacy_stream {
            return response;
        }
        let (parts, body) = response.into_parts();
        let ends = Forget {
            shared: shared.clone(),
            id: opened,
        };
        let body = body.into_data_stream().map(move |chunk| {
            let _held = &ends;
            chunk
        });
        return Response::from_parts(parts, Body::from_stream(body));
    };
    // One of this replica's own sessions: no need to ask Redis where it lives.
    if shared.places().contains_key(&id) {
        return serve_own(&shared, &id, request, next).await;
    }
    let owner: Result<(Option<String>, bool, Option<String>), _> = redis::cmd("EVAL")
        .arg(OWNER_AND_ALIVE)
        .arg(1)
        .arg(shared.session_key(&id))
        .arg(shared.redis.key("node:"))
        .query_async(&mut shared.redis.connection())
        .await;
    match owner {
        Ok((Some(owner), alive, subject)) if owner != shared.node => {
            if alive {
                return shared.forward(request, owner).await;
            }
            // Its replica is gone, and the session with it: what it wrote of the stream the
            // client resumes is replayed from Redis, to the subject it was opened for only;
            // anything else is answered here, as unknown (404).
            let acting_for = request.extensions().get::<Principal>();
            let resuming = resumed_stream(&request)
                .filter(|_| Principal::may_use_as(subject.as_deref(), acting_for));
            if let Some(replayed) = replay_for_dead_owner(&shared, &id, resuming).await {
                return replayed;
            }
            next.run(request).await
        }
        Ok((Some(_), _, _)) => serve_own(&shared, &id, request, next).await,
        // Not placed (Redis restarted, say): one of this replica's, or unknown here too (404).
        Ok((None, _, _)) => serve_own(&shared, &id, request, next).await,
        Err(error) => {
            tracing::warn!(%error, "cannot ask Redis where a session lives; serving it here");
            next.run(request).await
        }
    }
}

/// The session a request names: the `Mcp-Session-Id` header (Streamable HTTP), or the
/// `sessionId` query parameter of a legacy HTTP+SSE POST (`session_id`, as the Python SDK
/// spells it).
fn session_named(request: &Request) -> Option<String> {
    if let Some(id) = request.headers().get(SESSION_ID) {
        return id.to_str().ok().map(str::to_owned);
    }
    request.uri().query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        matches!(name, "sessionId" | "session_id").then(|| value.to_owned())
    })
}

/// Forgets the place of a legacy HTTP+SSE session when its stream's body is dropped (the
/// stream ended, or its client went away): the session ended with it.
struct Forget {
    shared: Arc<Shared>,
    id: String,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.shared.places().remove(&self.id);
        let (shared, id) = (self.shared.clone(), std::mem::take(&mut self.id));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { shared.remove_place(&id).await });
        }
    }
}

/// A GET resuming (`Last-Event-ID`) a stream of a session whose replica died: the events of
/// that stream copied to Redis after the id, as an SSE response that ends after them. `None`
/// (the request is answered 404) when it is not such a request or nothing is left to replay,
/// so a client that has everything learns the session is gone.
async fn replay_for_dead_owner(
    shared: &Shared,
    session: &str,
    resuming: Option<(u64, u64)>,
) -> Option<Response> {
    let (stream, after) = resuming?;
    match crate::events::replay(&shared.redis, session, stream, after).await {
        Ok(events) if !events.is_empty() => {
            tracing::info!(
                stream,
                events = events.len(),
                "a stream of a session whose replica died was replayed from Redis"
            );
            Some(tidewire_http::server::replay(stream, &events))
        }
        Ok(_) => None,
        Err(error) => {
            tracing::warn!(%error, "cannot replay a dead replica's stream from Redis");
            None
        }
    }
}

/// The stream and event a GET resumes (`Last-Event-ID`), if it is one.
fn resumed_stream(request: &Request) -> Option<(u64, u64)> {
    if request.method() != http::Method::GET {
        return None;
    }
    request
        .headers()
        .get("last-event-id")?
        .to_str()
        .ok()
        .and_then(tidewire_http::server::parse_event_id)
}

/// Serves a request for a session of this replica's (or one unknown anywhere, which the
/// endpoint answers 404): its place is kept while it is used, and forgotten once it ends.
async fn serve_own(shared: &Arc<Shared>, id: &str, request: Request, next: Next) -> Response {
    let asked = Asked::of(&request);
    let response = next.run(request).await;
    shared.settle(id, &asked, response.status()).await;
    response
}

/// What of a request for a session decides, once it is answered, whether the session ended.
struct Asked {
    deleting: bool,
    acting_for: Option<Principal>,
}

impl Asked {
    fn of(request: &Request) -> Self {
        Self {
            deleting: request.method() == http::Method::DELETE,
            acting_for: request.extensions().get::<Principal>().cloned(),
        }
    }
}

impl Shared {
    /// After a request for session `id` of this replica's was answered `status`: its place is
    /// forgotten when it ended (a DELETE done, or 404 to whom it was opened for: to anyone else
    /// a 404 refuses a session that goes on), else kept as used.
    async fn settle(&self, id: &str, asked: &Asked, status: StatusCode) {
        let ended = status == StatusCode::NOT_FOUND || (asked.deleting && status.is_success());
        {
            let mut places = self.places();
            let Some(place) = places.get_mut(id) else {
                return;
            };
            if !(ended
                && Principal::may_use_as(place.subject.as_deref(), asked.acting_for.as_ref()))
            {
                place.used = std::time::Instant::now();
                return;
            }
            places.remove(id);
        }
        self.remove_place(id).await;
    }

    /// Removes the place of session `id` from Redis (this replica has forgotten it already).
    async fn remove_place(&self, id: &str) {
        let removed: Result<(), _> = redis::cmd("DEL")
            .arg(self.session_key(id))
            .query_async(&mut self.redis.connection())
            .await;
        if let Err(error) = removed {
            tracing::warn!(%error, "an ended session's place could not be removed");
        }
    }
}
