//! Resources: listing, templates, reading, subscriptions, and resource contents.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::{Annotations, Cursor, EmptyResult, Icon, JsonObject, Meta, PaginatedParams};

/// A resource the server can read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// The resource's URI.
    pub uri: String,
    /// A programmatic name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the resource is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type of the contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The size in bytes of the raw content, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Resource {
    /// A resource at `uri` named `name`.
    pub fn new(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            size: None,
            annotations: None,
            icons: Vec::new(),
            meta: None,
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// Sets the MIME type.
    #[must_use]
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// A family of resources described by an RFC 6570 URI template.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// The URI template, e.g. `file:///logs/{date}.log`.
    pub uri_template: String,
    /// A programmatic name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the resources are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The MIME type shared by all matching resources, if they share one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ResourceTemplate {
    /// A template named `name`.
    pub fn new(uri_template: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
            annotations: None,
            icons: Vec::new(),
            meta: None,
        }
    }
}

/// The text contents of a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TextResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// The MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text.
    pub text: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl TextResourceContents {
    /// Text contents of `uri`.
    pub fn new(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            text: text.into(),
            meta: None,
        }
    }

    /// Sets the MIME type.
    #[must_use]
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// The binary contents of a resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlobResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// The MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The base64-encoded bytes.
    pub blob: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl BlobResourceContents {
    /// Binary contents of `uri`; `blob` is base64.
    pub fn new(uri: impl Into<String>, blob: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            mime_type: None,
            blob: blob.into(),
            meta: None,
        }
    }

    /// Sets the MIME type.
    #[must_use]
    pub fn with_mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.mime_type = Some(mime_type.into());
        self
    }
}

/// The contents of a resource: text or binary, told apart by which of `text` and `blob` is
/// present.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ResourceContents {
    /// Text contents.
    Text(TextResourceContents),
    /// Binary contents.
    Blob(BlobResourceContents),
}

impl ResourceContents {
    /// The resource's URI.
    pub fn uri(&self) -> &str {
        match self {
            Self::Text(t) => &t.uri,
            Self::Blob(b) => &b.uri,
        }
    }

    /// The MIME type, if given.
    pub fn mime_type(&self) -> Option<&str> {
        match self {
            Self::Text(t) => t.mime_type.as_deref(),
            Self::Blob(b) => b.mime_type.as_deref(),
        }
    }
}

impl From<TextResourceContents> for ResourceContents {
    fn from(c: TextResourceContents) -> Self {
        Self::Text(c)
    }
}

impl From<BlobResourceContents> for ResourceContents {
    fn from(c: BlobResourceContents) -> Self {
        Self::Blob(c)
    }
}

impl<'de> Deserialize<'de> for ResourceContents {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = JsonObject::deserialize(deserializer)?;
        if map.contains_key("text") {
            serde_json::from_value(Value::Object(map))
                .map(Self::Text)
                .map_err(|e| D::Error::custom(format_args!("invalid text resource contents: {e}")))
        } else if map.contains_key("blob") {
            serde_json::from_value(Value::Object(map))
                .map(Self::Blob)
                .map_err(|e| D::Error::custom(format_args!("invalid blob resource contents: {e}")))
        } else {
            Err(D::Error::custom(
                "resource contents need a `text` or a `blob` member",
            ))
        }
    }
}

/// Result of `resources/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// This page of resources.
    pub resources: Vec<Resource>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Result of `resources/templates/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// This page of templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// The cursor of the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<Cursor>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// Parameters of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceParams {
    /// The URI to read.
    pub uri: String,
    /// The client's answers to an `input_required` result, by key (2026-07-28).
    #[serde(
        rename = "inputResponses",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub input_responses: Option<JsonObject>,
    /// The state an `input_required` result carried, echoed (2026-07-28).
    #[serde(
        rename = "requestState",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub request_state: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ReadResourceParams {
    /// Reads `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            input_responses: None,
            request_state: None,
            meta: None,
        }
    }
}

/// Result of `resources/read`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// The contents (a resource may have several parts).
    pub contents: Vec<ResourceContents>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ReadResourceResult {
    /// A result with the given contents.
    pub fn new(contents: Vec<ResourceContents>) -> Self {
        Self {
            contents,
            ..Self::default()
        }
    }

    /// A result with one text part.
    pub fn text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self::new(vec![TextResourceContents::new(uri, text).into()])
    }
}

/// Parameters of `resources/subscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscribeParams {
    /// The URI to watch.
    pub uri: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SubscribeParams {
    /// Subscribes to `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            meta: None,
        }
    }
}

/// Parameters of `resources/unsubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnsubscribeParams {
    /// The URI to stop watching.
    pub uri: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl UnsubscribeParams {
    /// Unsubscribes from `uri`.
    pub fn new(uri: impl Into<String>) -> Self {
        Self {
            uri: uri.into(),
            meta: None,
        }
    }
}

impl_has_meta!(
    Resource,
    ResourceTemplate,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ReadResourceParams,
    ReadResourceResult,
    SubscribeParams,
    UnsubscribeParams,
);

request_marker!(
    /// Lists the server's resources (paginated).
    ListResources,
    "resources/list",
    PaginatedParams,
    ListResourcesResult
);
request_marker!(
    /// Lists the server's resource templates (paginated).
    ListResourceTemplates,
    "resources/templates/list",
    PaginatedParams,
    ListResourceTemplatesResult
);
request_marker!(
    /// Reads a resource.
    ReadResource,
    "resources/read",
    ReadResourceParams,
    ReadResourceResult
);
request_marker!(
    /// Asks for `notifications/resources/updated` when a resource changes.
    Subscribe,
    "resources/subscribe",
    SubscribeParams,
    EmptyResult
);
request_marker!(
    /// Cancels a `resources/subscribe`.
    Unsubscribe,
    "resources/unsubscribe",
    UnsubscribeParams,
    EmptyResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn read_result_round_trip() {
        let v = json!({
            "contents": [
                {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"},
                {"uri": "file:///a.png", "blob": "iVBORw0K", "_meta": {"x": 1}}
            ],
            "_meta": {"note": "n"},
            "ttlMs": 1000
        });
        let r: ReadResourceResult = serde_json::from_value(v.clone()).expect("de");
        assert!(matches!(r.contents[0], ResourceContents::Text(_)));
        assert!(matches!(r.contents[1], ResourceContents::Blob(_)));
        assert_eq!(r.contents[1].uri(), "file:///a.png");
        assert_eq!(r.extra.get("ttlMs"), Some(&json!(1000)));
        assert_eq!(serde_json::to_value(&r).expect("ser"), v);
    }

    #[test]
    fn contents_without_text_or_blob_fail() {
        let err = serde_json::from_value::<ResourceContents>(json!({"uri": "file:///x"}))
            .expect_err("neither");
        assert!(err.to_string().contains("`text` or a `blob`"), "{err}");
    }

    #[test]
    fn list_round_trip() {
        let mut res = Resource::new("file:///a.txt", "a")
            .with_description("A file")
            .with_mime_type("text/plain");
        res.size = Some(5);
        res.title = Some("A".into());
        let result = ListResourcesResult {
            resources: vec![res],
            next_cursor: Some("2".into()),
            ..Default::default()
        };
        let v = serde_json::to_value(&result).expect("ser");
        assert_eq!(
            v,
            json!({"resources": [{"uri": "file:///a.txt", "name": "a", "title": "A",
                   "description": "A file", "mimeType": "text/plain", "size": 5}],
                   "nextCursor": "2"})
        );
        assert_eq!(
            serde_json::from_value::<ListResourcesResult>(v).expect("de"),
            result
        );
        let t: ListResourceTemplatesResult = serde_json::from_value(json!({
            "resourceTemplates": [{"uriTemplate": "file:///logs/{day}.log", "name": "logs"}]
        }))
        .expect("templates");
        assert_eq!(
            t.resource_templates[0].uri_template,
            "file:///logs/{day}.log"
        );
    }
}
