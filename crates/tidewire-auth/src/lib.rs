//! Authorization for tidewire (OAuth 2.1 as MCP uses it), the resource server's side: what a
//! tidewire HTTP server needs to accept only requests that carry a valid access token.
//!
//! - [`BearerLayer`]: a tower layer in front of an MCP endpoint. It reads
//!   `Authorization: Bearer <token>`, asks a [`TokenVerifier`] who the token acts for and with
//!   which scopes, and answers what the specification asks: 401 with a `WWW-Authenticate`
//!   challenge naming the protected-resource metadata (and the scopes) when the token is
//!   missing or not valid, 403 `insufficient_scope` naming every scope needed, 400 for a
//!   malformed header. A request that passes carries its [`VerifiedToken`] and its
//!   [`Principal`](tidewire_core::transport::Principal) in its extensions, which the tidewire
//!   HTTP servers hand to handlers.
//! - [`ProtectedResourceMetadata`]: the RFC 9728 document the challenge points to, and the
//!   well-known path it is served at.
//! - [`Challenge`]: one `WWW-Authenticate` challenge, written and read (RFC 6750, RFC 9110
//!   quoting), for both sides.
//! - [`StaticTokens`]: a verifier of tokens known in advance (tests, development); with the
//!   feature `jwt`, [`JwtVerifier`] (JWT access tokens against the server's key set) and
//!   [`Introspection`] (RFC 7662).
//! - [`client`] (feature `client`): the host's side, from a 401 to an access token.
#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod challenge;
#[cfg(feature = "client")]
pub mod client;
#[cfg(any(feature = "client", feature = "jwt"))]
mod fetch;
#[cfg(feature = "jwt")]
mod introspection;
#[cfg(feature = "jwt")]
mod jwt;
mod layer;
mod metadata;
mod verify;

pub use challenge::{Challenge, parse_challenges};
#[cfg(feature = "jwt")]
pub use introspection::{DEFAULT_ANSWER_CACHE, DEFAULT_CACHED_ANSWERS, Introspection};
#[cfg(feature = "jwt")]
pub use jwt::JwtVerifier;
pub use layer::{BearerAuth, BearerLayer, DEFAULT_RECHECK, LeasedBody};
pub use metadata::{ProtectedResourceMetadata, well_known_path};
pub use verify::{StaticTokens, TokenError, TokenVerifier, VerifiedToken};
