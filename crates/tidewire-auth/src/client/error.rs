//! Why a client could not get a token, or keep one.

use std::path::PathBuf;

/// The authorization flow failed; nothing was sent to a server it should not trust.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// An HTTP exchange with the resource or an authorization server failed.
    #[error("{url}: {reason}")]
    Http {
        /// The URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// A metadata document is not there (404, or not JSON).
    #[error("{url}: no metadata there")]
    NotFound {
        /// The URL.
        url: String,
    },
    /// The protected-resource metadata names another resource than the one asked.
    #[error("the resource metadata names {named:?}, not this server ({url})")]
    ResourceMismatch {
        /// The resource named.
        named: String,
        /// The MCP endpoint.
        url: String,
    },
    /// The authorization server's metadata says it is another issuer (RFC 8414 §3.3).
    #[error("the authorization server metadata is for issuer {got:?}, not {expected:?}")]
    IssuerMismatch {
        /// The issuer the resource named.
        expected: String,
        /// The issuer its metadata claims.
        got: String,
    },
    /// The MCP server names an authorization server other than the one the client's
    /// pre-registered credentials are for ([`TrustedIssuer::Exactly`](super::TrustedIssuer)),
    /// and the grant has no browser to register anew: nothing was sent to it.
    #[error(
        "the authorization server {named:?} is not {trusted:?}, the one this client's credentials are for; nothing was sent to it"
    )]
    UntrustedIssuer {
        /// The issuer the credentials are for.
        trusted: String,
        /// The issuer the MCP server named (an excerpt, control characters escaped when shown).
        named: String,
    },
    /// An endpoint taken from metadata (an authorization server, its authorization, token or
    /// registration endpoint) is neither `https` nor `http` on a loopback host: nothing is
    /// fetched from it, posted to it or opened in a browser (a `file:` or `javascript:` URL, or
    /// plain `http` across a network, from a hostile or misconfigured server).
    #[error("the {what} {url:?} is neither https nor http on this machine (loopback); refused")]
    InsecureEndpoint {
        /// Which endpoint.
        what: &'static str,
        /// The URL (an excerpt, control characters escaped when shown).
        url: String,
    },
    /// The authorization server cannot be used as the specification asks (no PKCE S256, no
    /// way to register a client, …).
    #[error("the authorization server cannot be used: {0}")]
    Unusable(String),
    /// The authorization response is not for this request: wrong `state`, an `iss` that is
    /// not the issuer (RFC 9207), an error from the server, no code.
    #[error("the authorization response is refused: {0}")]
    Authorization(String),
    /// The token endpoint refused, or answered something that is not a token.
    #[error("the token request failed: {0}")]
    Token(String),
    /// The authorization server no longer honours the grant (`invalid_grant`: a refresh
    /// token expired, revoked or already rotated away, a code used twice); authorize again.
    #[error("the authorization server no longer honours the grant (invalid_grant)")]
    InvalidGrant,
    /// The token store could not keep or give back a grant; a token that could not be kept
    /// is not used.
    #[error("the token store failed: {0}")]
    Store(#[from] StoreError),
    /// More authorization attempts than allowed for one resource.
    #[error("gave up after {0} authorization attempts")]
    TooManyAttempts(usize),
}

/// Why a store could not keep or give back a grant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Reading or writing the file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The file is not a token file this version can read.
    #[error("{path}: not a tidewire token file ({reason})")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Another process held the token file's lock for longer than a save waits.
    #[error("{path}: still locked by another process after {waited:?}")]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// How long the save waited.
        waited: std::time::Duration,
    },
    /// The store already holds its most grants ([`MAX_GRANTS`](super::MAX_GRANTS)).
    #[error("the token store is full")]
    Full,
    /// No place for a file store: neither a config directory nor a home is known.
    #[error("no config directory: set XDG_CONFIG_HOME or HOME")]
    NoConfigDir,
}
