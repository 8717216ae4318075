//! A result already in wire form: what a server writes without building a `Value` tree.

use super::RequestId;

/// A success result already encoded as JSON text: one object, written straight from typed data
/// (a tool's result with the members every result carries), so the answer skips the `Value`
/// tree that [`Response`](super::Response) holds. A transport frames it with
/// [`Codec::encode_result`](crate::transport::Codec::encode_result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedResult(Vec<u8>);

impl EncodedResult {
    /// Wraps `json`, which the caller wrote as one JSON object (it is not parsed again, which
    /// is the point; debug builds check it).
    pub fn from_json_text_unchecked(json: Vec<u8>) -> Self {
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
    ///
    /// For an integer id the text fills its buffer exactly, so it becomes a `Bytes` or a body
    /// without another allocation.
    pub fn response_text(&self, id: &RequestId) -> Result<Vec<u8>, serde_json::Error> {
        let id_len = match id {
            RequestId::Number(n) => decimal_len(*n),
            // Quotes and a little room for escapes.
            RequestId::String(s) => s.len() + 8,
        };
        let mut out = Vec::with_capacity(FRAME_LEN + id_len + self.0.len());
        out.extend_from_slice(HEAD);
        serde_json::to_writer(&mut out, id)?;
        out.extend_from_slice(RESULT);
        out.extend_from_slice(&self.0);
        out.push(b'}');
        Ok(out)
    }
}

/// What a response's text holds besides its id and its result.
const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;
const RESULT: &[u8] = br#","result":"#;
const FRAME_LEN: usize = HEAD.len() + RESULT.len() + 1;

/// How many characters `n` takes in decimal, its sign included.
fn decimal_len(n: i64) -> usize {
    let mut rest = n.unsigned_abs();
    let mut len = usize::from(n < 0) + 1;
    while rest >= 10 {
        rest /= 10;
        len += 1;
    }
    len
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn a_response_reads_back_with_its_id_and_fills_its_buffer_for_an_integer_id() {
        let result = EncodedResult::from_json_text_unchecked(br#"{"content":[]}"#.to_vec());
        for n in [0, 7, 10, 99, -1, -10, 123_456, i64::MAX, i64::MIN] {
            let id = RequestId::Number(n);
            let text = result.response_text(&id).expect("an id writes");
            assert_eq!(text.len(), text.capacity(), "id {n}");
            let read: Value = serde_json::from_slice(&text).expect("one JSON object");
            assert_eq!(read["id"], n);
            assert_eq!(read["result"], serde_json::json!({"content": []}));
            assert_eq!(read["jsonrpc"], "2.0");
        }
        let id = RequestId::from("a \"quoted\"\n id");
        let read: Value = serde_json::from_slice(&result.response_text(&id).expect("an id writes"))
            .expect("JSON");
        assert_eq!(read["id"], "a \"quoted\"\n id");
    }
}
