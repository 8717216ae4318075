//! A transport from any `Sink` of envelopes and `Stream` of envelopes.

use futures::{Sink, SinkExt, Stream, StreamExt};

use super::{Envelope, TransportError, TransportReceiver, TransportSender};

/// Builds a transport from a sink and a stream, e.g. the two halves of a WebSocket after mapping
/// frames to envelopes.
pub fn transport<Si, St>(sink: Si, stream: St) -> (SinkSender<Si>, StreamReceiver<St>)
where
    Si: Sink<Envelope, Error = TransportError> + Send + Unpin + 'static,
    St: Stream<Item = Result<Envelope, TransportError>> + Send + Unpin + 'static,
{
    (SinkSender { sink }, StreamReceiver { stream })
}

/// The sending half built from a `Sink`.
#[derive(Debug)]
pub struct SinkSender<Si> {
    sink: Si,
}

/// The receiving half built from a `Stream`.
#[derive(Debug)]
pub struct StreamReceiver<St> {
    stream: St,
}

impl<Si> TransportSender for SinkSender<Si>
where
    Si: Sink<Envelope, Error = TransportError> + Send + Unpin + 'static,
{
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        self.sink.send(envelope).await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.sink.close().await
    }
}

impl<St> TransportReceiver for StreamReceiver<St>
where
    St: Stream<Item = Result<Envelope, TransportError>> + Send + Unpin + 'static,
{
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        self.stream.next().await
    }
}
