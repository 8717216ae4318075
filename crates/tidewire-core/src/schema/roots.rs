//! Roots: the filesystem locations a client exposes (`roots/list`).

use serde::{Deserialize, Serialize};

use super::{EmptyParams, JsonObject, Meta};

/// A root directory or file the client lets the server work with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Root {
    /// A root at `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: None,
            meta: None,
        }
    }

    /// Sets the name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// Result of `roots/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ListRootsResult {
    /// A result with `roots`.
    pub fn new(roots: Vec<Root>) -> Self {
        Self {
            roots,
            ..Self::default()
        }
    }
}

impl_has_meta!(Root, ListRootsResult);

request_marker!(
    /// Asks the client for its roots (server to client).
    ListRoots,
    "roots/list",
    EmptyParams,
    ListRootsResult
);
notification_marker!(
    /// The client's roots changed (client to server).
    RootsListChangedNotification,
    "notifications/roots/list_changed",
    EmptyParams
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn roots_round_trip() {
        let r = ListRootsResult::new(vec![
            Root::new("file:///home/u/project").with_name("project"),
            Root::new("file:///tmp"),
        ]);
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(
            v,
            json!({"roots": [{"uri": "file:///home/u/project", "name": "project"},
                             {"uri": "file:///tmp"}]})
        );
        assert_eq!(serde_json::from_value::<ListRootsResult>(v).expect("de"), r);
    }
}
