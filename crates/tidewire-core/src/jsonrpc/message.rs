//! The JSON-RPC 2.0 envelope: requests, notifications and responses.

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::strict::{StrictValue, nullable, present};
use serde_json::Value;

use super::{ErrorObject, RequestId};

/// A request: it has an id and expects a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id the response will carry.
    pub id: RequestId,
    /// The method name, e.g. `tools/call`.
    pub method: String,
    /// The parameters (an object in MCP), if any.
    pub params: Option<Value>,
}

/// A notification: no id, never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name, e.g. `notifications/progress`.
    pub method: String,
    /// The parameters, if any.
    pub params: Option<Value>,
}

/// A response: the result of a request, or its error.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request answered. `None` only for an error answering a message whose id
    /// could not be read (it is sent as `null`).
    pub id: Option<RequestId>,
    /// The result, or the error.
    pub outcome: Result<Value, ErrorObject>,
}

/// Any one JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response (result or error).
    Response(Response),
}

impl Request {
    /// A request with an id, a method and parameters.
    pub fn new(id: impl Into<RequestId>, method: impl Into<String>, params: Option<Value>) -> Self {
        Self {
            id: id.into(),
            method: method.into(),
            params,
        }
    }
}

impl Notification {
    /// A notification with a method and parameters.
    pub fn new(method: impl Into<String>, params: Option<Value>) -> Self {
        Self {
            method: method.into(),
            params,
        }
    }
}

impl Response {
    /// A successful response.
    pub fn result(id: RequestId, result: Value) -> Self {
        Self {
            id: Some(id),
            outcome: Ok(result),
        }
    }

    /// An error response.
    pub fn error(id: Option<RequestId>, error: ErrorObject) -> Self {
        Self {
            id,
            outcome: Err(error),
        }
    }
}

impl Message {
    /// The method name, for requests and notifications.
    pub fn method(&self) -> Option<&str> {
        match self {
            Self::Request(r) => Some(&r.method),
            Self::Notification(n) => Some(&n.method),
            Self::Response(_) => None,
        }
    }
}

impl From<Request> for Message {
    fn from(r: Request) -> Self {
        Self::Request(r)
    }
}

impl From<Notification> for Message {
    fn from(n: Notification) -> Self {
        Self::Notification(n)
    }
}

impl From<Response> for Message {
    fn from(r: Response) -> Self {
        Self::Response(r)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("jsonrpc", "2.0")?;
        match self {
            Self::Request(r) => {
                map.serialize_entry("id", &r.id)?;
                map.serialize_entry("method", &r.method)?;
                if let Some(p) = &r.params {
                    map.serialize_entry("params", p)?;
                }
            }
            Self::Notification(n) => {
                map.serialize_entry("method", &n.method)?;
                if let Some(p) = &n.params {
                    map.serialize_entry("params", p)?;
                }
            }
            Self::Response(r) => {
                map.serialize_entry("id", &r.id)?;
                match &r.outcome {
                    Ok(result) => map.serialize_entry("result", result)?,
                    Err(error) => map.serialize_entry("error", error)?,
                }
            }
        }
        map.end()
    }
}

/// Every member a JSON-RPC message may have; classified after one typed pass. A member named
/// twice is refused at every depth: here by the derive, inside the values by
/// [`strict`](super::strict). `present` tells a member set to `null` (`Some(Null)`) from a
/// missing one (`None`); for the others `null` is as good as absent.
#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    jsonrpc: Option<JsonRpcVersion>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    method: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    params: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Value>,
    #[serde(default, deserialize_with = "nullable")]
    error: Option<Value>,
}

/// The `jsonrpc` member, read without keeping its text: whether it is the string `"2.0"`. Any
/// other value is read through (strictly: a member named twice inside it is refused as
/// anywhere else) and is not.
struct JsonRpcVersion {
    is_2_0: bool,
}

impl<'de> Deserialize<'de> for JsonRpcVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        StrictValue::deserialize_matching(deserializer, "2.0")
            .map(|is_2_0| JsonRpcVersion { is_2_0 })
    }
}

/// Why a JSON value is not a valid JSON-RPC message, and the id if one could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidMessage {
    /// The request id, when it could be read (the error response then carries it).
    pub id: Option<RequestId>,
    /// What is wrong.
    pub reason: String,
    /// True when the message was a request (it carried a method and an id), so it deserves an
    /// error response; notifications and responses that are invalid are dropped.
    pub answerable: bool,
}

impl Message {
    /// Classifies a parsed JSON value as a JSON-RPC message.
    ///
    /// # Errors
    /// [`InvalidMessage`] when `jsonrpc` is not `"2.0"`, the id is not a string or integer, the
    /// method is not a string, params is not an object or array, or the member set matches no
    /// message kind.
    pub fn from_value(value: Value) -> Result<Self, InvalidMessage> {
        if !value.is_object() {
            return Err(InvalidMessage {
                id: None,
                reason: "a JSON-RPC message must be an object".into(),
                answerable: true,
            });
        }
        let raw: RawMessage = serde_json::from_value(value).map_err(|e| InvalidMessage {
            id: None,
            reason: e.to_string(),
            answerable: true,
        })?;
        raw.classify()
    }
}

impl Message {
    /// Decodes one message from JSON text in a single typed pass.
    ///
    /// # Errors
    /// [`DecodeFailure::Syntax`] when the bytes are not JSON, [`DecodeFailure::Invalid`] when
    /// they are JSON but not a valid JSON-RPC message.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, DecodeFailure> {
        // Only an object can be a message. serde would read a struct from a positional array
        // too (`["2.0",1,…]`), so anything else is told apart before the typed pass.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(not_an_object(bytes));
        }
        // Checked once as a whole, the text is read as a `str`: serde would check each string in
        // it on its own (JSON outside strings is ASCII, so the texts refused are the same).
        let text = std::str::from_utf8(bytes).map_err(|e| {
            DecodeFailure::Syntax(format!(
                "the message is not UTF-8 text (an invalid byte at offset {})",
                e.valid_up_to()
            ))
        })?;
        match serde_json::from_str::<RawMessage>(text) {
            Ok(raw) => raw.classify().map_err(DecodeFailure::Invalid),
            Err(e) => Err(typed_failure(&e, bytes)),
        }
    }

    /// Decodes a JSON-RPC batch (an array of messages, which only 2025-03-26 has), each
    /// member read as strictly as [`from_slice`](Self::from_slice) reads one message.
    ///
    /// # Errors
    /// [`DecodeFailure::Syntax`] when the bytes are not JSON, [`DecodeFailure::Invalid`] when
    /// they are not an array or a member is not a valid message (with its id when it could be
    /// read).
    pub fn batch_from_slice(bytes: &[u8]) -> Result<Vec<Self>, DecodeFailure> {
        let items = serde_json::from_slice::<Vec<StrictValue>>(bytes)
            .map_err(|e| typed_failure(&e, bytes))?;
        items
            .into_iter()
            .map(|StrictValue(item)| Self::from_value(item).map_err(DecodeFailure::Invalid))
            .collect()
    }
}

/// What a failed typed pass over `bytes` means: not JSON, or JSON that is no message.
fn typed_failure(error: &serde_json::Error, bytes: &[u8]) -> DecodeFailure {
    if error.is_syntax() || error.is_eof() || error.is_io() {
        return DecodeFailure::Syntax(error.to_string());
    }
    // The typed pass stops at the first member of the wrong type (or the first member named
    // twice), before it has seen the whole text: whether that text is JSON at all decides.
    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
        Ok(_) => DecodeFailure::Invalid(InvalidMessage {
            id: None,
            reason: error.to_string(),
            answerable: true,
        }),
        Err(syntax) => DecodeFailure::Syntax(syntax.to_string()),
    }
}

/// Why text that does not start with `{` is no message: not JSON (`-32700`), a batch, or
/// another JSON value (`-32600`).
fn not_an_object(bytes: &[u8]) -> DecodeFailure {
    let invalid = |reason: &str| {
        DecodeFailure::Invalid(InvalidMessage {
            id: None,
            reason: reason.into(),
            answerable: true,
        })
    };
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Array(_)) => {
            invalid("JSON-RPC batches are not supported (they exist only in 2025-03-26)")
        }
        Ok(_) => invalid("a JSON-RPC message must be an object"),
        Err(e) => DecodeFailure::Syntax(e.to_string()),
    }
}

/// Why bytes could not be decoded as a JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeFailure {
    /// Not JSON at all (answered with `-32700`).
    Syntax(String),
    /// JSON, but not a valid JSON-RPC message (answered with `-32600` when it was a request).
    Invalid(InvalidMessage),
}

impl RawMessage {
    fn classify(self) -> Result<Message, InvalidMessage> {
        let id = self.id.as_ref().map(|v| {
            RequestId::from_json(v).ok_or_else(|| {
                let null_ok = v.is_null() && self.error.is_some();
                InvalidMessage {
                    id: None,
                    reason: if null_ok {
                        String::new()
                    } else {
                        "id must be a string or an integer".into()
                    },
                    answerable: !null_ok,
                }
            })
        });
        // A null id is only valid on an error response (answering an unreadable request).
        let id = match id {
            Some(Err(e)) if e.reason.is_empty() => None,
            Some(Err(e)) => return Err(e),
            Some(Ok(id)) => Some(id),
            None => None,
        };
        let fail = |reason: &str, answerable: bool| InvalidMessage {
            id: id.clone(),
            reason: reason.into(),
            answerable,
        };
        if !matches!(self.jsonrpc, Some(JsonRpcVersion { is_2_0: true })) {
            return Err(fail(
                "jsonrpc must be \"2.0\"",
                id.is_some() && self.method.is_some(),
            ));
        }
        if let Some(method) = self.method {
            let is_request = id.is_some();
            let Value::String(method) = method else {
                return Err(fail("method must be a string", is_request));
            };
            if self.result.is_some() || self.error.is_some() {
                return Err(fail("a request cannot carry result or error", is_request));
            }
            let params = match self.params {
                None => None,
                Some(p @ (Value::Object(_) | Value::Array(_))) => Some(p),
                Some(_) => return Err(fail("params must be an object or an array", is_request)),
            };
            return Ok(match id {
                Some(id) => Message::Request(Request { id, method, params }),
                None => Message::Notification(Notification { method, params }),
            });
        }
        match (self.result, self.error) {
            (Some(result), None) => match id {
                Some(id) => Ok(Message::Response(Response::result(id, result))),
                None => Err(fail("a result needs an id", false)),
            },
            (None, Some(error)) => {
                let error: ErrorObject = serde_json::from_value(error)
                    .map_err(|e| fail(&format!("malformed error object: {e}"), false))?;
                Ok(Message::Response(Response::error(id, error)))
            }
            (Some(_), Some(_)) => Err(fail("a response cannot carry both result and error", false)),
            (None, None) => Err(fail(
                "not a request, notification or response (no method, result or error)",
                id.is_some(),
            )),
        }
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawMessage::deserialize(deserializer)?;
        raw.classify().map_err(|e| D::Error::custom(e.reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by the `codec` fuzz target: serde reads a struct from a positional array, so an
    /// array decoded as a message; and a JSON value followed by garbage was answered as
    /// invalid JSON-RPC (`-32600`) instead of as not JSON (`-32700`).
    #[test]
    fn only_an_object_is_a_message_and_garbage_is_a_parse_error() {
        let positional = br#"["2.0",1,null,null,{},null]"#;
        assert!(matches!(
            Message::from_slice(positional),
            Err(DecodeFailure::Invalid(_))
        ));
        for not_json in [
            &b"0 x"[..],
            b"[1] x",
            br#""a" }"#,
            br#"{"id":1,"id":true x"#,
        ] {
            assert!(
                matches!(Message::from_slice(not_json), Err(DecodeFailure::Syntax(_))),
                "{}",
                String::from_utf8_lossy(not_json)
            );
        }
        assert!(matches!(
            Message::from_slice(b"  42 "),
            Err(DecodeFailure::Invalid(_))
        ));
        let ok = br#" {"jsonrpc":"2.0","id":1,"method":"ping"}"#;
        assert!(Message::from_slice(ok).is_ok());
    }

    /// A message is UTF-8 text: a byte that is not (in a string, a key or anywhere else) makes
    /// a parse error, as it did when serde checked each string; text that is UTF-8 reads as
    /// before, escapes and characters outside ASCII alike.
    #[test]
    fn text_that_is_not_utf8_is_a_parse_error() {
        for bad in [
            &b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xffing\"}"[..],
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"\xc3\":1}}",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\xe2\x82",
            b"{\xed\xa0\x80}",
        ] {
            assert!(
                matches!(Message::from_slice(bad), Err(DecodeFailure::Syntax(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let text = r#"{"jsonrpc":"2.0","id":"é","method":"tools/call","params":{"name":"naïve \u00e9 \ud83d\ude00 😀"}}"#;
        let Ok(Message::Request(request)) = Message::from_slice(text.as_bytes()) else {
            panic!("a UTF-8 message reads");
        };
        assert_eq!(request.id, RequestId::from("é"));
        assert_eq!(
            request.params,
            Some(serde_json::json!({"name": "naïve é 😀 😀"}))
        );
    }

    /// The scope bypass of issue 26: a `tools/call` naming its tool twice meant one tool to a
    /// check that took the first name and another to a handler that took the last.
    #[test]
    fn a_member_named_twice_anywhere_makes_no_message() {
        for text in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"t","params":{"arguments":{"x":{"y":1,"y":2}}}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":1}}"#,
        ] {
            match Message::from_slice(text.as_bytes()) {
                Err(DecodeFailure::Invalid(bad)) => assert!(bad.answerable, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let batch =
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}]"#;
        assert!(matches!(
            Message::batch_from_slice(batch),
            Err(DecodeFailure::Invalid(_))
        ));
        // Not JSON after the repeated member: a syntax error, as for any text that is not JSON.
        assert!(matches!(
            Message::from_slice(br#"{"jsonrpc":"2.0","params":{"a":1,"a":2}, x"#),
            Err(DecodeFailure::Syntax(_))
        ));
    }

    #[test]
    fn null_members_read_as_before() {
        let m = Message::from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":null}"#)
            .expect("params null is absent");
        assert!(matches!(m, Message::Request(Request { params: None, .. })));
        let batch = br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"n"}]"#;
        assert_eq!(Message::batch_from_slice(batch).expect("a batch").len(), 2);
    }

    fn parse(v: Value) -> Result<Message, InvalidMessage> {
        Message::from_value(v)
    }

    #[test]
    fn classifies_each_kind() {
        let m = parse(json!({"jsonrpc":"2.0","id":1,"method":"ping"})).expect("request");
        assert!(matches!(m, Message::Request(ref r) if r.id == RequestId::Number(1)));
        let m = parse(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).expect("n");
        assert!(matches!(m, Message::Notification(_)));
        let m = parse(json!({"jsonrpc":"2.0","id":"a","result":{}})).expect("response");
        assert!(matches!(
            m,
            Message::Response(Response { outcome: Ok(_), .. })
        ));
        let m = parse(json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}))
            .expect("null-id error");
        assert!(matches!(m, Message::Response(Response { id: None, .. })));
    }

    #[test]
    fn round_trips_through_serde() {
        for v in [
            json!({"jsonrpc":"2.0","id":"7","method":"tools/call","params":{"name":"echo"}}),
            json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}),
            json!({"jsonrpc":"2.0","id":3,"result":{"content":[]}}),
            json!({"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"nope","data":[1]}}),
        ] {
            let m: Message = serde_json::from_value(v.clone()).expect("parse");
            assert_eq!(serde_json::to_value(&m).expect("ser"), v);
        }
    }

    #[test]
    fn rejects_bad_messages_with_reasons() {
        let e = parse(json!({"jsonrpc":"1.0","id":1,"method":"ping"})).expect_err("version");
        assert!(e.answerable);
        assert_eq!(e.id, Some(RequestId::Number(1)));
        let e = parse(json!({"jsonrpc":"2.0","id":1.5,"method":"ping"})).expect_err("float id");
        assert!(e.reason.contains("id"));
        let e = parse(json!({"jsonrpc":"2.0","id":2,"method":7})).expect_err("method type");
        assert_eq!(e.id, Some(RequestId::Number(2)));
        let e = parse(json!({"jsonrpc":"2.0","method":"x","params":3})).expect_err("params");
        assert!(!e.answerable);
        assert!(parse(json!([1, 2])).is_err());
        assert!(parse(json!({"jsonrpc":"2.0","id":1})).is_err());
        assert!(parse(json!({"jsonrpc":"2.0","id":1,"result":1,"error":{}})).is_err());
    }

    #[test]
    fn only_the_string_2_0_is_the_version_whatever_else_jsonrpc_holds() {
        for version in [
            r#""2.0 ""#,
            r#""""#,
            "2.0",
            "2",
            "null",
            "true",
            r#"["2.0"]"#,
            r#"{"v":"2.0"}"#,
        ] {
            let text = format!(r#"{{"jsonrpc":{version},"id":3,"method":"ping"}}"#);
            match Message::from_slice(text.as_bytes()) {
                Err(DecodeFailure::Invalid(e)) => {
                    assert_eq!(e.reason, "jsonrpc must be \"2.0\"", "{version}");
                    assert_eq!(e.id, Some(RequestId::Number(3)), "{version}");
                }
                other => panic!("{version}: {other:?}"),
            }
        }
        let escaped = br#"{"jsonrpc":"2\u002e0","id":3,"method":"ping"}"#;
        assert!(
            Message::from_slice(escaped).is_ok(),
            "an escaped \"2.0\" is \"2.0\""
        );
        let repeated = br#"{"jsonrpc":{"a":1,"a":2},"id":3,"method":"ping"}"#;
        let Err(DecodeFailure::Invalid(e)) = Message::from_slice(repeated) else {
            panic!("a member named twice inside jsonrpc is refused too");
        };
        assert!(e.reason.contains("appears twice"), "{}", e.reason);
    }
}
