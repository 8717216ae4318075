//! Stateless requests served straight from a transport, with no session: the HTTP transport
//! hands each 2026-07-28 request here ([`ServeRequest`]) and polls its [`RequestRun`] where it
//! answers, so no engine session, driver task or queue is built for it.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;
use tidewire_core::jsonrpc::{ErrorObject, Request, Response};
use tidewire_core::lifecycle::draining_error;
use tidewire_core::session::{
    Answered, RequestContext, RequestRun, RequestStream, ServeRequest, Watched, watch_drain,
};
use tidewire_core::text::excerpt;
use tidewire_core::version::Eras;
use tokio_util::sync::CancellationToken;

use crate::answer::Served;
use crate::connection::Connection;
use crate::context::ServerInner;

/// A server's stateless requests, served without a session.
pub(crate) struct RequestServer {
    server: Arc<ServerInner>,
    /// What a handler's context names as its connection: one for every request served here
    /// (a stateless request reads nothing of it; its `_meta` says who the client is).
    connection: Arc<Connection>,
}

impl RequestServer {
    pub(crate) fn new(server: Arc<ServerInner>) -> Self {
        let connection = Arc::new(server.connection(Eras::Modern));
        Self { server, connection }
    }
}

impl ServeRequest for RequestServer {
    fn serve_request(
        &self,
        mut request: Request,
        extensions: tidewire_core::Extensions,
        stream: RequestStream,
    ) -> RequestRun {
        let policy = self
            .server
            .cancel_policy_of(&request)
            .unwrap_or(self.server.session_options.default_cancel_policy());
        #[cfg(feature = "otel")]
        let operation = crate::telemetry::request(
            &request.method,
            request.params.as_ref(),
            &request.id,
            extensions.get(),
            None,
        );
        let cancel = CancellationToken::new();
        // `_meta` moves into the context (the dispatcher reads it there), not copied.
        let meta = match &mut request.params {
            Some(serde_json::Value::Object(params)) => params.remove("_meta"),
            _ => None,
        };
        let ctx = RequestContext::for_stream(
            request.id.clone(),
            &request.method,
            meta,
            extensions,
            stream,
            cancel.clone(),
            policy,
        );
        let server = self.server.clone();
        let connection = self.connection.clone();
        let in_flight = server.lifecycle.track();
        let watched = cancel.clone();
        let handler = async move {
            let _in_flight = in_flight;
            let id = request.id.clone();
            #[cfg(feature = "otel")]
            let method = request.method.clone();
            let served = crate::stateless::serve(&server, &connection, request, ctx);
            #[cfg(feature = "otel")]
            let served = tracing::Instrument::instrument(served, operation.span().clone());
            // A drain past its deadline cancels what still runs; the request is still
            // answered. The handler is pinned in this block, so one the drain stopped is
            // dropped at its end, before it is answered for (its `on_cancel` guards run first).
            let outcome = {
                let served = std::pin::pin!(AssertUnwindSafe(served).catch_unwind());
                match watch_drain(served, &server.lifecycle, &watched, policy).await {
                    Watched::Returned(outcome) | Watched::Stopped(outcome) => outcome,
                    Watched::Dropped => Ok(Err(draining_error())),
                }
            };
            #[cfg(feature = "otel")]
            operation.finish(match &outcome {
                Ok(answer) => crate::telemetry::outcome(&method, answer),
                Err(_) => tidewire_otel::Outcome::Error(
                    tidewire_core::jsonrpc::ErrorCode::INTERNAL_ERROR.0,
                ),
            });
            Some(match outcome {
                Ok(Ok(Served::Wire { encoded, .. })) => Answered::Result(encoded),
                Ok(Ok(Served::Tree(result))) => Response::result(id, result).into(),
                Ok(Err(error)) => Response::error(Some(id), error).into(),
                Err(_) => {
                    tracing::error!(id = %excerpt(&id.to_string()), "a stateless request's handler panicked");
                    Response::error(
                        Some(id),
                        ErrorObject::internal("the request's handler panicked"),
                    )
                    .into()
                }
            })
        };
        RequestRun::new(Box::pin(handler), cancel, policy)
    }
}
