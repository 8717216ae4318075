//! What reaches an SSE parser: an event-stream body decoded as the SSE specification says (one
//! leading byte-order mark dropped, UTF-8 decoded with U+FFFD for invalid bytes, CRLF and CR read
//! as LF), handed over one complete line at a time. Both SSE clients (Streamable HTTP and legacy
//! HTTP+SSE) put it in front of eventsource-stream.
//!
//! eventsource-stream 0.2.3 is not safe on a raw body:
//!
//! - it drops a leading BOM by slicing its text at byte 1, inside the 3-byte character: a panic;
//! - after an invalid UTF-8 sequence it keeps every later byte buffered until the stream ends
//!   (memory without bound, and no further event);
//! - it re-scans a partial line with every chunk, and copies the rest of its buffer after every
//!   line it parses (time quadratic in the size of a line, or of a chunk);
//! - it holds back an event whose last line ends with a lone CR until more bytes arrive.
//!
//! Fed only complete, LF-terminated lines of valid UTF-8 that never start with U+FEFF, none of
//! this can happen.

use bytes::Bytes;

/// The UTF-8 byte-order mark, U+FEFF.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// U+FFFD REPLACEMENT CHARACTER, what the UTF-8 decode algorithm puts for an invalid sequence.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// Turns the chunks of an event-stream body into lines for a parser.
///
/// ```
/// use bytes::Bytes;
/// use tidewire_core::http::sse_lines::SseLines;
///
/// let mut lines = SseLines::default();
/// assert!(lines.feed(Bytes::from_static(b"\xEF\xBB")).is_empty());
/// let out = lines.feed(Bytes::from_static(b"\xBFdata: x\r\n"));
/// assert_eq!(out, vec![Bytes::from_static(b"data: x\n")]);
/// ```
#[derive(Debug)]
pub struct SseLines {
    /// The first bytes of the body while they may still be a BOM; `None` once that is decided.
    head: Option<Vec<u8>>,
    /// An incomplete UTF-8 sequence at the end of the last chunk.
    carry: Vec<u8>,
    /// The start of a line whose end has not arrived yet.
    partial: Vec<u8>,
    /// The last byte seen was a CR: an LF right after it ends nothing more.
    after_cr: bool,
}

impl Default for SseLines {
    fn default() -> Self {
        Self {
            head: Some(Vec::new()),
            carry: Vec::new(),
            partial: Vec::new(),
            after_cr: false,
        }
    }
}

impl SseLines {
    /// Takes the next chunk of the body and returns the lines it completes, each ending with one
    /// LF. What follows the last line end waits for the next chunk; at the end of the body it is
    /// dropped, as the specification says of an unfinished line.
    pub fn feed(&mut self, chunk: Bytes) -> Vec<Bytes> {
        let mut lines = Vec::new();
        if let Some(chunk) = self.strip_bom(chunk) {
            let text = self.decode(chunk);
            self.split(&text, &mut lines);
        }
        lines
    }

    /// Drops a BOM at the very start of the body, even when it arrives split across chunks.
    /// `None` while the bytes so far may still be the start of one.
    fn strip_bom(&mut self, chunk: Bytes) -> Option<Bytes> {
        let Some(head) = self.head.as_mut() else {
            // Decided: everything after the start passes as it is.
            return Some(chunk);
        };
        let bytes = if head.is_empty() {
            chunk
        } else {
            let mut joined = std::mem::take(head);
            joined.extend_from_slice(&chunk);
            Bytes::from(joined)
        };
        if bytes.len() < BOM.len() && BOM.starts_with(&bytes[..]) {
            head.extend_from_slice(&bytes);
            return None;
        }
        self.head = None;
        if bytes.starts_with(BOM) {
            Some(bytes.slice(BOM.len()..))
        } else {
            Some(bytes)
        }
    }

    /// The chunk as valid UTF-8: each invalid sequence becomes U+FFFD, and an incomplete one at
    /// the end waits for the next chunk.
    fn decode(&mut self, chunk: Bytes) -> Bytes {
        if !self.carry.is_empty() {
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(&chunk);
            return self.lossy(&joined);
        }
        match std::str::from_utf8(&chunk) {
            Ok(_) => chunk,
            Err(e) if e.error_len().is_none() => {
                let valid = e.valid_up_to();
                self.carry.extend_from_slice(&chunk[valid..]);
                chunk.slice(..valid)
            }
            Err(_) => self.lossy(&chunk),
        }
    }

    /// Decodes `rest` with replacement characters; an incomplete sequence at its end is carried.
    fn lossy(&mut self, mut rest: &[u8]) -> Bytes {
        let mut text = Vec::with_capacity(rest.len() + REPLACEMENT.len());
        loop {
            match std::str::from_utf8(rest) {
                Ok(_) => {
                    text.extend_from_slice(rest);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.extend_from_slice(valid);
                    match e.error_len() {
                        Some(len) => {
                            text.extend_from_slice(REPLACEMENT);
                            rest = after.get(len..).unwrap_or_default();
                        }
                        None => {
                            self.carry.extend_from_slice(after);
                            break;
                        }
                    }
                }
            }
        }
        Bytes::from(text)
    }

    /// Cuts valid text at its line ends (LF, CR, CRLF — a CRLF may be split across chunks).
    fn split(&mut self, text: &Bytes, lines: &mut Vec<Bytes>) {
        if text.is_empty() {
            return;
        }
        let mut start = 0;
        if std::mem::take(&mut self.after_cr) && text.first() == Some(&b'\n') {
            start = 1;
        }
        while let Some(offset) = text[start..].iter().position(|&b| b == b'\n' || b == b'\r') {
            let end = start + offset;
            let cr = text[end] == b'\r';
            self.line(text, start, end, cr, lines);
            start = end + 1;
            if cr {
                match text.get(start) {
                    Some(b'\n') => start += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.partial.extend_from_slice(&text[start..]);
    }

    /// Completes the line `text[start..end]` (after what was partial) with an LF.
    fn line(&mut self, text: &Bytes, start: usize, end: usize, cr: bool, lines: &mut Vec<Bytes>) {
        let line = if self.partial.is_empty() && !cr {
            // The line and its LF, as they came: no copy.
            text.slice(start..=end)
        } else {
            let mut line = std::mem::take(&mut self.partial);
            line.extend_from_slice(&text[start..end]);
            line.push(b'\n');
            Bytes::from(line)
        };
        // A line that starts with U+FEFF (after the one BOM the stream may start with) is a field
        // whose name starts with it, which the specification ignores; and eventsource-stream
        // would slice it badly if it came first. Dropping it changes nothing else.
        if !line.starts_with(BOM) {
            lines.push(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `chunks` and returns all the lines, joined.
    fn run(chunks: &[&[u8]]) -> String {
        let mut lines = SseLines::default();
        let mut out = Vec::new();
        for chunk in chunks {
            for line in lines.feed(Bytes::copy_from_slice(chunk)) {
                assert!(line.ends_with(b"\n") && !line.is_empty(), "{line:?}");
                assert!(std::str::from_utf8(&line).is_ok(), "{line:?}");
                out.extend_from_slice(&line);
            }
        }
        String::from_utf8(out).expect("the lines are UTF-8")
    }

    #[test]
    fn one_leading_bom_is_dropped_wherever_the_chunks_split_it() {
        let body: &[u8] = b"\xEF\xBB\xBFdata: x\n\n";
        for cut in 0..=body.len() {
            let (a, b) = body.split_at(cut);
            assert_eq!(run(&[a, b]), "data: x\n\n", "cut at {cut}");
        }
        assert_eq!(
            run(&[b"\xEF", b"\xBB", b"", b"\xBF", b"data: x\n\n"]),
            "data: x\n\n"
        );
    }

    #[test]
    fn what_only_looks_like_a_bom_is_kept_as_text() {
        assert_eq!(run(&[b"\xEF\xBB", b"A\n"]), "\u{FFFD}A\n");
        assert_eq!(run(&[b"\xEF", b"data: x\n"]), "\u{FFFD}data: x\n");
        // A BOM later in the body is no BOM: the line it starts is ignored, as the spec says.
        assert_eq!(run(&[b"data: x\n", b"\xEF\xBB\xBFdata: y\n"]), "data: x\n");
    }

    #[test]
    fn a_second_bom_line_never_reaches_the_parser() {
        assert_eq!(
            run(&[b"\xEF\xBB\xBF\xEF\xBB\xBF: c\n\ndata: x\n\n"]),
            "\ndata: x\n\n"
        );
    }

    #[test]
    fn line_ends_become_lf_even_split_across_chunks() {
        assert_eq!(run(&[b"a\r\nb\rc\n\r\n"]), "a\nb\nc\n\n");
        assert_eq!(run(&[b"a\r", b"\nb\r", b"", b"\n"]), "a\nb\n");
        assert_eq!(run(&[b"a\r", b"b\r", b"\r"]), "a\nb\n\n");
        assert_eq!(run(&[b"da", b"ta: 1", b"2\n"]), "data: 12\n");
        assert_eq!(run(&[b"no end yet"]), "");
    }

    #[test]
    fn invalid_utf8_is_replaced_and_split_characters_are_joined() {
        assert_eq!(run(&[b"a\xFFb\n", b"data: ok\n"]), "a\u{FFFD}b\ndata: ok\n");
        assert_eq!(run(&[b"\xE2\x82", b"\xAC\n"]), "\u{20AC}\n");
        assert_eq!(run(&[b"x\xE2", b"\x82", b"\xAC\n"]), "x\u{20AC}\n");
        assert_eq!(run(&[b"\xE2\x82", b"A\n"]), "\u{FFFD}A\n");
    }

    #[tokio::test]
    async fn the_parser_gets_events_from_a_body_that_starts_with_a_bom() {
        use eventsource_stream::Eventsource;
        use futures::StreamExt;
        let check = async {
            let chunks: [&'static [u8]; 3] = [b"\xEF", b"\xBB", b"\xBFid: 1\r\ndata: {}\r\n\r"];
            let mut decoder = SseLines::default();
            let lines = futures::stream::iter(chunks)
                .map(move |chunk| decoder.feed(Bytes::from_static(chunk)))
                .flat_map(futures::stream::iter)
                .map(Ok::<_, std::convert::Infallible>);
            let events: Vec<_> = lines.eventsource().collect().await;
            assert_eq!(events.len(), 1, "{events:?}");
            let event = events
                .into_iter()
                .next()
                .and_then(Result::ok)
                .expect("an event");
            assert_eq!((event.id.as_str(), event.data.as_str()), ("1", "{}"));
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), check)
            .await
            .expect("in time");
    }
}
