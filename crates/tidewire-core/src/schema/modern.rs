//! What only the stateless revision (2026-07-28) has: `server/discover`, `subscriptions/listen`,
//! multi round-trip results (`input_required`), `resultType` and the caching hints.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CreateMessageParams, ElicitParams, EmptyParams, JsonObject, Meta, ServerCapabilities};

/// The `_meta` keys of the 2026-07-28 revision.
pub mod meta_keys {
    /// On every request: the revision the request is written in.
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// On every request: what the client can do, for this request only.
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// On requests (SHOULD): who the client says it is.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// On a request: the least severe log level the client wants for it (none: no logs).
    pub const LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
    /// On results (SHOULD): who the server is.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
    /// On every message of a `subscriptions/listen` stream: the listen request's id.
    pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
    /// W3C trace context keys a request may carry.
    pub const TRACE_CONTEXT: [&str; 3] = ["traceparent", "tracestate", "baggage"];
}

/// The values of `resultType`.
pub mod result_type {
    /// The request is done; the result is final.
    pub const COMPLETE: &str = "complete";
    /// The server needs answers from the client first ([`InputRequiredResult`](super::InputRequiredResult)).
    pub const INPUT_REQUIRED: &str = "input_required";
}

/// Whether a cached result may be shared across authorization contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// No user-specific data: any cache may keep it and serve it to anyone.
    Public,
    /// Only caches within the same authorization context may keep it.
    #[default]
    Private,
}

/// The result of `server/discover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// The revisions the server serves statelessly.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Guidance for the client's model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the client may cache this answer, in milliseconds.
    pub ttl_ms: u64,
    /// Who may share the cached answer.
    pub cache_scope: CacheScope,
    /// Always `complete`.
    pub result_type: String,
    /// Protocol metadata (`serverInfo`).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The notification types a client opts in to on `subscriptions/listen`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// `notifications/tasks` for these tasks (the tasks extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ids: Option<Vec<String>>,
}

/// Parameters of `subscriptions/listen`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenParams {
    /// What the client wants to hear about.
    pub notifications: SubscriptionFilter,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The result that ends a `subscriptions/listen` stream the server closes by choice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListenResult {
    /// Always `complete`.
    pub result_type: String,
    /// Carries the subscription id.
    #[serde(rename = "_meta")]
    pub meta: Meta,
}

/// Parameters of `notifications/subscriptions/acknowledged`, the first message of a listen
/// stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcknowledgedParams {
    /// The part of the filter the server will honour.
    pub notifications: SubscriptionFilter,
    /// Carries the subscription id.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// A question the server asks the client inside an [`InputRequiredResult`]: the payload of a
/// server-to-client request of the session era.
#[derive(Debug, Clone, PartialEq)]
pub enum InputRequest {
    /// `elicitation/create`.
    Elicit(ElicitParams),
    /// `sampling/createMessage`.
    CreateMessage(Box<CreateMessageParams>),
    /// `roots/list`.
    ListRoots,
}

impl InputRequest {
    /// The method the question would have been sent as.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Elicit(_) => "elicitation/create",
            Self::CreateMessage(_) => "sampling/createMessage",
            Self::ListRoots => "roots/list",
        }
    }

    /// `{ "method": …, "params": … }`.
    pub fn to_value(&self) -> Value {
        let params = match self {
            Self::Elicit(p) => serde_json::to_value(p).ok(),
            Self::CreateMessage(p) => serde_json::to_value(p).ok(),
            Self::ListRoots => serde_json::to_value(EmptyParams::new()).ok(),
        };
        let mut map = JsonObject::new();
        map.insert("method".to_owned(), Value::from(self.method()));
        if let Some(params) = params {
            map.insert("params".to_owned(), params);
        }
        Value::Object(map)
    }
}

impl Serialize for InputRequest {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut value = JsonObject::deserialize(deserializer)?;
        let params = value
            .remove("params")
            .unwrap_or_else(|| Value::Object(JsonObject::new()));
        match value.get("method").and_then(Value::as_str) {
            Some("elicitation/create") => serde_json::from_value(params)
                .map(Self::Elicit)
                .map_err(D::Error::custom),
            Some("sampling/createMessage") => serde_json::from_value(params)
                .map(|p| Self::CreateMessage(Box::new(p)))
                .map_err(D::Error::custom),
            Some("roots/list") => Ok(Self::ListRoots),
            Some(other) => Err(D::Error::custom(format!(
                "an input request cannot be {other:?}"
            ))),
            None => Err(D::Error::missing_field("method")),
        }
    }
}

/// The answer of a `tools/call`, `resources/read` or `prompts/get` that needs the client's input
/// first (2026-07-28): the client answers `input_requests` and retries the same request with
/// `inputResponses` and `requestState` echoed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// The questions, by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<BTreeMap<String, InputRequest>>,
    /// Opaque state the client echoes on its retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Always `input_required`.
    pub result_type: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl InputRequiredResult {
    /// A result asking `requests` (keyed), with optional state to echo.
    pub fn new(requests: BTreeMap<String, InputRequest>, state: Option<String>) -> Self {
        Self {
            input_requests: (!requests.is_empty()).then_some(requests),
            request_state: state,
            result_type: result_type::INPUT_REQUIRED.to_owned(),
            meta: None,
        }
    }
}

request_marker!(
    /// Asks a stateless server what it serves (2026-07-28).
    Discover,
    "server/discover",
    EmptyParams,
    DiscoverResult
);
request_marker!(
    /// Opens a stream of the notifications the client opts in to (2026-07-28).
    SubscriptionsListen,
    "subscriptions/listen",
    ListenParams,
    ListenResult
);
notification_marker!(
    /// The first message of a listen stream: what the server agreed to send.
    SubscriptionsAcknowledged,
    "notifications/subscriptions/acknowledged",
    AcknowledgedParams
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_requests_round_trip_with_their_method() {
        let request = InputRequest::ListRoots;
        let value = serde_json::to_value(&request).expect("serialises");
        assert_eq!(value["method"], "roots/list");
        let back: InputRequest = serde_json::from_value(value).expect("reads");
        assert_eq!(back, request);
        let bad = serde_json::json!({"method": "tools/call", "params": {}});
        assert!(serde_json::from_value::<InputRequest>(bad).is_err());
    }

    #[test]
    fn cache_scope_is_lowercase() {
        assert_eq!(
            serde_json::to_value(CacheScope::Public).expect("serialises"),
            "public"
        );
    }
}
