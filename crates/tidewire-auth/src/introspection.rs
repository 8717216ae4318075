//! [`Introspection`]: asking the authorization server about each token (RFC 7662), so a
//! revoked token is refused at once.

use std::time::{Duration, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::future::BoxFuture;
use serde::Deserialize;

use crate::fetch::form_encode;
use crate::verify::{TokenError, TokenVerifier, VerifiedToken};

/// The largest introspection answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// Checks each token at the authorization server's introspection endpoint (RFC 7662),
/// authenticating as a client (HTTP Basic). A token is valid when the answer says `active`,
/// it has not expired, and — when an audience is set — its `aud` names this resource. Its
/// subject is `sub`, else `username`, else `client_id`; its scopes are `scope`.
///
/// Nothing is cached: a token revoked at the server is refused on its next request. An
/// endpoint that cannot be reached, or answers an error, makes the request 503 (the client
/// retries), not 401.
#[derive(Debug)]
pub struct Introspection {
    endpoint: String,
    authorization: String,
    audience: Option<String>,
    http: reqwest::Client,
}

#[derive(Deserialize)]
struct Answer {
    active: bool,
    #[serde(default)]
    sub: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    exp: Option<u64>,
    #[serde(default)]
    aud: Option<Audience>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Introspection {
    /// Asks `endpoint`, as the client `client_id` with `client_secret`.
    pub fn new(endpoint: impl Into<String>, client_id: &str, client_secret: &str) -> Self {
        let http = crate::fetch::verifier_client();
        Self {
            endpoint: endpoint.into(),
            authorization: format!(
                "Basic {}",
                STANDARD.encode(format!(
                    "{}:{}",
                    form_encode(client_id),
                    form_encode(client_secret)
                ))
            ),
            audience: None,
            http,
        }
    }

    /// Refuses tokens whose `aud` does not name `audience` (this resource). Tokens without
    /// `aud` are refused too.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    async fn ask(&self, token: &str) -> Result<Answer, TokenError> {
        let unavailable =
            |reason: String| TokenError::Unavailable(format!("{}: {reason}", self.endpoint));
        let form = format!("token={}&token_type_hint=access_token", form_encode(token));
        let response = self
            .http
            .post(&self.endpoint)
            .header("authorization", &self.authorization)
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| unavailable(e.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        let body = crate::fetch::bounded(response, MAX_ANSWER)
            .await
            .map_err(unavailable)?;
        serde_json::from_slice(&body).map_err(|e| unavailable(format!("not an answer: {e}")))
    }
}

impl TokenVerifier for Introspection {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        Box::pin(async move {
            let answer = self.ask(token).await?;
            if !answer.active {
                return Err(TokenError::Invalid("not active".to_owned()));
            }
            if answer.exp.is_some_and(|exp| exp <= crate::jwt::now()) {
                return Err(TokenError::Invalid("expired".to_owned()));
            }
            if let Some(audience) = &self.audience {
                let named = match &answer.aud {
                    Some(Audience::One(aud)) => aud == audience,
                    Some(Audience::Many(auds)) => auds.iter().any(|a| a == audience),
                    None => false,
                };
                if !named {
                    return Err(TokenError::Invalid("for another resource".to_owned()));
                }
            }
            let subject = answer
                .sub
                .or(answer.username)
                .or(answer.client_id)
                .ok_or_else(|| TokenError::Invalid("no subject".to_owned()))?;
            Ok(VerifiedToken {
                subject,
                scopes: answer
                    .scope
                    .map(|s| s.split_whitespace().map(str::to_owned).collect())
                    .unwrap_or_default(),
                expires_at: answer
                    .exp
                    .and_then(|exp| UNIX_EPOCH.checked_add(Duration::from_secs(exp))),
            })
        })
    }
}
