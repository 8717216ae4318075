//! One-shot sessions ([`HttpConfig::one_shot_sessions`](super::HttpConfig::one_shot_sessions)):
//! each session-era POST served in an engine session of its own that ends with it.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::Message;
use tidewire_core::transport::RequestLimits;

use super::config::ResponseMode;
use super::deliver::deliver;
use super::sse_body::EndOnDrop;
use super::state::{State, StatelessSlot, server_busy};

/// Serves one message in a short-lived engine session of its own.
pub(crate) async fn post(
    state: &Arc<State>,
    message: Message,
    mut extensions: tidewire_core::Extensions,
    version: ProtocolVersion,
) -> Response {
    let Message::Request(request) = &message else {
        // Nothing in a server of one-shot sessions can be waiting for it.
        return StatusCode::ACCEPTED.into_response();
    };
    if state.lifecycle.is_draining() {
        return super::refusals::draining(Some(request.id.clone()));
    }
    // The same cap as the 2026-07-28 wire's: a place among the requests running at once, held
    // until the one-shot session ends.
    let Some(slot) = StatelessSlot::take(state) else {
        return server_busy(state, request.id.clone());
    };
    extensions.insert(RequestLimits {
        related_notifications: state.config.response_mode == ResponseMode::Sse,
        peer_requests: false,
        reason: "Streamable HTTP with one-shot sessions",
    });
    // Never a client's session id (those are hex), and unique: each one-shot session's streams
    // and stored events stay its own.
    let n = state
        .stateless_seq
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let session = state.start_session(format!("stateless-{n}").into(), true);
    // Owned by this request from here on: however the POST ends — answered, or dropped by a
    // client that went away before its reply began — the one-shot session ends with it.
    let one_shot = EndOnDrop::new(session.clone(), Some(slot));
    let priming = version >= ProtocolVersion::V2025_11_25;
    deliver(
        state,
        &session,
        message,
        extensions,
        priming,
        Some(one_shot),
    )
    .await
}
