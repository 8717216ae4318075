//! The redirect policy of the `reqwest::Client`s tidewire's HTTP clients build (this one and the
//! legacy HTTP+SSE client of `tidewire-sse`): redirects are followed only within the origin of
//! the URL asked for.
//!
//! reqwest's default policy follows up to 10 redirects anywhere, re-sending the user's headers
//! (API keys given with `header`), `Mcp-Session-Id` and, on 307/308, the body to whatever host the
//! server names; it drops only `Authorization` and cookies. A server, or whoever can answer in its
//! place, could collect them; it would also make the legacy client's same-origin check of the
//! `endpoint` event moot.

use std::fmt;

use reqwest::Url;
use reqwest::redirect::{Attempt, Policy};

use super::error::excerpt;

/// The most redirects followed for one request (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// A redirect policy that follows redirects only within the origin (scheme, host and port) of the
/// URL asked for, at most 10 of them, and fails the request otherwise with an error naming the
/// target (without its user info, query or fragment). The clients tidewire builds use it; give it
/// to a `reqwest::Client` of your own (`ClientBuilder::redirect`) to keep the same protection.
pub fn same_origin_policy() -> Policy {
    Policy::custom(|attempt: Attempt<'_>| {
        let verdict = check(attempt.url(), attempt.previous());
        match verdict {
            Ok(()) => attempt.follow(),
            Err(refused) => attempt.error(refused),
        }
    })
}

/// Whether a redirect to `next` may be followed, `previous` being the URLs requested so far (the
/// first is the one the transport asked for).
fn check(next: &Url, previous: &[Url]) -> Result<(), RefusedRedirect> {
    let Some(first) = previous.first() else {
        return Ok(());
    };
    if next.origin() != first.origin() {
        return Err(RefusedRedirect::OtherOrigin {
            target: sanitized(next),
        });
    }
    if previous.len() > MAX_REDIRECTS {
        return Err(RefusedRedirect::TooMany);
    }
    Ok(())
}

/// The target of a redirect as an error message shows it: no user name or password, no query or
/// fragment (they may hold tokens), and not too long.
fn sanitized(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("");
    let _ = shown.set_password(None);
    shown.set_query(None);
    shown.set_fragment(None);
    excerpt(shown.as_str())
}

/// Why a redirect was not followed; the source of the `reqwest::Error` the request fails with.
#[derive(Debug)]
pub(crate) enum RefusedRedirect {
    /// The server redirected to another origin.
    OtherOrigin {
        /// Where to, sanitized.
        target: String,
    },
    /// Too many redirects in a row.
    TooMany,
}

impl fmt::Display for RefusedRedirect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OtherOrigin { target } => write!(
                f,
                "the server redirected the request to another origin ({target}); redirects are \
                 followed only within the scheme, host and port of the URL asked for, so headers \
                 and the session never leave it"
            ),
            Self::TooMany => write!(f, "more than {MAX_REDIRECTS} redirects"),
        }
    }
}

impl std::error::Error for RefusedRedirect {}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).expect("a valid URL")
    }

    #[test]
    fn only_redirects_within_the_origin_are_followed() {
        let first = [url("http://127.0.0.1:8000/mcp")];
        assert!(check(&url("http://127.0.0.1:8000/v2/mcp?x=1"), &first).is_ok());
        for other in [
            "http://127.0.0.1:8001/mcp",
            "https://127.0.0.1:8000/mcp",
            "http://localhost:8000/mcp",
            "http://evil.example/mcp",
        ] {
            assert!(check(&url(other), &first).is_err(), "{other}");
        }
        // Leaving and coming back is still refused at the first step out; the origin that
        // counts is the first URL's, not the last one's.
        let hops = [
            url("http://127.0.0.1:8000/mcp"),
            url("http://127.0.0.1:8000/a"),
        ];
        assert!(check(&url("http://127.0.0.1:9/b"), &hops).is_err());
        let many: Vec<Url> = (0..=MAX_REDIRECTS)
            .map(|i| url(&format!("http://127.0.0.1:8000/{i}")))
            .collect();
        assert!(matches!(
            check(&url("http://127.0.0.1:8000/x"), &many),
            Err(RefusedRedirect::TooMany)
        ));
    }

    #[test]
    fn the_refusal_names_the_target_without_secrets() {
        let first = [url("http://127.0.0.1:8000/mcp")];
        let refused = check(
            &url("http://user:pw@evil.example:9000/collect?token=abc#frag"),
            &first,
        )
        .expect_err("another origin");
        let text = refused.to_string();
        assert!(text.contains("http://evil.example:9000/collect"), "{text}");
        for secret in ["user", "pw", "token", "abc", "frag"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}
