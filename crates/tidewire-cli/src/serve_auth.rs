//! `tidewire serve --bind ADDR --auth-issuer …`: the demo server as an OAuth protected
//! resource. Every HTTP endpoint (`/mcp`, `/sse` and `/messages`, `/ws`) wants a bearer token
//! from the issuer, checked against its key set (`--auth-jwks`) or at its introspection
//! endpoint (`--auth-introspection`); the RFC 9728 metadata document is served beside them.

use clap::Args;
use tidewire_auth::{BearerLayer, Introspection, JwtVerifier, ProtectedResourceMetadata};
use tidewire_server::ServerBuilder;

use crate::duration::{self, Span};

/// The environment variable holding the introspection client's secret (kept off the command
/// line, where other users could read it).
pub(crate) const CLIENT_SECRET_VAR: &str = "TIDEWIRE_AUTH_CLIENT_SECRET";

#[derive(Debug, Args)]
pub(crate) struct AuthArgs {
    /// HTTP: require OAuth access tokens issued by this authorization server (its issuer
    /// identifier). Needs --auth-jwks or --auth-introspection.
    #[arg(long, value_name = "URL")]
    pub(crate) auth_issuer: Option<String>,

    /// Check tokens as JWTs signed by a key of the set at this URL (the issuer's jwks_uri).
    #[arg(
        long,
        value_name = "URL",
        requires = "auth_issuer",
        conflicts_with = "auth_introspection"
    )]
    pub(crate) auth_jwks: Option<String>,

    /// Check each token at this introspection endpoint (RFC 7662), as the client
    /// --auth-client-id with the secret in $TIDEWIRE_AUTH_CLIENT_SECRET.
    #[arg(long, value_name = "URL", requires_all = ["auth_issuer", "auth_client_id"])]
    pub(crate) auth_introspection: Option<String>,

    /// The client id the server introspects tokens as.
    #[arg(long, value_name = "ID", requires = "auth_introspection")]
    pub(crate) auth_client_id: Option<String>,

    /// How long an introspection answer is kept (a token revoked at the server is refused
    /// here within this long; 0s asks about every request).
    #[arg(
        long,
        value_name = "DURATION",
        default_value_t = Span(tidewire_auth::DEFAULT_ANSWER_CACHE),
        value_parser = duration::parse_or_zero,
        requires = "auth_introspection"
    )]
    pub(crate) auth_cache: Span,

    /// How often a channel the token opened and that stays open (a WebSocket, an SSE stream,
    /// a listen) checks the token again: it ends at the first check that refuses it (revoked,
    /// or short of a scope), and at the token's expiry in any case.
    #[arg(
        long,
        value_name = "DURATION",
        default_value_t = Span(tidewire_auth::DEFAULT_RECHECK),
        value_parser = duration::parse,
        requires = "auth_issuer"
    )]
    pub(crate) auth_recheck: Span,

    /// The resource tokens must be for (their audience), and the `resource` of the metadata
    /// document: the URL clients use for /mcp (default: http://ADDR/mcp as bound).
    #[arg(long, value_name = "URL", requires = "auth_issuer")]
    pub(crate) auth_audience: Option<String>,

    /// A scope every request needs (repeat for more); clients are told to ask for them.
    #[arg(long = "auth-scope", value_name = "SCOPE", requires = "auth_issuer")]
    pub(crate) auth_scopes: Vec<String>,

    /// A scope a tool's calls need besides, as TOOL=SCOPE (repeat for more); a token without
    /// it gets 403 insufficient_scope, so the client steps up.
    #[arg(long = "auth-tool-scope", value_name = "TOOL=SCOPE", requires = "auth_issuer", value_parser = parse_tool_scope)]
    pub(crate) auth_tool_scopes: Vec<(String, String)>,

    /// A scope reading a resource needs besides, as URI=SCOPE, the URI a resource's or a
    /// template's (repeat for more): checked by the server for reads, subscriptions and listens
    /// (-32003 without it).
    #[arg(long = "auth-resource-scope", value_name = "URI=SCOPE", requires = "auth_issuer", value_parser = parse_resource_scope)]
    pub(crate) auth_resource_scopes: Vec<(String, String)>,
}

fn parse_tool_scope(text: &str) -> Result<(String, String), String> {
    split_scope(text).ok_or_else(|| "write it as TOOL=SCOPE".to_owned())
}

fn parse_resource_scope(text: &str) -> Result<(String, String), String> {
    // A URI may hold `=` (a query): the scope is what follows the last one.
    text.rsplit_once('=')
        .filter(|(uri, scope)| !uri.is_empty() && !scope.is_empty())
        .map(|(uri, scope)| (uri.to_owned(), scope.to_owned()))
        .ok_or_else(|| "write it as URI=SCOPE".to_owned())
}

fn split_scope(text: &str) -> Option<(String, String)> {
    text.split_once('=')
        .filter(|(key, scope)| !key.is_empty() && !scope.is_empty())
        .map(|(key, scope)| (key.to_owned(), scope.to_owned()))
}

/// What protects the server: the layer, and the metadata document to serve.
pub(crate) struct Protection {
    pub(crate) layer: BearerLayer,
    pub(crate) metadata: ProtectedResourceMetadata,
}

impl AuthArgs {
    /// The server checks each `--auth-tool-scope` itself too, from the request's principal
    /// (the layer's check covers HTTP bodies only, the server's every transport), and each
    /// `--auth-resource-scope` (the server's check only).
    pub(crate) fn guard_tools(&self, mut builder: ServerBuilder) -> ServerBuilder {
        for (tool, scope) in &self.auth_tool_scopes {
            builder = builder.tool_scopes(tool, [scope.clone()]);
        }
        for (uri, scope) in &self.auth_resource_scopes {
            builder = builder.resource_scopes(uri, [scope.clone()]);
        }
        builder
    }

    /// The protection the options ask for, for the endpoint at `mcp_url` (`None`: none asked).
    pub(crate) fn protection(
        &self,
        mcp_url: &str,
        max_body: usize,
    ) -> Result<Option<Protection>, String> {
        let Some(issuer) = &self.auth_issuer else {
            return Ok(None);
        };
        let resource = self
            .auth_audience
            .clone()
            .unwrap_or_else(|| mcp_url.to_owned());
        let mut offered = self.auth_scopes.clone();
        for (_, scope) in self
            .auth_tool_scopes
            .iter()
            .chain(&self.auth_resource_scopes)
        {
            if !offered.contains(scope) {
                offered.push(scope.clone());
            }
        }
        let metadata =
            ProtectedResourceMetadata::new(resource.clone(), issuer.clone()).scopes(offered);
        let layer = match (
            &self.auth_jwks,
            &self.auth_introspection,
            &self.auth_client_id,
        ) {
            (Some(jwks), None, _) => BearerLayer::new(
                JwtVerifier::from_jwks_url(jwks.clone(), issuer.clone(), resource),
                &metadata,
            ),
            (None, Some(endpoint), Some(client_id)) => {
                let secret = std::env::var(CLIENT_SECRET_VAR).map_err(|_| {
                    format!(
                        "--auth-introspection needs the client's secret in ${CLIENT_SECRET_VAR}"
                    )
                })?;
                let Span(keep_for) = self.auth_cache;
                BearerLayer::new(
                    Introspection::new(endpoint.clone(), client_id, &secret)
                        .audience(resource)
                        .cache(keep_for, tidewire_auth::DEFAULT_CACHED_ANSWERS),
                    &metadata,
                )
            }
            _ => {
                return Err(
                    "--auth-issuer needs --auth-jwks URL or --auth-introspection URL".to_owned(),
                );
            }
        };
        let Span(recheck) = self.auth_recheck;
        let mut layer = layer
            .require_scopes(self.auth_scopes.clone())
            .recheck_every(recheck)
            .max_body(max_body);
        let mut by_tool: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for (tool, scope) in &self.auth_tool_scopes {
            by_tool.entry(tool).or_default().push(scope.clone());
        }
        for (tool, scopes) in by_tool {
            layer = layer.tool_scopes(tool, scopes);
        }
        Ok(Some(Protection { layer, metadata }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_option_names_its_key_and_its_scope() {
        assert_eq!(
            parse_tool_scope("admin=mcp:admin"),
            Ok(("admin".to_owned(), "mcp:admin".to_owned()))
        );
        assert!(parse_tool_scope("admin").is_err());
        assert!(parse_tool_scope("=mcp:admin").is_err());
        // A URI with a query keeps its `=`: the scope follows the last one.
        assert_eq!(
            parse_resource_scope("db://rows?table=users=mcp:db"),
            Ok(("db://rows?table=users".to_owned(), "mcp:db".to_owned()))
        );
        assert_eq!(
            parse_resource_scope("vault://{name}=mcp:vault"),
            Ok(("vault://{name}".to_owned(), "mcp:vault".to_owned()))
        );
        assert!(parse_resource_scope("vault://x=").is_err());
    }
}
