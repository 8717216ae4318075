//! Newline-framed transports over any `AsyncRead + AsyncWrite` (stdio, TCP, pipes).

use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{FramedRead, FramedWrite};

use super::{Codec, Envelope, LineCodec, TransportError, TransportReceiver, TransportSender};

/// Builds a transport that reads one JSON-RPC message per line from `reader` and writes one per
/// line to `writer`, through `codec` (size limit and error answers).
pub fn transport<R, W>(reader: R, writer: W, codec: Codec) -> (FramedSender<W>, FramedReceiver<R>)
where
    R: AsyncRead + Send + Unpin + 'static,
    W: AsyncWrite + Send + Unpin + 'static,
{
    (
        FramedSender {
            inner: FramedWrite::new(writer, LineCodec::new(codec)),
            closed: false,
        },
        FramedReceiver {
            inner: FramedRead::new(reader, LineCodec::new(codec)),
        },
    )
}

/// The sending half of a newline-framed transport.
#[derive(Debug)]
pub struct FramedSender<W> {
    inner: FramedWrite<W, LineCodec>,
    closed: bool,
}

/// The receiving half of a newline-framed transport.
#[derive(Debug)]
pub struct FramedReceiver<R> {
    inner: FramedRead<R, LineCodec>,
}

impl<W> FramedSender<W> {
    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        self.inner.get_ref()
    }
}

impl<R> FramedReceiver<R> {
    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        self.inner.get_ref()
    }
}

impl<W: AsyncWrite + Send + Unpin + 'static> TransportSender for FramedSender<W> {
    fn profile(&self) -> super::TransportProfile {
        super::TransportProfile::MESSAGE_STREAM
            .limiting_messages_to(self.inner.encoder().max_message_size())
    }

    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed {
            return Err(TransportError::closed());
        }
        self.inner.send(&envelope).await
    }

    async fn feed(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed {
            return Err(TransportError::closed());
        }
        // Encoded into the write buffer; written once it passes the codec's high-water mark
        // or at the next flush.
        self.inner.feed(&envelope).await
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        if self.closed {
            return Ok(());
        }
        SinkExt::<&Envelope>::flush(&mut self.inner).await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        SinkExt::<&Envelope>::close(&mut self.inner).await
    }
}

impl<R: AsyncRead + Send + Unpin + 'static> TransportReceiver for FramedReceiver<R> {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        match self.inner.next().await? {
            Ok(Ok(message)) => Some(Ok(Envelope::new(message))),
            Ok(Err(bad)) => Some(Err(bad)),
            Err(io) => Some(Err(TransportError::from(io))),
        }
    }
}

impl From<TransportError> for std::io::Error {
    fn from(e: TransportError) -> Self {
        std::io::Error::other(e)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::{AsyncBufReadExt, BufReader};

    use super::*;
    use crate::jsonrpc::{Message, Notification};

    const LIMIT: Duration = Duration::from_secs(5);

    fn note(n: u64) -> Envelope {
        Envelope::new(Message::Notification(Notification::new(
            "n",
            Some(serde_json::json!({ "n": n })),
        )))
    }

    /// Fed messages wait in the buffer; one flush writes them all, in order.
    #[tokio::test]
    async fn fed_messages_are_written_at_the_flush() {
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            let (ours, theirs) = tokio::io::duplex(64 * 1024);
            let (_unused, reader) = tokio::io::duplex(64);
            let (mut sender, _receiver) = transport(reader, ours, Codec::default());
            for n in 0..3 {
                sender.feed(note(n)).await.expect("fed");
            }
            let mut lines = BufReader::new(theirs).lines();
            // `next_line` is cancel-safe: a poll that finds nothing loses nothing.
            let early = futures::FutureExt::now_or_never(lines.next_line());
            assert!(early.is_none(), "nothing is written before the flush");
            sender.flush().await.expect("flushed");
            for n in 0..3 {
                let line = tokio::time::timeout(LIMIT, lines.next_line())
                    .await
                    .expect("in time")
                    .expect("read")
                    .expect("a line");
                assert!(line.contains(&format!("\"n\":{n}")), "{line}");
            }
        })
        .await
        .expect("the test took longer than its limit");
    }
}
