//! Text from a peer made safe to show on a terminal.
//!
//! A server chooses the text of its progress messages, log messages, tool results, listings,
//! error messages and its stderr. Printed as they are, control characters in them would drive
//! the terminal: `ESC ] 52 ; c ; … BEL` writes the clipboard, `ESC [ 2 J` clears the screen, a
//! bare carriage return writes over the line, U+202E shows what follows backwards. [`line`] and
//! [`text`] show each such character as a visible escape instead, so it can be seen and does
//! nothing:
//!
//! | character | shown as |
//! |---|---|
//! | tab, newline, carriage return | `\t`, `\n`, `\r` ([`text`] keeps tabs, newlines and `\r\n`) |
//! | other C0 controls (U+0000–U+001F) and DEL (U+007F) | `\x1b`, `\x07`, `\x7f`: two lowercase hex digits |
//! | C1 controls (U+0080–U+009F) | `\u{9b}` |
//! | bidirectional embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) | `\u{202e}` |
//!
//! An escape sequence is disarmed by escaping its introducer (ESC, or a C1 control such as CSI
//! U+009B): the rest of it is printable and shows as itself, so `ESC [ 2 J` reads `\x1b[2J`.
//! Backslashes are left as they are: this rendering is for people to read, and `--raw` is there
//! for programs that want the bytes.

use std::borrow::Cow;

/// Which line breaks survive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Breaks {
    /// None: the text must stay on one line (a progress message, a log line, a table cell).
    Escaped,
    /// Newlines, tabs and `\r\n` line ends (tool text, a resource's text).
    Kept,
}

/// `text` for one line: every control character escaped, tabs and newlines included.
pub(crate) fn line(text: &str) -> Cow<'_, str> {
    escape(text, Breaks::Escaped)
}

/// `text` that may span lines: newlines, tabs and `\r\n` line ends kept, every other control
/// character escaped.
pub(crate) fn text(text: &str) -> Cow<'_, str> {
    escape(text, Breaks::Kept)
}

/// JSON text (as `serde_json` writes it) with DEL, the C1 controls and the bidirectional
/// controls written as JSON escapes (`\u009b`). It is the same JSON value: those characters can
/// only occur inside strings, where `\uXXXX` means the character itself. `serde_json` already
/// escapes the C0 controls in strings; the newlines of pretty printing are kept.
pub(crate) fn json(text: &str) -> Cow<'_, str> {
    replace(
        text,
        |c, _| (c.is_control() && c != '\n') || is_bidi_control(c),
        |c, out| out.push_str(&format!("\\u{:04x}", u32::from(c))),
    )
}

fn escape(text: &str, breaks: Breaks) -> Cow<'_, str> {
    replace(
        text,
        |c, next| {
            let kept = breaks == Breaks::Kept
                && (c == '\n' || c == '\t' || (c == '\r' && next == Some('\n')));
            !kept && (c.is_control() || is_bidi_control(c))
        },
        push_escape,
    )
}

/// `text` with every character for which `unsafe_char(c, next)` holds written by `write`;
/// borrowed when there is none.
fn replace(
    text: &str,
    unsafe_char: impl Fn(char, Option<char>) -> bool,
    write: impl Fn(char, &mut String),
) -> Cow<'_, str> {
    let mut out = String::new();
    // Bytes of `text` already in `out`.
    let mut copied = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        let next = chars.peek().map(|&(_, n)| n);
        if !unsafe_char(c, next) {
            continue;
        }
        out.push_str(&text[copied..at]);
        write(c, &mut out);
        copied = at + c.len_utf8();
    }
    if copied == 0 {
        return Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    Cow::Owned(out)
}

/// The visible escape of a control character.
fn push_escape(c: char, out: &mut String) {
    match c {
        '\t' => out.push_str("\\t"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        c if c.is_ascii() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
        c => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
    }
}

/// The characters that reorder the text around them (the embeddings, overrides and isolates of
/// the Unicode bidirectional algorithm): a line can then show something other than what it
/// says.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const OSC_52_AND_CLEAR: &str = "step \u{1b}]52;c;SGVsbG8=\u{7}\u{1b}[2J";

    #[test]
    fn escape_sequences_show_and_do_nothing() {
        assert_eq!(
            line(OSC_52_AND_CLEAR),
            "step \\x1b]52;c;SGVsbG8=\\x07\\x1b[2J"
        );
        assert_eq!(text(OSC_52_AND_CLEAR), line(OSC_52_AND_CLEAR));
        // The C1 form of CSI, and DEL.
        assert_eq!(line("a\u{9b}2Jb\u{7f}"), "a\\u{9b}2Jb\\x7f");
        assert_eq!(line("nul\0"), "nul\\x00");
    }

    #[test]
    fn a_bare_carriage_return_cannot_write_over_the_line() {
        assert_eq!(line("done\rfailed"), "done\\rfailed");
        assert_eq!(text("done\rfailed"), "done\\rfailed");
    }

    #[test]
    fn one_line_escapes_line_breaks_and_text_keeps_them() {
        let multi = "first\tcolumn\nsecond\r\nthird";
        assert_eq!(line(multi), "first\\tcolumn\\nsecond\\r\\nthird");
        assert_eq!(text(multi), multi);
        // A `\r` is kept only as part of `\r\n`.
        assert_eq!(text("a\r\rb\r"), "a\\r\\rb\\r");
    }

    #[test]
    fn bidirectional_overrides_are_shown() {
        assert_eq!(line("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(line("\u{2066}x\u{2069}"), "\\u{2066}x\\u{2069}");
    }

    #[test]
    fn ordinary_text_is_borrowed_unchanged() {
        for plain in ["", "héllo 🌊", "C:\\path\\x1b", "שלום עולם", "a\u{a0}b"] {
            assert!(
                matches!(line(plain), Cow::Borrowed(s) if s == plain),
                "{plain:?}"
            );
            assert!(matches!(text(plain), Cow::Borrowed(_)), "{plain:?}");
            assert!(matches!(json(plain), Cow::Borrowed(_)), "{plain:?}");
        }
    }

    #[test]
    fn json_keeps_its_value_and_loses_the_controls() {
        let value = serde_json::json!({ "text": "a\u{9b}2J\u{7f}\u{202e}\u{1b}[2J", "n": 1 });
        let pretty = serde_json::to_string_pretty(&value).unwrap_or_default();
        let clean = json(&pretty);
        assert!(
            !clean.contains(|c: char| (c.is_control() && c != '\n') || is_bidi_control(c)),
            "{clean:?}"
        );
        assert!(
            clean.contains("\\u009b") && clean.contains("\\u202e"),
            "{clean}"
        );
        let back: serde_json::Value =
            serde_json::from_str(&clean).unwrap_or(serde_json::Value::Null);
        assert_eq!(back, value);
        assert!(clean.contains('\n'), "pretty printing is kept");
    }
}
