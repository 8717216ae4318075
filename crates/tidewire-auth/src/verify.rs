//! Who an access token acts for: the [`TokenVerifier`] seam, and [`StaticTokens`].

use std::collections::HashMap;
use std::time::SystemTime;

use futures::future::BoxFuture;

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    /// Who it acts for (the `sub` claim, a client id, …): becomes the request's
    /// [`Principal`](tidewire_core::transport::Principal).
    pub subject: String,
    /// The scopes it grants.
    pub scopes: Vec<String>,
    /// When it stops being valid, if it says.
    pub expires_at: Option<SystemTime>,
}

impl VerifiedToken {
    /// A token for `subject` with `scopes`, with no expiry.
    pub fn new(
        subject: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            subject: subject.into(),
            scopes: scopes.into_iter().map(Into::into).collect(),
            expires_at: None,
        }
    }

    /// Whether it grants `scope`.
    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Unknown, expired, revoked, for another audience, badly signed: the client should get a
    /// new one (401 `invalid_token`). The reason goes to the log, not to the client.
    #[error("the access token is not valid: {0}")]
    Invalid(String),
    /// The verifier could not decide (its key set or introspection endpoint is unreachable):
    /// 503, so the client retries rather than re-authorizing.
    #[error("the access token could not be checked: {0}")]
    Unavailable(String),
}

/// Checks an access token. Implementations: JWTs against a key set, token introspection
/// (RFC 7662), or [`StaticTokens`].
pub trait TokenVerifier: Send + Sync + 'static {
    /// Who `token` acts for and what it grants, or why it is refused.
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<VerifiedToken, TokenError>>;
}

/// Tokens known in advance, each with what it grants (tests, development, a fixed service
/// token). Expired ones are refused.
#[derive(Debug, Clone, Default)]
pub struct StaticTokens {
    tokens: HashMap<String, VerifiedToken>,
}

impl StaticTokens {
    /// No tokens yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `token` as `verified`.
    #[must_use]
    pub fn with(mut self, token: impl Into<String>, verified: VerifiedToken) -> Self {
        self.tokens.insert(token.into(), verified);
        self
    }
}

impl TokenVerifier for StaticTokens {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        let found = match self.tokens.get(token) {
            None => Err(TokenError::Invalid("unknown token".to_owned())),
            Some(t) if t.expires_at.is_some_and(|at| at <= SystemTime::now()) => {
                Err(TokenError::Invalid("expired".to_owned()))
            }
            Some(t) => Ok(t.clone()),
        };
        Box::pin(futures::future::ready(found))
    }
}
