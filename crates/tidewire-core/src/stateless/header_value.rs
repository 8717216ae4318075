//! Header values of the 2026-07-28 HTTP transport (`Mcp-Name`, `Mcp-Param-*`): a value that is
//! not plain header-safe ASCII travels as `=?base64?<base64 of its UTF-8>?=`.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

/// The header form of `value`: itself when it is printable ASCII without leading or trailing
/// whitespace and does not look like the sentinel; otherwise the Base64 sentinel form.
pub fn encode(value: &str) -> String {
    let printable = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let looks_wrapped = value.starts_with(PREFIX) && value.ends_with(SUFFIX);
    if printable && !padded && !looks_wrapped {
        value.to_owned()
    } else {
        format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(value.as_bytes()))
    }
}

/// Why a header value cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderValueError {
    /// Not visible ASCII (or not valid as a header at all).
    #[error("the header value is not visible ASCII")]
    NotAscii,
    /// Wrapped in `=?base64?…?=`, but the inside is not valid Base64 of UTF-8 text.
    #[error("the header value is wrapped in =?base64?…?= but is not valid Base64 of UTF-8 text")]
    BadBase64,
}

/// The value a header carries: leading and trailing whitespace trimmed, and the Base64 sentinel
/// decoded when the value is wholly wrapped in it (anything else is taken literally, and
/// borrowed: no allocation).
///
/// # Errors
/// When the bytes are not ASCII, or the sentinel holds invalid Base64 or invalid UTF-8.
pub fn decode(raw: &[u8]) -> Result<Cow<'_, str>, HeaderValueError> {
    let text = std::str::from_utf8(raw).map_err(|_| HeaderValueError::NotAscii)?;
    if !text.is_ascii() {
        return Err(HeaderValueError::NotAscii);
    }
    let text = text.trim_matches(|c| c == ' ' || c == '\t');
    match text
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_suffix(SUFFIX))
    {
        Some(inner) => {
            let bytes = STANDARD
                .decode(inner)
                .map_err(|_| HeaderValueError::BadBase64)?;
            String::from_utf8(bytes)
                .map(Cow::Owned)
                .map_err(|_| HeaderValueError::BadBase64)
        }
        None => Ok(Cow::Borrowed(text)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_ascii_stays_and_the_rest_is_wrapped() {
        assert_eq!(encode("us-west1"), "us-west1");
        assert_eq!(encode("Zürich"), "=?base64?WsO8cmljaA==?=");
        assert_eq!(encode(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode("line\nbreak"), "=?base64?bGluZQpicmVhaw==?=");
        for value in ["Zürich", " padded", "=?base64?abc?=", "日本語", "tab\there"] {
            assert_eq!(decode(encode(value).as_bytes()).as_deref(), Ok(value));
        }
    }

    #[test]
    fn decoding_trims_and_refuses_bad_base64() {
        assert_eq!(decode(b"  us-west1 ").as_deref(), Ok("us-west1"));
        assert_eq!(
            decode(b"=?base64?not base64!?="),
            Err(HeaderValueError::BadBase64)
        );
        assert_eq!(
            decode(b"=?base64?WsO8cmljaA?="),
            Err(HeaderValueError::BadBase64)
        );
        // Not wholly wrapped: a literal.
        assert_eq!(
            decode(b"x=?base64?YQ==?=").as_deref(),
            Ok("x=?base64?YQ==?=")
        );
        assert_eq!(decode("é".as_bytes()), Err(HeaderValueError::NotAscii));
    }
}
