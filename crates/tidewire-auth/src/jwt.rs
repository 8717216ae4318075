//! [`JwtVerifier`]: access tokens that are JWTs, checked against the authorization server's
//! keys (a JWKS), its issuer, this resource as audience, and their expiry.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::lock::Mutex;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

use crate::verify::{TokenError, TokenVerifier, VerifiedToken};

/// The most keys kept from a key set.
const MAX_KEYS: usize = 64;
/// The largest key set read.
const MAX_JWKS: usize = 256 * 1024;
/// How long a fetched key set is used before it is fetched again.
const KEYS_FRESH: Duration = Duration::from_secs(300);
/// A token naming a key the set lacks fetches it again, at most this often (a flood of forged
/// key ids must not become a flood of fetches).
const REFETCH_EVERY: Duration = Duration::from_secs(30);

/// Checks JWT access tokens (RFC 9068) signed with the authorization server's keys:
/// - the signature, with an asymmetric algorithm (RS*, PS*, ES256/ES384, EdDSA) only, by the
///   key the token's `kid` names (HMAC and `none` are refused, so a public key cannot be
///   turned into a shared secret);
/// - `iss` exactly the issuer, `aud` naming this resource (RFC 8707: a token for another
///   resource is refused), `exp` in the future (a minute of clock skew), `sub` present;
/// - the scopes from `scope` (space-separated) or `scp` (an array).
///
/// Keys come from a fixed set, or from the server's `jwks_uri`, fetched when first needed,
/// again every five minutes, and again (at most every 30 s) when a token names an unknown key,
/// so a rotated key is picked up.
///
/// ```
/// use tidewire_auth::JwtVerifier;
///
/// let verifier = JwtVerifier::from_jwks_url(
///     "https://auth.example.com/.well-known/jwks.json",
///     "https://auth.example.com",
///     "https://mcp.example.com/mcp",
/// );
/// # let _ = verifier;
/// ```
#[derive(Debug)]
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    leeway: Duration,
    keys: Keys,
}

#[derive(Debug)]
enum Keys {
    Fixed(JwkSet),
    Remote {
        url: String,
        http: reqwest::Client,
        cache: Mutex<Cache>,
    },
}

#[derive(Debug, Default)]
struct Cache {
    set: Option<JwkSet>,
    fetched: Option<Instant>,
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
    exp: u64,
}

impl JwtVerifier {
    /// Tokens of `issuer` for the resource `audience`, signed by a key of `keys`.
    pub fn new(keys: JwkSet, issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            leeway: Duration::from_secs(60),
            keys: Keys::Fixed(bounded(keys)),
        }
    }

    /// Tokens of `issuer` for the resource `audience`, signed by a key of the set served at
    /// `jwks_url` (the authorization server's `jwks_uri`).
    pub fn from_jwks_url(
        jwks_url: impl Into<String>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        let http = crate::fetch::verifier_client();
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            leeway: Duration::from_secs(60),
            keys: Keys::Remote {
                url: jwks_url.into(),
                http,
                cache: Mutex::new(Cache::default()),
            },
        }
    }

    /// The clock skew allowed on `exp` and `nbf` (a minute unless set).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    async fn key(&self, kid: Option<&str>) -> Result<Jwk, TokenError> {
        let pick = |set: &JwkSet| match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let unknown = || TokenError::Invalid("no key of the set signed it".to_owned());
        let (url, http, cache) = match &self.keys {
            Keys::Fixed(set) => return pick(set).ok_or_else(unknown),
            Keys::Remote { url, http, cache } => (url, http, cache),
        };
        let mut cache = cache.lock().await;
        let age = cache.fetched.map(|at| at.elapsed());
        if let Some(set) = &cache.set
            && age.is_some_and(|a| a < KEYS_FRESH)
            && let Some(key) = pick(set)
        {
            return Ok(key);
        }
        if age.is_none_or(|a| a >= REFETCH_EVERY) {
            cache.fetched = Some(Instant::now());
            match fetch(http, url).await {
                Ok(set) => cache.set = Some(set),
                Err(reason) if cache.set.is_none() => {
                    cache.fetched = None;
                    return Err(TokenError::Unavailable(format!(
                        "the key set at {url}: {reason}"
                    )));
                }
                Err(reason) => {
                    tracing::warn!(%url, %reason, "the key set could not be fetched again")
                }
            }
        }
        cache.set.as_ref().and_then(pick).ok_or_else(unknown)
    }
}

fn bounded(mut set: JwkSet) -> JwkSet {
    set.keys.truncate(MAX_KEYS);
    set
}

async fn fetch(http: &reqwest::Client, url: &str) -> Result<JwkSet, String> {
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("HTTP {}", response.status()));
    }
    let body = crate::fetch::bounded(response, MAX_JWKS).await?;
    serde_json::from_slice(&body)
        .map(bounded)
        .map_err(|e| format!("not a key set: {e}"))
}

/// The asymmetric algorithms accepted.
const ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<VerifiedToken, TokenError>> {
        Box::pin(async move {
            let invalid = |e: jsonwebtoken::errors::Error| TokenError::Invalid(e.to_string());
            let header = jsonwebtoken::decode_header(token).map_err(invalid)?;
            if !ALGORITHMS.contains(&header.alg) {
                return Err(TokenError::Invalid(format!(
                    "algorithm {:?} is not accepted",
                    header.alg
                )));
            }
            let jwk = self.key(header.kid.as_deref()).await?;
            let key = DecodingKey::from_jwk(&jwk).map_err(invalid)?;
            let mut validation = Validation::new(header.alg);
            validation.set_issuer(&[&self.issuer]);
            validation.set_audience(&[&self.audience]);
            validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            validation.leeway = self.leeway.as_secs();
            // A token not yet valid is refused too (jsonwebtoken checks `nbf` only when asked).
            validation.validate_nbf = true;
            let data = jsonwebtoken::decode::<Claims>(token, &key, &validation).map_err(invalid)?;
            let claims = data.claims;
            let scopes = match (claims.scope, claims.scp) {
                (Some(scope), _) => scope.split_whitespace().map(str::to_owned).collect(),
                (None, Some(scp)) => scp,
                (None, None) => Vec::new(),
            };
            Ok(VerifiedToken {
                subject: claims.sub,
                scopes,
                expires_at: UNIX_EPOCH.checked_add(Duration::from_secs(claims.exp)),
            })
        })
    }
}

/// Seconds since the Unix epoch, now.
pub(crate) fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use jsonwebtoken::{EncodingKey, Header};
    use serde_json::json;

    use super::*;

    /// A P-256 key for these tests only (PKCS#8), and its public half as a JWK.
    const PRIVATE: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgh//vkZHSUmdY1g5B
AzTXokV6b3mAG3DlI0uCn+kSZ+GhRANCAATAtpbjeCkHDmNqHMlDrZ96d9qPEZGK
Jr/U5QzI+SSQMl2j6B94cKaUu91JVo1OcK25U//w2JYcn7syOr6kDdOx
-----END PRIVATE KEY-----";

    fn keys() -> JwkSet {
        serde_json::from_value(json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256", "use": "sig",
            "x": "wLaW43gpBw5jahzJQ62fenfajxGRiia_1OUMyPkkkDI",
            "y": "XaPoH3hwppS73UlWjU5wrblT__DYlhyfuzI6vqQN07E"
        }]}))
        .expect("a key set")
    }

    fn sign(claims: serde_json::Value, kid: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        let key = EncodingKey::from_ec_pem(PRIVATE.as_bytes()).expect("key");
        jsonwebtoken::encode(&header, &claims, &key).expect("signed")
    }

    fn claims() -> serde_json::Value {
        json!({"iss": "https://as.test", "aud": "https://mcp.test/mcp", "sub": "alice",
               "scope": "mcp:read mcp:write", "exp": now() + 300})
    }

    #[tokio::test]
    async fn a_signed_token_for_this_resource_passes_and_any_other_is_refused() {
        let verifier = JwtVerifier::new(keys(), "https://as.test", "https://mcp.test/mcp");
        let verified = verifier.verify(&sign(claims(), "k1")).await.expect("valid");
        assert_eq!(verified.subject, "alice");
        assert_eq!(verified.scopes, ["mcp:read", "mcp:write"]);
        let with = |key: &str, value: serde_json::Value| {
            let mut c = claims();
            c[key] = value;
            sign(c, "k1")
        };
        let refused = [
            with("aud", json!("https://other.test/mcp")),
            with("iss", json!("https://evil.test")),
            with("exp", json!(now() - 3600)),
            // Issue 26, item 5: `nbf` was not checked, though the leeway was said to cover it.
            with("nbf", json!(now() + 3600)),
            sign(claims(), "unknown-kid"),
            format!("{}x", sign(claims(), "k1")),
            "not a jwt".to_owned(),
        ];
        for token in refused {
            assert!(
                matches!(verifier.verify(&token).await, Err(TokenError::Invalid(_))),
                "{token}"
            );
        }
        // A token "signed" with HMAC using the public key as the secret is refused outright.
        let hs = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(),
            &EncodingKey::from_secret(b"wLaW43gpBw5jahzJQ62fenfajxGRiia_1OUMyPkkkDI").expect("key"),
        )
        .expect("signed");
        assert!(matches!(
            verifier.verify(&hs).await,
            Err(TokenError::Invalid(_))
        ));
    }

    #[tokio::test]
    async fn an_unreachable_key_set_makes_tokens_undecidable_not_invalid() {
        let verifier = JwtVerifier::from_jwks_url(
            "http://127.0.0.1:9/jwks",
            "https://as.test",
            "https://mcp.test/mcp",
        );
        assert!(matches!(
            verifier.verify(&sign(claims(), "k1")).await,
            Err(TokenError::Unavailable(_))
        ));
    }
}
