//! Errors and peer-sent bodies as short, one-line text, for messages a user reads. Every
//! transport reports failures this way, so they read alike.

/// An error and its causes on one line, `outer: cause: root`, skipping a cause whose text the
/// line already holds (many errors repeat their source in their own message).
///
/// ```
/// let io = std::io::Error::other("connection reset");
/// assert_eq!(tidewire_core::transport::text::chain(&io), "connection reset");
/// ```
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let more = cause.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = cause.source();
    }
    text
}

/// At most 200 characters of a body (an HTTP error page, say), whitespace folded to single
/// spaces, with `…` when it was cut.
pub fn excerpt(body: &str) -> String {
    const MAX_CHARS: usize = 200;
    let line: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut chars = line.chars();
    let head: String = chars.by_ref().take(MAX_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("request failed")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn chains_causes_once() {
        let e = Outer(std::io::Error::other("connection reset"));
        assert_eq!(chain(&e), "request failed: connection reset");
    }

    #[test]
    fn excerpts_are_short_and_on_one_line() {
        let long = "é".repeat(500);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), 201);
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt("boom\n  at line 3"), "boom at line 3");
    }
}
