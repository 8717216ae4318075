//! JSON read strictly: an object that names a member twice is refused.
//!
//! I-JSON (RFC 7493 §2.3) forbids duplicate member names, and RFC 8259 leaves their meaning to
//! the reader: one parser takes the first, another the last, a third fails. A message whose
//! meaning depends on the parser is how a check and a handler come to disagree (an
//! authorization layer reads one tool name, the handler runs another), so every message a
//! peer sends is read through [`StrictValue`], and one with a duplicate key is no message.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};

use crate::text::excerpt;

/// A [`Value`] whose objects, at every depth, name each member once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StrictValue(pub(crate) Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

impl StrictValue {
    /// Reads one value and says whether it is the string `expected`, keeping nothing of it (no
    /// allocation for a string); any other value is read through as strictly as a
    /// [`StrictValue`].
    pub(crate) fn deserialize_matching<'de, D: Deserializer<'de>>(
        deserializer: D,
        expected: &'static str,
    ) -> Result<bool, D::Error> {
        deserializer.deserialize_any(MatchVisitor(expected))
    }
}

/// Parses JSON text into a [`Value`], refusing an object that names a member twice.
///
/// # Errors
/// The parser's error: a syntax error, or a data error naming the repeated member.
pub fn value_from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice::<StrictValue>(bytes).map(|v| v.0)
}

/// For a `#[serde(deserialize_with)]` member that may be absent: present (even `null`) is
/// `Some`, read strictly.
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    StrictValue::deserialize(d).map(|v| Some(v.0))
}

/// For a `#[serde(deserialize_with)]` member where `null` means absent, read strictly.
pub(crate) fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    StrictValue::deserialize(d).map(|v| Some(v.0).filter(|v| !v.is_null()))
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // As serde_json's own `Value` reads it: a number JSON cannot hold is `null`.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        StrictValue::deserialize(d).map(|v| v.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            // One lookup per member: the entry both finds a repeat and takes the value.
            match map.entry(key) {
                Entry::Vacant(place) => {
                    let StrictValue(value) = access.next_value()?;
                    place.insert(value);
                }
                Entry::Occupied(repeated) => {
                    return Err(de::Error::custom(format!(
                        "the member {:?} appears twice in one object (I-JSON, RFC 7493, forbids \
                         it)",
                        excerpt(repeated.key())
                    )));
                }
            }
        }
        Ok(Value::Object(map))
    }
}

/// Whether a value is one string, read without keeping it.
struct MatchVisitor(&'static str);

impl<'de> Visitor<'de> for MatchVisitor {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E>(self, v: &str) -> Result<bool, E> {
        Ok(v == self.0)
    }

    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_none<E>(self) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
        StrictVisitor.visit_seq(seq).map(|_| false)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<bool, A::Error> {
        StrictVisitor.visit_map(map).map(|_| false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeated_member_is_refused_at_any_depth() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#"{"p":{"name":"x","name":"y"}}"#,
            r#"[1,{"k":[{"z":0,"z":0}]}]"#,
        ] {
            let error = value_from_slice(text.as_bytes()).expect_err(text);
            assert!(error.to_string().contains("appears twice"), "{error}");
            assert!(
                !error.is_syntax(),
                "a data error, not a syntax error: {error}"
            );
        }
    }

    #[test]
    fn what_serde_json_reads_is_read_the_same() {
        let text =
            r#"{"a":[1,-2,3.5,"s",true,null,{}],"b":{"c":"\u00e9"},"n":18446744073709551615}"#;
        let strict = value_from_slice(text.as_bytes()).expect("valid");
        let plain: Value = serde_json::from_str(text).expect("valid");
        assert_eq!(strict, plain);
    }

    #[test]
    fn the_reason_does_not_carry_raw_control_characters() {
        let text = "{\"a\\u001b[31m\":1,\"a\\u001b[31m\":2}";
        let error = value_from_slice(text.as_bytes()).expect_err("duplicate");
        assert!(!error.to_string().contains('\u{1b}'), "{error}");
    }
}
