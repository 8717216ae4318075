//! Sampling: `sampling/createMessage` (server to client), including tool use (2025-11-25).

use std::fmt;

use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{
    AudioContent, ContentBlock, ImageContent, JsonObject, Meta, Role, TaskMetadata, TextContent,
    Tool,
};

/// A model's request to call a tool, inside a sampled message (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseContent {
    /// An id for this call; the matching [`ToolResultContent`] carries it as `toolUseId`.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments.
    pub input: JsonObject,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

/// The result of a tool call, sent back to the model (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultContent {
    /// The `id` of the [`ToolUseContent`] this answers.
    pub tool_use_id: String,
    /// The unstructured result.
    pub content: Vec<ContentBlock>,
    /// The structured result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<JsonObject>,
    /// True when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

tagged_block_enum! {
    /// A block of content in a sampled message, tagged by `type`.
    pub enum SamplingContent {
        /// `"type": "text"`.
        Text(TextContent) = "text",
        /// `"type": "image"`.
        Image(ImageContent) = "image",
        /// `"type": "audio"` (2025-03-26 and later).
        Audio(AudioContent) = "audio",
        /// `"type": "tool_use"` (2025-11-25).
        ToolUse(ToolUseContent) = "tool_use",
        /// `"type": "tool_result"` (2025-11-25).
        ToolResult(ToolResultContent) = "tool_result",
    }
}

impl SamplingContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent::new(text))
    }

    /// The text, for a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            Self::Text(t) => Some(&t.text),
            _ => None,
        }
    }
}

/// One value or a list of values: how `content` is given in sampling messages (a list only from
/// 2025-11-25 on).
#[derive(Debug, Clone, PartialEq)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// A list of values.
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    /// The values as a slice.
    pub fn as_slice(&self) -> &[T] {
        match self {
            Self::One(v) => std::slice::from_ref(v),
            Self::Many(v) => v,
        }
    }

    /// Iterates over the values.
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.as_slice().iter()
    }

    /// The values as a vector.
    pub fn into_vec(self) -> Vec<T> {
        match self {
            Self::One(v) => vec![v],
            Self::Many(v) => v,
        }
    }
}

impl<T> From<T> for OneOrMany<T> {
    fn from(v: T) -> Self {
        Self::One(v)
    }
}

impl<T: Serialize> Serialize for OneOrMany<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::One(v) => v.serialize(serializer),
            Self::Many(v) => v.serialize(serializer),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: DeserializeOwned> Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object or an array of objects")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map)).map(OneOrMany::One)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                Vec::<T>::deserialize(SeqAccessDeserializer::new(seq)).map(OneOrMany::Many)
            }
        }
        deserializer.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A message in a sampling conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// Who says it.
    pub role: Role,
    /// What is said: one block, or (2025-11-25) several.
    pub content: OneOrMany<SamplingContent>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl SamplingMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<OneOrMany<SamplingContent>>) -> Self {
        Self {
            role,
            content: content.into(),
            meta: None,
        }
    }

    /// A text message from the user.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, SamplingContent::text(text))
    }

    /// A text message from the assistant.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, SamplingContent::text(text))
    }
}

/// A hint naming a model (or a family, by substring).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelHint {
    /// A model name or part of one, e.g. `"sonnet"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// The server's preferences for model selection; the client decides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelPreferences {
    /// Model hints, in order of preference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<ModelHint>,
    /// How much cost matters, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_priority: Option<f64>,
    /// How much speed matters, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_priority: Option<f64>,
    /// How much capability matters, 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intelligence_priority: Option<f64>,
}

open_string_enum! {
    /// Which MCP context the client should add to the prompt. Values other than `none` are
    /// soft-deprecated since 2025-11-25.
    pub enum IncludeContext {
        /// No context.
        None = "none",
        /// Context from the requesting server.
        ThisServer = "thisServer",
        /// Context from every connected server.
        AllServers = "allServers",
    }
}

open_string_enum! {
    /// How the model may use the offered tools (2025-11-25).
    pub enum ToolChoiceMode {
        /// The model decides.
        Auto = "auto",
        /// The model must call a tool.
        Required = "required",
        /// The model must not call a tool.
        None = "none",
    }
}

/// Tool-use policy for sampling (2025-11-25).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolChoice {
    /// The mode; absent means `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ToolChoiceMode>,
}

/// Parameters of `sampling/createMessage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageParams {
    /// The conversation.
    pub messages: Vec<SamplingMessage>,
    /// Model preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<ModelPreferences>,
    /// A system prompt the client may use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Which MCP context to include.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_context: Option<IncludeContext>,
    /// The sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// The most tokens to sample; the client must respect it.
    pub max_tokens: u32,
    /// Sequences that stop sampling.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// Provider-specific metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<JsonObject>,
    /// Tools the model may call (2025-11-25; needs the client's `sampling.tools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// How the model may use the tools (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Run as a task (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskMetadata>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CreateMessageParams {
    /// Samples a reply to `messages`, at most `max_tokens` long.
    pub fn new(messages: Vec<SamplingMessage>, max_tokens: u32) -> Self {
        Self {
            messages,
            max_tokens,
            ..Self::default()
        }
    }
}

open_string_enum! {
    /// Why sampling stopped.
    pub enum StopReason {
        /// The model finished its turn.
        EndTurn = "endTurn",
        /// A stop sequence was produced.
        StopSequence = "stopSequence",
        /// `maxTokens` was reached.
        MaxTokens = "maxTokens",
        /// The model wants to call tools (2025-11-25).
        ToolUse = "toolUse",
    }
}

/// Result of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// Who said it (normally the assistant).
    pub role: Role,
    /// What was sampled: one block, or (2025-11-25) several.
    pub content: OneOrMany<SamplingContent>,
    /// The model that produced it.
    pub model: String,
    /// Why sampling stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CreateMessageResult {
    /// An assistant text reply from `model`.
    pub fn text(model: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: SamplingContent::text(text).into(),
            model: model.into(),
            stop_reason: Some(StopReason::EndTurn),
            meta: None,
            extra: JsonObject::new(),
        }
    }
}

impl_has_meta!(
    ToolUseContent,
    ToolResultContent,
    SamplingMessage,
    CreateMessageParams,
    CreateMessageResult,
);

request_marker!(
    /// Asks the client to sample from its model (server to client).
    CreateMessage,
    "sampling/createMessage",
    CreateMessageParams,
    CreateMessageResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn create_message_round_trip() {
        let v = json!({
            "messages": [
                {"role": "user", "content": {"type": "text", "text": "What is 2+2?"}},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "c1", "name": "calc", "input": {"expr": "2+2"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "toolUseId": "c1",
                     "content": [{"type": "text", "text": "4"}], "structuredContent": {"v": 4}}
                ]}
            ],
            "modelPreferences": {"hints": [{"name": "sonnet"}], "costPriority": 0.3},
            "systemPrompt": "Be brief",
            "includeContext": "none",
            "temperature": 0.2,
            "maxTokens": 100,
            "stopSequences": ["\n\n"],
            "metadata": {"provider": "x"},
            "tools": [{"name": "calc", "inputSchema": {"type": "object"}}],
            "toolChoice": {"mode": "auto"},
            "_meta": {"progressToken": "p"}
        });
        let p: CreateMessageParams = serde_json::from_value(v.clone()).expect("de");
        assert!(matches!(
            p.messages[0].content,
            OneOrMany::One(SamplingContent::Text(_))
        ));
        assert!(matches!(
            p.messages[1].content.as_slice()[0],
            SamplingContent::ToolUse(_)
        ));
        assert_eq!(serde_json::to_value(&p).expect("ser"), v);
    }

    #[test]
    fn result_round_trip_and_open_enums() {
        let r = CreateMessageResult::text("m-1", "4");
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(
            v,
            json!({"role": "assistant", "content": {"type": "text", "text": "4"},
                   "model": "m-1", "stopReason": "endTurn"})
        );
        assert_eq!(
            serde_json::from_value::<CreateMessageResult>(v).expect("de"),
            r
        );
        let odd: CreateMessageResult = serde_json::from_value(json!({
            "role": "assistant", "model": "m", "stopReason": "contentFilter",
            "content": [{"type": "text", "text": "a"}, {"type": "thinking", "text": "b"}]
        }))
        .expect("odd");
        assert_eq!(
            odd.stop_reason,
            Some(StopReason::Other("contentFilter".into()))
        );
        assert!(matches!(
            odd.content.as_slice()[1],
            SamplingContent::Unknown(_)
        ));
    }

    #[test]
    fn content_must_be_object_or_array() {
        assert!(
            serde_json::from_value::<SamplingMessage>(json!({"role": "user", "content": "x"}))
                .is_err()
        );
    }
}
