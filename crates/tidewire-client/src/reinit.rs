//! A new session when the server ends one under a live connection (Streamable HTTP: a 404 to a
//! request carrying the session id; the transport tells the engine, the engine counts it in
//! [`Peer::sessions_ended`]). The client runs a real `initialize` and `notifications/initialized`
//! through the engine, and keeps what the new handshake says (server, capabilities, version).

use std::sync::{Arc, Weak};
use std::time::Duration;

use tidewire_core::schema::{
    EmptyParams, Initialize, InitializeParams, InitializeResult, InitializedNotification,
};
use tidewire_core::session::Peer;
use tidewire_core::text::excerpt;

use crate::client::Inner;

/// How long a new handshake may take when the builder set no handshake timeout.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a new session is started with: the first handshake's params, and its timeout.
pub(crate) type Renewal = (InitializeParams, Option<Duration>);

/// Watches for ended sessions for as long as the client lives: starts a new one with `renewal`,
/// or closes the connection without it.
pub(crate) fn watch(inner: Weak<Inner>, peer: Peer, renewal: Option<Renewal>) {
    let mut ended = peer.sessions_ended();
    ended.mark_unchanged();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = ended.changed() => if changed.is_err() { return },
                () = peer.closed() => return,
            }
            let Some(inner) = inner.upgrade() else {
                return;
            };
            let Some((params, timeout)) = &renewal else {
                tracing::warn!(
                    "the server ended the MCP session; closing the connection (reinitialize is off)"
                );
                peer.close();
                return;
            };
            // What the new handshake says is kept before `notifications/initialized` goes: the
            // transport releases the calls held for the new session only then, so none of them
            // sees the old session's description.
            let renewed = match renew(&peer, params, timeout.unwrap_or(DEFAULT_TIMEOUT)).await {
                Ok(result) => {
                    tracing::info!(
                        server = %excerpt(&result.server_info.name),
                        version = %excerpt(&result.protocol_version),
                        "started a new MCP session after the server ended the last one"
                    );
                    *inner
                        .init
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(result);
                    inner
                        .reinitializations
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    peer.notify::<InitializedNotification>(EmptyParams::new())
                        .await
                        .map_err(|e| format!("notifications/initialized failed: {e}"))
                }
                Err(reason) => Err(reason),
            };
            if let Err(reason) = renewed {
                // No session, and none to be had: end the connection rather than leave it
                // half-alive; every call then fails saying it is closed.
                tracing::error!(%reason, "the server ended the MCP session and a new one could not be started");
                peer.close();
                return;
            }
        }
    });
}

/// `initialize`, and the negotiated version recorded in the engine.
async fn renew(
    peer: &Peer,
    params: &InitializeParams,
    timeout: Duration,
) -> Result<InitializeResult, String> {
    let result = peer
        .request::<Initialize>(params.clone())
        .timeout(timeout)
        .await
        .map_err(|e| format!("initialize failed: {e}"))?;
    let version = match result.version() {
        Some(version) if version.uses_handshake() => version,
        _ => {
            return Err(format!(
                "the server answered initialize with version {:?}",
                excerpt(&result.protocol_version)
            ));
        }
    };
    peer.set_protocol_version(version);
    Ok(result)
}
