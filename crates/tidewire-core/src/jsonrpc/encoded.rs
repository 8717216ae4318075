//! A result already in wire form: what a server writes without building a `Value` tree.

use bytes::Bytes;

/// A success result already encoded as JSON text: one object, written straight from typed data
/// (a tool's result with the members every result carries), so the answer skips the `Value`
/// tree that [`Response`](super::Response) holds. A transport frames it with
/// [`Codec::encode_result`](crate::transport::Codec::encode_result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedResult(Bytes);

impl EncodedResult {
    /// Wraps `json`, which the caller wrote as one JSON object (it is not parsed again, which
    /// is the point; debug builds check it).
    pub fn from_json_text_unchecked(json: impl Into<Bytes>) -> Self {
        let json = json.into();
        debug_assert!(
            json.first() == Some(&b'{')
                && serde_json::from_slice::<serde::de::IgnoredAny>(&json).is_ok(),
            "an encoded result must be one JSON object"
        );
        Self(json)
    }

    /// The JSON text.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}
