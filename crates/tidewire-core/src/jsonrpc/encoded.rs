//! A result already in wire form: what a server writes without building a `Value` tree.

use bytes::Bytes;

use super::RequestId;

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

    /// The whole success response to request `id` that carries this result, as JSON text
    /// (no size limit applied: [`Codec::encode_result`](crate::transport::Codec::encode_result)
    /// checks one).
    ///
    /// # Errors
    /// The serializer's error writing the id (none for a string or an integer).
    pub fn response_text(&self, id: &RequestId) -> Result<Vec<u8>, serde_json::Error> {
        let mut out = Vec::with_capacity(self.0.len() + 48);
        out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        serde_json::to_writer(&mut out, id)?;
        out.extend_from_slice(br#","result":"#);
        out.extend_from_slice(&self.0);
        out.push(b'}');
        Ok(out)
    }
}
