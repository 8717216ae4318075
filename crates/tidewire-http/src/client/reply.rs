//! Reading the HTTP replies: what kind of body came, bounded reads, lenient JSON.

use std::time::Duration;

use http::header::CONTENT_TYPE;
use tidewire_core::jsonrpc::{Message, Response};
use tidewire_core::transport::Exchange;

use super::error::chain;

/// What a successful reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body {
    /// `application/json` (or `…+json`): one message, or leniently an array of them.
    Json,
    /// `text/event-stream`.
    EventStream,
    /// No body (202, 204, or an empty body without a type).
    Empty,
    /// Anything else.
    Other,
}

/// Classifies a 2xx reply by its status and `Content-Type`.
pub(crate) fn body_kind(response: &reqwest::Response) -> Body {
    let status = response.status();
    if status == reqwest::StatusCode::ACCEPTED || status == reqwest::StatusCode::NO_CONTENT {
        return Body::Empty;
    }
    let essence = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        });
    match essence.as_deref() {
        Some("text/event-stream") => Body::EventStream,
        Some(t) if t == "application/json" || t.ends_with("+json") => Body::Json,
        None if response.content_length() == Some(0) => Body::Empty,
        // No type: servers that forget it almost always mean JSON.
        None => Body::Json,
        Some(_) => Body::Other,
    }
}

/// Reads a body of at most `limit` bytes.
///
/// # Errors
/// A description when the body is larger or the connection breaks.
pub(crate) async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, String> {
    if let Some(length) = response.content_length()
        && length > limit as u64
    {
        return Err(format!(
            "the reply of {length} bytes exceeds the limit of {limit} bytes"
        ));
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(format!("the reply exceeds the limit of {limit} bytes"));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => return Err(format!("reading the reply failed: {}", chain(&e))),
        }
    }
}

/// The start of an error reply's body, for the error message; never waits longer than `wait`.
pub(crate) async fn error_text(mut response: reqwest::Response, wait: Duration) -> String {
    const MAX: usize = 4096;
    let mut body = Vec::new();
    let read = async {
        while body.len() < MAX {
            match response.chunk().await {
                Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                _ => break,
            }
        }
    };
    let _ = tokio::time::timeout(wait, read).await;
    body.truncate(MAX);
    String::from_utf8_lossy(&body).into_owned()
}

/// Decodes a JSON reply: one message, or an array of messages. Each item is either a message or
/// why it is not one.
pub(crate) fn decode_json(
    codec: &tidewire_core::transport::Codec,
    body: &[u8],
) -> Vec<Result<Message, String>> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        None => Vec::new(),
        // Read as strictly as one message is: a member named twice is no message.
        Some(b'[') => match tidewire_core::jsonrpc::value_from_slice(body) {
            Ok(serde_json::Value::Array(items)) => items
                .into_iter()
                .map(|v| Message::from_value(v).map_err(|e| e.reason))
                .collect(),
            Ok(_) => vec![Err("not a JSON array".to_owned())],
            Err(e) => vec![Err(e.to_string())],
        },
        Some(_) => vec![codec.decode(body).map_err(|e| e.to_string())],
    }
}

/// True when `message` is the response to the exchange's request.
pub(crate) fn answers(message: &Message, exchange: &Exchange) -> bool {
    matches!(message, Message::Response(Response { id: Some(id), .. }) if id == exchange.id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tidewire_core::transport::Codec;

    #[test]
    fn json_replies_may_be_arrays() {
        let codec = Codec::default();
        let one = decode_json(&codec, br#" {"jsonrpc":"2.0","id":1,"result":{}}"#);
        assert!(matches!(one.as_slice(), [Ok(Message::Response(_))]));
        let many = decode_json(
            &codec,
            br#"[{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        );
        assert!(matches!(
            many.as_slice(),
            [Ok(Message::Notification(_)), Ok(Message::Response(_))]
        ));
        let unusable = decode_json(&codec, br#"{"jsonrpc":"2.0","result":{}}"#);
        assert!(matches!(unusable.as_slice(), [Err(_)]));
        assert!(decode_json(&codec, b"  ").is_empty());
    }
}
