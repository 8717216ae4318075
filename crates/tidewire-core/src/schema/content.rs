//! Content blocks (text, image, audio, resource links, embedded resources), annotations, roles
//! and icons.

use serde::{Deserialize, Serialize};

use super::{BlobResourceContents, Meta, ResourceContents, TextResourceContents};

/// The sender or recipient of a message in a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The human side.
    User,
    /// The model side.
    Assistant,
}

/// Hints to the client about how to use or show an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who the object is meant for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audience: Vec<Role>,
    /// Importance, from 0 (optional) to 1 (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<f64>,
    /// When the object last changed, as an ISO 8601 timestamp (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}

impl Annotations {
    /// Annotations for the given audience.
    pub fn for_audience(audience: impl IntoIterator<Item = Role>) -> Self {
        Self {
            audience: audience.into_iter().collect(),
            ..Self::default()
        }
    }

    /// Sets the priority.
    #[must_use]
    pub fn with_priority(mut self, priority: f64) -> Self {
        self.priority = Some(priority);
        self
    }
}

open_string_enum! {
    /// The colour theme an icon is designed for.
    pub enum IconTheme {
        /// For a light background.
        Light = "light",
        /// For a dark background.
        Dark = "dark",
    }
}

/// An icon for a tool, resource, prompt or implementation (2025-11-25 and later).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An `https:` or `data:` URI of the image.
    pub src: String,
    /// The image's MIME type, when the URI does not make it clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes the icon fits, e.g. `"48x48"` or `"any"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sizes: Vec<String>,
    /// The theme the icon is designed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<IconTheme>,
}

impl Icon {
    /// An icon at `src`.
    pub fn new(src: impl Into<String>) -> Self {
        Self {
            src: src.into(),
            mime_type: None,
            sizes: Vec::new(),
            theme: None,
        }
    }
}

/// Text content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl TextContent {
    /// A text block.
    pub fn new(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            annotations: None,
            meta: None,
        }
    }
}

/// An image, base64-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// The base64-encoded image data.
    pub data: String,
    /// The image's MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ImageContent {
    /// An image block from base64 data and a MIME type.
    pub fn new(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }
}

/// Audio, base64-encoded (2025-03-26 and later).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AudioContent {
    /// The base64-encoded audio data.
    pub data: String,
    /// The audio's MIME type, e.g. `audio/wav`.
    pub mime_type: String,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl AudioContent {
    /// An audio block from base64 data and a MIME type.
    pub fn new(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self {
            data: data.into(),
            mime_type: mime_type.into(),
            annotations: None,
            meta: None,
        }
    }
}

/// A link to a resource the client may read (2025-06-18 and later). It need not appear in
/// `resources/list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceLink {
    /// The resource's URI.
    pub uri: String,
    /// A programmatic name.
    pub name: String,
    /// A human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the resource is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The resource's MIME type.
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

impl ResourceLink {
    /// A link to `uri` named `name`.
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
}

/// The contents of a resource, embedded in a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource's contents.
    pub resource: ResourceContents,
    /// Display hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl EmbeddedResource {
    /// Embeds `resource`.
    pub fn new(resource: impl Into<ResourceContents>) -> Self {
        Self {
            resource: resource.into(),
            annotations: None,
            meta: None,
        }
    }
}

tagged_block_enum! {
    /// A block of content in a tool result or a prompt message, tagged by `type`.
    ///
    /// A block with a `type` this version does not know decodes as [`ContentBlock::Unknown`]
    /// rather than failing the whole message.
    pub enum ContentBlock {
        /// `"type": "text"`.
        Text(TextContent) = "text",
        /// `"type": "image"`.
        Image(ImageContent) = "image",
        /// `"type": "audio"` (2025-03-26 and later).
        Audio(AudioContent) = "audio",
        /// `"type": "resource_link"` (2025-06-18 and later).
        ResourceLink(ResourceLink) = "resource_link",
        /// `"type": "resource"`: an embedded resource.
        Resource(EmbeddedResource) = "resource",
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent::new(text))
    }

    /// An image block from base64 data and a MIME type.
    pub fn image(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Image(ImageContent::new(data, mime_type))
    }

    /// An audio block from base64 data and a MIME type.
    pub fn audio(data: impl Into<String>, mime_type: impl Into<String>) -> Self {
        Self::Audio(AudioContent::new(data, mime_type))
    }

    /// A resource link block.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Self {
        Self::ResourceLink(ResourceLink::new(uri, name))
    }

    /// An embedded resource block.
    pub fn resource(contents: impl Into<ResourceContents>) -> Self {
        Self::Resource(EmbeddedResource::new(contents))
    }

    /// An embedded text resource block.
    pub fn embedded_text(uri: impl Into<String>, text: impl Into<String>) -> Self {
        Self::resource(TextResourceContents::new(uri, text))
    }

    /// An embedded binary resource block (`blob` is base64).
    pub fn embedded_blob(uri: impl Into<String>, blob: impl Into<String>) -> Self {
        Self::resource(BlobResourceContents::new(uri, blob))
    }

    /// The text, for a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(&t.text),
            _ => None,
        }
    }

    /// The block's annotations, if it has any.
    pub fn annotations(&self) -> Option<&Annotations> {
        match self {
            Self::Text(b) => b.annotations.as_ref(),
            Self::Image(b) => b.annotations.as_ref(),
            Self::Audio(b) => b.annotations.as_ref(),
            Self::ResourceLink(b) => b.annotations.as_ref(),
            Self::Resource(b) => b.annotations.as_ref(),
            Self::Unknown(_) => None,
        }
    }
}

impl From<&str> for ContentBlock {
    fn from(text: &str) -> Self {
        Self::text(text)
    }
}

impl From<String> for ContentBlock {
    fn from(text: String) -> Self {
        Self::text(text)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn round_trip(block: &ContentBlock, expected: &serde_json::Value) {
        let v = serde_json::to_value(block).expect("ser");
        assert_eq!(&v, expected);
        let back: ContentBlock = serde_json::from_value(v).expect("de");
        assert_eq!(&back, block);
    }

    #[test]
    fn every_block_round_trips() {
        round_trip(
            &ContentBlock::text("hi"),
            &json!({"type": "text", "text": "hi"}),
        );
        round_trip(
            &ContentBlock::image("aGk=", "image/png"),
            &json!({"type": "image", "data": "aGk=", "mimeType": "image/png"}),
        );
        round_trip(
            &ContentBlock::audio("aGk=", "audio/wav"),
            &json!({"type": "audio", "data": "aGk=", "mimeType": "audio/wav"}),
        );
        let mut link = ResourceLink::new("file:///a.txt", "a");
        link.size = Some(12);
        link.icons.push(Icon::new("https://example.com/a.png"));
        round_trip(
            &ContentBlock::ResourceLink(link),
            &json!({"type": "resource_link", "uri": "file:///a.txt", "name": "a", "size": 12,
                   "icons": [{"src": "https://example.com/a.png"}]}),
        );
        round_trip(
            &ContentBlock::embedded_text("file:///a.txt", "body"),
            &json!({"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}}),
        );
        round_trip(
            &ContentBlock::embedded_blob("file:///a.bin", "AAE="),
            &json!({"type": "resource", "resource": {"uri": "file:///a.bin", "blob": "AAE="}}),
        );
    }

    #[test]
    fn annotations_and_meta_round_trip() {
        let mut text = TextContent::new("x");
        text.annotations = Some(Annotations {
            audience: vec![Role::User, Role::Assistant],
            priority: Some(0.5),
            last_modified: Some("2025-01-01T00:00:00Z".into()),
        });
        let mut meta = Meta::new();
        meta.insert("k".into(), json!(true));
        text.meta = Some(meta);
        round_trip(
            &ContentBlock::Text(text),
            &json!({"type": "text", "text": "x", "_meta": {"k": true},
                   "annotations": {"audience": ["user", "assistant"], "priority": 0.5,
                                   "lastModified": "2025-01-01T00:00:00Z"}}),
        );
    }

    #[test]
    fn unknown_block_type_is_kept() {
        let v = json!({"type": "hologram", "frames": 3});
        let block: ContentBlock = serde_json::from_value(v.clone()).expect("de");
        assert!(matches!(block, ContentBlock::Unknown(_)));
        assert_eq!(block.type_tag(), Some("hologram"));
        assert_eq!(serde_json::to_value(&block).expect("ser"), v);
    }

    #[test]
    fn malformed_known_block_is_an_error() {
        let err = serde_json::from_value::<ContentBlock>(json!({"type": "text"}))
            .expect_err("missing text");
        assert!(err.to_string().contains("`text` block"), "{err}");
        assert!(serde_json::from_value::<ContentBlock>(json!({"text": "x"})).is_err());
        assert!(serde_json::from_value::<ContentBlock>(json!("text")).is_err());
    }

    #[test]
    fn unknown_icon_theme_is_kept() {
        let icon: Icon =
            serde_json::from_value(json!({"src": "data:,", "theme": "sepia"})).expect("de");
        assert_eq!(icon.theme, Some(IconTheme::Other("sepia".into())));
        assert_eq!(
            serde_json::to_value(&icon).expect("ser")["theme"],
            json!("sepia")
        );
    }
}
