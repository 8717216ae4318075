//! `skill://` URIs: the naming rules of a skill, and path segments as URI segments.

use crate::error::SkillError;

/// The scheme of the URIs this crate builds.
pub(crate) const SCHEME: &str = "skill://";

/// The file name of a skill's instructions.
pub(crate) const SKILL_MD: &str = "SKILL.md";

/// Whether `name` follows the Agent Skills naming rules the extension adopts: 1–64 characters
/// of `a-z`, `0-9` and `-`, with no hyphen at either end and no two in a row.
pub fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 64
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
        && !name.contains("--")
}

/// `path` (segments joined by `/`) as URI path segments: each checked (not empty, not `.` or
/// `..`, no `\`) and percent-encoded outside RFC 3986's unreserved characters.
pub(crate) fn encode_path(path: &str) -> Result<String, SkillError> {
    let refuse = |reason: &str| SkillError::Path {
        path: path.to_owned(),
        reason: reason.to_owned(),
    };
    if path.is_empty() {
        return Err(refuse("it is empty"));
    }
    let mut out = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        match segment {
            "" => {
                return Err(refuse(
                    "it has an empty segment (a leading, trailing or double `/`)",
                ));
            }
            "." | ".." => return Err(refuse("`.` and `..` are not allowed")),
            s if s.contains('\\') => return Err(refuse("use `/` between segments, not `\\`")),
            s if s.chars().any(char::is_control) => {
                return Err(refuse("it holds a control character"));
            }
            _ => {}
        }
        if i > 0 {
            out.push('/');
        }
        for byte in segment.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
                out.push(char::from(byte));
            } else {
                out.push('%');
                out.push(char::from(HEX[usize::from(byte >> 4)]));
                out.push(char::from(HEX[usize::from(byte & 0x0f)]));
            }
        }
    }
    Ok(out)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The folders above `uri` (a `skill://` URI), nearest the root first: `skill://a/b/c.md` has
/// `skill://a` and `skill://a/b`.
pub(crate) fn parents(uri: &str) -> impl Iterator<Item = &str> {
    let rest = uri.strip_prefix(SCHEME).unwrap_or("");
    rest.match_indices('/')
        .map(move |(i, _)| &uri[..SCHEME.len() + i])
}

/// The last segment of a URI.
pub(crate) fn last_segment(uri: &str) -> &str {
    uri.rsplit('/').next().unwrap_or(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for good in ["pdf-processing", "a", "x1", &"a".repeat(64)] {
            assert!(is_valid_name(good), "{good}");
        }
        for bad in ["", "-a", "a-", "a--b", "PDF", "a_b", "a b", &"a".repeat(65)] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn paths_are_checked_and_encoded_by_segment() {
        assert_eq!(encode_path("acme/billing").expect("path"), "acme/billing");
        assert_eq!(
            encode_path("docs/my file.md").expect("path"),
            "docs/my%20file.md"
        );
        assert_eq!(encode_path("é").expect("path"), "%C3%A9");
        for bad in ["", "/a", "a/", "a//b", "../x", "a/./b", "a\\b", "a\nb"] {
            assert!(encode_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn parents_walk_down_from_the_authority() {
        let all: Vec<&str> = parents("skill://a/b/c.md").collect();
        assert_eq!(all, ["skill://a", "skill://a/b"]);
        assert_eq!(last_segment("skill://a/b/c.md"), "c.md");
    }
}
