//! The OAuth 2.1 client of an MCP host (feature `client`): from a 401's challenge to an access
//! token, as the MCP specification's authorization section asks.
//!
//! [`OAuthClient::authorize`] runs the whole flow for one MCP endpoint:
//! 1. the protected-resource metadata: at the challenge's `resource_metadata`, else at the
//!    well-known URL of the endpoint's path, else the root one; its `resource` must name this
//!    endpoint (else [`AuthError::ResourceMismatch`], before any authorization server is asked);
//! 2. the authorization server's metadata, in the specification's order of well-known URLs;
//!    its `issuer` must be exactly the one the resource named;
//! 3. the client's credentials there, kept per issuer: pre-registered ones (only at the issuer
//!    they were configured for, [`TrustedIssuer`]), else a Client ID
//!    Metadata Document URL where the server accepts one, else dynamic registration (with
//!    `application_type`); a new issuer means a new registration, never another's client id;
//! 4. the scopes: the challenge's, else the resource's `scopes_supported`, else none, with
//!    `offline_access` only where the server lists it; a 403 `insufficient_scope` asks again
//!    with the union of what was asked and what is missing, at most three times in a row;
//! 5. the authorization request with PKCE S256, `state` and RFC 8707 `resource`, through a
//!    [`FrontChannel`] ([`LoopbackRedirect`] for a person with a browser, [`HeadlessRedirect`]
//!    for a server that approves at once); the response's `state` and RFC 9207 `iss` are checked exactly;
//! 6. the token request, with `resource` and the client's authentication method
//!    (`client_secret_basic`, `client_secret_post`, `none`, or `private_key_jwt` with a
//!    `ClientKey` under the feature `jwt`).
//!
//! Without a person at a browser, [`GrantFlow`] chooses the `client_credentials` grant (a
//! machine with its own credentials) or enterprise-managed authorization (an identity
//! provider's ID token exchanged for an identity assertion, then a `jwt-bearer` grant), or
//! workload identity federation (a platform-issued JWT as a `jwt-bearer` grant).
//!
//! [`OAuthClient::refresh`] renews a [`Grant`] with its refresh token (with `resource` again),
//! keeping a rotated refresh token.
//!
//! [`OAuthSession`] plugs it into the HTTP client transports (both eras, and legacy HTTP+SSE)
//! as their `authorizer`: a token about to expire is refreshed before the request, a 401
//! refreshes once and then runs the flow again, a 403 `insufficient_scope` gets a token with
//! more scopes, and the refused request is sent once more. Its grants live in a
//! [`TokenStore`]: [`MemoryStore`] by default, [`FileStore`] (one private file, written
//! atomically) for a program that runs again later.

#[cfg(feature = "jwt")]
mod assertion;
mod discovery;
mod error;
mod flow;
mod grants;
mod http;
mod loopback;
mod oauth;
mod registration;
mod session;
mod store;
mod token;

#[cfg(feature = "jwt")]
pub use assertion::ClientKey;
#[doc(hidden)]
pub use discovery::fuzz_server_metadata as __fuzz_server_metadata;
pub use error::AuthError;
pub use flow::{FrontChannel, HeadlessRedirect};
pub use grants::{GrantFlow, IdentityProvider, WorkloadAssertion};
pub use loopback::LoopbackRedirect;
pub use oauth::{MAX_ATTEMPTS, OAuthClient, OAuthConfig, TrustedIssuer};
pub use registration::{AuthMethod, Credentials};
pub use session::{OAuthSession, RENEW_MARGIN};
pub use store::{FileStore, LOCK_WAIT, MAX_GRANTS, MemoryStore, StoreError, TokenStore};
pub use token::{Grant, Token};
