//! The two routes: the GET that opens a session's stream, and the POST that carries a message.

use std::convert::Infallible;
use std::sync::{Arc, Weak};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State as Extract;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject, Message};
use tidewire_core::transport::Envelope;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use tidewire_core::http::HttpRequestInfo;
use tidewire_core::http::reply as http_reply;
use tidewire_core::http::sessions::{SESSION_ID_HEADER, SessionTable};
use tidewire_core::session::BoxedServe;
use tidewire_core::transport::{Codec, Principal};

use super::config::SseConfig;
use super::session::{Running, Session, SseReceiver, SseSender, SseTransport};

/// What the two routes share: the settings, the session table, and how a session's engine is
/// started.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) config: SseConfig,
    codec: Codec,
    make_driver: BoxedServe<SseTransport>,
    pub(crate) sessions: Arc<SessionTable<Session>>,
}

impl State {
    pub(crate) fn new(config: SseConfig, make_driver: BoxedServe<SseTransport>) -> Self {
        let sessions = SessionTable::new(config.limits.max_sessions, config.limits.idle_timeout)
            .with_lifecycle(make_driver.lifecycle());
        Self {
            codec: Codec::new(config.limits.max_message_size),
            make_driver,
            sessions: Arc::new(sessions),
            config,
        }
    }
}

/// An HTTP error with a JSON-RPC error body (no id).
fn refuse(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Response {
    answer(status, ErrorObject::new(code, message))
}

fn answer(status: StatusCode, error: ErrorObject) -> Response {
    http_reply::json_rpc_error(status, None, error).into_response()
}

fn json_response(status: StatusCode, body: &Message) -> Response {
    http_reply::json(status, body).into_response()
}

/// 503 with `Retry-After`: the table holds its maximum of sessions.
fn sessions_full(max: usize) -> Response {
    http_reply::sessions_full(max).into_response()
}

/// `GET <sse path>`: a new session, its engine, and its stream.
pub(crate) async fn open_stream(
    Extract(state): Extract<Arc<State>>,
    principal: Option<axum::Extension<Principal>>,
    post_path: Arc<str>,
) -> Response {
    let id = match state.sessions.fresh_id() {
        Ok(id) => id,
        Err(refused) => return http_reply::no_new_session(refused).into_response(),
    };
    let (outbound_tx, outbound_rx) = mpsc::channel(state.config.outbound_queue);
    let session = Arc::new(Session::new(
        state.config.inbound_queue,
        principal.map(|p| p.0),
    ));
    let transport = (
        SseSender {
            session: session.clone(),
            outbound: outbound_tx,
            codec: state.codec,
        },
        SseReceiver {
            session: session.clone(),
            ended: false,
        },
    );
    // Checked again as it is admitted: two streams racing for the last place.
    if let Err(full) = state.sessions.admit(id.clone(), session.clone()) {
        return sessions_full(full.max);
    }
    let driver = state.make_driver.serve_connection(transport);
    let weak = Arc::downgrade(&state);
    let ended_id = id.clone();
    tokio::spawn(async move {
        if let Err(error) = driver.await {
            tracing::debug!(%error, "a legacy SSE session's engine stopped");
        }
        if let Some(state) = weak.upgrade() {
            state.sessions.end(&ended_id);
        }
    });

    let endpoint = format!("event: endpoint\ndata: {post_path}?sessionId={id}\n\n");
    let id_header = HeaderValue::from_str(&id).ok();
    let stream = EventStream {
        first: Some(Bytes::from(endpoint)),
        outbound: outbound_rx,
        closed: session.closed.clone(),
        keep_alive: state.config.limits.keep_alive,
        _guard: EndOnDrop {
            state: Arc::downgrade(&state),
            id,
            closed: session.closed.clone(),
        },
    };
    let body = futures::stream::unfold(stream, |mut s| async move {
        let chunk = s.next_chunk().await?;
        Some((Ok::<_, Infallible>(chunk), s))
    });
    let mut response = (
        StatusCode::OK,
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            ),
        ],
        Body::from_stream(body),
    )
        .into_response();
    // The session, for what sits in front (a layer routing requests to the replica holding it);
    // a client reads it from the endpoint event.
    if let Some(id) = id_header {
        response.headers_mut().insert(SESSION_ID_HEADER, id);
    }
    response
}

/// What the response body of one session's stream reads from.
struct EventStream {
    first: Option<Bytes>,
    outbound: mpsc::Receiver<Arc<str>>,
    closed: CancellationToken,
    keep_alive: Duration,
    _guard: EndOnDrop,
}

impl EventStream {
    /// The next bytes to write; `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(first) = self.first.take() {
            return Some(first);
        }
        tokio::select! {
            biased;
            () = self.closed.cancelled() => None,
            message = self.outbound.recv() => {
                let data = message?;
                Some(Bytes::from(format!("event: message\ndata: {data}\n\n")))
            }
            () = tokio::time::sleep(self.keep_alive) => Some(Bytes::from_static(b": keep-alive\n\n")),
        }
    }
}

/// Ends the session when its stream's body is dropped: the client went away (hyper drops the
/// body when a write fails or the connection closes), or the stream ended.
struct EndOnDrop {
    state: Weak<State>,
    id: Arc<str>,
    closed: CancellationToken,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.closed.cancel();
        if let Some(state) = self.state.upgrade() {
            state.sessions.end(&self.id);
        }
    }
}

/// The session a POST names in its query (`sessionId`, or `session_id` as the Python SDK
/// spells it).
fn session_param(uri: &Uri) -> Option<&str> {
    uri.query()?.split('&').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        matches!(name, "sessionId" | "session_id").then_some(value)
    })
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// `POST <post path>?sessionId=…`: one message for a session's engine.
pub(crate) async fn post_message(
    Extract(state): Extract<Arc<State>>,
    uri: Uri,
    headers: HeaderMap,
    principal: Option<axum::Extension<Principal>>,
    body: Body,
) -> Response {
    let principal = principal.map(|p| p.0);
    let Some(id) = session_param(&uri).map(str::to_owned) else {
        return refuse(
            StatusCode::BAD_REQUEST,
            ErrorCode::INVALID_REQUEST,
            "Bad Request: the sessionId query parameter is missing (POST to the URL of the stream's endpoint event)",
        );
    };
    // Another principal's session is as unknown as one that never was (nothing leaks).
    let Some(session) = state.sessions.get_for(&id, principal.as_ref()) else {
        return refuse(
            StatusCode::NOT_FOUND,
            ErrorCode(-32001),
            format!("Session not found: {id:?} is unknown or has ended; open a new stream"),
        );
    };
    if !is_json(&headers) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::INVALID_REQUEST,
            "Unsupported Media Type: the body must be application/json",
        );
    }
    let Ok(bytes) = axum::body::to_bytes(body, state.config.limits.max_body).await else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::INVALID_REQUEST,
            format!(
                "Payload Too Large: the body exceeds {} bytes",
                state.config.limits.max_body
            ),
        );
    };
    let message = match state.codec.decode(&bytes) {
        Ok(message) => message,
        Err(bad) => {
            return match bad.error_response() {
                Some(response) => json_response(
                    StatusCode::BAD_REQUEST,
                    &Message::Response(response.clone()),
                ),
                None => answer(
                    StatusCode::BAD_REQUEST,
                    ErrorObject::invalid_request(bad.to_string()),
                ),
            };
        }
    };
    let mut envelope = Envelope::new(message);
    let info = HttpRequestInfo { headers };
    envelope.extensions.insert(info.arrival(Some(id.clone())));
    envelope.extensions.insert(info);
    if let Some(principal) = principal {
        envelope.extensions.insert(principal);
    }
    session.touch();
    if let Message::Request(request) = &envelope.message {
        envelope.reply = Some(Running::slot(&session.running, request.id.clone()));
    }
    let delivered = tokio::select! {
        biased;
        () = session.closed.cancelled() => false,
        sent = session.inbox.push(Box::new(envelope)) => sent.is_ok(),
    };
    if delivered {
        (StatusCode::ACCEPTED, "Accepted").into_response()
    } else {
        refuse(
            StatusCode::NOT_FOUND,
            ErrorCode(-32001),
            format!("Session not found: {id:?} has ended; open a new stream"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_comes_from_either_spelling() {
        let uri = |s: &str| s.parse::<Uri>().expect("a URI");
        assert_eq!(session_param(&uri("/m?sessionId=ab")), Some("ab"));
        assert_eq!(session_param(&uri("/m?x=1&session_id=cd")), Some("cd"));
        assert_eq!(session_param(&uri("/m?other=1")), None);
        assert_eq!(session_param(&uri("/m")), None);
    }
}
