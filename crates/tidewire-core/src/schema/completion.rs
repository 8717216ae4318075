//! Argument completion: `completion/complete`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{JsonObject, Meta};

/// A reference to a prompt, for completing its arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptReference {
    /// The prompt's name.
    pub name: String,
    /// A human-readable name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A reference to a resource template (or resource URI), for completing its variables.
/// Called `ResourceReference` in 2024-11-05 and 2025-03-26; the wire form is the same.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTemplateReference {
    /// The URI or URI template.
    pub uri: String,
}

/// The 2024-11-05 and 2025-03-26 name of [`ResourceTemplateReference`].
pub type ResourceReference = ResourceTemplateReference;

/// What is being completed, tagged by `type`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// `"type": "ref/prompt"`.
    #[serde(rename = "ref/prompt")]
    Prompt(PromptReference),
    /// `"type": "ref/resource"`.
    #[serde(rename = "ref/resource")]
    Resource(ResourceTemplateReference),
}

impl CompletionReference {
    /// A reference to the prompt `name`.
    pub fn prompt(name: impl Into<String>) -> Self {
        Self::Prompt(PromptReference {
            name: name.into(),
            title: None,
        })
    }

    /// A reference to the resource template `uri`.
    pub fn resource(uri: impl Into<String>) -> Self {
        Self::Resource(ResourceTemplateReference { uri: uri.into() })
    }
}

/// The argument being completed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// The argument's name.
    pub name: String,
    /// What the user typed so far.
    pub value: String,
}

/// Context for a completion (2025-06-18 and later).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionContext {
    /// Arguments already resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
}

/// Parameters of `completion/complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// The prompt or resource template.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument and its partial value.
    pub argument: CompletionArgument,
    /// Already resolved arguments (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompletionContext>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl CompleteParams {
    /// Completes `argument` (currently `value`) of `reference`.
    pub fn new(
        reference: CompletionReference,
        argument: impl Into<String>,
        value: impl Into<String>,
    ) -> Self {
        Self {
            reference,
            argument: CompletionArgument {
                name: argument.into(),
                value: value.into(),
            },
            context: None,
            meta: None,
        }
    }
}

/// The completion values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// Suggested values, at most 100.
    pub values: Vec<String>,
    /// How many values exist in all, which may exceed the number returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// More values exist than were returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

/// Result of `completion/complete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteResult {
    /// The suggestions.
    pub completion: Completion,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl CompleteResult {
    /// The most values one result may carry.
    pub const MAX_VALUES: usize = 100;

    /// A result with `values`; past [`Self::MAX_VALUES`] the list is cut and `hasMore` and
    /// `total` are set.
    pub fn new(mut values: Vec<String>) -> Self {
        let total = values.len();
        let has_more = total > Self::MAX_VALUES;
        values.truncate(Self::MAX_VALUES);
        Self {
            completion: Completion {
                values,
                total: has_more.then_some(total as u64),
                has_more: has_more.then_some(true),
            },
            ..Self::default()
        }
    }
}

impl_has_meta!(CompleteParams, CompleteResult);

request_marker!(
    /// Suggests values for a prompt argument or a resource template variable.
    Complete,
    "completion/complete",
    CompleteParams,
    CompleteResult
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn complete_round_trip() {
        let mut p = CompleteParams::new(CompletionReference::prompt("review"), "lang", "ru");
        p.context = Some(CompletionContext {
            arguments: Some(BTreeMap::from([("a".to_owned(), "b".to_owned())])),
        });
        let v = serde_json::to_value(&p).expect("ser");
        assert_eq!(
            v,
            json!({"ref": {"type": "ref/prompt", "name": "review"},
                   "argument": {"name": "lang", "value": "ru"},
                   "context": {"arguments": {"a": "b"}}})
        );
        assert_eq!(serde_json::from_value::<CompleteParams>(v).expect("de"), p);
        let r: CompleteParams = serde_json::from_value(json!({
            "ref": {"type": "ref/resource", "uri": "file:///{path}"},
            "argument": {"name": "path", "value": "sr"}
        }))
        .expect("resource ref");
        assert_eq!(r.reference, CompletionReference::resource("file:///{path}"));
    }

    #[test]
    fn results_are_capped() {
        let r = CompleteResult::new((0..150).map(|i| i.to_string()).collect());
        assert_eq!(r.completion.values.len(), 100);
        assert_eq!(r.completion.total, Some(150));
        assert_eq!(r.completion.has_more, Some(true));
        let small = CompleteResult::new(vec!["rust".into()]);
        assert_eq!(
            serde_json::to_value(&small).expect("ser"),
            json!({"completion": {"values": ["rust"]}})
        );
    }
}
