//! The handshake: `initialize`, capabilities, implementation info, `ping` and
//! `notifications/initialized`.

use serde::{Deserialize, Serialize};

use super::{
    ClientTasksCapability, EmptyParams, EmptyResult, Icon, JsonObject, Meta, ServerTasksCapability,
};
use crate::version::ProtocolVersion;

/// The name and version of an MCP implementation (`clientInfo` / `serverInfo`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// A programmatic name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The version string.
    pub version: String,
    /// What the implementation does (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    /// A home page (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
}

impl Implementation {
    /// An implementation called `name` at `version`.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            ..Self::default()
        }
    }

    /// Sets the human-readable title.
    #[must_use]
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }
}

/// The client's `roots` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootsCapability {
    /// The client sends `notifications/roots/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The client's `sampling` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplingCapability {
    /// The client honours `includeContext` values other than `none` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
    /// The client accepts `tools` and `toolChoice` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The client's `elicitation` capability (2025-06-18 and later).
///
/// An empty object means form mode only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCapability {
    /// Form mode (2025-11-25 spelling).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<JsonObject>,
    /// URL mode (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<JsonObject>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ElicitationCapability {
    /// True when form mode is supported: declared explicitly, or implied by an object that
    /// declares no mode at all.
    pub fn supports_form(&self) -> bool {
        self.form.is_some() || self.url.is_none()
    }

    /// True when URL mode is supported.
    pub fn supports_url(&self) -> bool {
        self.url.is_some()
    }
}

/// What a client can do, sent in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCapabilities {
    /// Non-standard capabilities, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The client exposes filesystem roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<RootsCapability>,
    /// The client can sample from a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingCapability>,
    /// The client can ask its user for input (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// The client supports tasks (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<ClientTasksCapability>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The server's `prompts` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptsCapability {
    /// The server sends `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The server's `resources` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// The server supports `resources/subscribe`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// The server sends `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The server's `tools` capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolsCapability {
    /// The server sends `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// What a server can do, sent in the `initialize` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerCapabilities {
    /// Non-standard capabilities, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// The server sends log messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// The server answers `completion/complete` (declared since 2025-03-26).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// The server offers prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PromptsCapability>,
    /// The server offers resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// The server offers tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ToolsCapability>,
    /// The server supports tasks (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<ServerTasksCapability>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ServerCapabilities {
    /// Declares tools; `list_changed` says whether the list may change.
    #[must_use]
    pub fn with_tools(mut self, list_changed: bool) -> Self {
        self.tools = Some(ToolsCapability {
            list_changed: Some(list_changed),
            ..Default::default()
        });
        self
    }

    /// Declares prompts; `list_changed` says whether the list may change.
    #[must_use]
    pub fn with_prompts(mut self, list_changed: bool) -> Self {
        self.prompts = Some(PromptsCapability {
            list_changed: Some(list_changed),
            ..Default::default()
        });
        self
    }

    /// Declares resources, with or without subscriptions and list-change notifications.
    #[must_use]
    pub fn with_resources(mut self, subscribe: bool, list_changed: bool) -> Self {
        self.resources = Some(ResourcesCapability {
            subscribe: Some(subscribe),
            list_changed: Some(list_changed),
            ..Default::default()
        });
        self
    }

    /// Declares logging.
    #[must_use]
    pub fn with_logging(mut self) -> Self {
        self.logging = Some(JsonObject::new());
        self
    }

    /// Declares completions.
    #[must_use]
    pub fn with_completions(mut self) -> Self {
        self.completions = Some(JsonObject::new());
        self
    }
}

/// Parameters of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The newest revision the client supports. Kept as a string: a server must be able to read
    /// versions it does not know in order to answer with one it does.
    pub protocol_version: String,
    /// The client's capabilities.
    pub capabilities: ClientCapabilities,
    /// The client's name and version.
    pub client_info: Implementation,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InitializeParams {
    /// Parameters offering `version`.
    pub fn new(
        version: ProtocolVersion,
        capabilities: ClientCapabilities,
        client_info: Implementation,
    ) -> Self {
        Self {
            protocol_version: version.as_str().to_owned(),
            capabilities,
            client_info,
            meta: None,
        }
    }

    /// The offered revision, if tidewire knows it.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.protocol_version.parse().ok()
    }
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The revision the server chose.
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server's name and version.
    pub server_info: Implementation,
    /// How to use the server, e.g. a hint for the model's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl InitializeResult {
    /// A result choosing `version`.
    pub fn new(
        version: ProtocolVersion,
        capabilities: ServerCapabilities,
        server_info: Implementation,
    ) -> Self {
        Self {
            protocol_version: version.as_str().to_owned(),
            capabilities,
            server_info,
            instructions: None,
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// The chosen revision, if tidewire knows it.
    pub fn version(&self) -> Option<ProtocolVersion> {
        self.protocol_version.parse().ok()
    }
}

impl_has_meta!(InitializeParams, InitializeResult);

request_marker!(
    /// The first request of a session: agrees on a revision and exchanges capabilities.
    Initialize,
    "initialize",
    InitializeParams,
    InitializeResult
);
request_marker!(
    /// Checks that the peer is alive; answered with an empty result. Both directions.
    Ping,
    "ping",
    EmptyParams,
    EmptyResult
);
notification_marker!(
    /// Sent by the client once it has the `initialize` result.
    InitializedNotification,
    "notifications/initialized",
    EmptyParams
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn initialize_round_trip() {
        let v = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {
                "roots": {"listChanged": true},
                "sampling": {"tools": {}},
                "elicitation": {"form": {}, "url": {}},
                "experimental": {"x": {"y": 1}},
                "futureCap": {"z": true}
            },
            "clientInfo": {"name": "c", "version": "1.0", "title": "C",
                           "websiteUrl": "https://example.com"},
            "_meta": {"progressToken": 3}
        });
        let p: InitializeParams = serde_json::from_value(v.clone()).expect("de");
        assert!(p.capabilities.extra.contains_key("futureCap"));
        let elicitation = p.capabilities.elicitation.as_ref().expect("elicitation");
        assert!(elicitation.supports_form() && elicitation.supports_url());
        assert_eq!(serde_json::to_value(&p).expect("ser"), v);
    }

    #[test]
    fn empty_elicitation_capability_means_form() {
        let cap = ElicitationCapability::default();
        assert!(cap.supports_form());
        assert!(!cap.supports_url());
        let url_only = ElicitationCapability {
            url: Some(JsonObject::new()),
            ..Default::default()
        };
        assert!(!url_only.supports_form());
    }

    #[test]
    fn initialize_result_round_trip() {
        let mut r = InitializeResult::new(
            ProtocolVersion::V2025_06_18,
            ServerCapabilities::default()
                .with_tools(true)
                .with_logging()
                .with_resources(true, false),
            Implementation::new("s", "0.1").with_title("S"),
        );
        r.instructions = Some("be nice".into());
        r.extra.insert("extraField".into(), json!(1));
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(
            v,
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {"tools": {"listChanged": true}, "logging": {},
                                 "resources": {"subscribe": true, "listChanged": false}},
                "serverInfo": {"name": "s", "version": "0.1", "title": "S"},
                "instructions": "be nice",
                "extraField": 1
            })
        );
        let back: InitializeResult = serde_json::from_value(v).expect("de");
        assert_eq!(back, r);
        assert_eq!(back.version(), Some(ProtocolVersion::V2025_06_18));
    }
}
