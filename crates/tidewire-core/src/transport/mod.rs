//! The message-stream trait every transport implements, and the adapters that build one.
//!
//! A connection is a pair of halves: a [`TransportSender`] with `send` and `close`, and a
//! [`TransportReceiver`] with `recv`. The session engine runs one writer task and one reader task
//! that own them, so no half is ever shared behind a mutex.
//!
//! Adapters:
//! - [`framed`] turns an `AsyncRead + AsyncWrite` pair into a newline-framed transport (stdio,
//!   TCP, pipes);
//! - [`sink_stream`] turns a `Sink + Stream` of [`Envelope`]s into one (WebSocket and friends);
//! - [`memory`] is an in-process duplex transport for tests and embedding.

mod codec;
mod envelope;
mod error;
mod exchange;
pub mod framed;
mod lease;
mod limits;
pub mod memory;
mod profile;
mod reply;
pub mod sink_stream;

use std::future::Future;

pub use codec::{Codec, DEFAULT_MAX_MESSAGE_SIZE, LineCodec};
pub use envelope::{Envelope, Route};
pub use error::TransportError;
pub(crate) use exchange::Settle;
pub use exchange::{Exchange, Failure, SessionEvent, Standalone};
pub use lease::{AccessLease, LeaseCheck, LeaseEnd, MIN_RECHECK_INTERVAL};
pub use limits::{HttpArrival, Principal, RequestLimits, StreamCloser};
pub use profile::TransportProfile;
pub use reply::{ReplySlot, ReplyTarget};

/// The sending half of a connection.
pub trait TransportSender: Send + 'static {
    /// Sends one message: its [`Envelope::wire`] bytes when the engine wrote them already,
    /// else its message encoded ([`Codec::encode_envelope`] does either).
    ///
    /// # Errors
    /// `is_closed` / `is_io` when the connection is gone; `is_too_large` when this one message
    /// exceeds the limit (the connection goes on).
    fn send(
        &mut self,
        envelope: Envelope,
    ) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// Sends one message that may wait in the transport's buffer until [`flush`](Self::flush):
    /// the engine feeds every message it has queued, then flushes once, so a stream transport
    /// writes a burst of replies in one system call. The default sends at once.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    fn feed(
        &mut self,
        envelope: Envelope,
    ) -> impl Future<Output = Result<(), TransportError>> + Send {
        self.send(envelope)
    }

    /// Writes whatever [`feed`](Self::feed) left in the buffer. The default has nothing to do.
    ///
    /// # Errors
    /// As [`send`](Self::send).
    fn flush(&mut self) -> impl Future<Output = Result<(), TransportError>> + Send {
        async { Ok(()) }
    }

    /// Flushes and closes the sending direction. Further sends fail with `is_closed`.
    ///
    /// # Errors
    /// When flushing fails.
    fn close(&mut self) -> impl Future<Output = Result<(), TransportError>> + Send;

    /// What the transport asks of the engine besides the messages (read once, when the
    /// connection is set up). The default is a plain message stream, which asks nothing.
    fn profile(&self) -> TransportProfile {
        TransportProfile::MESSAGE_STREAM
    }

    /// Told of a step of the session handshake: before an `initialize` request is sent
    /// ([`SessionEvent::Opening`]), before `notifications/initialized` is
    /// ([`SessionEvent::Negotiated`], with the negotiated revision), and after it was
    /// ([`SessionEvent::Opened`]). A transport that keeps session
    /// state (Streamable HTTP: the session id, the version header, the GET stream) acts on it;
    /// the default does nothing.
    fn session_event(&mut self, event: SessionEvent) -> impl Future<Output = ()> + Send {
        let _ = event;
        async {}
    }
}

/// The receiving half of a connection.
pub trait TransportReceiver: Send + 'static {
    /// The next message; `None` once the peer has closed the connection.
    ///
    /// A recoverable error (`is_recoverable`) concerns one bad message and reading can go on; any
    /// other error ends the connection.
    fn recv(&mut self) -> impl Future<Output = Option<Result<Envelope, TransportError>>> + Send;
}

/// A connection that splits into its two halves.
///
/// Any `(sender, receiver)` tuple is a transport.
pub trait Transport: Send + 'static {
    /// The sending half.
    type Sender: TransportSender;
    /// The receiving half.
    type Receiver: TransportReceiver;
    /// Splits the connection. What it asks of the engine besides the messages, its sender says
    /// ([`TransportSender::profile`]).
    fn split(self) -> (Self::Sender, Self::Receiver);
}

impl<S: TransportSender, R: TransportReceiver> Transport for (S, R) {
    type Sender = S;
    type Receiver = R;
    fn split(self) -> (S, R) {
        self
    }
}
