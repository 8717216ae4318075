//! [`BearerLayer`]: only requests with a valid access token reach the service it wraps.

use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::Body;
use http_body_util::{BodyExt as _, Limited};
use tidewire_core::jsonrpc::Message;
use tidewire_core::transport::DEFAULT_MAX_MESSAGE_SIZE;

use futures::future::BoxFuture;
use http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use tidewire_core::transport::{
    AccessLease, LeaseCheck, LeaseEnd, MIN_RECHECK_INTERVAL, Principal,
};
use tower_layer::Layer;
use tower_service::Service;

use crate::challenge::Challenge;
use crate::metadata::ProtectedResourceMetadata;
use crate::verify::{TokenError, TokenVerifier, VerifiedToken};

/// How often [`BearerLayer`] verifies again the token of a channel that stays open, unless
/// [`recheck_every`](BearerLayer::recheck_every) says otherwise.
pub const DEFAULT_RECHECK: Duration = Duration::from_secs(60);

/// Checks `Authorization: Bearer <token>` on every request, before the service it wraps:
///
/// | the request | the answer |
/// |---|---|
/// | no `Authorization` header | 401, `WWW-Authenticate: Bearer resource_metadata="…"` (and `scope="…"` when scopes are required) |
/// | a header that is not one `Bearer <token>` | 400 `invalid_request` |
/// | a token the verifier refuses | 401 `error="invalid_token"` |
/// | a token without every required scope | 403 `error="insufficient_scope"`, `scope` naming every scope required |
/// | a `tools/call` of a tool with its own scopes ([`tool_scopes`](Self::tool_scopes)), by a token without them | 403 `insufficient_scope`, `scope` naming every scope that call needs |
/// | the verifier cannot decide | 503 |
/// | a valid token | the service, with the [`VerifiedToken`](crate::VerifiedToken), its [`Principal`] and an [`AccessLease`] in the request's extensions |
/// | a channel that stays open (an SSE response; a WebSocket, which ends by the lease itself) | ends at the token's expiry, or when a re-check every [`recheck_every`](Self::recheck_every) refuses it |
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
    tools: Arc<HashMap<String, Vec<String>>>,
    max_body: usize,
    recheck: Duration,
}

impl std::fmt::Debug for BearerLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BearerLayer")
            .field("metadata_url", &self.metadata_url)
            .field("required", &self.required)
            .field("tools", &self.tools)
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
            tools: Arc::new(HashMap::new()),
            max_body: DEFAULT_MAX_MESSAGE_SIZE,
            recheck: DEFAULT_RECHECK,
        }
    }

    /// A `tools/call` of `tool` also needs all of `scopes` (beyond those every request
    /// needs). A token without them gets 403 `insufficient_scope` naming every scope the call
    /// needs, so the client can step up. The layer then reads the body of each POST (up to
    /// [`max_body`](Self::max_body)) to find the tools called, batches included, with the
    /// same strict decode as the transport (a body naming a member twice calls nothing here and
    /// is refused there).
    ///
    /// This check sees only HTTP POST bodies: a WebSocket's messages never pass through it.
    /// Declare the same scopes on the server (`ServerBuilder::tool_scopes`), which checks them
    /// from the [`Principal`] on every transport; this layer's part is the HTTP answer a
    /// client can step up from.
    #[must_use]
    pub fn tool_scopes(
        mut self,
        tool: impl Into<String>,
        scopes: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Arc::make_mut(&mut self.tools)
            .insert(tool.into(), scopes.into_iter().map(Into::into).collect());
        self
    }

    /// The longest POST body read for [`tool_scopes`](Self::tool_scopes) (the transport's
    /// default message limit unless set); a longer one gets 413.
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// How often the token of a channel that stays open (a WebSocket, an SSE stream: GET,
    /// legacy HTTP+SSE, a long POST reply, a listen) is verified again
    /// ([`DEFAULT_RECHECK`] unless set; at least [`MIN_RECHECK_INTERVAL`]). The channel ends at
    /// the token's expiry, or at the first re-check that refuses it (revoked, or without a
    /// required scope); a verifier that cannot decide keeps it open until the expiry.
    #[must_use]
    pub fn recheck_every(mut self, interval: Duration) -> Self {
        self.recheck = interval.max(MIN_RECHECK_INTERVAL);
        self
    }

    /// The lease of a channel opened with `token`, verified as `verified`.
    fn lease(&self, token: String, verified: &VerifiedToken) -> AccessLease {
        let verifier = self.verifier.clone();
        let required = self.required.clone();
        let token: Arc<str> = token.into();
        AccessLease::until(verified.expires_at).recheck_every(self.recheck, move || {
            let (verifier, required, token) = (verifier.clone(), required.clone(), token.clone());
            Box::pin(async move {
                match verifier.verify(&token).await {
                    Ok(again) if required.iter().all(|s| again.has_scope(s)) => LeaseCheck::Valid {
                        expires_at: again.expires_at,
                    },
                    Ok(_) | Err(TokenError::Invalid(_)) => LeaseCheck::Revoked,
                    Err(TokenError::Unavailable(_)) => LeaseCheck::Unknown,
                }
            })
        })
    }

    /// Every scope a request calling `tools` needs, when `verified` lacks one of them.
    fn missing(&self, verified: &VerifiedToken, tools: &[String]) -> Option<Vec<String>> {
        let mut needed: Vec<String> = self.required.to_vec();
        for tool in tools {
            for scope in self.tools.get(tool).into_iter().flatten() {
                if !needed.contains(scope) {
                    needed.push(scope.clone());
                }
            }
        }
        needed
            .iter()
            .any(|s| !verified.has_scope(s))
            .then_some(needed)
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
    B: Body<Data = Bytes> + From<Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    R: Body<Data = Bytes> + From<String> + Unpin + Send + 'static,
{
    type Response = Response<LeasedBody<R>>;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<Response<LeasedBody<R>>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> Self::Future {
        // The clone that was made ready serves this request; a fresh clone waits for the next.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        let layer = self.layer.clone();
        Box::pin(async move {
            let refuse = |refusal| Ok(layer.refuse::<R>(refusal).map(LeasedBody::plain));
            let token = match bearer(&request) {
                Bearer::Absent => return refuse(Refusal::NoToken),
                Bearer::Malformed => return refuse(Refusal::Malformed),
                Bearer::Token(token) => token,
            };
            let verified = match layer.verifier.verify(&token).await {
                Ok(verified) => verified,
                Err(TokenError::Invalid(reason)) => {
                    tracing::debug!(%reason, "refused an access token");
                    return refuse(Refusal::Invalid);
                }
                Err(TokenError::Unavailable(reason)) => {
                    tracing::warn!(%reason, "could not check an access token");
                    return refuse(Refusal::Unavailable);
                }
            };
            if layer.required.iter().any(|s| !verified.has_scope(s)) {
                return refuse(Refusal::Scope(layer.required.to_vec()));
            }
            if !layer.tools.is_empty() && request.method() == Method::POST {
                let (parts, body) = request.into_parts();
                let bytes = match Limited::new(body, layer.max_body).collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(_) => return refuse(Refusal::TooLarge),
                };
                if let Some(needed) = layer.missing(&verified, &tools_called(&bytes)) {
                    return refuse(Refusal::Scope(needed));
                }
                request = Request::from_parts(parts, B::from(bytes));
            }
            request.extensions_mut().insert(
                Principal::new(verified.subject.clone()).with_scopes(verified.scopes.clone()),
            );
            let lease = layer.lease(token, &verified);
            request.extensions_mut().insert(verified);
            // A WebSocket (or anything else the service keeps open past the response) ends by
            // the lease itself; an SSE response ends here, when the lease does.
            request.extensions_mut().insert(lease.clone());
            let response = inner.call(request).await?;
            let streams = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            Ok(if streams {
                response.map(|body| LeasedBody::leased(body, lease))
            } else {
                response.map(LeasedBody::plain)
            })
        })
    }
}

/// A response body behind [`BearerLayer`]: the service's own, and for an SSE response, the
/// end of the token's [`AccessLease`]: the stream ends cleanly (the client reconnects with a
/// fresh token) when the token expires or a re-check refuses it.
pub struct LeasedBody<B> {
    inner: B,
    ended: Option<BoxFuture<'static, LeaseEnd>>,
    done: bool,
}

impl<B> LeasedBody<B> {
    fn plain(inner: B) -> Self {
        Self {
            inner,
            ended: None,
            done: false,
        }
    }

    fn leased(inner: B, lease: AccessLease) -> Self {
        Self {
            inner,
            ended: Some(Box::pin(lease.ended())),
            done: false,
        }
    }

    /// The service's body.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B> std::fmt::Debug for LeasedBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeasedBody")
            .field("leased", &self.ended.is_some())
            .finish_non_exhaustive()
    }
}

impl<B: Body<Data = Bytes> + Unpin> Body for LeasedBody<B> {
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(ended) = self.ended.as_mut()
            && let Poll::Ready(why) = ended.as_mut().poll(cx)
        {
            tracing::debug!("an SSE response ended: {why}");
            self.ended = None;
            self.done = true;
            return Poll::Ready(None);
        }
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.done || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
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

/// The tools a JSON-RPC body calls (`tools/call`, alone or in a batch), read by the same strict
/// decode the transport behind uses ([`Message::from_slice`]), so the check and the handler
/// see one meaning: a body that is no message (not JSON, or a member named twice) calls no tool
/// here and is refused there. The server checks the same scopes again from the
/// [`Principal`] on every transport.
fn tools_called(body: &[u8]) -> Vec<String> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    let messages = if first == Some(&b'[') {
        Message::batch_from_slice(body).unwrap_or_default()
    } else {
        Message::from_slice(body)
            .map(|m| vec![m])
            .unwrap_or_default()
    };
    messages
        .into_iter()
        .filter_map(|m| match m {
            Message::Request(r) if r.method == "tools/call" => r.params,
            _ => None,
        })
        .filter_map(|params| match params.get("name") {
            Some(serde_json::Value::String(name)) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

enum Refusal {
    NoToken,
    Malformed,
    Invalid,
    /// Every scope the request needs.
    Scope(Vec<String>),
    TooLarge,
    Unavailable,
}

impl BearerLayer {
    fn refuse<R: From<String>>(&self, refusal: Refusal) -> Response<R> {
        let mut scopes = self.required.join(" ");
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
            Refusal::Scope(needed) => {
                scopes = needed.join(" ");
                (
                    StatusCode::FORBIDDEN,
                    Some("insufficient_scope"),
                    "the access token lacks a required scope",
                )
            }
            Refusal::TooLarge => (
                StatusCode::PAYLOAD_TOO_LARGE,
                Some("invalid_request"),
                "the request body is too long",
            ),
            Refusal::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                Some("temporarily_unavailable"),
                "the access token cannot be checked now; try again",
            ),
        };
        let mut challenge = Challenge::bearer().with("resource_metadata", &*self.metadata_url);
        if !scopes.is_empty() {
            challenge = challenge.with("scope", scopes);
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
            && status != StatusCode::PAYLOAD_TOO_LARGE
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

    type Full = http_body_util::Full<Bytes>;

    impl Service<Request<Full>> for Echo {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = Ready<Result<Response<String>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, request: Request<Full>) -> Self::Future {
            let who = request
                .extensions()
                .get::<Principal>()
                .map(|p| p.subject.clone())
                .unwrap_or_default();
            ready(Ok(Response::new(who)))
        }
    }

    async fn answer(authorization: &[&str]) -> Response<LeasedBody<String>> {
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
        let Ok(response) = service
            .call(request.body(Full::default()).expect("request"))
            .await;
        response
    }

    async fn call_tools(token: &str, body: &str) -> Response<LeasedBody<String>> {
        let metadata = ProtectedResourceMetadata::new("http://127.0.0.1:9/mcp", "http://as.test");
        let tokens = StaticTokens::new().with("t", VerifiedToken::new("alice", ["mcp:use"]));
        let mut service = BearerLayer::new(tokens, &metadata)
            .require_scopes(["mcp:use"])
            .tool_scopes("delete", ["mcp:admin", "mcp:write"])
            .max_body(256)
            .layer(Echo);
        let request = Request::post("/mcp")
            .header(AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::from(Bytes::from(body.to_owned())))
            .expect("request");
        let Ok(response) = service.call(request).await;
        response
    }

    #[tokio::test]
    async fn a_tool_with_its_own_scopes_needs_them_alone_or_in_a_batch() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
        let call = |name: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}"}}}}"#
            )
        };
        assert_eq!(
            call_tools("t", &call("echo")).await.status(),
            StatusCode::OK
        );
        let refused = call_tools("t", &call("delete")).await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let c = challenge(&refused);
        assert_eq!(c.param("error"), Some("insufficient_scope"));
        assert_eq!(c.param("scope"), Some("mcp:use mcp:admin mcp:write"));
        let batch = format!("[{},{}]", call("echo"), call("delete"));
        assert_eq!(
            call_tools("t", &batch).await.status(),
            StatusCode::FORBIDDEN
        );
        assert_eq!(call_tools("t", "{not json").await.status(), StatusCode::OK);
        let long = format!("{:300}", call("echo"));
        assert_eq!(
            call_tools("t", &long).await.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    })
    .await
    .expect("the test hung: it took longer than 300 s");
    }

    fn challenge(response: &Response<LeasedBody<String>>) -> Challenge {
        let header = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .expect("a challenge");
        parse_challenges(header).remove(0)
    }

    #[tokio::test]
    async fn each_refusal_has_its_status_and_challenge_and_a_good_token_passes() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let ok = answer(&["Bearer good"]).await;
            assert_eq!(
                (ok.status(), ok.body().get_ref().as_str()),
                (StatusCode::OK, "alice")
            );
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
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
