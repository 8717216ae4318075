//! Which `Host` and `Origin` headers a local HTTP server accepts: the DNS-rebinding protection
//! every tidewire HTTP transport (Streamable HTTP, legacy HTTP+SSE, WebSocket) applies before
//! anything else. It lives here, beside the message-stream trait, so the three share one rule.

use std::borrow::Cow;

use http::{HeaderMap, header};

/// The `Host` and `Origin` rules of a server.
///
/// By default only loopback names pass (`localhost`, `127.0.0.1`, `[::1]`, with any port), in
/// `Host` and in `Origin` alike; a request without `Origin` (any non-browser client) passes the
/// origin rule. Add names for a server reached under another name.
///
/// ```
/// use tidewire_core::http::HostPolicy;
///
/// let policy = HostPolicy::default()
///     .allow_host("mcp.example.com")
///     .allow_origin("https://app.example.com");
/// ```
#[derive(Debug, Clone, Default)]
pub struct HostPolicy {
    hosts: Vec<String>,
    origins: Vec<String>,
    any_host: bool,
    same_origin: bool,
}

/// Why a request was refused: a sentence for the response body (the status is always 403).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRefused(pub String);

impl HostRefused {
    /// The answer to the refused request: 403, with a JSON-RPC `-32600` error naming why.
    pub fn response(self) -> http::Response<String> {
        super::reply::json_rpc_error(
            http::StatusCode::FORBIDDEN,
            None,
            crate::jsonrpc::ErrorObject::new(crate::jsonrpc::ErrorCode::INVALID_REQUEST, self.0),
        )
    }
}

impl std::fmt::Display for HostRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl HostPolicy {
    /// Also accept `Host: host` (a name, with or without a port).
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        self.hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// Accept any `Host` (behind a proxy that checks it). `Origin` is still checked.
    #[must_use]
    pub fn allow_any_host(mut self) -> Self {
        self.any_host = true;
        self
    }

    /// Also accept `Origin: origin` (scheme, host and port, e.g. `https://app.example.com`).
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        self.origins.push(origin.into().to_ascii_lowercase());
        self
    }

    /// Accept an `Origin` only when it is this server's own (the request's `Host`, over http or
    /// https) or listed with [`allow_origin`](Self::allow_origin): a page on another loopback
    /// port no longer passes. The WebSocket server's default, since browsers let any page open
    /// a WebSocket to any address (no CORS preflight guards it, as it guards a JSON POST).
    #[must_use]
    pub fn same_origin(mut self) -> Self {
        self.same_origin = true;
        self
    }

    /// Applies both rules to a request's headers.
    ///
    /// # Errors
    /// [`HostRefused`] naming the header that failed.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), HostRefused> {
        if !self.any_host {
            let host = header_text(headers, header::HOST);
            let name = strip_port(&host);
            let listed = self.hosts.iter().any(|h| *h == *host || h == name);
            if !(is_loopback(name) || listed) {
                return Err(HostRefused(format!(
                    "Forbidden: Host {host:?} is not accepted by this server (DNS rebinding protection)"
                )));
            }
        }
        if headers.contains_key(header::ORIGIN) {
            let origin = header_text(headers, header::ORIGIN);
            let (scheme_port, authority) = if let Some(a) = origin.strip_prefix("http://") {
                (":80", Some(a))
            } else if let Some(a) = origin.strip_prefix("https://") {
                (":443", Some(a))
            } else {
                ("", None)
            };
            let authority = authority.filter(|a| !a.is_empty());
            let loopback = authority.is_some_and(|a| is_loopback(strip_port(a)));
            // This server's own origin, known only when `Host` was checked by name.
            let own = !self.any_host
                && authority.is_some_and(|a| {
                    let host = header_text(headers, header::HOST);
                    host == a
                        || host.strip_suffix(scheme_port) == Some(a)
                        || a.strip_suffix(scheme_port) == Some(&*host)
                });
            let allowed = if self.same_origin { own } else { loopback };
            if !(allowed || self.origins.iter().any(|o| *o == *origin)) {
                return Err(HostRefused(format!(
                    "Forbidden: Origin {origin:?} is not accepted by this server"
                )));
            }
        }
        Ok(())
    }
}

/// The header's text, trimmed and in lower case: borrowed when it is lower case already (a
/// `Host` usually is), so the check allocates nothing.
fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Cow<'_, str> {
    let text = headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .trim();
    if text.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(text.to_ascii_lowercase())
    } else {
        Cow::Borrowed(text)
    }
}

/// `name:port` → `name`; `[v6]:port` → `[v6]`.
fn strip_port(authority: &str) -> &str {
    if authority.starts_with('[') {
        return match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        };
    }
    match authority.rsplit_once(':') {
        Some((name, _port)) => name,
        None => authority,
    }
}

fn is_loopback(name: &str) -> bool {
    matches!(name, "localhost" | "127.0.0.1" | "[::1]")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn loopback_passes_and_strangers_do_not() {
        let p = HostPolicy::default();
        for host in ["127.0.0.1:9", "localhost", "[::1]:80", "LOCALHOST:1"] {
            assert!(p.check(&headers(&[("host", host)])).is_ok(), "{host}");
        }
        for host in ["", "evil.example", "localhost.evil.example:80", "[::2]:1"] {
            assert!(p.check(&headers(&[("host", host)])).is_err(), "{host}");
        }
        let origin = |o: &str| headers(&[("host", "localhost:1"), ("origin", o)]);
        assert!(p.check(&origin("http://127.0.0.1:5173")).is_ok());
        assert!(p.check(&origin("https://evil.example")).is_err());
        assert!(p.check(&origin("null")).is_err());
        assert!(p.check(&origin("")).is_err());
    }

    #[test]
    fn listed_names_pass() {
        let p = HostPolicy::default()
            .allow_host("mcp.example.com")
            .allow_origin("https://app.example.com");
        assert!(
            p.check(&headers(&[("host", "mcp.example.com:443")]))
                .is_ok()
        );
        let h = headers(&[
            ("host", "mcp.example.com"),
            ("origin", "https://app.example.com"),
        ]);
        assert!(p.check(&h).is_ok());
        let any = HostPolicy::default().allow_any_host();
        assert!(any.check(&headers(&[("host", "whatever:1")])).is_ok());
        let bad = headers(&[("host", "whatever:1"), ("origin", "http://whatever:1")]);
        assert!(any.check(&bad).is_err());
    }

    #[test]
    fn same_origin_accepts_the_server_itself_and_listed_origins_only() {
        let p = HostPolicy::default()
            .same_origin()
            .allow_origin("http://localhost:5173");
        let with = |host: &str, origin: &str| headers(&[("host", host), ("origin", origin)]);
        assert!(
            p.check(&with("127.0.0.1:3000", "http://127.0.0.1:3000"))
                .is_ok()
        );
        assert!(p.check(&with("localhost", "http://localhost:80")).is_ok());
        assert!(
            p.check(&with("localhost:3000", "http://localhost:5173"))
                .is_ok()
        );
        // Another local page, or the same name on another port: refused.
        assert!(
            p.check(&with("127.0.0.1:3000", "http://127.0.0.1:8080"))
                .is_err()
        );
        assert!(
            p.check(&with("localhost:3000", "http://127.0.0.1:3000"))
                .is_err()
        );
        assert!(p.check(&with("localhost:3000", "null")).is_err());
        // No Origin (not a browser): the Host rule alone.
        assert!(p.check(&headers(&[("host", "localhost:3000")])).is_ok());
        // With any Host accepted, no origin is "our own".
        let any = HostPolicy::default().same_origin().allow_any_host();
        assert!(
            any.check(&with("evil.example:3000", "http://evil.example:3000"))
                .is_err()
        );
    }
}
