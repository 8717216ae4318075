//! The protected-resource metadata document (RFC 9728) a resource server publishes, so a client
//! that met a 401 finds the authorization server to get a token from.

use serde::{Deserialize, Serialize};

/// What an MCP server says of itself as an OAuth protected resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// The resource's identifier: the MCP endpoint's URL, which tokens must name as their
    /// audience (RFC 8707).
    pub resource: String,
    /// The issuers of the authorization servers that grant tokens for it.
    pub authorization_servers: Vec<String>,
    /// The scopes a client may ask for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scopes_supported: Vec<String>,
    /// How a token may be sent: always `header` here (never in a URL).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bearer_methods_supported: Vec<String>,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

impl ProtectedResourceMetadata {
    /// The document of the resource `resource`, whose tokens `authorization_server` grants.
    pub fn new(resource: impl Into<String>, authorization_server: impl Into<String>) -> Self {
        Self {
            resource: resource.into(),
            authorization_servers: vec![authorization_server.into()],
            scopes_supported: Vec::new(),
            bearer_methods_supported: vec!["header".to_owned()],
            resource_name: None,
        }
    }

    /// Lists the scopes a client may ask for.
    #[must_use]
    pub fn scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.scopes_supported = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// The path this document is served at on the resource's host (see [`well_known_path`]).
    pub fn path(&self) -> String {
        well_known_path(&self.resource)
    }

    /// The URL of this document: the resource's origin and [`path`](Self::path).
    pub fn url(&self) -> String {
        format!("{}{}", origin(&self.resource), self.path())
    }
}

/// Where RFC 9728 puts the metadata of the resource `resource`:
/// `/.well-known/oauth-protected-resource` followed by the resource's path
/// (`https://h/mcp` → `/.well-known/oauth-protected-resource/mcp`; no path, no suffix).
pub fn well_known_path(resource: &str) -> String {
    let after_scheme = resource
        .split_once("://")
        .map_or(resource, |(_, rest)| rest);
    let path = after_scheme
        .find('/')
        .map_or("", |i| &after_scheme[i..])
        .split(['?', '#'])
        .next()
        .unwrap_or_default()
        .trim_end_matches('/');
    format!("/.well-known/oauth-protected-resource{path}")
}

/// `scheme://host[:port]` of a URL.
fn origin(url: &str) -> &str {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url;
    };
    let end = rest.find(['/', '?', '#']).map_or(rest.len(), |i| i);
    &url[..scheme.len() + 3 + end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_lives_at_the_resource_path_under_the_well_known_prefix() {
        let doc =
            ProtectedResourceMetadata::new("https://mcp.example.com/mcp", "https://as.example.com")
                .scopes(["mcp:read"]);
        assert_eq!(doc.path(), "/.well-known/oauth-protected-resource/mcp");
        assert_eq!(
            doc.url(),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            well_known_path("http://127.0.0.1:3000"),
            "/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            well_known_path("http://h/a/b/?x=1"),
            "/.well-known/oauth-protected-resource/a/b"
        );
        let json = serde_json::to_value(&doc).expect("JSON");
        assert_eq!(json["authorization_servers"][0], "https://as.example.com");
        assert_eq!(json["bearer_methods_supported"][0], "header");
        assert!(json.get("resource_name").is_none());
    }
}
