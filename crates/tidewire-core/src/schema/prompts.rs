//! Prompts: `prompts/list` and `prompts/get`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ContentBlock, Cursor, Icon, JsonObject, Meta, PaginatedParams, Role};

/// An argument a prompt accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptArgument {
    /// The argument's name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the argument is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether the argument must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

impl PromptArgument {
    /// An argument called `name`; `required` says whether it must be given.
    pub fn new(name: impl Into<String>, required: bool) -> Self {
        Self {
            name: name.into(),
            required: Some(required),
            ..Self::default()
        }
    }
}

/// A prompt (template) the server offers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Prompt {
    /// The prompt's name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the prompt does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it accepts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub icons: Vec<Icon>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl Prompt {
    /// A prompt called `name` with a description.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: Some(description.into()),
            ..Self::default()
        }
    }

    /// Adds an argument.
    #[must_use]
    pub fn with_argument(mut self, argument: PromptArgument) -> Self {
        self.arguments.push(argument);
        self
    }
}

/// One message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: ContentBlock,
}

impl PromptMessage {
    /// A message from `role`.
    pub fn new(role: Role, content: impl Into<ContentBlock>) -> Self {
        Self {
            role,
            content: content.into(),
        }
    }

    /// A text message from the user.
    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, ContentBlock::text(text))
    }

    /// A text message from the assistant.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, ContentBlock::text(text))
    }
}

/// Result of `prompts/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPromptsResult {
    /// This page of prompts.
    pub prompts: Vec<Prompt>,
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

/// Parameters of `prompts/get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// Values of the prompt's arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
    /// The client's answers to an `input_required` result, by key (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<JsonObject>,
    /// The state an `input_required` result carried, echoed (2026-07-28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl GetPromptParams {
    /// Gets `name` without arguments.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            ..Self::default()
        }
    }

    /// Adds one argument value.
    #[must_use]
    pub fn with_argument(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.arguments
            .get_or_insert_with(BTreeMap::new)
            .insert(name.into(), value.into());
        self
    }
}

/// Result of `prompts/get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetPromptResult {
    /// A description of the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The prompt's messages.
    pub messages: Vec<PromptMessage>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl GetPromptResult {
    /// A result with the given messages.
    pub fn new(messages: Vec<PromptMessage>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

impl_has_meta!(Prompt, ListPromptsResult, GetPromptParams, GetPromptResult);

request_marker!(
    /// Lists the server's prompts (paginated).
    ListPrompts,
    "prompts/list",
    PaginatedParams,
    ListPromptsResult
);
request_marker!(
    /// Gets a prompt with its arguments filled in.
    GetPrompt,
    "prompts/get",
    GetPromptParams,
    GetPromptResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn list_and_get_round_trip() {
        let list = ListPromptsResult {
            prompts: vec![
                Prompt::new("review", "Reviews code")
                    .with_argument(PromptArgument::new("code", true)),
            ],
            ..Default::default()
        };
        let v = serde_json::to_value(&list).expect("ser");
        assert_eq!(
            v,
            json!({"prompts": [{"name": "review", "description": "Reviews code",
                   "arguments": [{"name": "code", "required": true}]}]})
        );
        assert_eq!(
            serde_json::from_value::<ListPromptsResult>(v).expect("de"),
            list
        );

        let p = GetPromptParams::new("review").with_argument("code", "fn main() {}");
        assert_eq!(
            serde_json::to_value(&p).expect("ser"),
            json!({"name": "review", "arguments": {"code": "fn main() {}"}})
        );

        let r = GetPromptResult {
            description: Some("d".into()),
            ..GetPromptResult::new(vec![
                PromptMessage::user_text("hi"),
                PromptMessage::new(
                    Role::Assistant,
                    ContentBlock::embedded_text("file:///a", "x"),
                ),
            ])
        };
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(
            v["messages"][0],
            json!({"role": "user", "content": {"type": "text", "text": "hi"}})
        );
        assert_eq!(serde_json::from_value::<GetPromptResult>(v).expect("de"), r);
    }
}
