//! Finding who grants tokens for a resource: its protected-resource metadata (RFC 9728), then
//! the authorization server's metadata (RFC 8414, or OpenID Connect discovery), each in the
//! order the MCP specification gives, never asking a well-known URL it says not to.

use serde::Deserialize;

use super::error::AuthError;
use super::http::Http;
use crate::metadata::well_known_path;

/// What the resource says of itself (the fields the client reads).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: Option<String>,
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    #[serde(default)]
    pub(crate) scopes_supported: Vec<String>,
}

/// What the authorization server says of itself (the fields the client reads).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: String,
    pub(crate) token_endpoint: String,
    #[serde(default)]
    pub(crate) registration_endpoint: Option<String>,
    #[serde(default)]
    pub(crate) scopes_supported: Vec<String>,
    #[serde(default)]
    pub(crate) code_challenge_methods_supported: Vec<String>,
    #[serde(default)]
    pub(crate) token_endpoint_auth_methods_supported: Vec<String>,
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    pub(crate) client_id_metadata_document_supported: bool,
}

/// The resource's metadata: at the URL its challenge names, else at the well-known URL of its
/// path, else at the root one (only when the path has failed). `None` when there is none (a
/// server of 2025-03-26, whose authorization server is its own origin).
pub(crate) async fn resource_metadata(
    http: &Http,
    resource_url: &str,
    named: Option<&str>,
) -> Result<Option<ResourceMetadata>, AuthError> {
    if let Some(url) = named {
        return http.get_json(url).await.map(Some);
    }
    let origin = origin(resource_url);
    let path_based = format!("{origin}{}", well_known_path(resource_url));
    let root = format!("{origin}/.well-known/oauth-protected-resource");
    let mut urls = vec![path_based];
    if urls[0] != root {
        urls.push(root);
    }
    for url in urls {
        match http.get_json::<ResourceMetadata>(&url).await {
            Ok(found) => return Ok(Some(found)),
            Err(AuthError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(None)
}

/// The authorization server's metadata for the issuer `issuer`, from the first well-known URL
/// that has it; its `issuer` must be `issuer` exactly (RFC 8414 §3.3). For a 2025-03-26 server
/// (no resource metadata named it, `named` false) `issuer` is the MCP server's origin, and the
/// document's issuer must be on that origin (a path is allowed, as the 2025-03-26 back-compat
/// scenario of the official suite serves one); an issuer on another origin is refused, so
/// credentials kept for a real authorization server can never be looked up by an issuer a
/// server merely claims.
pub(crate) async fn server_metadata(
    http: &Http,
    issuer: &str,
    named: bool,
) -> Result<Option<ServerMetadata>, AuthError> {
    let origin = origin(issuer);
    let path = issuer[origin.len()..].trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    for url in candidates {
        match http.get_json::<ServerMetadata>(&url).await {
            Ok(found)
                if found.issuer == issuer || (!named && self::origin(&found.issuer) == issuer) =>
            {
                found.check_endpoints()?;
                return Ok(Some(found));
            }
            Ok(found) => {
                return Err(AuthError::IssuerMismatch {
                    expected: issuer.to_owned(),
                    got: found.issuer,
                });
            }
            Err(AuthError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    Ok(None)
}

/// Refuses an endpoint taken from metadata unless it is `https`, or `http` on a loopback host
/// (`localhost`, `127.0.0.0/8`, `::1`: a development server on this machine).
pub(crate) fn check_endpoint(what: &'static str, url: &str) -> Result<(), AuthError> {
    let refused = || AuthError::InsecureEndpoint {
        what,
        url: tidewire_core::text::excerpt(url),
    };
    let parsed = reqwest::Url::parse(url).map_err(|_| refused())?;
    let allowed = match parsed.scheme() {
        "https" => parsed.host().is_some(),
        "http" => parsed.host_str().is_some_and(|host| {
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<std::net::IpAddr>() {
                Ok(ip) => ip.is_loopback(),
                Err(_) => {
                    let name = host.to_ascii_lowercase();
                    name == "localhost" || name.ends_with(".localhost")
                }
            }
        }),
        _ => false,
    };
    if allowed { Ok(()) } else { Err(refused()) }
}

impl ServerMetadata {
    /// Every endpoint the document names, checked with [`check_endpoint`].
    fn check_endpoints(&self) -> Result<(), AuthError> {
        check_endpoint("authorization endpoint", &self.authorization_endpoint)?;
        check_endpoint("token endpoint", &self.token_endpoint)?;
        if let Some(registration) = &self.registration_endpoint {
            check_endpoint("registration endpoint", registration)?;
        }
        Ok(())
    }
}

/// For the fuzz target of authorization-server metadata, not a stable API: reads `bytes` as the
/// client reads such a document (a peer's) and applies its endpoint rule; the endpoints it would
/// use (authorization, token, registration), when it accepts the document.
#[doc(hidden)]
pub fn fuzz_server_metadata(bytes: &[u8]) -> Option<Vec<String>> {
    let metadata: ServerMetadata = serde_json::from_slice(bytes).ok()?;
    metadata.check_endpoints().ok()?;
    let mut endpoints = vec![metadata.authorization_endpoint, metadata.token_endpoint];
    endpoints.extend(metadata.registration_endpoint);
    Some(endpoints)
}

/// Whether the resource identifier `resource` names the endpoint `url`: the same origin, and a
/// path that is the endpoint's or a parent of it on a segment boundary.
pub(crate) fn names(resource: &str, url: &str) -> bool {
    let (resource, url) = (resource.trim_end_matches('/'), url.trim_end_matches('/'));
    if origin(resource) != origin(url) {
        return false;
    }
    let (rp, up) = (
        &resource[origin(resource).len()..],
        &url[origin(url).len()..],
    );
    up == rp || up.starts_with(&format!("{rp}/")) || rp.is_empty()
}

/// `scheme://authority` of a URL (all of it when it has no path).
pub(crate) fn origin(url: &str) -> &str {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &url[..scheme.len() + 3 + end]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26, item 3: a hostile authorization server's `file:///…` authorization endpoint
    /// was handed to the browser.
    #[test]
    fn only_https_or_loopback_http_endpoints_are_used() {
        for good in [
            "https://auth.example.com/authorize",
            "http://127.0.0.1:8080/token",
            "http://127.3.4.5/token",
            "http://[::1]:9/token",
            "http://localhost:3000/authorize",
            "http://app.localhost/authorize",
        ] {
            assert!(check_endpoint("token endpoint", good).is_ok(), "{good}");
        }
        for bad in [
            "file:///etc/passwd",
            "javascript:alert(1)",
            "http://auth.example.com/token",
            "http://10.0.0.1/token",
            "http://localhost.evil.com/token",
            "ftp://auth.example.com/x",
            "data:text/html,hi",
            "not a url",
            "",
        ] {
            let error = check_endpoint("authorization endpoint", bad).expect_err(bad);
            assert!(
                matches!(
                    error,
                    AuthError::InsecureEndpoint {
                        what: "authorization endpoint",
                        ..
                    }
                ),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_resource_names_its_endpoint_or_a_parent_of_it() {
        assert!(names("http://h:1/mcp", "http://h:1/mcp"));
        assert!(names("http://h:1", "http://h:1/mcp"));
        assert!(names("http://h:1/", "http://h:1/mcp"));
        assert!(names("http://h:1/a", "http://h:1/a/mcp"));
        assert!(!names("http://h:1/a", "http://h:1/ab"));
        assert!(!names("https://evil.example.com/mcp", "http://h:1/mcp"));
        assert!(!names("http://h:2/mcp", "http://h:1/mcp"));
        assert_eq!(origin("http://h:1/x?y"), "http://h:1");
        assert_eq!(origin("http://h:1"), "http://h:1");
    }
}
