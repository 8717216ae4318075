//! Serve MCP over this process's stdin and stdout.
//!
//! The client that started this process writes one JSON-RPC message per line to our stdin and
//! reads one per line from our stdout. [`transport`] wraps both in a [`Transport`] for the
//! session engine.
//!
//! # Stdout belongs to the protocol
//!
//! Every byte written to stdout must be part of a message. A stray `println!`, a library that
//! prints a banner, or a logger writing to stdout corrupts the stream: the client sees a line that
//! is not JSON-RPC. Send logs to **stderr** (for example `tracing_subscriber::fmt()
//! .with_writer(std::io::stderr)`); the client may show, capture or ignore them.
//!
//! # When the session ends
//!
//! The receiver returns `None` when stdin reaches end-of-file, which is how a client asks a stdio
//! server to stop (the MCP shutdown sequence closes stdin first, then escalates to signals).
//! A server should therefore finish its session and exit when the session driver returns.
//! Closing the sender flushes stdout; a server may also end the connection that way.
//!
//! # Exiting without waiting for stdin
//!
//! Tokio reads stdin with a blocking read on a helper thread, and that read cannot be
//! interrupted. If the server decides to stop *before* stdin has reached end-of-file (say on a
//! signal), dropping the runtime waits for that read to finish. Exit with
//! [`std::process::exit`] or shut the runtime down with
//! [`Runtime::shutdown_background`](tokio::runtime::Runtime::shutdown_background) in that case.

use tidewire_core::transport::framed::{self, FramedReceiver, FramedSender};
use tidewire_core::transport::{Codec, Transport};
use tokio::io::{Stdin, Stdout};

/// The sending half of [`StdioTransport`]: writes one message per line to stdout.
pub type StdoutSender = FramedSender<Stdout>;

/// The receiving half of [`StdioTransport`]: reads one message per line from stdin.
pub type StdinReceiver = FramedReceiver<Stdin>;

/// A transport over this process's stdin and stdout; see the [module docs](self).
///
/// Create one per process: two readers of stdin would steal each other's lines.
#[derive(Debug)]
pub struct StdioTransport {
    sender: StdoutSender,
    receiver: StdinReceiver,
}

impl Transport for StdioTransport {
    type Sender = StdoutSender;
    type Receiver = StdinReceiver;

    fn split(self) -> (StdoutSender, StdinReceiver) {
        (self.sender, self.receiver)
    }
}

/// A transport over stdin and stdout with the default [`Codec`] (8 MiB message limit).
///
/// Reading stops with `None` at end-of-file on stdin. A line that is not a valid message is
/// reported as a recoverable error carrying the JSON-RPC error to send back; it never ends the
/// stream.
///
/// # Panics
/// When the first message is sent or received outside a Tokio runtime (Tokio performs stdio on
/// its blocking thread pool).
pub fn transport() -> StdioTransport {
    transport_with(Codec::default())
}

/// Like [`transport`], with a chosen codec (for example a different message-size limit).
///
/// # Panics
/// As [`transport`].
pub fn transport_with(codec: Codec) -> StdioTransport {
    let (sender, receiver) = framed::transport(tokio::io::stdin(), tokio::io::stdout(), codec);
    StdioTransport { sender, receiver }
}
