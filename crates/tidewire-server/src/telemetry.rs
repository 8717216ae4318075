//! Feature `otel`: each message served is an [`Operation`] of `tidewire-otel` (a span in the
//! MCP conventions, a child of the trace context in its `_meta`, and its duration).

use serde_json::Value;
use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::transport::HttpArrival;
use tidewire_otel::{Message, Network, Operation, Outcome, Side};

use crate::answer::Served;

/// The operation of a request about to be served (before its `_meta` leaves its params: its
/// trace context is the span's parent). `version` is the session's revision, when it has one;
/// `http` what the HTTP transport said of the request.
pub(crate) fn request(
    method: &str,
    params: Option<&Value>,
    id: &tidewire_core::jsonrpc::RequestId,
    http: Option<&HttpArrival>,
    version: Option<&str>,
) -> Operation {
    Operation::start(
        Side::Server,
        Message {
            method,
            params,
            request_id: Some(id),
            session_id: http.and_then(|h| h.session_id.as_deref()),
            protocol_version: version,
            network: http.map(|_| Network::Http),
        },
    )
}

/// The operation of a notification about to be handled.
pub(crate) fn notification(
    method: &str,
    params: Option<&Value>,
    version: Option<&str>,
) -> Operation {
    Operation::start(
        Side::Server,
        Message {
            method,
            params,
            protocol_version: version,
            ..Message::default()
        },
    )
}

/// The outcome of the answer to a request of `method`.
pub(crate) fn outcome(method: &str, answer: &Result<Served, ErrorObject>) -> Outcome {
    match answer {
        Ok(Served::Wire {
            tool_error: true, ..
        }) => Outcome::ToolError,
        Ok(Served::Wire { .. }) => Outcome::Ok,
        Ok(Served::Tree(result)) => Outcome::of_result(method, result),
        Err(error) => Outcome::Error(error.code),
    }
}
