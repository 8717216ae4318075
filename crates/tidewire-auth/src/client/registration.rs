//! Who the client is at an authorization server: pre-registered, a Client ID Metadata
//! Document URL, or registered on the spot (RFC 7591), in that order.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::discovery::ServerMetadata;
use super::error::AuthError;
use super::http::{Http, failed, read};

/// How the client authenticates at the token endpoint (kept by its registered name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMethod {
    /// HTTP Basic with the id and secret.
    #[serde(rename = "client_secret_basic")]
    SecretBasic,
    /// The id and secret in the form.
    #[serde(rename = "client_secret_post")]
    SecretPost,
    /// A public client: the id only.
    #[serde(rename = "none")]
    None,
    /// A JWT signed with the client's private key (RFC 7523 §2.2), see
    /// `OAuthConfig::client_key` (feature `jwt`).
    #[serde(rename = "private_key_jwt")]
    PrivateKeyJwt,
}

impl AuthMethod {
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "client_secret_basic" => Some(Self::SecretBasic),
            "client_secret_post" => Some(Self::SecretPost),
            "none" => Some(Self::None),
            "private_key_jwt" => Some(Self::PrivateKeyJwt),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::SecretBasic => "client_secret_basic",
            Self::SecretPost => "client_secret_post",
            Self::None => "none",
            Self::PrivateKeyJwt => "private_key_jwt",
        }
    }
}

/// A client's credentials at one authorization server.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    /// The client id.
    pub client_id: String,
    /// The secret, for a confidential client.
    #[serde(default)]
    pub client_secret: Option<String>,
    /// How it authenticates at the token endpoint.
    pub method: AuthMethod,
}

/// The secret stays out of logs.
impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "…"))
            .field("method", &self.method)
            .finish()
    }
}

impl Credentials {
    /// Credentials given in advance; the method is chosen from what the server supports.
    pub fn pre_registered(client_id: impl Into<String>, client_secret: Option<String>) -> Self {
        Self {
            client_id: client_id.into(),
            method: if client_secret.is_some() {
                AuthMethod::SecretBasic
            } else {
                AuthMethod::None
            },
            client_secret,
        }
    }

    /// These credentials, authenticating with `method` (`private_key_jwt` for a client that
    /// signs its assertions).
    #[must_use]
    pub fn with_method(mut self, method: AuthMethod) -> Self {
        self.method = method;
        self
    }

    /// The method to use at `server`: this one if it supports it (or says nothing), else the
    /// first it supports that these credentials allow.
    pub(crate) fn fitted(mut self, server: &ServerMetadata) -> Self {
        let supported = &server.token_endpoint_auth_methods_supported;
        // A signing client has no secret to fall back on.
        if self.method == AuthMethod::PrivateKeyJwt
            || supported.is_empty()
            || supported.iter().any(|m| m == self.method.name())
        {
            return self;
        }
        let allowed: &[AuthMethod] = if self.client_secret.is_some() {
            &[
                AuthMethod::SecretBasic,
                AuthMethod::SecretPost,
                AuthMethod::None,
            ]
        } else {
            &[AuthMethod::None]
        };
        if let Some(method) = allowed
            .iter()
            .copied()
            .find(|m| supported.iter().any(|s| s == m.name()))
        {
            self.method = method;
        }
        self
    }
}

/// Registers the client at `server` (dynamic client registration).
pub(crate) async fn register(
    http: &Http,
    server: &ServerMetadata,
    client_name: &str,
    redirect_uri: &str,
) -> Result<Credentials, AuthError> {
    let Some(url) = &server.registration_endpoint else {
        return Err(AuthError::Unusable(
            "it offers no registration, and no client id was given for it".to_owned(),
        ));
    };
    let supported = &server.token_endpoint_auth_methods_supported;
    let method = [
        AuthMethod::SecretBasic,
        AuthMethod::SecretPost,
        AuthMethod::None,
    ]
    .into_iter()
    .find(|m| supported.iter().any(|s| s == m.name()))
    .unwrap_or(AuthMethod::SecretBasic);
    let body = json!({
        "client_name": client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method.name(),
        // A program on the user's machine with a loopback redirect.
        "application_type": "native",
    });
    let response = http
        .raw()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| failed(url, &e))?;
    let status = response.status();
    let body = read(url, response).await?;
    if !status.is_success() {
        return Err(AuthError::Unusable(format!(
            "registration answered HTTP {status}"
        )));
    }
    let answer: Value = serde_json::from_slice(&body)
        .map_err(|e| AuthError::Unusable(format!("registration answered no JSON: {e}")))?;
    let client_id = answer
        .get("client_id")
        .and_then(Value::as_str)
        .ok_or_else(|| AuthError::Unusable("registration answered no client_id".to_owned()))?;
    let client_secret = answer
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let method = answer
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
        .and_then(AuthMethod::from_name)
        .unwrap_or(if client_secret.is_some() {
            method
        } else {
            AuthMethod::None
        });
    Ok(Credentials {
        client_id: client_id.to_owned(),
        client_secret,
        method,
    })
}
