//! Which era a client speaks with its server: the session era (`initialize`) or the stateless
//! revision 2026-07-28 (every request carries its `_meta`), and how it finds out.

use serde_json::Value;
use tidewire_core::ProtocolVersion;
use tidewire_core::jsonrpc::ErrorCode;
use tidewire_core::schema::{ClientCapabilities, Implementation, JsonObject, meta_keys};
use tidewire_core::version::STATELESS_VERSIONS;

/// The two eras of MCP, and the choice between them: what a client asks for
/// ([`ClientBuilder::era`](crate::ClientBuilder::era)) and what a connected one speaks
/// ([`Client::era`](crate::Client::era): `Modern` or `Legacy`, never `Auto`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Era {
    /// Probe with `server/discover`: a discover result (or a recognised stateless error) means
    /// the stateless revision; any other error, or no answer within the handshake timeout (10 s
    /// by default), means the session era, on the same connection. The default, on every
    /// transport that carries both eras (stdio, WebSocket, in-memory, `StreamableHttpConnector`);
    /// over one built around sessions only (the legacy HTTP+SSE client) it is the session era
    /// at once.
    #[default]
    Auto,
    /// The stateless revision (2026-07-28): every request carries its `_meta`. Asked for, the
    /// only one: connecting fails if the server does not serve it.
    Modern,
    /// The session era (`initialize`, 2024-11-05 … 2025-11-25). Asked for, the only one.
    Legacy,
}

/// The `_meta` envelope every stateless request carries.
pub(crate) fn envelope(
    version: ProtocolVersion,
    capabilities: &ClientCapabilities,
    info: &Implementation,
) -> JsonObject {
    let mut meta = JsonObject::new();
    meta.insert(
        meta_keys::PROTOCOL_VERSION.to_owned(),
        Value::from(version.as_str()),
    );
    meta.insert(
        meta_keys::CLIENT_CAPABILITIES.to_owned(),
        serde_json::to_value(capabilities).unwrap_or_else(|_| Value::Object(JsonObject::new())),
    );
    if let Ok(info) = serde_json::to_value(info) {
        meta.insert(meta_keys::CLIENT_INFO.to_owned(), info);
    }
    meta
}

/// Whether an error answer to `server/discover` comes from a server of the stateless era (so
/// falling back to `initialize` would be wrong): `-32022` naming supported versions, or a
/// header mismatch.
pub(crate) fn is_stateless_error(code: i64, data: Option<&Value>) -> bool {
    match ErrorCode(code) {
        ErrorCode::UNSUPPORTED_PROTOCOL_VERSION => data
            .and_then(|d| d.get("supported"))
            .is_some_and(Value::is_array),
        ErrorCode::HEADER_MISMATCH => true,
        _ => false,
    }
}

/// A stateless revision both sides serve, from a `-32022` answer's `data.supported`.
pub(crate) fn shared_version(data: Option<&Value>) -> Option<ProtocolVersion> {
    let supported = data?.get("supported")?.as_array()?;
    STATELESS_VERSIONS
        .iter()
        .rev()
        .copied()
        .find(|ours| supported.iter().any(|v| v.as_str() == Some(ours.as_str())))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn only_stateless_errors_keep_a_client_from_falling_back() {
        assert!(is_stateless_error(
            -32022,
            Some(&json!({"supported": ["2026-07-28"], "requested": "x"}))
        ));
        assert!(!is_stateless_error(-32022, None));
        assert!(!is_stateless_error(-32601, None));
        assert!(!is_stateless_error(-32602, None));
        assert_eq!(
            shared_version(Some(&json!({"supported": ["2099-01-01", "2026-07-28"]}))),
            Some(ProtocolVersion::V2026_07_28)
        );
        assert_eq!(
            shared_version(Some(&json!({"supported": ["2099-01-01"]}))),
            None
        );
    }
}
