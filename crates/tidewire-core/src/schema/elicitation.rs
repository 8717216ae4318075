//! Elicitation: `elicitation/create` (server to client) in form mode (2025-06-18 and later) and
//! URL mode (2025-11-25), and `notifications/elicitation/complete`. The form schemas are in
//! `elicitation_form.rs`.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::value::SeqAccessDeserializer;
use serde::de::{Error as _, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::{ElicitationSchema, JsonObject, Meta, TaskMetadata};
use crate::jsonrpc::{ErrorCode, ErrorObject};

/// Parameters of a form-mode `elicitation/create`. Serialised with `"mode": "form"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitFormParams {
    /// What to ask the user.
    pub message: String,
    /// The form.
    pub requested_schema: ElicitationSchema,
    /// Run as a task (2025-11-25).
    #[serde(default)]
    pub task: Option<TaskMetadata>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default)]
    pub meta: Option<Meta>,
}

impl Serialize for ElicitFormParams {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("mode", "form")?;
        map.serialize_entry("message", &self.message)?;
        map.serialize_entry("requestedSchema", &self.requested_schema)?;
        if let Some(task) = &self.task {
            map.serialize_entry("task", task)?;
        }
        if let Some(meta) = &self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

/// Parameters of a URL-mode `elicitation/create` (2025-11-25). Serialised with `"mode": "url"`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitUrlParams {
    /// Why the user should open the URL.
    pub message: String,
    /// The URL to open.
    pub url: String,
    /// An id, echoed by `notifications/elicitation/complete`.
    pub elicitation_id: String,
    /// Run as a task.
    #[serde(default)]
    pub task: Option<TaskMetadata>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default)]
    pub meta: Option<Meta>,
}

impl Serialize for ElicitUrlParams {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("mode", "url")?;
        map.serialize_entry("message", &self.message)?;
        map.serialize_entry("url", &self.url)?;
        map.serialize_entry("elicitationId", &self.elicitation_id)?;
        if let Some(task) = &self.task {
            map.serialize_entry("task", task)?;
        }
        if let Some(meta) = &self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

/// Parameters of `elicitation/create`: a form, or (2025-11-25) a URL, told apart by `mode`
/// (absent means form).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ElicitParams {
    /// Form mode.
    Form(ElicitFormParams),
    /// URL mode.
    Url(ElicitUrlParams),
}

impl ElicitParams {
    /// Asks the user to fill `schema`.
    pub fn form(message: impl Into<String>, schema: ElicitationSchema) -> Self {
        Self::Form(ElicitFormParams {
            message: message.into(),
            requested_schema: schema,
            task: None,
            meta: None,
        })
    }

    /// Asks the user to open `url`.
    pub fn url(
        message: impl Into<String>,
        url: impl Into<String>,
        elicitation_id: impl Into<String>,
    ) -> Self {
        Self::Url(ElicitUrlParams {
            message: message.into(),
            url: url.into(),
            elicitation_id: elicitation_id.into(),
            task: None,
            meta: None,
        })
    }

    /// The message shown to the user.
    pub fn message(&self) -> &str {
        match self {
            Self::Form(p) => &p.message,
            Self::Url(p) => &p.message,
        }
    }
}

impl<'de> Deserialize<'de> for ElicitParams {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = JsonObject::deserialize(deserializer)?;
        match map.get("mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(mode)) if mode == "form" => {}
            Some(Value::String(mode)) if mode == "url" => {
                return serde_json::from_value(Value::Object(map))
                    .map(Self::Url)
                    .map_err(|e| D::Error::custom(format_args!("invalid URL elicitation: {e}")));
            }
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "unknown elicitation mode {other} (expected \"form\" or \"url\")"
                )));
            }
        }
        serde_json::from_value(Value::Object(map))
            .map(Self::Form)
            .map_err(|e| D::Error::custom(format_args!("invalid form elicitation: {e}")))
    }
}

/// How the user answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted (form mode: `content` holds the answers).
    Accept,
    /// Explicitly refused.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// One answer in a form: a string, a number, a boolean or (2025-11-25) a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ElicitValue {
    /// Text or a single choice.
    String(String),
    /// An integer.
    Integer(i64),
    /// A number.
    Number(f64),
    /// Yes or no.
    Boolean(bool),
    /// Several choices.
    StringList(Vec<String>),
}

impl<'de> Deserialize<'de> for ElicitValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ElicitValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, a number, a boolean or an array of strings")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<ElicitValue, E> {
                Ok(ElicitValue::Boolean(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<ElicitValue, E> {
                Ok(ElicitValue::Integer(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<ElicitValue, E> {
                Ok(i64::try_from(v).map_or(ElicitValue::Number(v as f64), ElicitValue::Integer))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<ElicitValue, E> {
                Ok(ElicitValue::Number(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ElicitValue, E> {
                Ok(ElicitValue::String(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<ElicitValue, E> {
                Ok(ElicitValue::String(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<ElicitValue, A::Error> {
                Vec::<String>::deserialize(SeqAccessDeserializer::new(seq))
                    .map(ElicitValue::StringList)
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl From<&str> for ElicitValue {
    fn from(v: &str) -> Self {
        Self::String(v.to_owned())
    }
}

impl From<String> for ElicitValue {
    fn from(v: String) -> Self {
        Self::String(v)
    }
}

impl From<i64> for ElicitValue {
    fn from(v: i64) -> Self {
        Self::Integer(v)
    }
}

impl From<f64> for ElicitValue {
    fn from(v: f64) -> Self {
        Self::Number(v)
    }
}

impl From<bool> for ElicitValue {
    fn from(v: bool) -> Self {
        Self::Boolean(v)
    }
}

impl From<Vec<String>> for ElicitValue {
    fn from(v: Vec<String>) -> Self {
        Self::StringList(v)
    }
}

/// Result of `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// How the user answered.
    pub action: ElicitAction,
    /// The answers, by field name (form mode, `accept` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<BTreeMap<String, ElicitValue>>,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
    /// Members this version does not know, kept for a round trip.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ElicitResult {
    fn with_action(action: ElicitAction, content: Option<BTreeMap<String, ElicitValue>>) -> Self {
        Self {
            action,
            content,
            meta: None,
            extra: JsonObject::new(),
        }
    }

    /// The user submitted `content` (form mode).
    pub fn accept(content: BTreeMap<String, ElicitValue>) -> Self {
        Self::with_action(ElicitAction::Accept, Some(content))
    }

    /// The user accepted (URL mode: they agreed to open the URL).
    pub fn accept_url() -> Self {
        Self::with_action(ElicitAction::Accept, None)
    }

    /// The user refused.
    pub fn decline() -> Self {
        Self::with_action(ElicitAction::Decline, None)
    }

    /// The user dismissed the request.
    pub fn cancel() -> Self {
        Self::with_action(ElicitAction::Cancel, None)
    }
}

/// Parameters of `notifications/elicitation/complete` (2025-11-25).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCompleteParams {
    /// The id of the URL-mode elicitation that finished.
    pub elicitation_id: String,
    /// Protocol metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Meta>,
}

impl ElicitationCompleteParams {
    /// The elicitation `elicitation_id` finished.
    pub fn new(elicitation_id: impl Into<String>) -> Self {
        Self {
            elicitation_id: elicitation_id.into(),
            meta: None,
        }
    }
}

/// The `data` of a `-32042` error: URL elicitations the client must complete first
/// (2025-11-25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrlElicitationRequiredData {
    /// The elicitations to complete.
    pub elicitations: Vec<ElicitUrlParams>,
}

impl UrlElicitationRequiredData {
    /// The `-32042` error carrying these elicitations.
    pub fn into_error(self, message: impl Into<String>) -> ErrorObject {
        let error = ErrorObject::new(ErrorCode::URL_ELICITATION_REQUIRED, message);
        match serde_json::to_value(&self) {
            Ok(data) => error.with_data(data),
            Err(_) => error,
        }
    }

    /// Reads the elicitations from a `-32042` error; `None` for any other error.
    pub fn from_error(error: &ErrorObject) -> Option<Self> {
        if error.code() != ErrorCode::URL_ELICITATION_REQUIRED {
            return None;
        }
        Self::deserialize(error.data.as_ref()?).ok()
    }
}

impl_has_meta!(
    ElicitFormParams,
    ElicitUrlParams,
    ElicitResult,
    ElicitationCompleteParams
);

request_marker!(
    /// Asks the user for input through the client (server to client, 2025-06-18 and later).
    Elicit,
    "elicitation/create",
    ElicitParams,
    ElicitResult
);
notification_marker!(
    /// A URL-mode elicitation finished (server to client, 2025-11-25).
    ElicitationCompleteNotification,
    "notifications/elicitation/complete",
    ElicitationCompleteParams
);

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn mode_defaults_to_form_and_url_mode_reads() {
        let p: ElicitParams = serde_json::from_value(json!({
            "message": "m",
            "requestedSchema": {"type": "object", "properties": {"n": {"type": "number", "minimum": 1}}}
        }))
        .expect("form");
        assert!(matches!(p, ElicitParams::Form(_)));
        let u = ElicitParams::url("Sign in", "https://example.com/auth", "e-1");
        let v = serde_json::to_value(&u).expect("ser");
        assert_eq!(
            v,
            json!({"mode": "url", "message": "Sign in", "url": "https://example.com/auth",
                   "elicitationId": "e-1"})
        );
        assert_eq!(serde_json::from_value::<ElicitParams>(v).expect("de"), u);
        let err = serde_json::from_value::<ElicitParams>(json!({"mode": "voice", "message": "m"}))
            .expect_err("mode");
        assert!(
            err.to_string().contains("unknown elicitation mode"),
            "{err}"
        );
        let err = serde_json::from_value::<ElicitParams>(json!({
            "message": "m", "requestedSchema": {"type": "object", "properties": {"o": {"type": "object"}}}
        }))
        .expect_err("nested object");
        assert!(
            err.to_string()
                .contains("unsupported elicitation field type"),
            "{err}"
        );
    }

    #[test]
    fn result_round_trip() {
        let r = ElicitResult::accept(BTreeMap::from([
            ("name".to_owned(), ElicitValue::from("Ann")),
            ("age".to_owned(), ElicitValue::from(30)),
            ("ratio".to_owned(), ElicitValue::from(0.5)),
            ("ok".to_owned(), ElicitValue::from(true)),
            ("tags".to_owned(), ElicitValue::from(vec!["a".to_owned()])),
        ]));
        let v = serde_json::to_value(&r).expect("ser");
        assert_eq!(
            v,
            json!({"action": "accept",
                   "content": {"name": "Ann", "age": 30, "ratio": 0.5, "ok": true, "tags": ["a"]}})
        );
        assert_eq!(serde_json::from_value::<ElicitResult>(v).expect("de"), r);
        assert_eq!(
            serde_json::to_value(ElicitResult::decline()).expect("ser"),
            json!({"action": "decline"})
        );
    }

    #[test]
    fn url_required_error_round_trip() {
        let ElicitParams::Url(url) = ElicitParams::url("m", "https://example.com", "e") else {
            panic!("url mode");
        };
        let data = UrlElicitationRequiredData {
            elicitations: vec![url],
        };
        let err = data.clone().into_error("Authorization needed");
        assert_eq!(err.code, -32042);
        assert_eq!(
            err.data.as_ref().expect("data")["elicitations"][0]["mode"],
            json!("url")
        );
        assert_eq!(UrlElicitationRequiredData::from_error(&err), Some(data));
        assert_eq!(
            UrlElicitationRequiredData::from_error(&ErrorObject::internal("x")),
            None
        );
    }
}
