//! Errors of the child-process client.

use std::io;
use std::process::ExitStatus;
use std::sync::Arc;

/// Starting the server process failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The operating system refused to start the program (not found, not executable, bad
    /// working directory, …).
    #[error("could not start the server program `{program}`")]
    Spawn {
        /// The program, as given to the builder.
        program: String,
        /// Why the operating system refused.
        #[source]
        source: io::Error,
    },
    /// [`spawn`](super::StdioConnector::spawn) was called outside a Tokio runtime.
    #[error("spawning a server process needs a Tokio runtime")]
    NoRuntime,
}

/// Waiting for or signalling the server process failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// The operating system could not report the process's exit.
    #[error("could not wait for the server process")]
    Wait(#[source] Arc<io::Error>),
    /// A signal could not be delivered to the process group.
    #[error("could not send {signal} to the server process group")]
    Signal {
        /// The signal's name, e.g. `SIGKILL`.
        signal: &'static str,
        /// Why the signal was refused.
        #[source]
        source: Arc<io::Error>,
    },
    /// The task that watches the process is gone, because its Tokio runtime shut down.
    #[error("the task supervising the server process is gone (its runtime shut down)")]
    SupervisorGone,
}

/// The server process ended unsuccessfully while the connection was open.
///
/// The receiving half of a [`ChildTransport`](super::ChildTransport) reports this as a fatal
/// [`TransportError`](tidewire_core::transport::TransportError) (its
/// [`source`](std::error::Error::source) is this type) before it returns `None`. A server that
/// exits with status 0, or that was stopped through
/// [`ChildHandle::shutdown`](super::ChildHandle::shutdown), ends the stream with a plain `None`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the server process `{program}` exited ({status})")]
#[non_exhaustive]
pub struct ServerExited {
    /// The program that was started.
    pub program: String,
    /// How it ended.
    pub status: ExitStatus,
}
