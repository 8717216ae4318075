//! [`JwtVerifier`]: access tokens that are JWTs, checked against the authorization server's
//! keys (a JWKS), its issuer, this resource as audience, and their expiry.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
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
/// While no key set could be fetched yet, it is tried again at most this often (the tokens
/// meanwhile are undecidable: 503, not 401).
const RETRY_WITHOUT_KEYS: Duration = Duration::from_secs(1);

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
    fresh_for: Duration,
    keys: Keys,
}

#[derive(Debug)]
enum Keys {
    Fixed(JwkSet),
    Remote(Arc<Remote>),
}

/// A key set fetched from a URL. The cache's lock is held only to read or replace the set,
/// never across a fetch; fetches are single-flight (`flight`), and while one runs every
/// verification goes on with the keys already there.
#[derive(Debug)]
struct Remote {
    url: String,
    http: reqwest::Client,
    cache: std::sync::Mutex<Cache>,
    flight: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Cache {
    set: Option<Arc<JwkSet>>,
    /// When the last fetch started (answered or not): fetches are spaced by it.
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
            fresh_for: KEYS_FRESH,
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
            fresh_for: KEYS_FRESH,
            keys: Keys::Remote(Arc::new(Remote {
                url: jwks_url.into(),
                http,
                cache: std::sync::Mutex::new(Cache::default()),
                flight: tokio::sync::Mutex::new(()),
            })),
        }
    }

    /// The clock skew allowed on `exp` and `nbf` (a minute unless set).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// How long a fetched key set is used before it is fetched again (five minutes unless
    /// set). The refresh runs beside the verifications, which go on with the keys they have.
    #[must_use]
    pub fn refresh_every(mut self, every: Duration) -> Self {
        self.fresh_for = every;
        self
    }

    async fn key(&self, kid: Option<&str>) -> Result<Jwk, TokenError> {
        let pick = |set: &JwkSet| match kid {
            Some(kid) => set.find(kid).cloned(),
            None if set.keys.len() == 1 => set.keys.first().cloned(),
            None => None,
        };
        let unknown = || TokenError::Invalid("no key of the set signed it".to_owned());
        let remote = match &self.keys {
            Keys::Fixed(set) => return pick(set).ok_or_else(unknown),
            Keys::Remote(remote) => remote,
        };
        let (set, fetched) = remote.look();
        let age = fetched.map(|at| at.elapsed());
        if let Some(key) = set.as_deref().and_then(pick) {
            if age.is_some_and(|a| a >= self.fresh_for) {
                // Stale but still holding the key: verified with it now, refreshed meanwhile.
                Remote::refresh_in_background(remote);
            }
            return Ok(key);
        }
        // No set yet (wait for the fetch in flight, or make one), or a key it lacks (rotated
        // in, or forged): fetch again, spaced out.
        if set.is_none() || age.is_none_or(|a| a >= REFETCH_EVERY) {
            remote.refresh(fetched, set.is_some()).await;
        }
        match remote.look().0 {
            Some(set) => pick(&set).ok_or_else(unknown),
            None => Err(TokenError::Unavailable(format!(
                "the key set at {} could not be fetched",
                remote.url
            ))),
        }
    }
}

impl Remote {
    /// The set held now, and when the last fetch started.
    fn look(&self) -> (Option<Arc<JwkSet>>, Option<Instant>) {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        (cache.set.clone(), cache.fetched)
    }

    /// Fetches the set unless another fetch started after `seen`, or finished since
    /// `saw_set` (single flight: the callers that queue behind a fetch take its result).
    async fn refresh(&self, seen: Option<Instant>, saw_set: bool) {
        let _flight = self.flight.lock().await;
        let (set, fetched) = self.look();
        if (fetched.is_some() && fetched != seen) || (!saw_set && set.is_some()) {
            return;
        }
        if set.is_none() && fetched.is_some_and(|at| at.elapsed() < RETRY_WITHOUT_KEYS) {
            return;
        }
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .fetched = Some(Instant::now());
        let fetched = fetch(&self.http, &self.url).await;
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match fetched {
            Ok(set) => cache.set = Some(Arc::new(set)),
            Err(reason) if cache.set.is_none() => {
                tracing::warn!(url = %self.url, %reason, "the key set could not be fetched");
            }
            Err(reason) => {
                tracing::warn!(url = %self.url, %reason, "the key set could not be fetched again");
            }
        }
    }

    /// A refresh of a stale set in a task of its own, unless one is running.
    fn refresh_in_background(remote: &Arc<Self>) {
        if remote.flight.try_lock().is_err() {
            return;
        }
        let remote = remote.clone();
        let (set, fetched) = remote.look();
        tokio::spawn(async move { remote.refresh(fetched, set.is_some()).await });
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
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
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
                &EncodingKey::from_secret(b"wLaW43gpBw5jahzJQ62fenfajxGRiia_1OUMyPkkkDI")
                    .expect("key"),
            )
            .expect("signed");
            assert!(matches!(
                verifier.verify(&hs).await,
                Err(TokenError::Invalid(_))
            ));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// A key set server that counts its fetches and answers only while `open` has permits.
    async fn key_server(
        open: Arc<tokio::sync::Semaphore>,
    ) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/jwks", listener.local_addr().expect("address"));
        let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = fetches.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let (open, counted) = (open.clone(), counted.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buffer[..n]),
                        }
                    }
                    counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Ok(_permit) = open.acquire().await else {
                        return;
                    };
                    let body = serde_json::to_string(&keys()).expect("JSON");
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        (url, fetches)
    }

    /// Issue 26, item 5: the key set's lock was held across a fetch of up to 10 s, so every
    /// verification waited on it. Now the first fetch is single-flight, and a refresh runs
    /// beside the verifications, which go on with the keys they have.
    #[tokio::test]
    async fn a_refresh_is_single_flight_and_verifications_do_not_wait_for_it() {
        use std::sync::atomic::Ordering;
        tokio::time::timeout(Duration::from_secs(30), async {
            let open = Arc::new(tokio::sync::Semaphore::new(0));
            let (url, fetches) = key_server(open.clone()).await;
            let verifier = Arc::new(JwtVerifier::from_jwks_url(
                url,
                "https://as.test",
                "https://mcp.test/mcp",
            ));
            // The first fetch: eight verifications wait on one fetch.
            let waiting: Vec<_> = (0..8)
                .map(|_| {
                    let verifier = verifier.clone();
                    tokio::spawn(async move { verifier.verify(&sign(claims(), "k1")).await })
                })
                .collect();
            while fetches.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
            open.add_permits(1);
            for verified in waiting {
                assert!(verified.await.expect("joined").is_ok());
            }
            assert_eq!(fetches.load(Ordering::SeqCst), 1, "one fetch for all eight");

            // Stale at once (refresh_every 0): a verification starts a refresh unless one runs;
            // the key server answers the first fetch, then holds its answers, and verifications
            // go on with the keys they have.
            let open = Arc::new(tokio::sync::Semaphore::new(1));
            let (url, fetches) = key_server(open.clone()).await;
            let verifier =
                JwtVerifier::from_jwks_url(url, "https://as.test", "https://mcp.test/mcp")
                    .refresh_every(Duration::ZERO);
            assert!(verifier.verify(&sign(claims(), "k1")).await.is_ok());
            for _ in 0..5 {
                assert!(verifier.verify(&sign(claims(), "k1")).await.is_ok());
            }
            while fetches.load(Ordering::SeqCst) < 2 {
                tokio::task::yield_now().await;
            }
            assert!(verifier.verify(&sign(claims(), "k1")).await.is_ok());
            assert_eq!(
                fetches.load(Ordering::SeqCst),
                2,
                "one refresh in flight at a time"
            );
            open.add_permits(100);
        })
        .await
        .expect("no verification waited on the held refresh");
    }

    #[tokio::test]
    async fn an_unreachable_key_set_makes_tokens_undecidable_not_invalid() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let verifier = JwtVerifier::from_jwks_url(
                "http://127.0.0.1:9/jwks",
                "https://as.test",
                "https://mcp.test/mcp",
            );
            assert!(matches!(
                verifier.verify(&sign(claims(), "k1")).await,
                Err(TokenError::Unavailable(_))
            ));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
