//! Matching URIs against resource templates.
//!
//! Supports the simple-string expressions of RFC 6570 (`{var}`), which is what resource
//! templates use in practice: a variable matches one or more characters up to the next literal
//! part of the template and never spans a `/`. Other operators (`{+var}`, `{?q}`, …) are matched
//! as literals, so a template that uses them simply never matches.

use std::collections::HashMap;

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UriTemplate {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var(String),
}

impl UriTemplate {
    /// Parses a template such as `test://template/{id}/data`.
    pub fn new(template: &str) -> Self {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}').map(|c| open + c) else {
                break;
            };
            let name = &rest[open + 1..close];
            let simple = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if open > 0 {
                parts.push(Part::Literal(rest[..open].to_owned()));
            }
            if simple {
                parts.push(Part::Var(name.to_owned()));
            } else {
                parts.push(Part::Literal(rest[open..=close].to_owned()));
            }
            rest = &rest[close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.to_owned()));
        }
        Self {
            source: template.to_owned(),
            parts,
        }
    }

    /// The template text.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// The variables of `uri`, if it matches.
    pub fn matches(&self, uri: &str) -> Option<HashMap<String, String>> {
        let mut vars = HashMap::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(lit) => rest = rest.strip_prefix(lit.as_str())?,
                Part::Var(name) => {
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        Some(Part::Var(_)) => return None,
                        None => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    vars.insert(name.clone(), value.to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(vars)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_simple_variables() {
        let t = UriTemplate::new("test://template/{id}/data");
        let vars = t.matches("test://template/42/data").expect("match");
        assert_eq!(vars.get("id").map(String::as_str), Some("42"));
        assert!(t.matches("test://template//data").is_none());
        assert!(t.matches("test://template/a/b/data").is_none());
        assert!(t.matches("test://template/42/data/more").is_none());
        let t = UriTemplate::new("file:///{dir}/{name}");
        let vars = t.matches("file:///etc/hosts").expect("match");
        assert_eq!(vars.get("name").map(String::as_str), Some("hosts"));
    }

    #[test]
    fn operators_are_literals() {
        let t = UriTemplate::new("search://{?q}");
        assert!(t.matches("search://x").is_none());
        assert!(t.matches("search://{?q}").is_some());
    }
}
