//! The middleware: where each request is served. One naming a session another live replica
//! owns is forwarded there; one for a session whose owner died is replayed from Redis when it
//! resumes a stream (else answered 404 here); every other one is served here, and a session
//! it opens is made known.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt as _;
use tidewire_core::http::sessions::SESSION_ID_HEADER as SESSION_ID;
use tidewire_core::transport::Principal;

use super::places::{Asked, Forget};
use super::shared::{Routing, session_named, unavailable};

/// A session's replica, whether it is alive, and the session's subject, in one round trip:
/// `{owner or nil, 0|1, subject or nil, 0|1}`, the last saying, when there is no place,
/// whether Redis's places are complete: the epoch is there and no settling window is open (see
/// [`settling`](super::settling)). `KEYS`: the place, the epoch, the settling window;
/// `ARGV[1]`: the prefix of the `alive` keys.
const OWNER_AND_ALIVE: &str = r"
local place = redis.call('HMGET', KEYS[1], 'owner', 'subject')
local owner = place[1]
if not owner then
  local complete = redis.call('EXISTS', KEYS[2]) == 1 and redis.call('EXISTS', KEYS[3]) == 0
  return {false, 0, false, complete and 1 or 0}
end
return {owner, redis.call('EXISTS', ARGV[1] .. owner .. ':alive'), place[2], 1}
";

/// The middleware: a request for a session another live replica owns is forwarded there;
/// every other request is served here, and a session opened here is made known.
pub(super) async fn route(
    State(shared): State<Arc<Routing>>,
    request: Request,
    next: Next,
) -> Response {
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
        // A replica that gave up its sessions makes no new one known (a draining server
        // opens none: this is the race of one opened as the drain began).
        if shared.is_leaving() {
            return response;
        }
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
    let owner: Result<(Option<String>, bool, Option<String>, bool), _> = redis::cmd("EVAL")
        .arg(OWNER_AND_ALIVE)
        .arg(3)
        .arg(shared.session_key(&id))
        .arg(shared.epoch_key())
        .arg(shared.settling_key())
        .arg(shared.redis.key("node:"))
        .query_async(&mut shared.redis.connection())
        .await;
    match owner {
        Ok((Some(owner), alive, subject, _)) if owner != shared.node => {
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
        Ok((Some(_), _, _, _)) => serve_own(&shared, &id, request, next).await,
        // Not placed, and Redis's places are complete: unknown here too (404).
        Ok((None, _, _, true)) => serve_own(&shared, &id, request, next).await,
        // Not placed because Redis lost its data: its replica writes it again within seconds.
        Ok((None, _, _, false)) => retry_later(
            "Redis is recovering the places of sessions after a restart; try again in a moment",
        ),
        // Not one of this replica's (checked above), and where it lives cannot be asked: not a
        // 404, which would make its client give up a session that may well be alive.
        Err(error) => {
            tracing::warn!(%error, "cannot ask Redis where a session lives");
            retry_later("cannot reach Redis to find the replica holding this session")
        }
    }
}

/// `503` with `Retry-After: 1`: the request was not acted on and may be sent again.
fn retry_later(why: &str) -> Response {
    let mut response = unavailable(why);
    response.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    response
}

/// A GET resuming (`Last-Event-ID`) a stream of a session whose replica died: the events of
/// that stream copied to Redis after the id, as an SSE response that ends after them. `None`
/// (the request is answered 404) when it is not such a request or nothing is left to replay,
/// so a client that has everything learns the session is gone.
async fn replay_for_dead_owner(
    shared: &Routing,
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
async fn serve_own(shared: &Arc<Routing>, id: &str, request: Request, next: Next) -> Response {
    let asked = Asked::of(&request);
    let response = next.run(request).await;
    shared.settle(id, &asked, response.status()).await;
    response
}
