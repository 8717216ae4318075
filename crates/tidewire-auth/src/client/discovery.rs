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
/// that has it; its `issuer` must be `issuer` exactly, unless `issuer` is only a 2025-03-26
/// server's origin (no resource metadata named it, so there is no issuer to hold it to).
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
            Ok(found) if found.issuer == issuer || !named => return Ok(Some(found)),
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
