//! Bounded HTTP bodies for everything in this crate that asks a server: the client's
//! discovery and token requests, a verifier's key set or introspection answer.

/// The HTTP client of a verifier: ten seconds per exchange, no redirects followed (a key set or
/// an introspection answer comes from where it was configured, or not at all).
#[cfg(feature = "jwt")]
pub(crate) fn verifier_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap_or_default()
}

/// The body of `response`, or why not: at most `max` bytes.
pub(crate) async fn bounded(
    mut response: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > max {
            return Err(format!("the response is longer than {max} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Form-encoding of one value (`application/x-www-form-urlencoded`; RFC 6749 Appendix B, which
/// client credentials also get in HTTP Basic).
pub(crate) fn form_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                out.push(char::from(byte));
            }
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}
