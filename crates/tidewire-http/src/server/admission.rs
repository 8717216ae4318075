//! [`Admission`]: what a request must pass at this endpoint before anything of it is acted on,
//! for a layer in front of the endpoint that reads a request itself (`tidewire-redis` forwards
//! a request to the replica holding its session): the same checks, in the same order, as a
//! request served here.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use bytes::Bytes;
use tidewire_core::http::reply as http_reply;
use tidewire_core::jsonrpc::{ErrorCode, ErrorObject};

use super::body::{self, Limits};
use super::state::State;

/// The endpoint's admission checks, from [`StreamableHttp::admission`](super::StreamableHttp::admission).
#[derive(Clone)]
pub struct Admission {
    state: Arc<State>,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission").finish_non_exhaustive()
    }
}

impl Admission {
    pub(crate) fn new(state: Arc<State>) -> Self {
        Self { state }
    }

    /// The endpoint's `Host`/`Origin` rule (what its handler applies first).
    ///
    /// # Errors
    /// The 403 to answer with.
    #[allow(clippy::result_large_err)]
    pub fn check_host(&self, headers: &HeaderMap) -> Result<(), Response> {
        self.state
            .config
            .limits
            .hosts
            .check(headers)
            .map_err(|refused| {
                http_reply::json_rpc_error(
                    StatusCode::FORBIDDEN,
                    None,
                    ErrorObject::new(ErrorCode::INVALID_REQUEST, refused.0),
                )
                .map(Body::from)
            })
    }

    /// Reads a request body as a POST here is read: at most the endpoint's body limit (a
    /// larger `Content-Length` is refused before a byte is read), within its read timeout, and
    /// counted against the bytes of bodies the endpoint reads at once. A body that came in one
    /// chunk is returned as that chunk, which may share the connection's read buffer: copy
    /// what is kept for long.
    ///
    /// # Errors
    /// The answer to send instead: 413, 408, 503 or 400.
    #[allow(clippy::result_large_err)]
    pub async fn read_body(&self, headers: &HeaderMap, body: Body) -> Result<Bytes, Response> {
        let state = &self.state;
        let limits = Limits {
            max: state.config.limits.max_body,
            timeout: state.config.body_read_timeout,
            budgets: &[&state.body_budget],
            drains: &state.drains,
        };
        body::read(body, headers, limits).await
    }
}
