//! The grants without a person at a browser: a machine client's own credentials
//! (`client_credentials`), and an enterprise identity provider's assertion (RFC 8693 token
//! exchange for an identity assertion JWT, then the RFC 7523 `jwt-bearer` grant).

use serde::Deserialize;

use super::discovery::ServerMetadata;
use super::error::AuthError;
use super::flow::{Presented, post_form, token_request};
use super::http::Http;
use super::registration::Credentials;
use super::token::Token;

/// How the client gets its tokens.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum GrantFlow {
    /// A person authorizes in a browser: the authorization code with PKCE (the default).
    #[default]
    AuthorizationCode,
    /// A machine acting for itself, with its pre-registered credentials (a secret, or a
    /// signing key with `private_key_jwt`): the `client_credentials` grant, no user.
    ClientCredentials,
    /// Enterprise-managed authorization (cross-app access): the user's ID token from the
    /// enterprise identity provider is exchanged there for an identity assertion naming this
    /// authorization server and resource, which the authorization server takes as a
    /// `jwt-bearer` grant from the pre-registered client.
    IdentityAssertion(IdentityProvider),
    /// Workload identity federation: a JWT the workload's platform issued for this
    /// authorization server (a cloud or CI identity token), presented as a `jwt-bearer`
    /// grant (RFC 7523 §2.1).
    JwtBearer(WorkloadAssertion),
}

/// The assertion of [`GrantFlow::JwtBearer`].
#[derive(Clone)]
pub struct WorkloadAssertion(pub String);

/// The assertion stays out of logs.
impl std::fmt::Debug for WorkloadAssertion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkloadAssertion(…)")
    }
}

impl std::fmt::Debug for GrantFlow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::AuthorizationCode => f.write_str("AuthorizationCode"),
            Self::ClientCredentials => f.write_str("ClientCredentials"),
            Self::IdentityAssertion(idp) => f.debug_tuple("IdentityAssertion").field(idp).finish(),
            Self::JwtBearer(assertion) => f.debug_tuple("JwtBearer").field(assertion).finish(),
        }
    }
}

/// The enterprise identity provider of [`GrantFlow::IdentityAssertion`].
#[derive(Clone)]
pub struct IdentityProvider {
    /// Its token endpoint.
    pub token_endpoint: String,
    /// The user's ID token it issued.
    pub id_token: String,
    /// This client's credentials there, if it wants them.
    pub client: Option<Credentials>,
}

/// The ID token stays out of logs.
impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("token_endpoint", &self.token_endpoint)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// The token of a `client_credentials` grant.
pub(crate) async fn client_credentials(
    http: &Http,
    server: &ServerMetadata,
    client: Presented<'_>,
    scopes: &[String],
    resource: Option<&str>,
) -> Result<Token, AuthError> {
    let mut form = vec![("grant_type", "client_credentials".to_owned())];
    push_scope_and_resource(&mut form, scopes, resource);
    token_request(http, &server.token_endpoint, client, form).await
}

/// The token of an identity-assertion grant: the exchange at `idp`, then the `jwt-bearer`
/// grant at `server`.
pub(crate) async fn identity_assertion(
    http: &Http,
    idp: &IdentityProvider,
    server: &ServerMetadata,
    client: Presented<'_>,
    scopes: &[String],
    resource: Option<&str>,
) -> Result<Token, AuthError> {
    #[derive(Deserialize)]
    struct Exchanged {
        access_token: String,
        #[serde(default)]
        issued_token_type: Option<String>,
    }
    const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
    let Some(resource) = resource else {
        return Err(AuthError::Unusable(
            "an identity assertion names its resource, and this server's metadata names none"
                .to_owned(),
        ));
    };
    let mut exchange = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:token-exchange".to_owned(),
        ),
        ("requested_token_type", ID_JAG.to_owned()),
        ("audience", server.issuer.clone()),
        ("resource", resource.to_owned()),
        ("subject_token", idp.id_token.clone()),
        (
            "subject_token_type",
            "urn:ietf:params:oauth:token-type:id_token".to_owned(),
        ),
    ];
    if !scopes.is_empty() {
        exchange.push(("scope", scopes.join(" ")));
    }
    // No client at the identity provider: an empty id, which is not sent.
    let anonymous = Credentials::pre_registered(String::new(), None);
    let idp_client = idp.client.as_ref().unwrap_or(&anonymous);
    let at_idp = Presented {
        client: idp_client,
        assertion: None,
    };
    let body = post_form(http, &idp.token_endpoint, at_idp, exchange).await?;
    let exchanged: Exchanged = serde_json::from_slice(&body)
        .map_err(|e| AuthError::Token(format!("the identity provider's answer: {e}")))?;
    if exchanged
        .issued_token_type
        .as_deref()
        .is_some_and(|t| t != ID_JAG)
    {
        return Err(AuthError::Token(
            "the identity provider issued another kind of token than an identity assertion"
                .to_owned(),
        ));
    }
    jwt_bearer(
        http,
        server,
        client,
        exchanged.access_token,
        scopes,
        Some(resource),
    )
    .await
}

/// The token of a `jwt-bearer` grant (RFC 7523 §2.1) presenting `grant_assertion`.
pub(crate) async fn jwt_bearer(
    http: &Http,
    server: &ServerMetadata,
    client: Presented<'_>,
    grant_assertion: String,
    scopes: &[String],
    resource: Option<&str>,
) -> Result<Token, AuthError> {
    let mut form = vec![
        (
            "grant_type",
            "urn:ietf:params:oauth:grant-type:jwt-bearer".to_owned(),
        ),
        ("assertion", grant_assertion),
    ];
    push_scope_and_resource(&mut form, scopes, resource);
    token_request(http, &server.token_endpoint, client, form).await
}

fn push_scope_and_resource(
    form: &mut Vec<(&str, String)>,
    scopes: &[String],
    resource: Option<&str>,
) {
    if !scopes.is_empty() {
        form.push(("scope", scopes.join(" ")));
    }
    if let Some(resource) = resource {
        form.push(("resource", resource.to_owned()));
    }
}
