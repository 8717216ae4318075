//! An access token, as a token endpoint answers it.

use std::time::{Duration, Instant};

use serde::Deserialize;

use super::error::AuthError;

/// What the token endpoint granted.
#[derive(Clone, PartialEq, Eq)]
pub struct Token {
    /// The access token: sent as `Authorization: Bearer …`, never in a URL, never logged.
    pub access_token: String,
    /// The token type (`Bearer`).
    pub token_type: String,
    /// When it expires, if the server said.
    pub expires_at: Option<Instant>,
    /// A refresh token, if one was granted.
    pub refresh_token: Option<String>,
    /// The scopes granted, if the server said.
    pub scope: Option<String>,
}

/// The token itself stays out of logs.
impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Token")
            .field("token_type", &self.token_type)
            .field("expires_at", &self.expires_at)
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "…"))
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Wire {
    access_token: String,
    token_type: String,
    expires_in: Option<u64>,
    refresh_token: Option<String>,
    scope: Option<String>,
}

impl Token {
    pub(crate) fn from_response(body: &[u8]) -> Result<Self, AuthError> {
        let wire: Wire = serde_json::from_slice(body)
            .map_err(|e| AuthError::Token(format!("the answer is not a token: {e}")))?;
        if wire.access_token.is_empty() {
            return Err(AuthError::Token("an empty access token".to_owned()));
        }
        Ok(Self {
            access_token: wire.access_token,
            token_type: wire.token_type,
            expires_at: wire
                .expires_in
                .and_then(|s| Instant::now().checked_add(Duration::from_secs(s))),
            refresh_token: wire.refresh_token,
            scope: wire.scope,
        })
    }
}
