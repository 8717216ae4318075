//! Request ids and progress tokens: a string or an integer, never both.

use std::fmt;
use std::sync::Arc;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A JSON-RPC request id: a string or an integer.
///
/// The two forms are distinct: `1` and `"1"` are different ids, as JSON-RPC requires. Cloning is
/// cheap (the string form is reference-counted). A JSON `null` or a fractional number is not an id.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(Arc<str>),
}

/// A progress token (`_meta.progressToken`): like an id, a string or an integer.
pub type ProgressToken = RequestId;

impl RequestId {
    /// Renders the id as JSON text, e.g. `7` or `"abc"`.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Self::Number(n) => serde_json::Value::from(*n),
            Self::String(s) => serde_json::Value::from(s.as_ref()),
        }
    }

    /// Reads an id from a JSON value; `None` for anything that is not a string or an integer.
    pub fn from_json(value: &serde_json::Value) -> Option<Self> {
        match value {
            serde_json::Value::String(s) => Some(Self::String(s.as_str().into())),
            serde_json::Value::Number(n) => n.as_i64().map(Self::Number),
            _ => None,
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(n) => write!(f, "{n}"),
            Self::String(s) => write!(f, "{s:?}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.into())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s.into())
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Number(n) => serializer.serialize_i64(*n),
            Self::String(s) => serializer.serialize_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IdVisitor;
        impl Visitor<'_> for IdVisitor {
            type Value = RequestId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an integer")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RequestId, E> {
                Ok(RequestId::Number(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RequestId, E> {
                i64::try_from(v)
                    .map(RequestId::Number)
                    .map_err(|_| E::custom("integer id out of range"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RequestId, E> {
                Ok(RequestId::String(v.into()))
            }
        }
        deserializer.deserialize_any(IdVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_and_string_ids_differ() {
        let a: RequestId = serde_json::from_str("1").expect("int id");
        let b: RequestId = serde_json::from_str("\"1\"").expect("string id");
        assert_ne!(a, b);
        assert_eq!(serde_json::to_string(&a).expect("ser"), "1");
        assert_eq!(serde_json::to_string(&b).expect("ser"), "\"1\"");
    }

    #[test]
    fn null_and_float_are_not_ids() {
        assert!(serde_json::from_str::<RequestId>("null").is_err());
        assert!(serde_json::from_str::<RequestId>("1.5").is_err());
        assert!(serde_json::from_str::<RequestId>("{}").is_err());
    }
}
