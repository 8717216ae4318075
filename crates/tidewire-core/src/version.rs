//! Protocol revisions and version negotiation.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A revision of the MCP specification that tidewire knows.
///
/// The first four use the `initialize` handshake ("the handshake era"); 2026-07-28 is stateless
/// (every request carries its version in `_meta`). Ordering follows publication date.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05: the first revision (stdio and HTTP+SSE).
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, batching, audio, tool annotations, progress messages.
    V2025_03_26,
    /// 2025-06-18: structured tool output, elicitation, resource links; batching removed.
    V2025_06_18,
    /// 2025-11-25: icons, URL elicitation, sampling with tools, tasks, SSE polling.
    V2025_11_25,
    /// 2026-07-28: the stateless revision (no `initialize`, no sessions).
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every revision, oldest first.
    pub const ALL: [Self; 5] = [
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
        Self::V2026_07_28,
    ];

    /// The revisions negotiated through `initialize`, oldest first.
    pub const HANDSHAKE: [Self; 4] = [
        Self::V2024_11_05,
        Self::V2025_03_26,
        Self::V2025_06_18,
        Self::V2025_11_25,
    ];

    /// The newest revision negotiated through `initialize`; what a client offers by default.
    pub const LATEST_HANDSHAKE: Self = Self::V2025_11_25;

    /// The date string used on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2024_11_05 => "2024-11-05",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// True for the revisions that use the `initialize` handshake.
    pub const fn uses_handshake(self) -> bool {
        !matches!(self, Self::V2026_07_28)
    }

    /// The server side of `initialize`: echo the client's version when we support it as a
    /// handshake revision, otherwise answer with our newest handshake revision (the client then
    /// decides whether it can go on).
    pub fn negotiate(requested: &str) -> Self {
        match requested.parse::<Self>() {
            Ok(v) if v.uses_handshake() => v,
            _ => Self::LATEST_HANDSHAKE,
        }
    }

    /// `notifications/progress` carries `message` (2025-03-26 and later).
    pub const fn has_progress_message(self) -> bool {
        !matches!(self, Self::V2024_11_05)
    }

    /// Server-to-client `elicitation/create` exists (2025-06-18 and later).
    pub const fn has_elicitation(self) -> bool {
        matches!(
            self,
            Self::V2025_06_18 | Self::V2025_11_25 | Self::V2026_07_28
        )
    }

    /// Tools may declare `outputSchema` and return `structuredContent` (2025-06-18 and later).
    pub const fn has_structured_output(self) -> bool {
        matches!(
            self,
            Self::V2025_06_18 | Self::V2025_11_25 | Self::V2026_07_28
        )
    }
}

/// Which eras a server serves: the session era (`initialize`, 2024-11-05 … 2025-11-25), the
/// stateless era (2026-07-28), or both on the same endpoint (the default).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Eras {
    /// Both: a request carrying `_meta` `io.modelcontextprotocol/protocolVersion` is served
    /// statelessly, `initialize` opens a session.
    #[default]
    Dual,
    /// Only the stateless revision: `initialize` is refused, naming the supported versions.
    Modern,
    /// Only the session era: requests are served as before 2026-07-28 (`server/discover` is an
    /// unknown method).
    Legacy,
}

impl Eras {
    /// Serves stateless (2026-07-28) requests.
    pub const fn modern(self) -> bool {
        matches!(self, Self::Dual | Self::Modern)
    }

    /// Serves `initialize` and sessions.
    pub const fn legacy(self) -> bool {
        matches!(self, Self::Dual | Self::Legacy)
    }
}

impl FromStr for Eras {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "dual" => Ok(Self::Dual),
            "modern" => Ok(Self::Modern),
            "legacy" => Ok(Self::Legacy),
            other => Err(format!(
                "unknown era {other:?} (expected modern, legacy or dual)"
            )),
        }
    }
}

/// The revisions served statelessly (every request names one in its `_meta`).
pub const STATELESS_VERSIONS: [ProtocolVersion; 1] = [ProtocolVersion::V2026_07_28];

/// True when `params` carry `_meta["io.modelcontextprotocol/protocolVersion"]`: the request
/// is written in the stateless era, whatever the value says.
pub fn is_stateless_request(params: Option<&serde_json::Value>) -> bool {
    params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(crate::schema::meta_keys::PROTOCOL_VERSION))
        .is_some()
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The version string is not one tidewire knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown MCP protocol version {0:?} (known: 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28)"
)]
pub struct UnknownVersion(pub String);

impl FromStr for ProtocolVersion {
    type Err = UnknownVersion;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or_else(|| UnknownVersion(s.to_owned()))
    }
}

impl Serialize for ProtocolVersion {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ProtocolVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_echoes_known_handshake_versions() {
        for v in ProtocolVersion::HANDSHAKE {
            assert_eq!(ProtocolVersion::negotiate(v.as_str()), v);
        }
        assert_eq!(
            ProtocolVersion::negotiate("2026-07-28"),
            ProtocolVersion::V2025_11_25
        );
        assert_eq!(
            ProtocolVersion::negotiate("1999-01-01"),
            ProtocolVersion::V2025_11_25
        );
    }

    #[test]
    fn parses_and_orders() {
        assert!(ProtocolVersion::V2024_11_05 < ProtocolVersion::V2026_07_28);
        assert!("2025-13-01".parse::<ProtocolVersion>().is_err());
        assert_eq!(
            "2025-06-18".parse::<ProtocolVersion>(),
            Ok(ProtocolVersion::V2025_06_18)
        );
    }
}
