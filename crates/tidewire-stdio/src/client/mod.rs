//! Spawn an MCP server as a child process and talk to it over its stdin and stdout.
//!
//! [`StdioConnector`] is the builder; [`spawn`](StdioConnector::spawn) starts the program and returns a
//! [`ChildTransport`] for the session engine, plus (through [`ChildTransport::handle`]) a
//! [`ChildHandle`] to stop the server and learn how it ended. See the [crate docs](crate) for
//! the shutdown sequence.
//!
//! The server runs in a process group of its own, so signals reach everything it starts (the
//! real server behind an `npx` or `uvx` wrapper, for example), and a Ctrl-C in the terminal
//! reaches only this program, which then decides how to stop the server.

mod child;
mod error;
mod stderr;
mod stdin;

use std::ffi::OsStr;
use std::path::Path;
use std::process::Stdio;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tidewire_core::transport::Codec;

pub use child::{ChildHandle, ChildReceiver, ChildSender, ChildTransport, ShutdownTimeouts};
pub use error::{ProcessError, ServerExited, SpawnError};
pub use stderr::{LineSink, StderrMode};

/// Builds and spawns a server process.
///
/// Setters never fail; [`spawn`](Self::spawn) reports the first problem. The child inherits this
/// process's environment and working directory unless told otherwise, and its stderr by default
/// (see [`StderrMode`]). Its stdin and stdout always carry the protocol.
///
/// ```no_run
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// use tidewire_stdio::client::{StderrMode, StdioConnector};
///
/// let transport = StdioConnector::command("npx")
///     .args(["-y", "@modelcontextprotocol/server-everything"])
///     .env("LOG_LEVEL", "debug")
///     .stderr(StderrMode::Tracing)
///     .spawn()?;
/// let server = transport.handle();
/// // ... run a session over `transport` ...
/// let status = server.shutdown().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct StdioConnector {
    command: std::process::Command,
    stderr: StderrMode,
    timeouts: ShutdownTimeouts,
    codec: Codec,
    kill_on_drop: bool,
}

impl StdioConnector {
    /// A builder for running `program`, looked up in `PATH` unless it contains a `/`.
    pub fn command(program: impl AsRef<OsStr>) -> Self {
        Self::from_command(std::process::Command::new(program))
    }

    /// A builder from a prepared [`std::process::Command`]. Its program, arguments,
    /// environment and working directory are kept; its stdin, stdout, stderr and process group
    /// are replaced as described on [`StdioConnector`].
    pub fn from_command(command: std::process::Command) -> Self {
        Self {
            command,
            stderr: StderrMode::default(),
            timeouts: ShutdownTimeouts::default(),
            codec: Codec::default(),
            kill_on_drop: true,
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.command.arg(arg);
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Sets an environment variable for the child.
    #[must_use]
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.command.env(key, value);
        self
    }

    /// Sets several environment variables for the child.
    #[must_use]
    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.command.envs(vars);
        self
    }

    /// Removes one variable from the child's environment.
    #[must_use]
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.command.env_remove(key);
        self
    }

    /// Starts the child with an empty environment (plus whatever is set afterwards).
    #[must_use]
    pub fn env_clear(mut self) -> Self {
        self.command.env_clear();
        self
    }

    /// Sets the child's working directory.
    #[must_use]
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.command.current_dir(dir);
        self
    }

    /// Chooses where the child's stderr goes; [`StderrMode::Inherit`] by default.
    #[must_use]
    pub fn stderr(mut self, mode: StderrMode) -> Self {
        self.stderr = mode;
        self
    }

    /// The timeouts of [`ChildHandle::shutdown`]; 2 s and 2 s by default.
    #[must_use]
    pub fn shutdown_timeouts(mut self, timeouts: ShutdownTimeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The codec (message-size limit) for both directions; [`Codec::default`] by default.
    #[must_use]
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }

    /// Whether to kill the server's process group when the transport halves and every handle
    /// have been dropped while it still runs; `true` by default. With `false` the server keeps
    /// running on its own (it still gets end-of-file on stdin).
    #[must_use]
    pub fn kill_on_drop(mut self, kill: bool) -> Self {
        self.kill_on_drop = kill;
        self
    }

    /// Starts the server process.
    ///
    /// Must be called within a Tokio runtime whose I/O driver is enabled; the runtime also runs
    /// a small task that waits for the process (and one that reads stderr, when captured).
    ///
    /// # Errors
    /// [`SpawnError::Spawn`] when the program cannot be started; [`SpawnError::NoRuntime`]
    /// outside a Tokio runtime.
    ///
    /// # Panics
    /// If the current Tokio runtime was built without its I/O driver (Tokio panics then).
    pub fn spawn(self) -> Result<ChildTransport, SpawnError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| SpawnError::NoRuntime)?;
        let Self {
            command,
            stderr,
            timeouts,
            codec,
            kill_on_drop,
        } = self;
        let program = command.get_program().to_string_lossy().into_owned();
        let spawn_error = |source| SpawnError::Spawn {
            program: program.clone(),
            source,
        };

        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match stderr {
                StderrMode::Inherit => Stdio::inherit(),
                StderrMode::Null => Stdio::null(),
                StderrMode::Tracing | StderrMode::Capture(_) => Stdio::piped(),
            })
            .process_group(0)
            .kill_on_drop(false);
        let mut child = command.spawn().map_err(spawn_error)?;

        let pid = child.id().and_then(|pid| i32::try_from(pid).ok());
        let (Some(raw_pid), Some(stdin), Some(stdout)) =
            (pid, child.stdin.take(), child.stdout.take())
        else {
            // Cannot happen with piped stdio on a fresh child; clean up rather than panic.
            if let Some(pid) = pid {
                let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = child.start_kill();
            return Err(spawn_error(std::io::Error::other(
                "the spawned process has no pid or no pipes",
            )));
        };
        let pid = raw_pid.unsigned_abs();
        let group = Pid::from_raw(raw_pid);

        let sink = match stderr {
            StderrMode::Tracing => Some(LineSink::tracing(pid)),
            StderrMode::Capture(sink) => Some(sink),
            StderrMode::Inherit | StderrMode::Null => None,
        };
        if let (Some(sink), Some(pipe)) = (sink, child.stderr.take()) {
            runtime.spawn(stderr::forward(pipe, sink));
        }

        tracing::debug!(%program, pid, "spawned server process");
        Ok(child::start(
            &runtime,
            child,
            pid,
            group,
            child::Parts {
                program,
                stdin,
                stdout,
                codec,
                timeouts,
                kill_on_drop,
            },
        ))
    }
}
