//! Errors and peer-sent bodies as short, one-line text, for messages a user reads. Every
//! transport reports failures this way, so they read alike.

/// An error and its causes on one line, `outer: cause: root`, skipping a cause whose text the
/// line already holds (many errors repeat their source in their own message).
///
/// ```
/// let io = std::io::Error::other("connection reset");
/// assert_eq!(tidewire_core::text::chain(&io), "connection reset");
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
///
/// Also the one way to quote a peer's text (a method, tool or prompt name, a URI, an id, a serde
/// error that quotes the input) in a message sent back or logged: the result is at most 200
/// characters plus the `…`, so under a kilobyte however large the input. It allocates only what
/// it keeps. A control character (a terminal escape, say) or a bidirectional override is
/// replaced by `�`, so the text cannot drive a terminal or reorder a log line.
///
/// ```
/// use tidewire_core::text::excerpt;
///
/// assert_eq!(excerpt("tools/call"), "tools/call");
/// let cut = excerpt(&"x".repeat(2 << 20));
/// assert!(cut.len() < 210 && cut.ends_with('…'));
/// assert_eq!(excerpt("a\u{1b}[2J\u{202e}b"), "a�[2J�b");
/// ```
pub fn excerpt(body: &str) -> String {
    const MAX_CHARS: usize = 200;
    let mut out = String::with_capacity(body.len().min(MAX_CHARS));
    let mut kept = 0;
    for word in body.split_whitespace() {
        // A space between words, then the word, a character at a time while there is room.
        let space = (kept > 0).then_some(' ');
        for c in space.into_iter().chain(word.chars()) {
            if kept == MAX_CHARS {
                out.push('…');
                return out;
            }
            out.push(if printable(c) { c } else { '\u{FFFD}' });
            kept += 1;
        }
    }
    out
}

/// Not a control character, nor one that reorders the text around it (the bidirectional
/// embeddings, overrides and isolates).
fn printable(c: char) -> bool {
    !c.is_control() && !matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The message a panic was raised with (what `catch_unwind` hands back), for the error that
/// reports it.
///
/// ```
/// let panic = std::panic::catch_unwind(|| panic!("boom")).expect_err("it panics");
/// assert_eq!(tidewire_core::text::panic_message(&*panic), "boom");
/// ```
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(text) = panic.downcast_ref::<&str>() {
        (*text).to_owned()
    } else if let Some(text) = panic.downcast_ref::<String>() {
        text.clone()
    } else {
        "a panic without a message".to_owned()
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
        assert_eq!(excerpt("  "), "");
        let exact = "a".repeat(200);
        assert_eq!(excerpt(&exact), exact, "200 characters are kept whole");
        assert_eq!(excerpt(&format!("{exact} b")), format!("{exact}…"));
        let huge = excerpt(&"m".repeat(2 << 20));
        assert!(huge.len() <= 203, "{}", huge.len());
    }
}
