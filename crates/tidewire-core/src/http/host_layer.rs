//! [`HostLayer`]: the [`HostPolicy`] as a tower layer, so an HTTP server checks `Host` and
//! `Origin` once, in front of all its routes, and an app can put the same check in front of
//! its own.

use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::{Either, Ready, ready};
use http::{Request, Response};
use tower_layer::Layer;
use tower_service::Service;

use super::host_policy::HostPolicy;

/// Answers a request whose `Host` or `Origin` the policy refuses with 403 and a JSON-RPC error
/// body, before it reaches the service it wraps (DNS-rebinding protection). The legacy HTTP+SSE
/// and WebSocket servers put one in front of their routes, with the policy of their
/// `ServerLimits`; the Streamable HTTP endpoint applies the same policy first thing in its
/// handler (no router layer on its hot path).
///
/// ```
/// use tidewire_core::http::{HostLayer, HostPolicy};
///
/// // In front of an app's own routes: `router.layer(layer)` with axum.
/// let layer = HostLayer::new(HostPolicy::default().allow_host("mcp.example.com"));
/// # let _ = layer;
/// ```
#[derive(Debug, Clone)]
pub struct HostLayer {
    policy: Arc<HostPolicy>,
}

impl HostLayer {
    /// A layer that applies `policy`.
    pub fn new(policy: HostPolicy) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<S> Layer<S> for HostLayer {
    type Service = HostCheck<S>;

    fn layer(&self, inner: S) -> HostCheck<S> {
        HostCheck {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// The service [`HostLayer`] makes.
#[derive(Debug, Clone)]
pub struct HostCheck<S> {
    inner: S,
    policy: Arc<HostPolicy>,
}

impl<S, B, R> Service<Request<B>> for HostCheck<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    R: From<String>,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response<R>, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        match self.policy.check(request.headers()) {
            Ok(()) => Either::Right(self.inner.call(request)),
            Err(refused) => Either::Left(ready(Ok(refused.response().map(R::from)))),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::pin;

    use http::StatusCode;

    use super::*;
    use crate::jsonrpc::ErrorCode;

    /// A service that answers 200 "inner".
    #[derive(Clone)]
    struct Inner;

    impl Service<Request<()>> for Inner {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = Ready<Result<Response<String>, Infallible>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            ready(Ok(Response::new("inner".to_owned())))
        }
    }

    fn answer(host: &str, origin: Option<&str>) -> Response<String> {
        let mut service = HostLayer::new(HostPolicy::default()).layer(Inner);
        let mut request = Request::builder().header("host", host);
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        let future = service.call(request.body(()).expect("a request"));
        let waker = futures::task::noop_waker();
        match pin!(future).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(Ok(response)) => response,
            other => panic!("a ready answer, got {other:?}"),
        }
    }

    #[test]
    fn a_refused_host_or_origin_never_reaches_the_service() {
        assert_eq!(answer("127.0.0.1:3000", None).body(), "inner");
        let refused = answer("evil.example", None);
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        let body: serde_json::Value = serde_json::from_str(refused.body()).expect("JSON");
        assert_eq!(body["error"]["code"], ErrorCode::INVALID_REQUEST.0);
        let refused = answer("127.0.0.1:3000", Some("http://evil.example"));
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    }
}
