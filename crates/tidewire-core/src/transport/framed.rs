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
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        if self.closed {
            return Err(TransportError::closed());
        }
        self.inner.send(&envelope.message).await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        SinkExt::<&crate::jsonrpc::Message>::close(&mut self.inner).await
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
