//! [`BearerLayer`]: only requests with a valid access token reach the service it wraps.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Request, Response, StatusCode};
use tidewire_core::transport::Principal;
use tower_layer::Layer;
use tower_service::Service;

use crate::challenge::Challenge;
use crate::metadata::ProtectedResourceMetadata;
use crate::verify::{TokenError, TokenVerifier};

/// Checks `Authorization: Bearer <token>` on every request, before the service it wraps:
///
/// | the request | the answer |
/// |---|---|
/// | no `Authorization` header | 401, `WWW-Authenticate: Bearer resource_metadata="…"` (and `scope="…"` when scopes are required) |
/// | a header that is not one `Bearer <token>` | 400 `invalid_request` |
/// | a token the verifier refuses | 401 `error="invalid_token"` |
/// | a token without every required scope | 403 `error="insufficient_scope"`, `scope` naming every scope required |
/// | the verifier cannot decide | 503 |
/// | a valid token | the service, with the [`VerifiedToken`](crate::VerifiedToken) and its [`Principal`] in the request's extensions |
///
/// ```
/// use tidewire_auth::{BearerLayer, ProtectedResourceMetadata, StaticTokens, VerifiedToken};
///
/// let metadata = ProtectedResourceMetadata::new("https://mcp.example.com/mcp", "https://auth.example.com");
/// let tokens = StaticTokens::new().with("t0k3n", VerifiedToken::new("alice", ["mcp:read"]));
/// // In front of the MCP routes: `router.layer(layer)` with axum.
/// let layer = BearerLayer::new(tokens, &metadata).require_scopes(["mcp:read"]);
/// # let _ = layer;
/// ```
#[derive(Clone)]
pub struct BearerLayer {
    verifier: Arc<dyn TokenVerifier>,
    metadata_url: Arc<str>,
    required: Arc<[String]>,
}

impl std::fmt::Debug for BearerLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerLayer")
            .field("metadata_url", &self.metadata_url)
            .field("required", &self.required)
            .finish_non_exhaustive()
    }
}

impl BearerLayer {
    /// A layer that asks `verifier` about each token, and points clients that have none to
    /// `metadata` (served at [`ProtectedResourceMetadata::url`]).
    pub fn new(verifier: impl TokenVerifier, metadata: &ProtectedResourceMetadata) -> Self {
        Self {
            verifier: Arc::new(verifier),
            metadata_url: metadata.url().into(),
            required: Arc::from(Vec::new()),
        }
    }

    /// Every request needs a token that grants all of `scopes`.
    #[must_use]
    pub fn require_scopes(mut self, scopes: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.required = scopes.into_iter().map(Into::into).collect();
        self
    }
}

impl<S> Layer<S> for BearerLayer {
    type Service = BearerAuth<S>;

    fn layer(&self, inner: S) -> BearerAuth<S> {
        BearerAuth {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`BearerLayer`] makes.
#[derive(Debug, Clone)]
pub struct BearerAuth<S> {
    inner: S,
    layer: BearerLayer,
}

impl<S, B, R> Service<Request<B>> for BearerAuth<S>
where
    S: Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Send,
    B: Send + 'static,
    R: From<String> + Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The clone that was made ready serves this request; a fresh clone waits for the next.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let layer = self.layer.clone();
        Box::pin(async move {
            let token = match bearer(&request) {
                Bearer::Absent => return Ok(layer.refuse(Refusal::NoToken)),
                Bearer::Malformed => return Ok(layer.refuse(Refusal::Malformed)),
                Bearer::Token(token) => token,
            };
            let verified = match layer.verifier.verify(&token).await {
                Ok(verified) => verified,
                Err(TokenError::Invalid(reason)) => {
                    tracing::debug!(%reason, "refused an access token");
                    return Ok(layer.refuse(Refusal::Invalid));
                }
                Err(TokenError::Unavailable(reason)) => {
                    tracing::warn!(%reason, "could not check an access token");
                    return Ok(layer.refuse(Refusal::Unavailable));
                }
            };
            if layer.required.iter().any(|s| !verified.has_scope(s)) {
                return Ok(layer.refuse(Refusal::Scope));
            }
            request
                .extensions_mut()
                .insert(Principal(verified.subject.clone()));
            request.extensions_mut().insert(verified);
            inner.call(request).await
        })
    }
}

enum Bearer {
    Absent,
    Malformed,
    Token(String),
}

/// The bearer token of a request: one `Authorization` header, `Bearer` (any case), one space,
/// and a token68 (RFC 6750 §2.1).
fn bearer<B>(request: &Request<B>) -> Bearer {
    let mut values = request.headers().get_all(AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return if request.headers().contains_key(AUTHORIZATION) {
            Bearer::Malformed
        } else {
            Bearer::Absent
        };
    };
    let Ok(value) = value.to_str() else {
        return Bearer::Malformed;
    };
    let Some((scheme, token)) = value.split_once(' ') else {
        return Bearer::Malformed;
    };
    let body = token.trim_end_matches('=');
    let token68 = !body.is_empty()
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~+/".contains(&b));
    if !scheme.eq_ignore_ascii_case("bearer") || !token68 {
        return Bearer::Malformed;
    }
    Bearer::Token(token.to_owned())
}

enum Refusal {
    NoToken,
    Malformed,
    Invalid,
    Scope,
    Unavailable,
}

impl BearerLayer {
    fn refuse<R: From<String>>(&self, refusal: Refusal) -> Response<R> {
        let (status, error, description) = match refusal {
            Refusal::NoToken => (
                StatusCode::UNAUTHORIZED,
                None,
                "an access token is required",
            ),
            Refusal::Malformed => (
                StatusCode::BAD_REQUEST,
                Some("invalid_request"),
                "the Authorization header must be one `Bearer <token>`",
            ),
            Refusal::Invalid => (
                StatusCode::UNAUTHORIZED,
                Some("invalid_token"),
                "the access token is not valid",
            ),
            Refusal::Scope => (
                StatusCode::FORBIDDEN,
                Some("insufficient_scope"),
                "the access token lacks a required scope",
            ),
            Refusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("temporarily_unavailable"),
                "the access token cannot be checked now; try again",
            ),
        };
        let mut challenge = Challenge::bearer().with("resource_metadata", &*self.metadata_url);
        if !self.required.is_empty() {
            challenge = challenge.with("scope", self.required.join(" "));
        }
        if let Some(error) = error {
            challenge = challenge
                .with("error", error)
                .with("error_description", description);
        }
        let body = serde_json::json!({
            "error": error.unwrap_or("invalid_token"),
            "error_description": description,
        });
        let mut response = Response::new(R::from(body.to_string()));
        *response.status_mut() = status;
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if status != StatusCode::SERVICE_UNAVAILABLE
            && let Ok(value) = HeaderValue::from_str(&challenge.to_string())
        {
            headers.insert(WWW_AUTHENTICATE, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::future::{Ready, ready};

    use super::*;
    use crate::challenge::parse_challenges;
    use crate::verify::{StaticTokens, VerifiedToken};

    /// Answers 200 with the principal it was handed.
    #[derive(Clone)]
    struct Echo;

    impl Service<Request<()>> for Echo {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = Ready<Result<Response<String>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<()>) -> Self::Future {
            let who = request
                .extensions()
                .get::<Principal>()
                .map(|p| p.0.clone())
                .unwrap_or_default();
            ready(Ok(Response::new(who)))
        }
    }

    async fn answer(authorization: &[&str]) -> Response<String> {
        let metadata = ProtectedResourceMetadata::new("http://127.0.0.1:9/mcp", "http://as.test");
        let tokens = StaticTokens::new()
            .with(
                "good",
                VerifiedToken::new("alice", ["mcp:read", "mcp:write"]),
            )
            .with("narrow", VerifiedToken::new("bob", ["mcp:read"]));
        let mut service = BearerLayer::new(tokens, &metadata)
            .require_scopes(["mcp:read", "mcp:write"])
            .layer(Echo);
        let mut request = Request::builder();
        for value in authorization {
            request = request.header(AUTHORIZATION, *value);
        }
        let Ok(response) = service.call(request.body(()).expect("request")).await;
        response
    }

    fn challenge(response: &Response<String>) -> Challenge {
        let header = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .expect("a challenge");
        parse_challenges(header).remove(0)
    }

    #[tokio::test]
    async fn each_refusal_has_its_status_and_challenge_and_a_good_token_passes() {
        let ok = answer(&["Bearer good"]).await;
        assert_eq!((ok.status(), ok.body().as_str()), (StatusCode::OK, "alice"));
        assert_eq!(answer(&["bearer good"]).await.status(), StatusCode::OK);

        let none = answer(&[]).await;
        assert_eq!(none.status(), StatusCode::UNAUTHORIZED);
        let c = challenge(&none);
        assert_eq!(
            c.param("resource_metadata"),
            Some("http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.param("scope"), Some("mcp:read mcp:write"));
        assert_eq!(c.param("error"), None);

        let bad = answer(&["Bearer nope"]).await;
        assert_eq!(bad.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(challenge(&bad).param("error"), Some("invalid_token"));

        let narrow = answer(&["Bearer narrow"]).await;
        assert_eq!(narrow.status(), StatusCode::FORBIDDEN);
        let c = challenge(&narrow);
        assert_eq!(c.param("error"), Some("insufficient_scope"));
        assert_eq!(c.param("scope"), Some("mcp:read mcp:write"));

        for malformed in [
            &["Basic YTpi"][..],
            &["Bearer"],
            &["Bearer a b"],
            &["Bearer good", "Bearer good"],
            &["Bearer tok\"en"],
        ] {
            let response = answer(malformed).await;
            assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{malformed:?}");
            assert_eq!(challenge(&response).param("error"), Some("invalid_request"));
        }
    }
}
