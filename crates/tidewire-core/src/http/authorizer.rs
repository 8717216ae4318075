//! [`Authorizer`]: what an HTTP client transport asks for credentials, and tells when the
//! server refuses them, so authorization (OAuth) plugs into every HTTP transport from outside.

use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use http::{HeaderValue, StatusCode};

/// Supplies a client transport's `Authorization` header, and gets new credentials when the
/// server refuses a request with 401 or 403. `tidewire_auth::client::OAuthSession` is the
/// OAuth one.
pub trait Authorizer: Send + Sync + 'static {
    /// The `Authorization` header for the next request, if there are credentials yet.
    fn authorization(&self) -> Option<HeaderValue>;

    /// Called before each request is sent: credentials about to expire are renewed here (an
    /// OAuth refresh), so the request does not go out with a token the server will refuse.
    /// The default renews nothing.
    fn renew(&self) -> BoxFuture<'_, ()> {
        Box::pin(futures::future::ready(()))
    }

    /// The server answered `status` (401 or 403) with these `WWW-Authenticate` values to a
    /// request that carried `sent`. Get new credentials (unless another request already has
    /// since `sent`); `true` when there are, and the request is sent once more with them.
    fn refused<'a>(
        &'a self,
        status: StatusCode,
        challenges: &'a [String],
        sent: Option<&'a HeaderValue>,
    ) -> BoxFuture<'a, bool>;

    /// The request sent once more after [`refused`](Self::refused) was not refused: the
    /// credentials it carried (`sent`) work. The default does nothing.
    fn accepted(&self, sent: Option<&HeaderValue>) {
        let _ = sent;
    }
}

/// A transport's authorizer, if it has one (a slot the builders share, with a `Debug` that
/// shows only whether it is set).
#[derive(Clone, Default)]
pub struct AuthorizerSlot(pub Option<Arc<dyn Authorizer>>);

impl fmt::Debug for AuthorizerSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Some(Authorizer)"
        } else {
            "None"
        })
    }
}

impl AuthorizerSlot {
    /// The header it supplies now.
    pub fn authorization(&self) -> Option<HeaderValue> {
        self.0.as_ref().and_then(|a| a.authorization())
    }
}
