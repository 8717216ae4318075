//! What happens to the server's stderr.

use std::fmt;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::ChildStderr;
use tokio::sync::mpsc;

/// A line longer than this many bytes is delivered in pieces, so a server that never writes a
/// newline cannot make us buffer without bound.
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// Where the server's stderr goes. Servers may log to stderr freely; none of these modes treats
/// output there as an error.
///
/// Captured output is read line by line (a trailing `\r` removed, invalid UTF-8 replaced) by a
/// task that keeps draining the pipe until the server and everything it started have closed it,
/// so a chatty server never blocks on a full pipe, whatever the receiving side does.
#[derive(Default)]
#[non_exhaustive]
pub enum StderrMode {
    /// The server writes to this process's stderr (the default).
    #[default]
    Inherit,
    /// Discarded (`/dev/null`).
    Null,
    /// Each line becomes a `tracing` event at `INFO` level with target `tidewire_stdio::stderr`
    /// and the process id as field `pid`.
    Tracing,
    /// Each line is handed to a callback or a channel; see [`StderrMode::callback`] and
    /// [`StderrMode::channel`].
    Capture(LineSink),
}

impl StderrMode {
    /// Calls `f` with each line, from a task of its own. `f` should return quickly: while it
    /// runs, the server's stderr is not read.
    pub fn callback(f: impl FnMut(String) + Send + 'static) -> Self {
        Self::Capture(LineSink {
            kind: SinkKind::Callback(Box::new(f)),
        })
    }

    /// Sends each line to `tx`. When the channel is full the line is dropped (and a warning is
    /// logged) rather than stalling the server; when the receiver is gone, lines are discarded.
    /// The channel closes once the server's stderr has closed.
    pub fn channel(tx: mpsc::Sender<String>) -> Self {
        Self::Capture(LineSink {
            kind: SinkKind::Channel { tx, dropped: 0 },
        })
    }
}

impl fmt::Debug for StderrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Inherit => f.write_str("Inherit"),
            Self::Null => f.write_str("Null"),
            Self::Tracing => f.write_str("Tracing"),
            Self::Capture(sink) => f.debug_tuple("Capture").field(sink).finish(),
        }
    }
}

/// Receives captured stderr lines; built by [`StderrMode::callback`] or [`StderrMode::channel`].
pub struct LineSink {
    kind: SinkKind,
}

enum SinkKind {
    Callback(Box<dyn FnMut(String) + Send>),
    Channel {
        tx: mpsc::Sender<String>,
        dropped: u64,
    },
    Tracing {
        pid: u32,
    },
}

impl fmt::Debug for LineSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            SinkKind::Callback(_) => "callback",
            SinkKind::Channel { .. } => "channel",
            SinkKind::Tracing { .. } => "tracing",
        };
        f.debug_struct("LineSink").field("kind", &kind).finish()
    }
}

impl LineSink {
    pub(crate) fn tracing(pid: u32) -> Self {
        Self {
            kind: SinkKind::Tracing { pid },
        }
    }

    fn deliver(&mut self, line: String) {
        match &mut self.kind {
            SinkKind::Callback(f) => f(line),
            SinkKind::Channel { tx, dropped } => match tx.try_send(line) {
                Ok(()) => {
                    if *dropped > 0 {
                        tracing::warn!(
                            dropped = *dropped,
                            "the stderr channel was full; server stderr lines were dropped"
                        );
                        *dropped = 0;
                    }
                }
                Err(mpsc::error::TrySendError::Full(_)) => *dropped += 1,
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            },
            SinkKind::Tracing { pid } => {
                tracing::info!(target: "tidewire_stdio::stderr", pid = *pid, "{line}");
            }
        }
    }

    fn finish(&mut self) {
        if let SinkKind::Channel { dropped, .. } = &self.kind
            && *dropped > 0
        {
            tracing::warn!(
                dropped = *dropped,
                "the stderr channel was full; server stderr lines were dropped"
            );
        }
    }
}

fn take_line(line: &mut Vec<u8>) -> String {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    let text = String::from_utf8_lossy(line).into_owned();
    line.clear();
    text
}

/// Reads `stderr` to its end, handing each line to `sink`.
pub(crate) async fn forward(stderr: ChildStderr, mut sink: LineSink) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::new();
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(chunk) => chunk,
            Err(error) => {
                tracing::debug!(%error, "reading the server's stderr failed");
                break;
            }
        };
        if chunk.is_empty() {
            break;
        }
        let (used, complete) = match chunk.iter().position(|b| *b == b'\n') {
            Some(at) => {
                line.extend_from_slice(&chunk[..at]);
                (at + 1, true)
            }
            None => {
                line.extend_from_slice(chunk);
                (chunk.len(), false)
            }
        };
        reader.consume(used);
        if complete || line.len() >= MAX_LINE {
            sink.deliver(take_line(&mut line));
        }
    }
    if !line.is_empty() {
        sink.deliver(take_line(&mut line));
    }
    sink.finish();
}
