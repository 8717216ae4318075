//! `_meta`, empty parameter and result objects, and the [`HasMeta`] trait.

use std::ops::{Deref, DerefMut};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jsonrpc::{ProgressToken, RequestId};

/// A JSON object: what the schema calls `{ [key: string]: unknown }`.
pub type JsonObject = serde_json::Map<String, Value>;

/// The `_meta` member: a free-form JSON object that carries protocol metadata.
///
/// Keys may have a reverse-DNS prefix (`io.modelcontextprotocol/…` is reserved for the
/// specification). In a request's `params._meta`, the key `progressToken` asks the receiver for
/// progress notifications. `Meta` dereferences to its map, so every map method is available.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Meta(pub JsonObject);

impl Meta {
    /// The key of the progress token inside a request's `_meta`.
    pub const PROGRESS_TOKEN: &'static str = "progressToken";
    /// The key that ties a message to a task (2025-11-25).
    pub const RELATED_TASK: &'static str = "io.modelcontextprotocol/related-task";

    /// An empty `_meta`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A `_meta` holding only a progress token.
    pub fn with_progress_token(token: impl Into<ProgressToken>) -> Self {
        let mut meta = Self::new();
        meta.set_progress_token(token);
        meta
    }

    /// The progress token, if there is one that is a string or an integer.
    pub fn progress_token(&self) -> Option<ProgressToken> {
        self.0
            .get(Self::PROGRESS_TOKEN)
            .and_then(RequestId::from_json)
    }

    /// Sets (or replaces) the progress token.
    pub fn set_progress_token(&mut self, token: impl Into<ProgressToken>) {
        self.0
            .insert(Self::PROGRESS_TOKEN.to_owned(), token.into().to_json());
    }

    /// Removes the progress token and returns it.
    pub fn take_progress_token(&mut self) -> Option<ProgressToken> {
        self.0
            .remove(Self::PROGRESS_TOKEN)
            .and_then(|v| RequestId::from_json(&v))
    }

    /// The underlying map.
    pub fn into_inner(self) -> JsonObject {
        self.0
    }
}

impl Deref for Meta {
    type Target = JsonObject;
    fn deref(&self) -> &JsonObject {
        &self.0
    }
}

impl DerefMut for Meta {
    fn deref_mut(&mut self) -> &mut JsonObject {
        &mut self.0
    }
}

impl From<JsonObject> for Meta {
    fn from(map: JsonObject) -> Self {
        Self(map)
    }
}

/// Parameter and result types that carry an optional `_meta`.
pub trait HasMeta {
    /// The `_meta` member, if present.
    fn meta(&self) -> Option<&Meta>;
    /// The `_meta` member, for changing it.
    fn meta_mut(&mut self) -> &mut Option<Meta>;

    /// The progress token in `_meta`, if any.
    fn progress_token(&self) -> Option<ProgressToken> {
        self.meta().and_then(Meta::progress_token)
    }

    /// Sets the progress token in `_meta`, creating `_meta` when needed.
    fn set_progress_token(&mut self, token: impl Into<ProgressToken>)
    where
        Self: Sized,
    {
        self.meta_mut()
            .get_or_insert_with(Meta::new)
            .set_progress_token(token);
    }
}

/// Reads `_meta.progressToken` from raw (undecoded) request params.
pub fn progress_token_of(params: Option<&Value>) -> Option<ProgressToken> {
    params?
        .get("_meta")?
        .get(Meta::PROGRESS_TOKEN)
        .and_then(RequestId::from_json)
}

/// Parameters of a method that takes none (`ping`, `roots/list`, `notifications/initialized`,
/// the `list_changed` notifications): an object with an optional `_meta`.
///
/// It serialises as `{}` when empty. Other members are kept (the schema leaves this object open).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyParams {
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl EmptyParams {
    /// Empty parameters.
    pub fn new() -> Self {
        Self::default()
    }
}

/// A result with no content (`ping`, `logging/setLevel`, `resources/subscribe`, …).
///
/// The schema's `Result` is an open object, so any members a peer adds are kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyResult {
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl EmptyResult {
    /// An empty result (`{}`).
    pub fn new() -> Self {
        Self::default()
    }
}

impl_has_meta!(EmptyParams, EmptyResult);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn progress_tokens_keep_their_form() {
        let int: EmptyParams =
            serde_json::from_value(json!({"_meta": {"progressToken": 1}})).expect("int");
        let string: EmptyParams =
            serde_json::from_value(json!({"_meta": {"progressToken": "1"}})).expect("string");
        assert_eq!(int.progress_token(), Some(RequestId::Number(1)));
        assert_eq!(string.progress_token(), Some(RequestId::from("1")));
        assert_ne!(int.progress_token(), string.progress_token());
        assert_eq!(
            serde_json::to_value(&string).expect("ser"),
            json!({"_meta": {"progressToken": "1"}})
        );
    }

    #[test]
    fn invalid_tokens_read_as_none() {
        let meta: Meta = serde_json::from_value(json!({"progressToken": 1.5})).expect("meta");
        assert_eq!(meta.progress_token(), None);
        assert_eq!(
            progress_token_of(Some(&json!({"_meta": {"progressToken": 7}}))),
            Some(7.into())
        );
        assert_eq!(progress_token_of(Some(&json!({}))), None);
        assert_eq!(progress_token_of(None), None);
    }

    #[test]
    fn set_progress_token_creates_meta() {
        let mut params = EmptyParams::new();
        assert_eq!(serde_json::to_value(&params).expect("ser"), json!({}));
        params.set_progress_token("abc");
        assert_eq!(
            serde_json::to_value(&params).expect("ser"),
            json!({"_meta": {"progressToken": "abc"}})
        );
        let mut meta = params.meta.clone().expect("meta");
        assert_eq!(meta.take_progress_token(), Some("abc".into()));
        assert!(meta.is_empty());
    }

    #[test]
    fn empty_result_keeps_unknown_members() {
        let v = json!({"_meta": {"x": 1}, "future": [1, 2]});
        let r: EmptyResult = serde_json::from_value(v.clone()).expect("de");
        assert_eq!(r.extra.get("future"), Some(&json!([1, 2])));
        assert_eq!(serde_json::to_value(&r).expect("ser"), v);
    }
}
