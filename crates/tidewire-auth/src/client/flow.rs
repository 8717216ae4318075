//! The authorization-code grant with PKCE (RFC 7636, S256): the authorization request, its
//! response checked (`state`, RFC 9207 `iss`), and the token request with the client's
//! authentication method.

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use futures::future::BoxFuture;
use reqwest::Url;
use sha2::{Digest, Sha256};

use super::discovery::ServerMetadata;
use super::error::AuthError;
use super::http::{Http, failed, read};
use super::registration::{AuthMethod, Credentials};
use super::token::{Grant, Token};
use crate::fetch::form_encode as encode;

/// Takes a person (or a program) through the authorization request: given the authorization
/// URL, answers the URL the authorization server redirected back to (with `code` and `state`).
pub trait FrontChannel: Send + Sync + 'static {
    /// Runs the authorization request at `url`.
    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>>;
}

/// For an authorization server that approves at once (a test server, a pre-approved client):
/// GETs the authorization URL without following the redirect and answers its `Location`.
#[derive(Debug, Clone)]
pub struct HeadlessRedirect {
    http: reqwest::Client,
}

impl HeadlessRedirect {
    /// A front channel with its own HTTP client (no redirects followed; each GET given up
    /// after 30 s, so an authorization server that never answers fails the login instead of
    /// holding it).
    pub fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(30))
                .build()
                .unwrap_or_default(),
        }
    }
}

impl Default for HeadlessRedirect {
    fn default() -> Self {
        Self::new()
    }
}

impl FrontChannel for HeadlessRedirect {
    fn authorize<'a>(&'a self, url: &'a str) -> BoxFuture<'a, Result<String, AuthError>> {
        Box::pin(async move {
            let response = self
                .http
                .get(url)
                .send()
                .await
                .map_err(|e| failed(url, &e))?;
            if !response.status().is_redirection() {
                return Err(AuthError::Authorization(format!(
                    "the authorization endpoint answered {} instead of redirecting",
                    response.status()
                )));
            }
            response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| AuthError::Authorization("a redirect without a Location".into()))
        })
    }
}

/// One authorization request in flight: what its response must match.
pub(crate) struct Pending {
    verifier: String,
    state: String,
    pub(crate) url: String,
}

/// 32 random bytes, base64url: a PKCE verifier (43 characters) or a `state`.
pub(crate) fn random() -> Result<String, AuthError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| AuthError::Unusable(format!("no randomness: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The authorization request for `client` at `server`, asking for `scopes` on `resource`.
pub(crate) fn request(
    server: &ServerMetadata,
    client: &Credentials,
    redirect_uri: &str,
    scopes: &[String],
    resource: Option<&str>,
) -> Result<Pending, AuthError> {
    if !server
        .code_challenge_methods_supported
        .iter()
        .any(|m| m == "S256")
    {
        return Err(AuthError::Unusable(
            "it does not offer PKCE with S256 (code_challenge_methods_supported)".to_owned(),
        ));
    }
    let verifier = random()?;
    let state = random()?;
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let mut url = Url::parse(&server.authorization_endpoint)
        .map_err(|e| AuthError::Unusable(format!("its authorization endpoint: {e}")))?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", &client.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("state", &state)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        if !scopes.is_empty() {
            query.append_pair("scope", &scopes.join(" "));
        }
        if let Some(resource) = resource {
            query.append_pair("resource", resource);
        }
    }
    Ok(Pending {
        verifier,
        state,
        url: url.into(),
    })
}

/// The code in the authorization response `redirected`, once its `state` and `iss` check out.
pub(crate) fn code(
    pending: &Pending,
    server: &ServerMetadata,
    redirected: &str,
) -> Result<String, AuthError> {
    let url = Url::parse(redirected)
        .map_err(|e| AuthError::Authorization(format!("the redirect is not a URL: {e}")))?;
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(error) = param("error") {
        return Err(AuthError::Authorization(format!(
            "the authorization server answered {error:?}"
        )));
    }
    if param("state").as_deref() != Some(pending.state.as_str()) {
        return Err(AuthError::Authorization(
            "its state is not the one sent".to_owned(),
        ));
    }
    // RFC 9207: compared exactly, never normalised; required when the server says it sends it.
    match param("iss") {
        Some(iss) if iss != server.issuer => {
            return Err(AuthError::Authorization(format!(
                "it comes from issuer {iss:?}, not {:?}",
                server.issuer
            )));
        }
        None if server.authorization_response_iss_parameter_supported => {
            return Err(AuthError::Authorization(
                "it has no iss, which this server says it always sends".to_owned(),
            ));
        }
        _ => {}
    }
    param("code").ok_or_else(|| AuthError::Authorization("it has no code".to_owned()))
}

/// The client as it presents itself at a token endpoint: its credentials, and the signed
/// assertion that goes with them under `private_key_jwt`.
pub(crate) struct Presented<'a> {
    pub(crate) client: &'a Credentials,
    pub(crate) assertion: Option<String>,
}

/// Exchanges `code` for a token.
pub(crate) async fn exchange(
    http: &Http,
    server: &ServerMetadata,
    client: Presented<'_>,
    pending: &Pending,
    code: &str,
    redirect_uri: &str,
    resource: Option<&str>,
) -> Result<Token, AuthError> {
    let mut form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code.to_owned()),
        ("redirect_uri", redirect_uri.to_owned()),
        ("code_verifier", pending.verifier.clone()),
    ];
    if let Some(resource) = resource {
        form.push(("resource", resource.to_owned()));
    }
    token_request(http, &server.token_endpoint, client, form).await
}

/// Refreshes `grant`'s token (RFC 6749 §6), naming its resource again (RFC 8707). A server
/// that rotates refresh tokens answers a new one; one that does not leaves the old one valid,
/// so it is kept, and so are the scopes when the answer does not name them.
pub(crate) async fn refresh(
    http: &Http,
    grant: &Grant,
    assertion: Option<String>,
) -> Result<Token, AuthError> {
    let Some(refresh_token) = &grant.token.refresh_token else {
        return Err(AuthError::InvalidGrant);
    };
    let mut form = vec![
        ("grant_type", "refresh_token".to_owned()),
        ("refresh_token", refresh_token.clone()),
    ];
    if let Some(resource) = &grant.resource {
        form.push(("resource", resource.clone()));
    }
    let client = Presented {
        client: &grant.client,
        assertion,
    };
    let mut token = token_request(http, &grant.token_endpoint, client, form).await?;
    if token.refresh_token.is_none() {
        token.refresh_token = Some(refresh_token.clone());
    }
    if token.scope.is_none() {
        token.scope.clone_from(&grant.token.scope);
    }
    Ok(token)
}

/// POSTs a token request to `url` with the client's authentication: its secret (Basic or in
/// the form), its signed `assertion` (`private_key_jwt`), or its id alone.
pub(crate) async fn token_request(
    http: &Http,
    url: &str,
    client: Presented<'_>,
    form: Vec<(&str, String)>,
) -> Result<Token, AuthError> {
    let body = post_form(http, url, client, form).await?;
    Token::from_response(&body)
}

/// POSTs `form` to `url` with the client's authentication; the body of a success.
pub(crate) async fn post_form(
    http: &Http,
    url: &str,
    presented: Presented<'_>,
    mut form: Vec<(&str, String)>,
) -> Result<Vec<u8>, AuthError> {
    let Presented { client, assertion } = presented;
    let mut request = http.raw().post(url).header("accept", "application/json");
    match (client.method, &client.client_secret) {
        (AuthMethod::SecretBasic, Some(secret)) => {
            let pair = format!("{}:{}", encode(&client.client_id), encode(secret));
            request = request.header("authorization", format!("Basic {}", STANDARD.encode(pair)));
            // Also in the body: some servers (the MCP Python SDK's among them) look the client
            // up by it before reading the header; RFC 6749 allows both.
            form.push(("client_id", client.client_id.clone()));
        }
        (AuthMethod::SecretPost, Some(secret)) => {
            form.push(("client_id", client.client_id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        (AuthMethod::PrivateKeyJwt, _) => {
            let Some(assertion) = assertion else {
                return Err(AuthError::Unusable(
                    "private_key_jwt needs the client's signing key (OAuthConfig::client_key)"
                        .to_owned(),
                ));
            };
            form.push(("client_id", client.client_id.clone()));
            form.push((
                "client_assertion_type",
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".to_owned(),
            ));
            form.push(("client_assertion", assertion));
        }
        // A client unknown there (an identity provider that asks for none) sends no id.
        _ if client.client_id.is_empty() => {}
        _ => form.push(("client_id", client.client_id.clone())),
    }
    let body = form_body(&form);
    let response = request
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .map_err(|e| failed(url, &e))?;
    let status = response.status();
    let body = read(url, response).await?;
    if !status.is_success() {
        let error: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        let code = error.get("error").and_then(|e| e.as_str()).unwrap_or("?");
        if code == "invalid_grant" {
            return Err(AuthError::InvalidGrant);
        }
        return Err(AuthError::Token(format!("HTTP {status}, error {code:?}")));
    }
    Ok(body)
}

/// `application/x-www-form-urlencoded` of `pairs`.
fn form_body(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_form_encoded() {
        assert_eq!(encode("a b&c=d/é"), "a+b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            form_body(&[
                ("grant_type", "authorization_code".into()),
                ("x", "1 2".into())
            ]),
            "grant_type=authorization_code&x=1+2"
        );
    }
}
