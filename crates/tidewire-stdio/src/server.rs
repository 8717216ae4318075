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
//! # Pipes, and everything else
//!
//! When stdin and stdout are pipes (what an MCP client gives the server it starts), they are
//! read and written as non-blocking pipes on the runtime's reactor: no helper thread, no hand-off
//! per line (about six times the throughput of the fallback, see `docs/performance.md`). This
//! puts the pipes in non-blocking mode for the whole process, so nothing else should read stdin
//! or write stdout with blocking calls meanwhile — which the protocol forbids anyway.
//!
//! Anything else (a terminal, a file) goes through Tokio's stdin and stdout, which use blocking
//! reads on a helper thread. That read cannot be interrupted: if the server stops *before* stdin
//! has reached end-of-file (say on a signal), dropping the runtime waits for it. Exit with
//! [`std::process::exit`] or shut the runtime down with
//! [`Runtime::shutdown_background`](tokio::runtime::Runtime::shutdown_background) in that case.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tidewire_core::transport::framed::{self, FramedReceiver, FramedSender};
use tidewire_core::transport::{Codec, Transport};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The sending half of [`StdioTransport`]: writes one message per line to stdout.
pub type StdoutSender = FramedSender<StdoutSink>;

/// The receiving half of [`StdioTransport`]: reads one message per line from stdin.
pub type StdinReceiver = FramedReceiver<StdinSource>;

/// This process's stdin: a non-blocking pipe when it is one, else Tokio's stdin.
#[derive(Debug)]
pub struct StdinSource(Input);

#[derive(Debug)]
enum Input {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Receiver),
    Blocking(tokio::io::Stdin),
}

/// This process's stdout: a non-blocking pipe when it is one, else Tokio's stdout.
#[derive(Debug)]
pub struct StdoutSink(Output);

#[derive(Debug)]
enum Output {
    #[cfg(unix)]
    Pipe(tokio::net::unix::pipe::Sender),
    Blocking(tokio::io::Stdout),
}

impl StdinSource {
    fn open() -> Self {
        #[cfg(unix)]
        if tokio::runtime::Handle::try_current().is_ok() {
            use std::os::fd::AsFd;
            let pipe = io::stdin()
                .as_fd()
                .try_clone_to_owned()
                .and_then(tokio::net::unix::pipe::Receiver::from_owned_fd);
            if let Ok(pipe) = pipe {
                return Self(Input::Pipe(pipe));
            }
        }
        Self(Input::Blocking(tokio::io::stdin()))
    }

    /// True when stdin is read as a non-blocking pipe.
    pub fn is_pipe(&self) -> bool {
        !matches!(self.0, Input::Blocking(_))
    }
}

impl StdoutSink {
    fn open() -> Self {
        #[cfg(unix)]
        if tokio::runtime::Handle::try_current().is_ok() {
            use std::os::fd::AsFd;
            let pipe = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .and_then(tokio::net::unix::pipe::Sender::from_owned_fd);
            if let Ok(pipe) = pipe {
                return Self(Output::Pipe(pipe));
            }
        }
        Self(Output::Blocking(tokio::io::stdout()))
    }

    /// True when stdout is written as a non-blocking pipe.
    pub fn is_pipe(&self) -> bool {
        !matches!(self.0, Output::Blocking(_))
    }
}

impl AsyncRead for StdinSource {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Input::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Input::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for StdoutSink {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.0 {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_write(cx, data),
            Output::Blocking(stdout) => Pin::new(stdout).poll_write(cx, data),
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Output::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.0 {
            #[cfg(unix)]
            Output::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Output::Blocking(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}

/// A transport over this process's stdin and stdout; see the [module docs](self).
///
/// Create one per process: two readers of stdin would steal each other's lines.
#[derive(Debug)]
pub struct StdioTransport {
    sender: StdoutSender,
    receiver: StdinReceiver,
}

impl StdioTransport {
    /// True when both stdin and stdout are used as non-blocking pipes (see the module docs).
    pub fn uses_pipes(&self) -> bool {
        self.receiver.get_ref().is_pipe() && self.sender.get_ref().is_pipe()
    }
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
/// Call it inside a Tokio runtime (with I/O enabled) to get the non-blocking pipes; outside one,
/// it falls back to Tokio's stdin and stdout.
///
/// # Panics
/// When the first message is sent or received outside a Tokio runtime.
pub fn transport() -> StdioTransport {
    transport_with(Codec::default())
}

/// Like [`transport`], with a chosen codec (for example a different message-size limit).
///
/// # Panics
/// As [`transport`].
pub fn transport_with(codec: Codec) -> StdioTransport {
    let (sender, receiver) = framed::transport(StdinSource::open(), StdoutSink::open(), codec);
    StdioTransport { sender, receiver }
}
