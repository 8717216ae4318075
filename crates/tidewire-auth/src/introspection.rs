//! [`Introspection`]: asking the authorization server about each token (RFC 7662), so a
//! revoked token is refused at once.

use std::collections::HashMap;
use std::time::{Duration, Instant, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use futures::future::BoxFuture;
use serde::Deserialize;
use sha2::Digest as _;

use crate::fetch::form_encode;
use crate::verify::{TokenError, TokenVerifier, VerifiedToken};

/// The largest introspection answer read.
const MAX_ANSWER: usize = 64 * 1024;
/// How long an answer is kept unless [`Introspection::cache`] says: a token revoked at the
/// server is refused here within this long.
pub const DEFAULT_ANSWER_CACHE: Duration = Duration::from_secs(30);
/// How many answers are kept at most unless [`Introspection::cache`] says.
pub const DEFAULT_CACHED_ANSWERS: usize = 10_000;

/// The subject of a token with `username` and no `sub`: this prefix, then the username.
const USERNAME_PREFIX: &str = "username:";
/// The subject of a token with only `client_id`: this prefix, then the client id.
const CLIENT_PREFIX: &str = "client:";
/// Written before a `sub` that begins with one of the prefixes (this one included).
const SUB_PREFIX: &str = "sub:";

/// The subject for a token's `sub`: the `sub` itself, unless it begins like a subject taken
/// from another claim (`username:`, `client:`) or like an escaped one (`sub:`); then `sub:`
/// and the `sub`. So no `sub` can pass for a username or a client id, and every claim keeps
/// its own subjects.
fn subject_of_sub(sub: String) -> String {
    if [USERNAME_PREFIX, CLIENT_PREFIX, SUB_PREFIX]
        .iter()
        .any(|prefix| sub.starts_with(prefix))
    {
        format!("{SUB_PREFIX}{sub}")
    } else {
        sub
    }
}

/// Checks each token at the authorization server's introspection endpoint (RFC 7662),
/// authenticating as a client (HTTP Basic). A token is valid when the answer says `active`,
/// it has not expired, and — when an audience is set — its `aud` names this resource. Its
/// subject is `sub`; a token without one acts for `username:<username>`, else
/// `client:<client_id>`, and a `sub` that itself begins `username:`, `client:` or `sub:` is
/// written `sub:<sub>`, so the three namespaces never meet (a user named like another's `sub`
/// is not that principal, nor a `sub` spelled like a username's subject). Its scopes are
/// `scope`.
///
/// Answers are kept, by a digest of the token, for [`DEFAULT_ANSWER_CACHE`] (a valid one no
/// longer than the token's `exp`), at most [`DEFAULT_CACHED_ANSWERS`] of them:
/// [`cache`](Self::cache) changes both, and a zero time turns the cache off. A token revoked at
/// the server is thus refused within that time. An endpoint that cannot be reached, or answers
/// an error, makes the request 503 (the client retries), not 401; such an answer is not kept.
#[derive(Debug)]
pub struct Introspection {
    endpoint: String,
    authorization: String,
    audience: Option<String>,
    http: reqwest::Client,
    cache: std::sync::Mutex<AnswerCache>,
}

/// Answers kept by the digest of their token.
#[derive(Debug)]
struct AnswerCache {
    keep_for: Duration,
    max: usize,
    answers: HashMap<[u8; 32], Kept>,
}

#[derive(Debug)]
struct Kept {
    verdict: Result<VerifiedToken, String>,
    until: Instant,
}

impl AnswerCache {
    fn get(&mut self, key: &[u8; 32]) -> Option<Result<VerifiedToken, TokenError>> {
        let kept = self.answers.get(key)?;
        if kept.until <= Instant::now() {
            self.answers.remove(key);
            return None;
        }
        Some(kept.verdict.clone().map_err(TokenError::Invalid))
    }

    fn keep(&mut self, key: [u8; 32], verdict: &Result<VerifiedToken, TokenError>) {
        let verdict = match verdict {
            Ok(token) => Ok(token.clone()),
            Err(TokenError::Invalid(reason)) => Err(reason.clone()),
            // Not an answer about the token: asked again next time.
            Err(TokenError::Unavailable(_)) => return,
        };
        let now = Instant::now();
        let mut until = now + self.keep_for;
        if let Ok(token) = &verdict
            && let Some(expires) = token.expires_at
        {
            let left = expires
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            until = until.min(now + left);
        }
        if until <= now || self.max == 0 {
            return;
        }
        if self.answers.len() >= self.max {
            self.answers.retain(|_, kept| kept.until > now);
        }
        if self.answers.len() >= self.max {
            // Full of live answers: the one that would go first makes room.
            let soonest = self
                .answers
                .iter()
                .min_by_key(|(_, kept)| kept.until)
                .map(|(key, _)| *key);
            if let Some(soonest) = soonest {
                self.answers.remove(&soonest);
            }
        }
        self.answers.insert(key, Kept { verdict, until });
    }
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
            cache: std::sync::Mutex::new(AnswerCache {
                keep_for: DEFAULT_ANSWER_CACHE,
                max: DEFAULT_CACHED_ANSWERS,
                answers: HashMap::new(),
            }),
        }
    }

    /// Keeps answers for `keep_for` (a valid one no longer than its token's `exp`), at most
    /// `max_answers` of them; `Duration::ZERO` asks the endpoint about every request.
    #[must_use]
    pub fn cache(self, keep_for: Duration, max_answers: usize) -> Self {
        {
            let mut cache = self
                .cache
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.keep_for = keep_for;
            cache.max = max_answers;
            cache.answers.clear();
        }
        self
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
            let key: [u8; 32] = sha2::Sha256::digest(token.as_bytes()).into();
            if let Some(kept) = self.lock_cache().get(&key) {
                return kept;
            }
            let verdict = self.decide(token).await;
            self.lock_cache().keep(key, &verdict);
            verdict
        })
    }
}

impl Introspection {
    fn lock_cache(&self) -> std::sync::MutexGuard<'_, AnswerCache> {
        self.cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What the endpoint's answer about `token` means.
    async fn decide(&self, token: &str) -> Result<VerifiedToken, TokenError> {
        {
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
            let subject = match (answer.sub, answer.username, answer.client_id) {
                (Some(sub), _, _) => subject_of_sub(sub),
                (None, Some(username), _) => format!("{USERNAME_PREFIX}{username}"),
                (None, None, Some(client)) => format!("{CLIENT_PREFIX}{client}"),
                (None, None, None) => return Err(TokenError::Invalid("no subject".to_owned())),
            };
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
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// An introspection endpoint answering `answer(token)` (JSON), counting the questions.
    async fn endpoint(answer: fn(&str) -> String) -> (String, Arc<AtomicUsize>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!(
            "http://{}/introspect",
            listener.local_addr().expect("address")
        );
        let asked = Arc::new(AtomicUsize::new(0));
        let counted = asked.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // The head, then the form (its length from the head).
                while let Ok(n) = stream.read(&mut buffer).await {
                    request.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    let complete = text.split_once("\r\n\r\n").is_some_and(|(head, body)| {
                        let length = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        body.len() >= length
                    });
                    if complete || n == 0 {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&request).to_string();
                let token = text
                    .rsplit("\r\n\r\n")
                    .next()
                    .and_then(|form| form.split('&').find_map(|p| p.strip_prefix("token=")))
                    .unwrap_or_default()
                    .to_owned();
                let body = answer(&token);
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            }
        });
        (url, asked)
    }

    fn answers(token: &str) -> String {
        let exp = crate::jwt::now() + 3600;
        match token {
            "by-sub" => format!(r#"{{"active":true,"sub":"alice","scope":"a b","exp":{exp}}}"#),
            "by-username" => format!(r#"{{"active":true,"username":"alice","exp":{exp}}}"#),
            "by-client" => format!(r#"{{"active":true,"client_id":"alice","exp":{exp}}}"#),
            "sub-like-username" => {
                format!(r#"{{"active":true,"sub":"username:alice","exp":{exp}}}"#)
            }
            "sub-like-escaped" => format!(r#"{{"active":true,"sub":"sub:x","exp":{exp}}}"#),
            _ => r#"{"active":false}"#.to_owned(),
        }
    }

    /// Issue 26, item 5: each request asked the endpoint (nothing cached, nothing bounded), and
    /// `sub`, `username` and `client_id` shared one namespace.
    #[tokio::test]
    async fn answers_are_kept_for_a_while_bounded_and_subjects_keep_their_namespace() {
        tokio::time::timeout(Duration::from_secs(30), async {
            let (url, asked) = endpoint(answers).await;
            let introspection = Introspection::new(url, "rs", "secret");
            for _ in 0..3 {
                let verified = introspection.verify("by-sub").await.expect("active");
                assert_eq!(verified.subject, "alice");
                assert_eq!(verified.scopes, ["a", "b"]);
                assert!(matches!(
                    introspection.verify("revoked").await,
                    Err(TokenError::Invalid(_))
                ));
            }
            assert_eq!(
                asked.load(Ordering::SeqCst),
                2,
                "each answer asked for once"
            );
            let username = introspection.verify("by-username").await.expect("active");
            let client = introspection.verify("by-client").await.expect("active");
            assert_eq!(username.subject, "username:alice");
            assert_eq!(client.subject, "client:alice");
            // A `sub` spelled like another claim's subject keeps to its own namespace.
            let spelled = introspection
                .verify("sub-like-username")
                .await
                .expect("active");
            assert_eq!(spelled.subject, "sub:username:alice");
            assert_ne!(spelled.subject, username.subject);
            let escaped = introspection
                .verify("sub-like-escaped")
                .await
                .expect("active");
            assert_eq!(escaped.subject, "sub:sub:x");

            // Bounded: two answers at most, the one due first makes room.
            let (url, asked) = endpoint(answers).await;
            let small = Introspection::new(url, "rs", "secret").cache(Duration::from_secs(60), 2);
            for token in ["by-sub", "by-username", "by-client", "by-client"] {
                small.verify(token).await.expect("active");
            }
            assert_eq!(asked.load(Ordering::SeqCst), 3);
            assert!(small.lock_cache().answers.len() <= 2);

            // Off: every request asks.
            let (url, asked) = endpoint(answers).await;
            let off = Introspection::new(url, "rs", "secret").cache(Duration::ZERO, 100);
            for _ in 0..3 {
                off.verify("by-sub").await.expect("active");
            }
            assert_eq!(asked.load(Ordering::SeqCst), 3);
        })
        .await
        .expect("within the limit");
    }
}
