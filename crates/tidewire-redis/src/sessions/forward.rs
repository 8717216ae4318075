//! A request's trip to the replica that owns its session, and its answer's way back: the
//! relaying replica publishes the request whole on the owner's inbox; the owner serves it and
//! publishes the answer piece by piece (its head, each chunk of its body, its end) on a channel
//! of the request's own, until it ends or the relay's client has gone.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{HeaderName, HeaderValue, StatusCode};
use http_body_util::BodyExt as _;
use serde::{Deserialize, Serialize};
use tidewire_core::transport::Principal;
use tower::ServiceExt as _;

use super::pieces::{PieceReceiver, pieces};
use super::places::Asked;
use super::shared::{
    RELAY_BYTES, RELAY_QUEUE, Routing, SESSION_ID, random_id, session_named, unavailable,
};

/// How long the owner may take to start answering a forwarded request.
const HEAD_WITHIN: Duration = Duration::from_secs(30);
/// How long a relay waits on a quiet stream before it checks that the owner still lives.
const QUIET_CHECK: Duration = Duration::from_secs(2);

/// A request, as it travels to its session's owner.
#[derive(Serialize, Deserialize)]
pub(super) struct Forwarded {
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
    /// Answered at once (see [`answered_at_once`]): served within the owner's budget of
    /// messages, not of streams. Absent from an older replica's: counted as a stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) brief: bool,
}

impl Forwarded {
    /// A forwarded request read from the owner's inbox.
    pub(super) fn parse(payload: &[u8]) -> Option<Self> {
        serde_json::from_slice(payload).ok()
    }
}

/// Whether a request for a session is answered at once: a `DELETE`; a legacy HTTP+SSE `POST`
/// (answered 202, its answer goes on the session's stream), or a Streamable HTTP one carrying
/// no JSON-RPC request (responses and notifications, answered 202). Anything else — a `GET`,
/// a `POST` of a request, whose answer may stream for as long as the call runs — is a stream.
fn answered_at_once(method: &http::Method, headers: &http::HeaderMap, body: &[u8]) -> bool {
    if method == http::Method::DELETE {
        return true;
    }
    if method != http::Method::POST {
        return false;
    }
    !headers.contains_key(SESSION_ID) || !carries_request(body)
}

/// Whether a JSON-RPC body is a request (an `id` and a `method`). A batch or anything
/// unreadable counts as one: the owner answers it, maybe at length.
fn carries_request(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Probe {
        #[serde(default)]
        id: Option<serde::de::IgnoredAny>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    // Only an object: serde would read an array as the struct's fields in order.
    let object = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    !object
        || serde_json::from_slice::<Probe>(body)
            .map_or(true, |p| p.id.is_some() && p.method.is_some())
}

/// One piece of the owner's answer.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Piece {
    Head {
        status: u16,
        headers: Vec<(String, String)>,
    },
    Data(String),
    End,
}

impl Routing {
    pub(super) async fn publish(
        &self,
        channel: &str,
        piece: &Piece,
    ) -> Result<usize, redis::RedisError> {
        let json = serde_json::to_string(piece).unwrap_or_default();
        redis::cmd("PUBLISH")
            .arg(channel)
            .arg(json)
            .query_async(&mut self.redis.connection())
            .await
    }

    /// Publishes `pieces` on `channel` in order, in one round trip; whether someone heard each.
    pub(super) async fn publish_all(&self, channel: &str, pieces: &[Piece]) -> bool {
        let mut pipe = redis::pipe();
        for piece in pieces {
            let json = serde_json::to_string(piece).unwrap_or_default();
            pipe.cmd("PUBLISH").arg(channel).arg(json);
        }
        let heard: Result<Vec<usize>, _> = pipe.query_async(&mut self.redis.connection()).await;
        heard.is_ok_and(|counts| counts.iter().all(|&n| n > 0))
    }

    /// Answers a forwarded request 503: this replica serves its most forwarded requests of
    /// that kind now.
    pub(super) async fn refuse(&self, forwarded: Forwarded) {
        let kind = if forwarded.brief {
            "messages"
        } else {
            "streams"
        };
        tracing::warn!(
            kind,
            "too many forwarded requests at once; one is answered 503"
        );
        let reply = self.redis.key(&format!("reply:{}", forwarded.rid));
        let why = format!("the replica holding this session is serving its most forwarded {kind}");
        let pieces = [
            Piece::Head {
                status: 503,
                headers: vec![("retry-after".to_owned(), "1".to_owned())],
            },
            Piece::Data(STANDARD.encode(why)),
            Piece::End,
        ];
        self.publish_all(&reply, &pieces).await;
    }

    /// Serves a request another replica forwarded here, sending the answer back piece by
    /// piece until it ends or the other replica's client has gone.
    pub(super) async fn serve(self: Arc<Self>, forwarded: Forwarded) {
        let Some(local) = self.local.get().cloned() else {
            return;
        };
        self.forwarded_in.fetch_add(1, Ordering::Relaxed);
        let reply = self.redis.key(&format!("reply:{}", forwarded.rid));
        let gone = self.redis.key(&format!("gone:{}", forwarded.rid));
        let relay = forwarded.from.clone();
        let (tx, mut gone_rx) = pieces(1, 1024);
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
    pub(super) async fn forward(self: Arc<Self>, request: Request, owner: String) -> Response {
        // What a request served here would pass first, before anything is sent anywhere.
        let (parts, body) = request.into_parts();
        let Some(admission) = self.admission.get() else {
            return unavailable("this replica's endpoint is not set up for forwarding");
        };
        if let Err(refused) = admission.check_host(&parts.headers) {
            return refused;
        }
        let body = match admission.read_body(&parts.headers, body).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let rid = random_id();
        let reply = self.redis.key(&format!("reply:{rid}"));
        let (tx, mut pieces) = pieces(RELAY_QUEUE, RELAY_BYTES);
        self.route(&reply, tx);
        let cleanup = Cleanup {
            shared: self.clone(),
            rid: rid.clone(),
            finished: false,
        };
        if self.sink().subscribe(&reply).await.is_err() {
            return unavailable("cannot reach Redis to forward the request");
        }
        let forwarded = Forwarded {
            rid,
            from: self.node.clone(),
            method: parts.method.to_string(),
            uri: parts.uri.to_string(),
            headers: text_headers(&parts.headers),
            body: STANDARD.encode(&body),
            principal: parts.extensions.get::<Principal>().cloned(),
            brief: answered_at_once(&parts.method, &parts.headers, &body),
        };
        // Copied into the message: the body (often a slice of the connection's read buffer)
        // is not held while the owner answers.
        drop(body);
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
        self.forwarded_out.fetch_add(1, Ordering::Relaxed);
        let head = match self.first_piece(&mut pieces, &owner).await {
            Ok(head) => head,
            Err(why) => return unavailable(why),
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

/// Why no piece came.
enum NoPiece {
    /// The relay's queue closed (it fell behind and was dropped, or broke).
    Closed,
    /// A quiet spell, and the owner no longer seen alive: it stopped, or Redis, which carries
    /// its pieces, cannot be reached.
    OwnerGone,
    /// The deadline passed.
    TooLate,
}

impl Routing {
    /// The next piece of a relayed answer. Every [`QUIET_CHECK`] of silence the owner must
    /// still be seen alive, so an owner that stopped, or a Redis that went away with the
    /// request in flight (its pieces can no longer come), ends the wait within seconds; with a
    /// `deadline`, the wait ends there too.
    async fn next_piece(
        &self,
        pieces: &mut PieceReceiver,
        owner: &str,
        deadline: Option<tokio::time::Instant>,
    ) -> Result<Vec<u8>, NoPiece> {
        loop {
            let wait = deadline.map_or(QUIET_CHECK, |deadline| {
                QUIET_CHECK.min(deadline.saturating_duration_since(tokio::time::Instant::now()))
            });
            match tokio::time::timeout(wait, pieces.recv()).await {
                Ok(Some(piece)) => return Ok(piece),
                Ok(None) => return Err(NoPiece::Closed),
                Err(_) if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) => {
                    return Err(NoPiece::TooLate);
                }
                Err(_) => {
                    if !self.alive(owner).await {
                        return Err(NoPiece::OwnerGone);
                    }
                }
            }
        }
    }

    /// The first piece of a forwarded request's answer (its head), waited for at most
    /// [`HEAD_WITHIN`], or the reason for the 503 that answers instead.
    async fn first_piece(
        &self,
        pieces: &mut PieceReceiver,
        owner: &str,
    ) -> Result<Vec<u8>, &'static str> {
        let deadline = tokio::time::Instant::now() + HEAD_WITHIN;
        self.next_piece(pieces, owner, Some(deadline))
            .await
            .map_err(|why| match why {
                NoPiece::Closed => "the relay from the session's replica broke",
                NoPiece::OwnerGone => {
                    "the replica holding this session stopped, or Redis cannot be reached"
                }
                NoPiece::TooLate => "the replica holding this session did not answer",
            })
    }
}

/// Tells the owner the client went away (unless the answer was whole), and stops listening,
/// when a relay ends.
struct Cleanup {
    shared: Arc<Routing>,
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
    pieces: PieceReceiver,
    shared: Arc<Routing>,
    owner: String,
    cleanup: Cleanup,
}

/// The relayed body: each data piece as it comes, until the end; the owner's death or a
/// broken relay ends it with an error (the client then resumes, or starts over).
fn relayed(relay: Relay) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    futures::stream::unfold(Some(relay), |relay| async move {
        let mut relay = relay?;
        let broken = |why: &str| Err(std::io::Error::other(why.to_owned()));
        let next = relay
            .shared
            .next_piece(&mut relay.pieces, &relay.owner, None)
            .await;
        match next {
            Ok(piece) => match serde_json::from_slice::<Piece>(&piece) {
                Ok(Piece::Data(data)) => match STANDARD.decode(data) {
                    Ok(bytes) => Some((Ok(Bytes::from(bytes)), Some(relay))),
                    Err(_) => Some((broken("a garbled piece"), None)),
                },
                Ok(Piece::End) => {
                    relay.cleanup.finished = true;
                    None
                }
                _ => Some((broken("the relay from the session's replica broke"), None)),
            },
            Err(NoPiece::Closed) => Some((broken("the relay fell behind and was dropped"), None)),
            Err(NoPiece::OwnerGone | NoPiece::TooLate) => {
                Some((broken("the session's replica stopped"), None))
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

/// Credentials stay with the replica that checked them: what crosses to the owner is the
/// principal it verified, never a token (which Redis and every subscriber could read).
fn credential(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "cookie"
    )
}

fn text_headers(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| !hop_by_hop(name) && !credential(name))
        .filter_map(|(name, value)| Some((name.to_string(), value.to_str().ok()?.to_owned())))
        .collect()
}

/// For the fuzz target of the envelope replicas forward through Redis, not a stable API: reads
/// `payload` as an owner reads its inbox and rebuilds the request it describes, as it would
/// serve it (`None` when it would refuse it); and reads it as a relay reads a piece of an answer
/// (`true` when it is one).
#[doc(hidden)]
pub fn fuzz_forwarded(payload: &[u8]) -> (Option<Request>, bool) {
    let request = Forwarded::parse(payload).and_then(rebuild);
    let piece = serde_json::from_slice::<Piece>(payload).is_ok();
    (request, piece)
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
        ) && !credential(&name)
        {
            request.headers_mut().append(name, value);
        }
    }
    if let Some(principal) = forwarded.principal {
        request.extensions_mut().insert(principal);
    }
    Some(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(method: http::Method, session: bool, body: &str) -> bool {
        let mut headers = http::HeaderMap::new();
        if session {
            headers.insert(SESSION_ID, HeaderValue::from_static("s-1"));
        }
        answered_at_once(&method, &headers, body.as_bytes())
    }

    /// Issue 26, item 10: a forwarded request carried the raw `Authorization` header through
    /// Redis; the owner needs only the principal the first replica verified.
    #[test]
    fn credentials_do_not_cross_between_replicas() {
        let mut headers = http::HeaderMap::new();
        headers.insert("authorization", HeaderValue::from_static("Bearer secret"));
        headers.insert("cookie", HeaderValue::from_static("sid=secret"));
        headers.insert("mcp-session-id", HeaderValue::from_static("s-1"));
        let sent = text_headers(&headers);
        assert_eq!(sent, [("mcp-session-id".to_owned(), "s-1".to_owned())]);
        let forwarded = Forwarded {
            rid: "r".into(),
            from: "a".into(),
            method: "POST".into(),
            uri: "/mcp".into(),
            headers: vec![("authorization".into(), "Bearer old-replica".into())],
            body: String::new(),
            principal: None,
            brief: true,
        };
        let rebuilt = rebuild(forwarded).expect("a request");
        assert!(rebuilt.headers().get("authorization").is_none());
    }

    #[test]
    fn only_what_is_answered_at_once_is_a_message() {
        let request = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#;
        let response = r#"{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}"#;
        let notification = r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#;
        let batch = format!("[{request}]");
        assert!(
            !kind(http::Method::POST, true, request),
            "a call may stream"
        );
        assert!(!kind(http::Method::GET, true, ""), "a GET is a stream");
        assert!(
            !kind(http::Method::POST, true, &batch),
            "a batch may hold calls"
        );
        assert!(
            !kind(http::Method::POST, true, "{not json"),
            "unreadable: a stream"
        );
        assert!(kind(http::Method::POST, true, response));
        assert!(kind(http::Method::POST, true, notification));
        assert!(kind(http::Method::DELETE, true, ""));
        assert!(
            kind(http::Method::POST, false, request),
            "a legacy HTTP+SSE POST is answered 202 at once"
        );
    }
}
