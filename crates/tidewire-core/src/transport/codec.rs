//! The one codec: JSON-RPC messages to and from bytes, with a size limit.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::{Envelope, TransportError};
use crate::jsonrpc::{DecodeFailure, EncodedResult, ErrorObject, Message, RequestId, Response};

/// The default limit on one message: 8 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 8 * 1024 * 1024;

/// Encodes and decodes JSON-RPC messages and enforces the message-size limit.
///
/// Every transport decodes through this type, so bad input is answered the same way everywhere:
/// bytes that are not JSON get `-32700`, JSON that is not a valid request gets `-32600` (with the
/// request id when it could be read), an oversized message gets `-32600` naming the limit, and
/// invalid notifications or responses are dropped without an answer.
#[derive(Debug, Clone, Copy)]
pub struct Codec {
    max_message_size: usize,
}

impl Default for Codec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_MESSAGE_SIZE)
    }
}

impl Codec {
    /// A codec that refuses messages over `max_message_size` bytes.
    pub fn new(max_message_size: usize) -> Self {
        Self { max_message_size }
    }

    /// The size limit in bytes.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }

    /// Decodes one message.
    ///
    /// # Errors
    /// A recoverable [`TransportError`] (`is_malformed` or `is_too_large`) that carries the
    /// error response to send back, when the message deserves one.
    pub fn decode(&self, bytes: &[u8]) -> Result<Message, TransportError> {
        if bytes.len() > self.max_message_size {
            return Err(TransportError::too_large(
                bytes.len(),
                self.max_message_size,
                true,
            ));
        }
        Message::from_slice(bytes).map_err(|failure| match failure {
            DecodeFailure::Syntax(reason) => {
                let response = Response::error(None, ErrorObject::parse_error(&reason));
                TransportError::malformed(reason, Some(response))
            }
            DecodeFailure::Invalid(invalid) => {
                let response = invalid.answerable.then(|| {
                    Response::error(
                        invalid.id.clone(),
                        ErrorObject::invalid_request(&invalid.reason),
                    )
                });
                TransportError::malformed(invalid.reason, response)
            }
        })
    }

    /// Encodes one message as compact JSON (never containing a raw newline).
    ///
    /// # Errors
    /// `is_too_large` when the encoded message exceeds the limit.
    pub fn encode(&self, message: &Message) -> Result<Vec<u8>, TransportError> {
        let mut out = Vec::with_capacity(128);
        self.encode_into(message, &mut out)?;
        Ok(out)
    }

    /// The wire form of an outbound envelope: its [`wire`](Envelope::wire) bytes when the
    /// engine wrote them already, else its message encoded; within the size limit either way.
    ///
    /// # Errors
    /// `is_too_large` when the message exceeds the limit.
    pub fn encode_envelope(&self, envelope: &Envelope) -> Result<Bytes, TransportError> {
        match &envelope.wire {
            Some(wire) if wire.len() > self.max_message_size => Err(TransportError::too_large(
                wire.len(),
                self.max_message_size,
                false,
            )),
            Some(wire) => Ok(wire.clone()),
            None => self.encode(&envelope.message).map(Bytes::from),
        }
    }

    /// [`encode_envelope`](Self::encode_envelope) for a sender that owns the envelope: the
    /// [`wire`](Envelope::wire) bytes are taken out rather than shared, so bytes made from a
    /// `Vec` keep their one allocation (sharing them allocates a header for the count). Too
    /// large, they stay in the envelope.
    ///
    /// # Errors
    /// `is_too_large` when the message exceeds the limit.
    pub fn take_encoded(&self, envelope: &mut Envelope) -> Result<Bytes, TransportError> {
        match envelope.wire.take() {
            Some(wire) if wire.len() > self.max_message_size => {
                let size = wire.len();
                envelope.wire = Some(wire);
                Err(TransportError::too_large(
                    size,
                    self.max_message_size,
                    false,
                ))
            }
            Some(wire) => Ok(wire),
            None => self.encode(&envelope.message).map(Bytes::from),
        }
    }

    /// [`encode_envelope`](Self::encode_envelope) into a `Vec` (copying only bytes the engine
    /// wrote before).
    ///
    /// # Errors
    /// `is_too_large` when the message exceeds the limit.
    pub fn encode_envelope_to_vec(&self, envelope: &Envelope) -> Result<Vec<u8>, TransportError> {
        match &envelope.wire {
            Some(_) => self.encode_envelope(envelope).map(|wire| wire.to_vec()),
            None => self.encode(&envelope.message),
        }
    }

    /// Encodes the success response to request `id` whose result is already in wire form (see
    /// [`EncodedResult`]), within the size limit.
    ///
    /// # Errors
    /// `is_too_large` when the message would exceed the limit.
    pub fn encode_result(
        &self,
        id: &RequestId,
        result: &EncodedResult,
    ) -> Result<Vec<u8>, TransportError> {
        let out = result.response_text(id).map_err(TransportError::other)?;
        if out.len() > self.max_message_size {
            return Err(TransportError::too_large(
                out.len(),
                self.max_message_size,
                false,
            ));
        }
        Ok(out)
    }

    /// Appends the encoded message to `out`.
    ///
    /// # Errors
    /// `is_too_large` when the encoded message exceeds the limit; `out` is then left as it was.
    pub fn encode_into(&self, message: &Message, out: &mut Vec<u8>) -> Result<(), TransportError> {
        let start = out.len();
        serde_json::to_writer(&mut *out, message).map_err(TransportError::other)?;
        let size = out.len() - start;
        if size > self.max_message_size {
            out.truncate(start);
            return Err(TransportError::too_large(
                size,
                self.max_message_size,
                false,
            ));
        }
        Ok(())
    }
}

/// Newline framing for byte streams (stdio, TCP, pipes), built on [`Codec`].
///
/// Use with `tokio_util::codec::{FramedRead, FramedWrite}`. Unlike a plain lines codec it never
/// ends the stream on bad input: a line that is not a valid message, or is longer than the limit,
/// is yielded as an `Err` item and reading goes on with the next line. Empty lines and a trailing
/// `\r` are ignored.
#[derive(Debug, Clone, Default)]
pub struct LineCodec {
    codec: Codec,
    /// Bytes already scanned for a newline in the current buffer.
    scanned: usize,
    /// Discarding an over-long line until its newline; holds its length so far.
    discarding: Option<usize>,
}

impl LineCodec {
    /// A line codec over `codec`.
    pub fn new(codec: Codec) -> Self {
        Self {
            codec,
            scanned: 0,
            discarding: None,
        }
    }

    /// The largest message it reads or writes, in bytes.
    pub fn max_message_size(&self) -> usize {
        self.codec.max_message_size()
    }
}

impl tokio_util::codec::Decoder for LineCodec {
    type Item = Result<Message, TransportError>;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        loop {
            let newline = src[self.scanned..].iter().position(|b| *b == b'\n');
            let limit = self.codec.max_message_size();
            match (newline, self.discarding) {
                (Some(pos), Some(so_far)) => {
                    let end = self.scanned + pos;
                    src.advance(end + 1);
                    self.scanned = 0;
                    self.discarding = None;
                    let size = so_far + end;
                    return Ok(Some(Err(TransportError::too_large(size, limit, true))));
                }
                (None, Some(so_far)) => {
                    let len = src.len();
                    src.advance(len);
                    self.scanned = 0;
                    self.discarding = Some(so_far + len);
                    return Ok(None);
                }
                (Some(pos), None) => {
                    let end = self.scanned + pos;
                    let line = src.split_to(end + 1);
                    self.scanned = 0;
                    let mut body = &line[..end];
                    if let [rest @ .., b'\r'] = body {
                        body = rest;
                    }
                    if body.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    return Ok(Some(self.codec.decode(body)));
                }
                (None, None) => {
                    if src.len() > limit {
                        let len = src.len();
                        src.advance(len);
                        self.scanned = 0;
                        self.discarding = Some(len);
                    } else {
                        self.scanned = src.len();
                    }
                    return Ok(None);
                }
            }
        }
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Self::Item>, Self::Error> {
        if let Some(item) = self.decode(src)? {
            return Ok(Some(item));
        }
        // A last line without its newline still counts as a message.
        if self.discarding.take().is_some() || src.is_empty() {
            src.clear();
            self.scanned = 0;
            return Ok(None);
        }
        let line = src.split();
        self.scanned = 0;
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        Ok(Some(self.codec.decode(&line)))
    }
}

impl tokio_util::codec::Encoder<&Envelope> for LineCodec {
    type Error = TransportError;

    fn encode(&mut self, item: &Envelope, dst: &mut BytesMut) -> Result<(), Self::Error> {
        let bytes = self.codec.encode_envelope(item)?;
        dst.reserve(bytes.len() + 1);
        dst.put_slice(&bytes);
        dst.put_u8(b'\n');
        Ok(())
    }
}

impl tokio_util::codec::Encoder<&Message> for LineCodec {
    type Error = TransportError;

    fn encode(&mut self, item: &Message, dst: &mut BytesMut) -> Result<(), Self::Error> {
        let bytes = self.codec.encode(item)?;
        dst.reserve(bytes.len() + 1);
        dst.put_slice(&bytes);
        dst.put_u8(b'\n');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RequestId;
    use tokio_util::codec::Decoder;

    fn decode_all(codec: &mut LineCodec, input: &[u8]) -> Vec<Result<Message, TransportError>> {
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(item) = codec
            .decode(&mut buf)
            .expect("decode never fails on content")
        {
            out.push(item);
        }
        if let Some(item) = codec.decode_eof(&mut buf).expect("eof") {
            out.push(item);
        }
        out
    }

    /// An envelope the engine wrote already goes as written (through the line codec too),
    /// within the same limit as any message; one without goes as its message encodes.
    #[test]
    fn an_envelope_written_before_goes_as_written_within_the_limit() {
        use crate::jsonrpc::Notification;
        use tokio_util::codec::Encoder;
        let codec = Codec::new(80);
        let wire =
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#;
        let mut written = Envelope::new(Notification::new("notifications/progress", None));
        written.wire = Some(Bytes::from_static(wire));
        assert_eq!(&codec.encode_envelope(&written).expect("fits")[..], wire);
        assert_eq!(codec.encode_envelope_to_vec(&written).expect("fits"), wire);
        let mut taken = written.clone();
        assert_eq!(&codec.take_encoded(&mut taken).expect("fits")[..], wire);
        assert!(taken.wire.is_none(), "taken, not shared");
        let mut line = BytesMut::new();
        LineCodec::new(codec)
            .encode(&written, &mut line)
            .expect("fits");
        assert_eq!(&line[..line.len() - 1], wire);
        assert_eq!(line.last(), Some(&b'\n'));

        let mut large = written.clone();
        large.wire = Some(Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{{"p":"{}"}}}}"#,
            "y".repeat(80)
        )));
        assert!(
            codec
                .encode_envelope(&large)
                .expect_err("over the limit")
                .is_too_large()
        );

        let plain = Envelope::new(Notification::new("ping", None));
        assert_eq!(
            &codec.encode_envelope(&plain).expect("fits")[..],
            br#"{"jsonrpc":"2.0","method":"ping"}"#
        );
    }

    #[test]
    fn bad_lines_do_not_end_the_stream() {
        let mut codec = LineCodec::new(Codec::new(64));
        let long = format!("{}\n", "x".repeat(200));
        let input = format!(
            "not json\n{long}\n{{\"jsonrpc\":\"1.0\",\"id\":4,\"method\":\"ping\"}}\r\n{{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}}"
        );
        let items = decode_all(&mut codec, input.as_bytes());
        assert_eq!(items.len(), 4, "{items:?}");
        let parse = items[0].as_ref().expect_err("not json");
        let resp = parse.error_response().expect("answered");
        assert_eq!(resp.outcome.as_ref().expect_err("error").code, -32700);
        assert!(items[1].as_ref().expect_err("too long").is_too_large());
        let invalid = items[2].as_ref().expect_err("bad version");
        let resp = invalid.error_response().expect("answered");
        assert_eq!(resp.id, Some(RequestId::Number(4)));
        assert_eq!(resp.outcome.as_ref().expect_err("error").code, -32600);
        assert!(matches!(items[3], Ok(Message::Request(_))));
    }

    #[test]
    fn long_line_split_across_reads_is_discarded_once() {
        let mut codec = LineCodec::new(Codec::new(16));
        let mut buf = BytesMut::from(&b"aaaaaaaaaaaaaaaaaaaaaaaa"[..]);
        assert!(codec.decode(&mut buf).expect("ok").is_none());
        buf.extend_from_slice(b"bbbbbbbbbbbbbbbbbbbb\n{\"jsonrpc\":\"2.0\"");
        let first = codec.decode(&mut buf).expect("ok").expect("item");
        assert!(first.expect_err("too long").is_too_large());
        assert!(codec.decode(&mut buf).expect("ok").is_none());
    }

    #[test]
    fn invalid_notification_is_not_answered() {
        let codec = Codec::default();
        let err = codec
            .decode(br#"{"jsonrpc":"2.0","method":"x","params":1}"#)
            .expect_err("invalid");
        assert!(err.is_malformed());
        assert!(err.error_response().is_none());
    }

    #[test]
    fn encoding_escapes_newlines_and_respects_the_limit() {
        let codec = Codec::new(60);
        let m = Message::Notification(crate::jsonrpc::Notification::new(
            "a",
            Some(serde_json::json!({"t":"x\ny"})),
        ));
        let bytes = codec.encode(&m).expect("fits");
        assert!(!bytes.contains(&b'\n'));
        let big = Message::Notification(crate::jsonrpc::Notification::new(
            "a",
            Some(serde_json::json!({"t":"y".repeat(64)})),
        ));
        assert!(codec.encode(&big).expect_err("too big").is_too_large());
    }
}
