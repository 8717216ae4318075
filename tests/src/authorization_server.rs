//! A small OAuth 2.1 authorization server for tests, on 127.0.0.1: what an MCP client's full
//! flow meets, with the knobs a test needs to make tokens expire, be revoked and be rotated.
//!
//! - RFC 8414 metadata (with `jwks_uri` and `introspection_endpoint`), dynamic registration;
//! - an authorization endpoint that approves at once (redirecting with `code`, `state` and
//!   RFC 9207 `iss`), for the scopes asked;
//! - a token endpoint for `authorization_code` (PKCE S256 checked, `resource` required) and
//!   `refresh_token` (rotated: each refresh token works once; `resource` checked again);
//! - access tokens are ES256 JWTs (`iss`, `aud` = the resource, `sub` = `alice`, `scope`,
//!   `exp`), verifiable at `/jwks`, and known to `/introspect` (RFC 7662), where a revoked one
//!   is inactive.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::Digest as _;

/// The client the resource server introspects as.
pub const INTROSPECTION_CLIENT: (&str, &str) = ("resource-server", "rs-secret");

/// The signing key, for these tests only (P-256, PKCS#8).
const SIGNING_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgvAYGAYZ8VjI8JgJX
8qmQBE4HX1kjn699KHRJb5WWCLShRANCAAT3FwUCU4c7kjxZtkOj5TjnWQnXTuZv
HD5MxHCdfEhKo1HEm3gC7OZEoOpFJ2GztusDc3dX3FN4hnix5+kdxwuI
-----END PRIVATE KEY-----";

/// Its public half.
fn jwks() -> Value {
    json!({"keys": [{
        "kty": "EC", "crv": "P-256", "kid": "test-1", "alg": "ES256", "use": "sig",
        "x": "9xcFAlOHO5I8WbZDo-U451kJ107mbxw-TMRwnXxISqM",
        "y": "UcSbeALs5kSg6kUnYbO26wNzd1fcU3iGeLHn6R3HC4g"
    }]})
}

/// A running test authorization server.
#[derive(Clone)]
pub struct TestAuthorizationServer {
    /// Its issuer identifier (its base URL).
    pub issuer: String,
    state: Arc<Mutex<Books>>,
}

impl std::fmt::Debug for TestAuthorizationServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestAuthorizationServer")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct Books {
    lifetime: u64,
    serial: u64,
    /// Codes not yet exchanged: PKCE challenge, scopes, resource.
    codes: HashMap<String, (String, String, String)>,
    /// Live refresh tokens: scopes, resource.
    refresh: HashMap<String, (String, String)>,
    /// Access tokens issued: scopes, resource, expiry, revoked, subject.
    access: HashMap<String, (String, String, u64, bool, String)>,
    /// Every token request's grant type, in order.
    grants: Vec<String>,
    /// Every refresh token issued, in order.
    issued_refresh: Vec<String>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl TestAuthorizationServer {
    /// Starts one whose access tokens last `lifetime` seconds.
    ///
    /// # Panics
    /// When it cannot listen on 127.0.0.1.
    pub async fn start(lifetime: u64) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let issuer = format!("http://{}", listener.local_addr().expect("address"));
        let server = Self {
            issuer,
            state: Arc::new(Mutex::new(Books {
                lifetime,
                ..Books::default()
            })),
        };
        let app = axum::Router::new()
            .route("/.well-known/oauth-authorization-server", get(metadata))
            .route("/jwks", get(|| async { answer(StatusCode::OK, &jwks()) }))
            .route("/register", post(register))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .route("/introspect", post(introspect))
            .with_state(server.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        server
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Its key set's URL.
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// Its introspection endpoint.
    pub fn introspection_endpoint(&self) -> String {
        format!("{}/introspect", self.issuer)
    }

    /// Access tokens issued from now on last `seconds`.
    pub fn set_lifetime(&self, seconds: u64) {
        self.books().lifetime = seconds;
    }

    /// Revokes every access token issued so far.
    pub fn revoke_access_tokens(&self) {
        for entry in self.books().access.values_mut() {
            entry.3 = true;
        }
    }

    /// Revokes every live refresh token.
    pub fn revoke_refresh_tokens(&self) {
        self.books().refresh.clear();
    }

    /// The grant type of every token request so far, in order.
    pub fn grants(&self) -> Vec<String> {
        self.books().grants.clone()
    }

    /// The refresh token issued last (the only one still valid after rotation).
    pub fn last_refresh_token(&self) -> Option<String> {
        self.books().issued_refresh.last().cloned()
    }

    /// An access token for `subject`, with `scopes` on `resource`, issued without a flow (for
    /// a test that needs tokens of two people).
    pub fn access_token_for(&self, subject: &str, scopes: &str, resource: &str) -> String {
        let mut books = self.books();
        self.access_token(&mut books, subject, scopes, resource)
    }

    /// Signs and records an access token.
    fn access_token(
        &self,
        books: &mut Books,
        subject: &str,
        scopes: &str,
        resource: &str,
    ) -> String {
        books.serial += 1;
        let serial = books.serial;
        let exp = now() + books.lifetime;
        let claims = json!({
            "iss": self.issuer, "aud": resource, "sub": subject, "scope": scopes,
            "exp": exp, "iat": now(), "jti": format!("t{serial}"),
        });
        let mut head = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        head.kid = Some("test-1".to_owned());
        let key = jsonwebtoken::EncodingKey::from_ec_pem(SIGNING_KEY.as_bytes()).expect("key");
        let access = jsonwebtoken::encode(&head, &claims, &key).expect("signed");
        books.access.insert(
            access.clone(),
            (
                scopes.to_owned(),
                resource.to_owned(),
                exp,
                false,
                subject.to_owned(),
            ),
        );
        access
    }

    /// Issues an access token and a refresh token for `scopes` on `resource`.
    fn issue(&self, scopes: &str, resource: &str) -> Value {
        let mut books = self.books();
        let access = self.access_token(&mut books, "alice", scopes, resource);
        let serial = books.serial;
        let refresh = format!("refresh-{serial}");
        books
            .refresh
            .insert(refresh.clone(), (scopes.to_owned(), resource.to_owned()));
        books.issued_refresh.push(refresh.clone());
        json!({"access_token": access, "token_type": "Bearer", "expires_in": books.lifetime,
               "refresh_token": refresh, "scope": scopes})
    }
}

/// The pairs of an `application/x-www-form-urlencoded` body or query.
fn form(body: &str) -> HashMap<String, String> {
    fn decode(text: &str) -> String {
        let bytes = text.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match (bytes[i], hex) {
                (b'+', _) => out.push(b' '),
                (b'%', Some(byte)) => {
                    out.push(byte);
                    i += 2;
                }
                (byte, _) => out.push(byte),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// A JSON answer.
fn answer(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn oauth_error(status: StatusCode, error: &str) -> Response {
    answer(status, &json!({"error": error}))
}

async fn metadata(State(server): State<TestAuthorizationServer>) -> Response {
    let issuer = &server.issuer;
    answer(
        StatusCode::OK,
        &json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
            "jwks_uri": server.jwks_uri(),
            "introspection_endpoint": server.introspection_endpoint(),
            "scopes_supported": ["mcp:use", "mcp:admin", "offline_access"],
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["client_secret_post"],
            "authorization_response_iss_parameter_supported": true,
        }),
    )
}

async fn register() -> Response {
    answer(
        StatusCode::CREATED,
        &json!({"client_id": "registered", "client_secret": "s3cret",
                "token_endpoint_auth_method": "client_secret_post"}),
    )
}

async fn authorize(State(server): State<TestAuthorizationServer>, uri: Uri) -> Response {
    let q = form(uri.query().unwrap_or(""));
    let field = |k: &str| q.get(k).cloned().unwrap_or_default();
    let code = {
        let mut books = server.books();
        books.serial += 1;
        let code = format!("code-{}", books.serial);
        books.codes.insert(
            code.clone(),
            (field("code_challenge"), field("scope"), field("resource")),
        );
        code
    };
    let to = format!(
        "{}?code={code}&state={}&iss={}",
        field("redirect_uri"),
        query_encode(&field("state")),
        query_encode(&server.issuer)
    );
    (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
}

fn query_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

async fn token(State(server): State<TestAuthorizationServer>, body: String) -> Response {
    let f = form(&body);
    let field = |k: &str| f.get(k).cloned().unwrap_or_default();
    let grant = field("grant_type");
    server.books().grants.push(grant.clone());
    if field("client_id") != "registered" || field("client_secret") != "s3cret" {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    match grant.as_str() {
        "authorization_code" => {
            let Some((challenge, scopes, resource)) = server.books().codes.remove(&field("code"))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            let derived = URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(field("code_verifier")));
            if derived != challenge || resource.is_empty() || field("resource") != resource {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            }
            answer(StatusCode::OK, &server.issue(&scopes, &resource))
        }
        "refresh_token" => {
            let Some((scopes, resource)) = server.books().refresh.remove(&field("refresh_token"))
            else {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
            };
            if field("resource") != resource {
                return oauth_error(StatusCode::BAD_REQUEST, "invalid_target");
            }
            answer(StatusCode::OK, &server.issue(&scopes, &resource))
        }
        _ => oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
}

async fn introspect(
    State(server): State<TestAuthorizationServer>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let (id, secret) = INTROSPECTION_CLIENT;
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(expected.as_str())
    {
        return oauth_error(StatusCode::UNAUTHORIZED, "invalid_client");
    }
    let token = form(&body).remove("token").unwrap_or_default();
    let books = server.books();
    let state = match books.access.get(&token) {
        Some((scopes, resource, exp, false, subject)) if *exp > now() => json!({
            "active": true, "sub": subject, "scope": scopes, "aud": resource, "exp": exp,
            "iss": server.issuer,
        }),
        _ => json!({"active": false}),
    };
    answer(StatusCode::OK, &state)
}
