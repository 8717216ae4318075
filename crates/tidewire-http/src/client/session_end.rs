//! When the server ends the session (HTTP 404 to a request carrying its id): the transport
//! forgets it, stops what served it, and tells the engine, whose client starts a new one.

use tidewire_core::jsonrpc::ErrorObject;
use tidewire_core::transport::{Exchange, TransportError};

use super::error::transport_error;
use super::shared::TransportState;

/// The error a request of the ended session fails with.
pub(crate) fn error() -> ErrorObject {
    transport_error(
        "the server ended the MCP session (HTTP 404); its requests are lost with it: retry the \
         request once the client has started a new session",
    )
}

/// Handles the end of session `generation` (once: later calls for it do nothing), which
/// `request`, when given, learnt of and fails with.
///
/// The order matters. The session is forgotten first, so a request sent from here on waits for
/// the new one instead of going out with the dead id (a caller retrying at once would otherwise
/// get a second 404). The request fails next, before the engine hears and starts that new
/// session, so its caller learns of the end before anything else happens.
pub(crate) async fn ended(shared: &TransportState, generation: u64, request: Option<&Exchange>) {
    let served = shared.end_session(generation);
    if let Some(exchange) = request {
        exchange.fail(error());
    }
    let Some(served) = served else {
        return;
    };
    tracing::warn!("the server ended the MCP session (HTTP 404)");
    let signal = TransportError::session_ended("HTTP 404 to a request carrying the session id");
    shared.push(Err(signal)).await;
    // Last: the caller may be one of the tasks this stops.
    served.cancel();
}
