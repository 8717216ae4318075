//! [`OAuthSession`]: an [`OAuthClient`] as a transport's
//! [`Authorizer`](tidewire_core::transport::Authorizer), for one MCP endpoint.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use http::{HeaderValue, StatusCode};
use tidewire_core::transport::Authorizer;

use super::oauth::OAuthClient;
use crate::challenge::parse_challenges;

/// Keeps the access token of one MCP endpoint and gets a new one when the server refuses a
/// request: a 401 (no token yet, or one that expired or was revoked) starts the flow again, a
/// 403 `insufficient_scope` steps up to the scopes the server names.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tidewire_auth::client::{HeadlessRedirect, OAuthClient, OAuthConfig, OAuthSession};
///
/// let oauth = OAuthClient::new(OAuthConfig::new(
///     "my-agent",
///     "http://127.0.0.1:8976/callback",
///     HeadlessRedirect::new(),
/// ))?;
/// let session = OAuthSession::new(oauth, "https://mcp.example.com/mcp");
/// // tidewire_http::client::StreamableHttpClient::new(url).authorizer(session).connect()
/// # let _ = session;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct OAuthSession {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    oauth: OAuthClient,
    url: String,
    header: Mutex<Option<HeaderValue>>,
}

impl OAuthSession {
    /// Tokens from `oauth` for the MCP endpoint `url`: the one the server's resource metadata
    /// names (over legacy HTTP+SSE, that resource's URL rather than the stream's, if they
    /// differ).
    pub fn new(oauth: OAuthClient, url: impl Into<String>) -> Self {
        Self {
            inner: Arc::new(Inner {
                oauth,
                url: url.into(),
                header: Mutex::new(None),
            }),
        }
    }

    fn set(&self, header: Option<HeaderValue>) {
        *self
            .inner
            .header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = header;
    }
}

impl Authorizer for OAuthSession {
    fn authorization(&self) -> Option<HeaderValue> {
        self.inner
            .header
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn refused<'a>(&'a self, status: StatusCode, challenges: &'a [String]) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let challenge = challenges
                .iter()
                .flat_map(|header| parse_challenges(header))
                .find(|c| c.is("bearer"));
            let step_up =
                challenge.as_ref().and_then(|c| c.param("error")) == Some("insufficient_scope");
            if status == StatusCode::FORBIDDEN && !step_up {
                // Forbidden for another reason: new credentials would not help.
                return false;
            }
            if status == StatusCode::UNAUTHORIZED {
                self.set(None);
            }
            match self
                .inner
                .oauth
                .authorize(&self.inner.url, challenge.as_ref())
                .await
            {
                Ok(token) => {
                    let value = HeaderValue::from_str(&format!("Bearer {}", token.access_token));
                    match value {
                        Ok(mut value) => {
                            value.set_sensitive(true);
                            self.set(Some(value));
                            true
                        }
                        Err(_) => {
                            tracing::warn!("the access token cannot be sent in a header");
                            false
                        }
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "authorization failed");
                    false
                }
            }
        })
    }
}
