//! [`OAuthClient`]: the flow from a challenge to a token (see the parent module's docs).

use super::discovery::{self, ServerMetadata};
use crate::challenge::Challenge;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::error::AuthError;
#[cfg(test)]
use super::flow::HeadlessRedirect;
use super::flow::{self, FrontChannel, Presented};
use super::grants::{self, GrantFlow};
use super::http;
use super::registration::{self, AuthMethod, Credentials};
use super::token::Grant;

/// Authorization attempts allowed for one endpoint in one chain of step-ups (a plain 401
/// starts a new chain) before giving up.
pub const MAX_ATTEMPTS: usize = 3;

/// How the client presents itself, and how it reaches the user.
#[derive(Clone)]
pub struct OAuthConfig {
    /// Where the authorization server sends the user back (a loopback URL for a program).
    pub redirect_uri: String,
    /// The name shown to the user at registration.
    pub client_name: String,
    /// Credentials registered in advance, and the authorization server they may be shown to
    /// (see [`with_credentials`](Self::with_credentials)).
    pub pre_registered: Option<(Credentials, TrustedIssuer)>,
    /// The URL of this client's Client ID Metadata Document, used as its client id where the
    /// server supports that.
    pub client_metadata_url: Option<String>,
    /// How the authorization request reaches the user.
    pub front_channel: Arc<dyn FrontChannel>,
    /// The time limit of each HTTP exchange.
    pub timeout: Duration,
    /// How tokens are granted: through a browser (the default), to a machine with its own
    /// credentials, or from an enterprise identity provider's assertion.
    pub flow: GrantFlow,
    /// The client's signing key, for `private_key_jwt` credentials.
    #[cfg(feature = "jwt")]
    pub client_key: Option<super::assertion::ClientKey>,
}

impl std::fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthConfig")
            .field("redirect_uri", &self.redirect_uri)
            .field("client_name", &self.client_name)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("flow", &self.flow)
            .finish_non_exhaustive()
    }
}

impl OAuthConfig {
    /// A client named `client_name` that is sent back to `redirect_uri`, reaching the user
    /// through `front_channel`.
    pub fn new(
        client_name: impl Into<String>,
        redirect_uri: impl Into<String>,
        front_channel: impl FrontChannel,
    ) -> Self {
        Self {
            redirect_uri: redirect_uri.into(),
            client_name: client_name.into(),
            pre_registered: None,
            client_metadata_url: None,
            front_channel: Arc::new(front_channel),
            timeout: Duration::from_secs(30),
            flow: GrantFlow::AuthorizationCode,
            #[cfg(feature = "jwt")]
            client_key: None,
        }
    }

    /// This configuration with credentials registered in advance at the authorization server
    /// whose issuer is `issuer` (its metadata's `issuer`, exactly). They, and a grant without
    /// a browser ([`GrantFlow`]'s other flows), go to that server only: an MCP server that
    /// names another gets [`AuthError::UntrustedIssuer`] before anything is sent there (in the
    /// browser flow, the client registers there as a new client instead).
    #[must_use]
    pub fn with_credentials(mut self, credentials: Credentials, issuer: impl Into<String>) -> Self {
        self.pre_registered = Some((credentials, TrustedIssuer::Exactly(issuer.into())));
        self
    }
}

/// Which authorization server pre-registered credentials may be shown to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustedIssuer {
    /// Only the server whose metadata's `issuer` is this, exactly.
    Exactly(String),
    /// Whichever authorization server the MCP server names. The credentials (and a
    /// workload's or identity provider's assertion) then go wherever that MCP server points:
    /// only for an MCP server trusted as much as the credentials themselves, such as a test
    /// harness whose authorization server is not known in advance.
    NamedByTheServer,
}

impl TrustedIssuer {
    /// Whether credentials bound this way may go to `issuer`.
    fn admits(&self, issuer: &str) -> bool {
        match self {
            Self::Exactly(trusted) => trusted == issuer,
            Self::NamedByTheServer => true,
        }
    }
}

/// Gets access tokens for MCP endpoints (see the module docs).
#[derive(Debug)]
pub struct OAuthClient {
    config: OAuthConfig,
    http: http::Http,
    /// The client's credentials by issuer.
    registrations: Mutex<HashMap<String, Credentials>>,
    /// By endpoint: the scopes asked for so far, and the attempts made.
    asked: Mutex<HashMap<String, (BTreeSet<String>, usize)>>,
}

impl OAuthClient {
    /// A client with `config`.
    ///
    /// # Errors
    /// [`AuthError::Http`] when the HTTP client cannot be built.
    pub fn new(config: OAuthConfig) -> Result<Self, AuthError> {
        Ok(Self {
            http: http::Http::new(config.timeout)?,
            config,
            registrations: Mutex::new(HashMap::new()),
            asked: Mutex::new(HashMap::new()),
        })
    }

    /// A grant for the MCP endpoint `url`, which answered 401 (or 403 `insufficient_scope`)
    /// with `challenge` (`None` when there was none to read).
    ///
    /// # Errors
    /// Any [`AuthError`]: the flow stops at the first check that fails, and sends nothing
    /// after it.
    pub async fn authorize(
        &self,
        url: &str,
        challenge: Option<&Challenge>,
    ) -> Result<Grant, AuthError> {
        let named = challenge.and_then(|c| c.param("resource_metadata"));
        let resource = discovery::resource_metadata(&self.http, url, named).await?;
        if let Some(named) = resource.as_ref().and_then(|r| r.resource.as_deref())
            && !discovery::names(named, url)
        {
            return Err(AuthError::ResourceMismatch {
                named: named.to_owned(),
                url: url.to_owned(),
            });
        }
        let issuer = match resource
            .as_ref()
            .and_then(|r| r.authorization_servers.first())
        {
            Some(issuer) => issuer.clone(),
            None if resource.is_some() => {
                return Err(AuthError::Unusable(
                    "the resource metadata names no authorization server".to_owned(),
                ));
            }
            // 2025-03-26: the MCP server's origin is its authorization server.
            None => discovery::origin(url).to_owned(),
        };
        let named = resource.is_some();
        if named {
            discovery::check_endpoint("authorization server", &issuer)?;
        }
        let server = match discovery::server_metadata(&self.http, &issuer, named).await? {
            Some(server) => server,
            None if resource.is_none() => fallback_endpoints(&issuer),
            None => {
                return Err(AuthError::Unusable(format!(
                    "no metadata for the authorization server {issuer:?}"
                )));
            }
        };
        let client = self.credentials(&server).await?.fitted(&server);
        let scopes = self.scopes(url, challenge, resource.as_ref(), &server)?;
        let resource_id = resource.as_ref().and_then(|r| r.resource.clone());
        let assertion = self.assertion(&client, &server.issuer)?;
        let presented = Presented {
            client: &client,
            assertion,
        };
        let token = match &self.config.flow {
            GrantFlow::AuthorizationCode => {
                let redirect_uri = &self.config.redirect_uri;
                let pending = flow::request(
                    &server,
                    &client,
                    redirect_uri,
                    &scopes,
                    resource_id.as_deref(),
                )?;
                let redirected = self.config.front_channel.authorize(&pending.url).await?;
                let code = flow::code(&pending, &server, &redirected)?;
                flow::exchange(
                    &self.http,
                    &server,
                    presented,
                    &pending,
                    &code,
                    redirect_uri,
                    resource_id.as_deref(),
                )
                .await?
            }
            GrantFlow::ClientCredentials => {
                grants::client_credentials(
                    &self.http,
                    &server,
                    presented,
                    &scopes,
                    resource_id.as_deref(),
                )
                .await?
            }
            GrantFlow::IdentityAssertion(idp) => {
                let resource = resource_id.as_deref().unwrap_or(url);
                grants::identity_assertion(
                    &self.http,
                    idp,
                    &server,
                    presented,
                    &scopes,
                    Some(resource),
                )
                .await?
            }
            GrantFlow::JwtBearer(workload) => {
                grants::jwt_bearer(
                    &self.http,
                    &server,
                    presented,
                    workload.0.clone(),
                    &scopes,
                    resource_id.as_deref(),
                )
                .await?
            }
        };
        Ok(Grant {
            issuer: server.issuer,
            token_endpoint: server.token_endpoint,
            client,
            resource: resource_id,
            token,
        })
    }

    /// `grant` with a fresh token from its refresh token, at the server that issued it, for
    /// the same resource. The answer's refresh token replaces the old one when the server
    /// rotates them; the caller must keep the new grant before using it.
    ///
    /// # Errors
    /// [`AuthError::InvalidGrant`] when there is no refresh token or the server no longer
    /// honours it (authorize again); any other [`AuthError`] of the token request.
    pub async fn refresh(&self, grant: &Grant) -> Result<Grant, AuthError> {
        let assertion = self.assertion(&grant.client, &grant.issuer)?;
        let token = flow::refresh(&self.http, grant, assertion).await?;
        Ok(Grant {
            token,
            ..grant.clone()
        })
    }

    /// Uses `credentials` at `issuer` from now on (ones kept from an earlier run), rather than
    /// registering again.
    pub fn remember(&self, issuer: &str, credentials: Credentials) {
        self.registrations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(issuer.to_owned())
            .or_insert(credentials);
    }

    /// A signed client assertion for `issuer`, when the client authenticates with its key.
    fn assertion(&self, client: &Credentials, issuer: &str) -> Result<Option<String>, AuthError> {
        if client.method != AuthMethod::PrivateKeyJwt {
            return Ok(None);
        }
        #[cfg(feature = "jwt")]
        if let Some(key) = &self.config.client_key {
            return key.sign(&client.client_id, issuer).map(Some);
        }
        let _ = issuer;
        Err(AuthError::Unusable(
            "private_key_jwt needs the client's signing key (OAuthConfig::client_key, feature jwt)"
                .to_owned(),
        ))
    }

    /// The client's credentials at `server`: kept from before (for that issuer exactly),
    /// pre-registered (where their [`TrustedIssuer`] admits it), its metadata document's URL,
    /// or a new registration.
    async fn credentials(&self, server: &ServerMetadata) -> Result<Credentials, AuthError> {
        if let Some(known) = self.registered(&server.issuer) {
            return Ok(known);
        }
        let browser = matches!(self.config.flow, GrantFlow::AuthorizationCode);
        let credentials = match &self.config.pre_registered {
            Some((credentials, trusted)) if trusted.admits(&server.issuer) => credentials.clone(),
            // Neither the credentials nor an assertion go to a server the user did not name.
            Some((_, TrustedIssuer::Exactly(trusted))) if !browser => {
                return Err(AuthError::UntrustedIssuer {
                    trusted: trusted.clone(),
                    named: tidewire_core::text::excerpt(&server.issuer),
                });
            }
            _ if !browser => {
                return Err(AuthError::Unusable(
                    "a grant without a browser needs the client's pre-registered credentials"
                        .to_owned(),
                ));
            }
            _ => match &self.config.client_metadata_url {
                Some(url) if server.client_id_metadata_document_supported => Credentials {
                    client_id: url.clone(),
                    client_secret: None,
                    method: AuthMethod::None,
                },
                _ => {
                    registration::register(
                        &self.http,
                        server,
                        &self.config.client_name,
                        &self.config.redirect_uri,
                    )
                    .await?
                }
            },
        };
        self.registrations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(server.issuer.clone(), credentials.clone());
        Ok(credentials)
    }

    fn registered(&self, issuer: &str) -> Option<Credentials> {
        self.registrations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(issuer)
            .cloned()
    }

    /// The scopes to ask for now, counting the attempt.
    fn scopes(
        &self,
        url: &str,
        challenge: Option<&Challenge>,
        resource: Option<&discovery::ResourceMetadata>,
        server: &ServerMetadata,
    ) -> Result<Vec<String>, AuthError> {
        let challenged: BTreeSet<String> = challenge
            .and_then(|c| c.param("scope"))
            .map(|s| s.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default();
        let step_up = challenge.and_then(|c| c.param("error")) == Some("insufficient_scope");
        let mut asked = self
            .asked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (before, attempts) = asked.entry(url.to_owned()).or_default();
        // A plain 401 (no token yet, or one that expired) starts over; only a chain of
        // step-ups counts toward the limit.
        if !step_up {
            *attempts = 0;
        }
        if *attempts >= MAX_ATTEMPTS {
            return Err(AuthError::TooManyAttempts(*attempts));
        }
        let mut wanted: BTreeSet<String> = if !challenged.is_empty() {
            challenged
        } else {
            resource
                .map(|r| r.scopes_supported.iter().cloned().collect())
                .unwrap_or_default()
        };
        if step_up {
            if wanted.is_subset(before) {
                return Err(AuthError::Unusable(
                    "the server asks for scopes it was already asked for; more would not help"
                        .to_owned(),
                ));
            }
            wanted.extend(before.iter().cloned());
        }
        // Only a person's login is kept for later (a machine asks again).
        if matches!(self.config.flow, GrantFlow::AuthorizationCode)
            && server
                .scopes_supported
                .iter()
                .any(|s| s == "offline_access")
        {
            wanted.insert("offline_access".to_owned());
        }
        *attempts += 1;
        before.clone_from(&wanted);
        Ok(wanted.into_iter().collect())
    }
}

/// A 2025-03-26 server without metadata: the default endpoints at its origin.
fn fallback_endpoints(origin: &str) -> ServerMetadata {
    ServerMetadata {
        issuer: origin.to_owned(),
        authorization_endpoint: format!("{origin}/authorize"),
        token_endpoint: format!("{origin}/token"),
        registration_endpoint: Some(format!("{origin}/register")),
        scopes_supported: Vec::new(),
        code_challenge_methods_supported: vec!["S256".to_owned()],
        token_endpoint_auth_methods_supported: Vec::new(),
        authorization_response_iss_parameter_supported: false,
        client_id_metadata_document_supported: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> OAuthClient {
        OAuthClient::new(OAuthConfig::new(
            "test",
            "http://127.0.0.1:9/callback",
            HeadlessRedirect::new(),
        ))
        .expect("client")
    }

    fn server(offline: bool) -> ServerMetadata {
        let mut server = fallback_endpoints("http://as.test");
        if offline {
            server.scopes_supported = vec!["offline_access".to_owned()];
        }
        server
    }

    fn challenge(scope: &str, step_up: bool) -> Challenge {
        let c = Challenge::bearer().with("scope", scope);
        if step_up {
            c.with("error", "insufficient_scope")
        } else {
            c
        }
    }

    #[test]
    fn scopes_come_from_the_challenge_grow_by_union_and_step_ups_are_bounded() {
        let oauth = client();
        let url = "http://mcp.test/mcp";
        let ask = |c: &Challenge, offline| oauth.scopes(url, Some(c), None, &server(offline));
        assert_eq!(ask(&challenge("a", false), false).expect("first"), ["a"]);
        assert_eq!(
            ask(&challenge("b", true), false).expect("step-up"),
            ["a", "b"],
            "the union of what was asked and what is missing"
        );
        assert!(
            ask(&challenge("b", true), false).is_err(),
            "asking again for what was asked cannot help"
        );
        assert_eq!(
            ask(&challenge("c", true), false).expect("third"),
            ["a", "b", "c"]
        );
        assert!(matches!(
            ask(&challenge("d", true), false),
            Err(AuthError::TooManyAttempts(3))
        ));
        // A plain 401 starts over; offline_access only where the server lists it.
        assert_eq!(
            ask(&challenge("a", false), true).expect("a new chain"),
            ["a", "offline_access"]
        );
        assert!(
            oauth
                .scopes(url, None, None, &server(false))
                .expect("none")
                .is_empty()
        );
    }
}
