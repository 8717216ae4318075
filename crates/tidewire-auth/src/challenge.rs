//! `WWW-Authenticate` challenges (RFC 9110 §11.6.1, RFC 6750 §3), written by a resource server
//! and read by a client.

use std::fmt;

/// One challenge: a scheme (`Bearer`, `DPoP`, …) and its parameters, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The authentication scheme, as sent (compare it case-insensitively).
    pub scheme: String,
    /// The parameters, names lowercased, values unquoted.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// A `Bearer` challenge with no parameters yet.
    pub fn bearer() -> Self {
        Self {
            scheme: "Bearer".to_owned(),
            params: Vec::new(),
        }
    }

    /// Adds the parameter `name="value"`.
    #[must_use]
    pub fn with(mut self, name: &str, value: impl Into<String>) -> Self {
        self.params.push((name.to_ascii_lowercase(), value.into()));
        self
    }

    /// The value of the parameter `name` (case-insensitive), if present.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the scheme is `scheme` (case-insensitive).
    pub fn is(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }
}

/// `Bearer error="invalid_token", resource_metadata="…"`: every value quoted, `"` and `\`
/// escaped, control characters dropped (a value never splits the header).
impl fmt::Display for Challenge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.scheme)?;
        for (i, (name, value)) in self.params.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { ", " })?;
            write!(f, "{name}=\"")?;
            for c in value.chars().filter(|c| !c.is_control()) {
                if c == '"' || c == '\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("\"")?;
        }
        Ok(())
    }
}

/// Every challenge in the value of a `WWW-Authenticate` header (several may share one header,
/// separated by commas). Parameters may be quoted strings (with `\` escapes) or tokens; a
/// challenge with a `token68` instead of parameters keeps none. Whatever does not parse ends
/// the list there, so a malformed header gives what came before it.
pub fn parse_challenges(header: &str) -> Vec<Challenge> {
    let mut out = Vec::new();
    let mut rest = header;
    loop {
        rest = rest.trim_start_matches([',', ' ', '\t']);
        let (scheme, after) = take_token(rest);
        if scheme.is_empty() {
            return out;
        }
        let mut challenge = Challenge {
            scheme: scheme.to_owned(),
            params: Vec::new(),
        };
        rest = after.trim_start_matches([' ', '\t']);
        if let Some(after68) = token68(rest) {
            rest = after68;
        } else {
            loop {
                let (name, value, after) = match param(rest) {
                    Param::Read(name, value, after) => (name, value, after),
                    Param::None => break,
                    // An unterminated quoted string: nothing after it can be read.
                    Param::Broken => {
                        out.push(challenge);
                        return out;
                    }
                };
                challenge.params.push((name.to_ascii_lowercase(), value));
                rest = after.trim_start_matches([' ', '\t']);
                match rest.strip_prefix(',') {
                    Some(next) => rest = next.trim_start_matches([' ', '\t']),
                    None => break,
                }
            }
        }
        // Each round takes at least the scheme, so the loop ends.
        out.push(challenge);
    }
}

/// A `token68` (`abc123==`) standing alone at the start of `s`: what follows it.
fn token68(s: &str) -> Option<&str> {
    let (token, after) = take_token(s);
    let after = after.trim_start_matches('=');
    let next = after.trim_start_matches([' ', '\t']);
    (!token.is_empty() && (next.is_empty() || next.starts_with(','))).then_some(next)
}

enum Param<'a> {
    /// The name, the unquoted value, and what follows.
    Read(&'a str, String, &'a str),
    /// Not a parameter (the next challenge's scheme, or the end).
    None,
    /// A quoted string that never ends.
    Broken,
}

/// `name=value` at the start of `s`.
fn param(s: &str) -> Param<'_> {
    let (name, after) = take_token(s);
    let Some(after) = after.trim_start_matches([' ', '\t']).strip_prefix('=') else {
        return Param::None;
    };
    if name.is_empty() {
        return Param::None;
    }
    match take_value(after.trim_start_matches([' ', '\t'])) {
        Some((value, rest)) => Param::Read(name, value, rest),
        None => Param::Broken,
    }
}

/// A token (RFC 9110 `tchar`s) at the start of `s`, and what follows it.
fn take_token(s: &str) -> (&str, &str) {
    let end = s
        .char_indices()
        .find(|(_, c)| !is_tchar(*c))
        .map_or(s.len(), |(i, _)| i);
    s.split_at(end)
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~/".contains(c)
}

/// A quoted string or a token at the start of `s`, unescaped, and what follows it.
fn take_value(s: &str) -> Option<(String, &str)> {
    let Some(quoted) = s.strip_prefix('"') else {
        let (token, rest) = take_token(s);
        return Some((token.to_owned(), rest));
    };
    let mut value = String::new();
    let mut chars = quoted.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &quoted[i + 1..])),
            '\\' => value.push(chars.next()?.1),
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_challenge_is_written_quoted_and_read_back() {
        let written = Challenge::bearer()
            .with("error", "insufficient_scope")
            .with("scope", "mcp:read mcp:write")
            .with("error_description", "say \"please\"\r\n")
            .to_string();
        assert_eq!(
            written,
            "Bearer error=\"insufficient_scope\", scope=\"mcp:read mcp:write\", \
             error_description=\"say \\\"please\\\"\""
        );
        let read = parse_challenges(&written);
        assert_eq!(read.len(), 1);
        assert!(read[0].is("bearer"));
        assert_eq!(read[0].param("scope"), Some("mcp:read mcp:write"));
        assert_eq!(read[0].param("ERROR_DESCRIPTION"), Some("say \"please\""));
    }

    #[test]
    fn several_challenges_tokens_and_odd_spacing_are_read() {
        let read = parse_challenges(
            "DPoP algs=\"ES256\", error=use_dpop_nonce , Bearer realm=\"mcp\",resource_metadata=\"http://a/x\"",
        );
        let schemes: Vec<&str> = read.iter().map(|c| c.scheme.as_str()).collect();
        assert_eq!(schemes, ["DPoP", "Bearer"]);
        assert_eq!(read[0].param("error"), Some("use_dpop_nonce"));
        assert_eq!(read[1].param("resource_metadata"), Some("http://a/x"));
        assert_eq!(parse_challenges("Bearer"), [Challenge::bearer()]);
        // Odd quoting never panics; what was read stays.
        let odd = parse_challenges("Bearer scope=\"a, error=\"x");
        assert_eq!(odd[0].param("scope"), Some("a, error="));
        let cut = parse_challenges("Bearer scope=\"unterminated");
        assert_eq!(cut.len(), 1);
        assert_eq!(
            parse_challenges("Basic dXNlcjpwYXNz==, Bearer")[1],
            Challenge::bearer()
        );
        assert!(parse_challenges("").is_empty());
        assert!(parse_challenges("=== ,,,").is_empty());
    }
}
