//! Signed client assertions (RFC 7523 §2.2, `private_key_jwt`): the client proves who it is
//! at the token endpoint with a short-lived JWT signed by its own key (feature `jwt`).

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use super::error::AuthError;

/// How long an assertion is valid.
const LIFETIME_SECS: u64 = 300;

/// A client's private signing key, and the algorithm it signs with.
#[derive(Clone)]
pub struct ClientKey {
    key: EncodingKey,
    algorithm: Algorithm,
    key_id: Option<String>,
}

/// The key stays out of logs.
impl std::fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientKey")
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

impl ClientKey {
    /// A key from its PEM (PKCS#8 for EC and Ed25519, PKCS#1 or PKCS#8 for RSA) that signs
    /// with `algorithm`: ES256, ES384, RS256, RS384, RS512, PS256, PS384, PS512 or EdDSA.
    ///
    /// # Errors
    /// [`AuthError::Unusable`] for another algorithm, or a PEM that is not a key of its kind.
    pub fn from_pem(pem: &[u8], algorithm: &str) -> Result<Self, AuthError> {
        let unusable = |e: jsonwebtoken::errors::Error| {
            AuthError::Unusable(format!("the client's signing key: {e}"))
        };
        let algorithm: Algorithm = algorithm
            .parse()
            .map_err(|_| AuthError::Unusable(format!("unknown algorithm {algorithm:?}")))?;
        let key = match algorithm {
            Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem),
            Algorithm::EdDSA => EncodingKey::from_ed_pem(pem),
            Algorithm::RS256
            | Algorithm::RS384
            | Algorithm::RS512
            | Algorithm::PS256
            | Algorithm::PS384
            | Algorithm::PS512 => EncodingKey::from_rsa_pem(pem),
            _ => {
                return Err(AuthError::Unusable(format!(
                    "{algorithm:?} is not a signature algorithm for client assertions"
                )));
            }
        }
        .map_err(unusable)?;
        Ok(Self {
            key,
            algorithm,
            key_id: None,
        })
    }

    /// Names the key (`kid`) in each assertion's header.
    #[must_use]
    pub fn key_id(mut self, kid: impl Into<String>) -> Self {
        self.key_id = Some(kid.into());
        self
    }

    /// An assertion by `client_id` for the authorization server `audience` (its issuer
    /// identifier): `iss` = `sub` = the client, `aud`, `iat`, `exp` five minutes on, a random
    /// `jti`.
    pub(crate) fn sign(&self, client_id: &str, audience: &str) -> Result<String, AuthError> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = json!({
            "iss": client_id,
            "sub": client_id,
            "aud": audience,
            "iat": now,
            "exp": now + LIFETIME_SECS,
            "jti": super::flow::random()?,
        });
        let mut header = Header::new(self.algorithm);
        header.kid.clone_from(&self.key_id);
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| AuthError::Unusable(format!("signing the client assertion: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{DecodingKey, Validation};

    use super::*;

    /// A P-256 key for this test only, and its public point.
    const PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgh//vkZHSUmdY1g5B
AzTXokV6b3mAG3DlI0uCn+kSZ+GhRANCAATAtpbjeCkHDmNqHMlDrZ96d9qPEZGK
Jr/U5QzI+SSQMl2j6B94cKaUu91JVo1OcK25U//w2JYcn7syOr6kDdOx
-----END PRIVATE KEY-----";

    #[test]
    fn an_assertion_names_the_client_and_the_server_and_verifies_with_the_public_key() {
        let key = ClientKey::from_pem(PRIVATE.as_bytes(), "ES256")
            .expect("key")
            .key_id("k1");
        let jwt = key.sign("my-client", "https://as.test").expect("signed");
        let public = DecodingKey::from_ec_components(
            "wLaW43gpBw5jahzJQ62fenfajxGRiia_1OUMyPkkkDI",
            "XaPoH3hwppS73UlWjU5wrblT__DYlhyfuzI6vqQN07E",
        )
        .expect("public key");
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_audience(&["https://as.test"]);
        let claims = jsonwebtoken::decode::<serde_json::Value>(&jwt, &public, &validation)
            .expect("verifies")
            .claims;
        assert_eq!(
            (claims["iss"].as_str(), claims["sub"].as_str()),
            (Some("my-client"), Some("my-client"))
        );
        assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 32));
        assert_eq!(
            jsonwebtoken::decode_header(&jwt)
                .expect("header")
                .kid
                .as_deref(),
            Some("k1")
        );
        assert!(ClientKey::from_pem(PRIVATE.as_bytes(), "HS256").is_err());
        assert!(ClientKey::from_pem(b"not a key", "ES256").is_err());
    }
}
