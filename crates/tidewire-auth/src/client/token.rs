//! An access token as a token endpoint answers it, and the [`Grant`] that keeps it usable:
//! where, as whom and for which resource to refresh it.

use std::time::{Duration, SystemTime};

use http::HeaderValue;
use serde::{Deserialize, Serialize};

use super::error::AuthError;
use super::registration::Credentials;

/// What the token endpoint granted.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Token {
    /// The access token: sent as `Authorization: Bearer …`, never in a URL, never logged.
    pub access_token: String,
    /// The token type (`Bearer`).
    pub token_type: String,
    /// When it expires, if the server said (kept as seconds since the Unix epoch).
    #[serde(default, with = "unix_seconds")]
    pub expires_at: Option<SystemTime>,
    /// A refresh token, if one was granted.
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// The scopes granted, if the server said.
    #[serde(default)]
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
                .and_then(|s| SystemTime::now().checked_add(Duration::from_secs(s))),
            refresh_token: wire.refresh_token,
            scope: wire.scope,
        })
    }

    /// Whether it expires within `margin` from now (never, when the server gave no expiry).
    pub fn expires_within(&self, margin: Duration) -> bool {
        self.expires_at
            .is_some_and(|at| SystemTime::now() + margin >= at)
    }

    /// The `Authorization` header that presents it, marked sensitive (`None` when the token
    /// holds bytes a header cannot carry).
    pub fn header(&self) -> Option<HeaderValue> {
        let mut value = HeaderValue::from_str(&format!("Bearer {}", self.access_token)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

/// One MCP endpoint's access: its token, and what refreshing it takes (the authorization
/// server, the client's credentials there, the RFC 8707 resource). A [`TokenStore`] keeps
/// these.
///
/// [`TokenStore`]: super::TokenStore
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Grant {
    /// The authorization server that issued it.
    pub issuer: String,
    /// Its token endpoint, where the token is refreshed.
    pub token_endpoint: String,
    /// The client's credentials there.
    pub client: Credentials,
    /// The resource the token is for (RFC 8707), sent again on refresh.
    #[serde(default)]
    pub resource: Option<String>,
    /// The token.
    pub token: Token,
}

/// `Option<SystemTime>` as whole seconds since the Unix epoch.
mod unix_seconds {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        at: &Option<SystemTime>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match at.and_then(|at| at.duration_since(UNIX_EPOCH).ok()) {
            Some(since) => serializer.serialize_some(&since.as_secs()),
            None => serializer.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<SystemTime>, D::Error> {
        let seconds = Option::<u64>::deserialize(deserializer)?;
        Ok(seconds.and_then(|s| UNIX_EPOCH.checked_add(Duration::from_secs(s))))
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    #[test]
    fn a_token_keeps_its_expiry_to_the_second_and_knows_when_it_is_due() {
        let token = Token::from_response(
            br#"{"access_token":"a","token_type":"Bearer","expires_in":60,"refresh_token":"r"}"#,
        )
        .expect("token");
        assert!(!token.expires_within(Duration::from_secs(30)));
        assert!(token.expires_within(Duration::from_secs(61)));
        let json = serde_json::to_string(&token).expect("json");
        let back: Token = serde_json::from_str(&json).expect("back");
        let secs = |t: &Token| {
            t.expires_at
                .and_then(|at| at.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_secs())
        };
        assert_eq!(secs(&back), secs(&token));
        assert_eq!(back.refresh_token.as_deref(), Some("r"));
        assert!(!format!("{token:?}").contains("\"a\""), "no token in Debug");
        assert!(Token::from_response(br#"{"access_token":"","token_type":"Bearer"}"#).is_err());
    }
}
