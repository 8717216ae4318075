//! [`OAuthSession`]: an [`OAuthClient`] and a [`TokenStore`] as a transport's
//! [`Authorizer`](tidewire_core::http::Authorizer), for one MCP endpoint.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::lock::Mutex as Turn;
use http::{HeaderValue, StatusCode};
use tidewire_core::http::Authorizer;

use super::error::AuthError;
use super::oauth::OAuthClient;
use super::store::{MemoryStore, TokenStore};
use super::token::Grant;
use crate::challenge::{Challenge, parse_challenges};

/// A token this close to its expiry is refreshed before the next request.
pub const RENEW_MARGIN: Duration = Duration::from_secs(30);

/// Keeps the access of one MCP endpoint and renews it:
/// - before a request, a token within [`RENEW_MARGIN`] of its expiry is refreshed;
/// - a 401 (a token expired or revoked early) refreshes once; when the refreshed token is
///   refused at once too (that request fails), or there is no refresh token, the next 401 runs
///   the flow again from the challenge;
/// - a 403 `insufficient_scope` steps up to the scopes the server names.
///
/// Each new grant is saved in the [`TokenStore`] before its token is used (a rotated refresh
/// token is never only in memory); a grant that cannot be saved is not used, and the error is
/// kept for [`last_error`](Self::last_error). Requests refused at once share one renewal: the
/// first runs it, the others wait and are sent with its token.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tidewire_auth::client::{FileStore, HeadlessRedirect, OAuthClient, OAuthConfig, OAuthSession};
///
/// let oauth = OAuthClient::new(OAuthConfig::new(
///     "my-agent",
///     "http://127.0.0.1:8976/callback",
///     HeadlessRedirect::new(),
/// ))?;
/// let store = Arc::new(FileStore::in_config_dir()?);
/// let session = OAuthSession::with_store(oauth, "https://mcp.example.com/mcp", store);
/// // tidewire_http::client::StreamableHttpConnector::new(url).authorizer(session).connect()
/// # let _ = session;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct OAuthSession {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for OAuthSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthSession")
            .field("url", &self.inner.url)
            .finish_non_exhaustive()
    }
}

struct Inner {
    oauth: OAuthClient,
    url: String,
    store: Arc<dyn TokenStore>,
    state: Mutex<State>,
    /// One renewal at a time.
    turn: Turn<()>,
}

#[derive(Default)]
struct State {
    /// Whether the store was read yet.
    loaded: bool,
    grant: Option<Grant>,
    header: Option<HeaderValue>,
    /// The header of a token refreshed after a 401: refused too, it is not refreshed again.
    refreshed: Option<HeaderValue>,
    last_error: Option<String>,
}

impl OAuthSession {
    /// Tokens from `oauth` for the MCP endpoint `url` (over legacy HTTP+SSE, the resource's
    /// URL rather than the stream's, if they differ), kept in memory.
    pub fn new(oauth: OAuthClient, url: impl Into<String>) -> Self {
        Self::with_store(oauth, url, Arc::new(MemoryStore::new()))
    }

    /// Tokens kept in `store` under `url`: a grant saved by an earlier run is used (and
    /// refreshed) before anything asks the user.
    pub fn with_store(
        oauth: OAuthClient,
        url: impl Into<String>,
        store: Arc<dyn TokenStore>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                oauth,
                url: url.into(),
                store,
                state: Mutex::new(State::default()),
                turn: Turn::new(()),
            }),
        }
    }

    /// The grant in use, if there is one.
    pub fn grant(&self) -> Option<Grant> {
        self.state().grant.clone()
    }

    /// Why the last renewal failed, if it did (the transport only sees the server's refusal).
    pub fn last_error(&self) -> Option<String> {
        self.state().last_error.clone()
    }

    /// Gets a grant now, without waiting for a request to be refused: the saved one (refreshed
    /// when it is due), else the whole flow from the endpoint's metadata.
    ///
    /// # Errors
    /// The flow's [`AuthError`], or the store's.
    pub async fn login(&self) -> Result<Grant, AuthError> {
        let _turn = self.inner.turn.lock().await;
        let kept = self.state().grant.clone();
        if let Some(grant) = kept {
            if !grant.token.expires_within(RENEW_MARGIN) {
                return Ok(grant);
            }
            if let Ok(grant) = self.refresh(&grant).await {
                return Ok(grant);
            }
        }
        let grant = self.inner.oauth.authorize(&self.inner.url, None).await?;
        self.keep(grant)
    }

    /// Forgets the grant, here and in the store.
    ///
    /// # Errors
    /// The store's.
    pub fn logout(&self) -> Result<bool, AuthError> {
        *self.state() = State {
            loaded: true,
            ..State::default()
        };
        Ok(self.inner.store.remove(&self.inner.url)?)
    }

    /// The state, read from the store the first time.
    fn state(&self) -> MutexGuard<'_, State> {
        let mut state = self
            .inner
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !state.loaded {
            state.loaded = true;
            match self.inner.store.load(&self.inner.url) {
                Ok(Some(grant)) => {
                    self.inner
                        .oauth
                        .remember(&grant.issuer, grant.client.clone());
                    state.header = grant.token.header();
                    state.grant = Some(grant);
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(%error, "the saved token could not be read");
                    state.last_error = Some(error.to_string());
                }
            }
        }
        state
    }

    /// Saves `grant`, then uses it.
    fn keep(&self, grant: Grant) -> Result<Grant, AuthError> {
        if let Err(error) = self.inner.store.save(&self.inner.url, &grant) {
            tracing::warn!(%error, "a new token could not be saved, so it is not used");
            let error = AuthError::Store(error);
            self.state().last_error = Some(error.to_string());
            return Err(error);
        }
        let mut state = self.state();
        state.header = grant.token.header();
        state.grant = Some(grant.clone());
        state.last_error = None;
        Ok(grant)
    }

    /// Refreshes `grant` and keeps the result. When the server no longer honours the refresh
    /// token, it is dropped, so it is not tried again.
    async fn refresh(&self, grant: &Grant) -> Result<Grant, AuthError> {
        match self.inner.oauth.refresh(grant).await {
            Ok(fresh) => self.keep(fresh),
            Err(error) => {
                tracing::warn!(%error, "the token could not be refreshed");
                if matches!(error, AuthError::InvalidGrant) {
                    let mut state = self.state();
                    if let Some(kept) = state.grant.as_mut() {
                        kept.token.refresh_token = None;
                    }
                }
                Err(error)
            }
        }
    }

    /// The whole flow again, from `challenge`.
    async fn reauthorize(&self, challenge: Option<&Challenge>) -> bool {
        match self.inner.oauth.authorize(&self.inner.url, challenge).await {
            Ok(grant) => self.keep(grant).is_ok(),
            Err(error) => {
                tracing::warn!(%error, "authorization failed");
                self.state().last_error = Some(error.to_string());
                false
            }
        }
    }
}

impl Authorizer for OAuthSession {
    fn authorization(&self) -> Option<HeaderValue> {
        self.state().header.clone()
    }

    fn renew(&self) -> BoxFuture<'_, ()> {
        let due = |state: &State| {
            state
                .grant
                .as_ref()
                .filter(|g| g.token.refresh_token.is_some())
                .filter(|g| g.token.expires_within(RENEW_MARGIN))
                .cloned()
        };
        if due(&self.state()).is_none() {
            return Box::pin(futures::future::ready(()));
        }
        Box::pin(async move {
            let _turn = self.inner.turn.lock().await;
            // Another request may have refreshed it while this one waited.
            let Some(grant) = due(&self.state()) else {
                return;
            };
            let _ = self.refresh(&grant).await;
        })
    }

    fn accepted(&self, sent: Option<&HeaderValue>) {
        let mut state = self.state();
        if sent.is_some() && state.refreshed.as_ref() == sent {
            // The token refreshed after a 401 works: a later 401 may refresh again.
            state.refreshed = None;
        }
    }

    fn refused<'a>(
        &'a self,
        status: StatusCode,
        challenges: &'a [String],
        sent: Option<&'a HeaderValue>,
    ) -> BoxFuture<'a, bool> {
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
            let _turn = self.inner.turn.lock().await;
            let (current, refreshed, grant) = {
                let state = self.state();
                (
                    state.header.clone(),
                    state.refreshed.clone(),
                    state.grant.clone(),
                )
            };
            if current.is_some() && current.as_ref() != sent {
                // Renewed by another request since this one was sent.
                return true;
            }
            if status == StatusCode::UNAUTHORIZED
                && let Some(grant) = grant.filter(|g| g.token.refresh_token.is_some())
                && (sent.is_none() || refreshed.as_ref() != sent)
                && self.refresh(&grant).await.is_ok()
            {
                let mut state = self.state();
                state.refreshed = state.header.clone();
                return true;
            }
            if status == StatusCode::UNAUTHORIZED {
                self.state().header = None;
            }
            self.reauthorize(challenge.as_ref()).await
        })
    }
}
