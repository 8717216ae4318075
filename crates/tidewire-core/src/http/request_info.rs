//! [`HttpRequestInfo`]: what an HTTP server transport knew of the request that carried a message.

use crate::transport::HttpArrival;

/// The HTTP request that carried an inbound message (Streamable HTTP, HTTP+SSE): in the
/// message's envelope extensions, reached through `RequestContext::extensions`. Its session and
/// its `Mcp-Param-*` headers are also in [`HttpArrival`] ([`arrival`](Self::arrival)), which
/// needs no `http` crate.
#[derive(Debug, Clone)]
pub struct HttpRequestInfo {
    /// The request headers (for auth, tracing, …).
    pub headers: http::HeaderMap,
}

impl HttpRequestInfo {
    /// What the engine and the server read of this request without the `http` crate: `session_id`,
    /// and its `Mcp-Param-*` headers (a value that is not text is kept with U+FFFD in place of
    /// its bad bytes, so reading it fails as a value that is not visible ASCII does).
    pub fn arrival(&self, session_id: Option<String>) -> HttpArrival {
        let param_headers = self
            .headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with("mcp-param-"))
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                (name.as_str().to_owned(), value)
            })
            .collect();
        HttpArrival {
            session_id,
            param_headers,
        }
    }
}

#[cfg(test)]
mod tests {
    use http::{HeaderMap, HeaderValue};

    use super::*;

    #[test]
    fn the_arrival_keeps_the_session_and_the_first_of_each_param_header() {
        let mut headers = HeaderMap::new();
        headers.append("mcp-param-region", HeaderValue::from_static("eu"));
        headers.append("mcp-param-region", HeaderValue::from_static("us"));
        headers.append("mcp-method", HeaderValue::from_static("tools/call"));
        headers.append(
            "mcp-param-city",
            HeaderValue::from_bytes(b"Z\xfcrich").expect("opaque bytes are a header value"),
        );
        let arrival = HttpRequestInfo { headers }.arrival(Some("s-1".into()));
        assert_eq!(arrival.session_id.as_deref(), Some("s-1"));
        assert_eq!(arrival.param_headers.len(), 2);
        assert_eq!(arrival.param_headers.get("mcp-param-region"), Some("eu"));
        let city = arrival.param_headers.get("mcp-param-city").expect("kept");
        assert!(!city.is_ascii(), "{city}");
        assert_eq!(arrival.param_headers.get("mcp-method"), None);
    }
}
