//! The session lane of a POST: the session it names (found by the front door), or the one its
//! `initialize` opens; its messages then go to [`deliver`](super::deliver).

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tidewire_core::ProtocolVersion;
use tidewire_core::http::reply as http_reply;
use tidewire_core::jsonrpc::{ErrorCode, Message};
use tidewire_core::transport::{Principal, RequestLimits};

use super::checks::{SESSION_ID, error};
use super::config::ResponseMode;
use super::deliver::{deliver, deliver_batch};
use super::refusals::sessions_full;
use super::session::HttpSession;
use super::state::State;

/// Serves `messages` (one, or a 2025-03-26 batch) in the session `known` names, or in the one
/// an `initialize` opens for `principal`.
pub(crate) async fn post(
    state: &Arc<State>,
    known: Option<Arc<HttpSession>>,
    principal: Option<Principal>,
    mut messages: Vec<Message>,
    is_batch: bool,
    mut extensions: tidewire_core::Extensions,
    version: ProtocolVersion,
) -> Response {
    let is_initialize = !is_batch
        && matches!(messages.first(), Some(Message::Request(r)) if r.method == "initialize");
    let (session, created) = match known {
        // Ended while the body was read: its inbox is closed, and delivery says 404.
        Some(session) => (session, false),
        None if is_initialize => {
            let id = match state.sessions.fresh_id() {
                Ok(id) => id,
                Err(refused) => return http_reply::no_new_session(refused).into_response(),
            };
            let session = state.start_session(id, false);
            session.bind(principal);
            // Checked again as it is admitted: two initializes racing for the last slot.
            if let Err(full) = state.sessions.admit(session.id.clone(), session.clone()) {
                session.close();
                return sessions_full(full.max);
            }
            (session, true)
        }
        None => {
            return error(
                StatusCode::BAD_REQUEST,
                ErrorCode::INVALID_REQUEST,
                "Bad Request: the Mcp-Session-Id header is required (send initialize first to get one)",
            );
        }
    };
    session.touch();
    if state.config.response_mode == ResponseMode::Json {
        extensions.insert(RequestLimits {
            related_notifications: false,
            peer_requests: false,
            reason: "Streamable HTTP in JSON response mode",
        });
    }
    let priming = session.version().unwrap_or(version) >= ProtocolVersion::V2025_11_25;
    let mut response = if is_batch {
        deliver_batch(state, &session, messages, &extensions, priming).await
    } else {
        match messages.pop() {
            Some(message) => deliver(state, &session, message, extensions, priming, None).await,
            None => StatusCode::ACCEPTED.into_response(),
        }
    };
    if created && let Ok(value) = HeaderValue::from_str(&session.id) {
        response.headers_mut().insert(SESSION_ID, value);
    }
    response
}
