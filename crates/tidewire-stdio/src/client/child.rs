//! A running server process: the transport over its pipes, and the handle that supervises it.

use std::fmt;
use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tidewire_core::transport::framed::{FramedReceiver, FramedSender};
use tidewire_core::transport::{
    Envelope, Transport, TransportError, TransportReceiver, TransportSender,
};
use tokio::process::{Child, ChildStdout};
use tokio::sync::watch;
use tokio::time::Instant;

use super::error::{ProcessError, ServerExited};
use super::stdin::{StdinSlot, StdinWriter};

/// After the server process exits, how long the receiver keeps reading what it wrote before its
/// stdout closes; and after stdout closes, how long it waits to learn the exit status. Both are
/// normally a matter of microseconds; the bound only matters when something else holds the pipe.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How the process ended, as published by the reaper task. `io::Error` is not `Clone`, hence the
/// `Arc`.
type Exit = Result<ExitStatus, Arc<io::Error>>;

/// How long each step of the shutdown sequence waits for the server to exit before escalating.
///
/// The default waits 2 seconds after closing stdin and 2 seconds after `SIGTERM`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownTimeouts {
    stdin_close: Duration,
    terminate: Duration,
}

impl ShutdownTimeouts {
    /// Waits `stdin_close` after closing stdin, then `terminate` after `SIGTERM`, before
    /// `SIGKILL`.
    pub const fn new(stdin_close: Duration, terminate: Duration) -> Self {
        Self {
            stdin_close,
            terminate,
        }
    }

    /// How long to wait after closing stdin before sending `SIGTERM`.
    pub const fn stdin_close(&self) -> Duration {
        self.stdin_close
    }

    /// How long to wait after `SIGTERM` before sending `SIGKILL`.
    pub const fn terminate(&self) -> Duration {
        self.terminate
    }
}

impl Default for ShutdownTimeouts {
    fn default() -> Self {
        Self::new(Duration::from_secs(2), Duration::from_secs(2))
    }
}

/// State shared by the sender, the receiver and every handle of one process.
pub(crate) struct Process {
    pid: u32,
    /// The process group: the server's pid, since it leads its own group.
    group: Pid,
    program: String,
    pub(crate) stdin: Arc<StdinSlot>,
    /// `None` while the server runs; set once by the reaper task.
    exit: watch::Receiver<Option<Exit>>,
    timeouts: ShutdownTimeouts,
    kill_on_drop: bool,
    /// A shutdown was asked for, so the end of the stream is expected, not an error.
    shutting_down: AtomicBool,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.pid)
            .field("program", &self.program)
            .field("exit", &*self.exit.borrow())
            .finish_non_exhaustive()
    }
}

impl Process {
    fn current_exit(&self) -> Option<Exit> {
        self.exit.borrow().clone()
    }

    fn has_exited(&self) -> bool {
        self.exit.borrow().is_some()
    }

    /// Sends `signal` to the whole group while the server is still running.
    ///
    /// Once the server has been reaped its pid, and so the group id, may be reused by an
    /// unrelated process group, so nothing is sent after that; the reaper has already killed
    /// what was left of the group at that point.
    fn signal_group(&self, signal: Signal) -> Result<(), ProcessError> {
        if self.has_exited() {
            return Ok(());
        }
        match killpg(self.group, signal) {
            Ok(()) | Err(Errno::ESRCH) => Ok(()),
            Err(errno) => Err(ProcessError::Signal {
                signal: signal.as_str(),
                source: Arc::new(io::Error::from(errno)),
            }),
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // The last transport half and the last handle are gone while the server still runs:
        // nobody can ever stop it, so kill its group now. Never blocks; the reaper task collects
        // the exit status.
        if self.kill_on_drop && !self.has_exited() {
            tracing::debug!(pid = self.pid, "killing the server process group on drop");
            if let Err(error) = self.signal_group(Signal::SIGKILL) {
                tracing::warn!(pid = self.pid, %error, "could not kill the server process group");
            }
        }
    }
}

/// Kills the process group if the reaper future is dropped before the server exits (its runtime
/// is shutting down), so no server outlives the program that supervised it.
struct GroupGuard {
    group: Pid,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            // Best effort; the group may already be gone.
            let _ = killpg(self.group, Signal::SIGKILL);
        }
    }
}

/// Waits for the server to exit, kills whatever it left running in its group, then publishes the
/// exit status.
async fn reap(mut child: Child, group: Pid, exit: watch::Sender<Option<Exit>>) {
    let mut guard = GroupGuard { group, armed: true };
    let status = child.wait().await;
    guard.armed = false;
    // Grandchildren still in the group (a wrapper such as `npx` exited, or the server left
    // helpers behind) would otherwise keep running and keep the stdout pipe open. The leader was
    // reaped an instant ago, so the group id cannot have been reused yet by another group.
    match killpg(group, Signal::SIGKILL) {
        Ok(()) => tracing::debug!(%group, "killed processes left in the server's group"),
        Err(Errno::ESRCH) => {}
        Err(error) => tracing::debug!(%group, %error, "could not clean up the server's group"),
    }
    match &status {
        Ok(status) => tracing::debug!(pid = %group, %status, "server process exited"),
        Err(error) => tracing::warn!(pid = %group, %error, "waiting for the server process failed"),
    }
    exit.send_replace(Some(status.map_err(Arc::new)));
}

/// Starts the supervision of a freshly spawned child and builds its transport.
pub(crate) fn start(
    runtime: &tokio::runtime::Handle,
    child: Child,
    pid: u32,
    group: Pid,
    parts: Parts,
) -> ChildTransport {
    let (exit_tx, exit_rx) = watch::channel(None);
    runtime.spawn(reap(child, group, exit_tx));
    let shared = Arc::new(Process {
        pid,
        group,
        program: parts.program,
        stdin: Arc::new(StdinSlot::new(parts.stdin)),
        exit: exit_rx.clone(),
        timeouts: parts.timeouts,
        kill_on_drop: parts.kill_on_drop,
        shutting_down: AtomicBool::new(false),
    });
    let (sender, receiver) = tidewire_core::transport::framed::transport(
        parts.stdout,
        StdinWriter {
            slot: Arc::clone(&shared.stdin),
        },
        parts.codec,
    );
    ChildTransport {
        sender: ChildSender {
            inner: sender,
            shared: Arc::clone(&shared),
        },
        receiver: ChildReceiver {
            inner: receiver,
            exit: exit_rx,
            state: ReadState::Open,
            shared: Arc::clone(&shared),
        },
        handle: ChildHandle { shared },
    }
}

/// What `start` needs besides the child itself.
pub(crate) struct Parts {
    pub(crate) program: String,
    pub(crate) stdin: tokio::process::ChildStdin,
    pub(crate) stdout: ChildStdout,
    pub(crate) codec: tidewire_core::transport::Codec,
    pub(crate) timeouts: ShutdownTimeouts,
    pub(crate) kill_on_drop: bool,
}

/// A connection to a server process started by [`StdioConnector::spawn`](super::StdioConnector::spawn).
///
/// It is a [`Transport`]: hand it to the session engine, which splits it. Keep a
/// [`ChildHandle`] first ([`handle`](Self::handle)) to shut the server down or learn its exit
/// status later, or split it yourself with [`split_with_handle`](Self::split_with_handle).
#[derive(Debug)]
pub struct ChildTransport {
    sender: ChildSender,
    receiver: ChildReceiver,
    handle: ChildHandle,
}

impl ChildTransport {
    /// A handle to the server process; cheap to clone, see [`ChildHandle`].
    pub fn handle(&self) -> ChildHandle {
        self.handle.clone()
    }

    /// The server's process id (also its process-group id).
    pub fn id(&self) -> u32 {
        self.handle.id()
    }

    /// Splits into the two halves and a handle.
    pub fn split_with_handle(self) -> (ChildSender, ChildReceiver, ChildHandle) {
        (self.sender, self.receiver, self.handle)
    }
}

impl Transport for ChildTransport {
    type Sender = ChildSender;
    type Receiver = ChildReceiver;

    fn split(self) -> (ChildSender, ChildReceiver) {
        (self.sender, self.receiver)
    }
}

/// Writes messages to the server's stdin, one per line.
///
/// [`close`](TransportSender::close) flushes and closes stdin, which tells a well-behaved server
/// to exit; dropping the sender closes stdin too. Once the server has gone (or stdin was closed through a [`ChildHandle`]), `send`
/// fails with an error for which `is_closed()` holds.
#[derive(Debug)]
pub struct ChildSender {
    inner: FramedSender<StdinWriter>,
    shared: Arc<Process>,
}

impl ChildSender {
    /// A handle to the server process.
    pub fn handle(&self) -> ChildHandle {
        ChildHandle {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl Drop for ChildSender {
    fn drop(&mut self) {
        // Nothing can write to the server any more: let it see end-of-file, even if handles
        // (which share the pipe's slot) are still around.
        self.shared.stdin.close();
    }
}

impl TransportSender for ChildSender {
    async fn send(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        self.inner.send(envelope).await
    }

    async fn feed(&mut self, envelope: Envelope) -> Result<(), TransportError> {
        self.inner.feed(envelope).await
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        self.inner.flush().await
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        self.inner.close().await
    }
}

#[derive(Debug)]
enum ReadState {
    /// The server runs; reading its stdout.
    Open,
    /// The server exited; reading what is left on stdout until end-of-file or the deadline.
    Draining(Instant),
    /// Stdout reached end-of-file; waiting until the deadline to learn the exit status.
    Closing(Instant),
    /// The end was reported; only `None` from now on.
    Finished,
}

// Built by one `select!` and matched at once, never stored or sent: boxing the message would
// cost an allocation per message for nothing.
#[allow(clippy::large_enum_variant)]
enum Event {
    Item(Option<Result<Envelope, TransportError>>),
    Exited,
    Deadline,
}

/// Reads messages from the server's stdout, one per line.
///
/// `recv` returns `None` when the connection ends: stdout closed, or the server exited (what it
/// wrote before exiting is still delivered). If the server ended with a failure status or was
/// killed by a signal other than through [`ChildHandle::shutdown`], the last item before `None`
/// is a fatal [`TransportError`] whose [`source`](std::error::Error::source) is a
/// [`ServerExited`] naming the status. A line that is not a valid message is a recoverable error
/// and reading goes on.
///
/// `recv` is cancel-safe.
#[derive(Debug)]
pub struct ChildReceiver {
    inner: FramedReceiver<ChildStdout>,
    exit: watch::Receiver<Option<Exit>>,
    state: ReadState,
    shared: Arc<Process>,
}

impl ChildReceiver {
    /// A handle to the server process.
    pub fn handle(&self) -> ChildHandle {
        ChildHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// What to report once the stream is over.
    fn end_of_stream(&mut self) -> Option<Result<Envelope, TransportError>> {
        self.state = ReadState::Finished;
        if self.shared.shutting_down.load(Ordering::Acquire) {
            return None;
        }
        match self.shared.current_exit() {
            // Still running with stdout closed: the server ended the connection on purpose.
            None => None,
            Some(Ok(status)) if status.success() => None,
            Some(Ok(status)) => Some(Err(TransportError::other(ServerExited {
                program: self.shared.program.clone(),
                status,
            }))),
            Some(Err(error)) => Some(Err(TransportError::other(ProcessError::Wait(error)))),
        }
    }

    fn on_item(
        &mut self,
        item: Option<Result<Envelope, TransportError>>,
    ) -> Option<Option<Result<Envelope, TransportError>>> {
        match item {
            Some(Ok(envelope)) => Some(Some(Ok(envelope))),
            Some(Err(error)) => {
                if !error.is_recoverable() {
                    self.state = ReadState::Finished;
                }
                Some(Some(Err(error)))
            }
            None => {
                if self.shared.has_exited() {
                    return Some(self.end_of_stream());
                }
                self.state = ReadState::Closing(Instant::now() + EXIT_GRACE);
                None
            }
        }
    }
}

impl TransportReceiver for ChildReceiver {
    async fn recv(&mut self) -> Option<Result<Envelope, TransportError>> {
        loop {
            let event = match self.state {
                ReadState::Finished => return None,
                ReadState::Open => {
                    tokio::select! {
                        biased;
                        item = self.inner.recv() => Event::Item(item),
                        // An error means the reaper is gone without a status (runtime shutting
                        // down); stop waiting for it either way.
                        _ = self.exit.changed() => Event::Exited,
                    }
                }
                ReadState::Draining(deadline) => {
                    tokio::select! {
                        biased;
                        item = self.inner.recv() => Event::Item(item),
                        () = tokio::time::sleep_until(deadline) => Event::Deadline,
                    }
                }
                ReadState::Closing(deadline) => {
                    let exited = async {
                        // Only the fact of the change matters; drop the borrow at once.
                        let _ = self.exit.wait_for(Option::is_some).await.map(|_| ());
                    };
                    tokio::select! {
                        () = exited => Event::Exited,
                        () = tokio::time::sleep_until(deadline) => Event::Deadline,
                    }
                }
            };
            match (event, &self.state) {
                (Event::Item(item), _) => {
                    if let Some(out) = self.on_item(item) {
                        return out;
                    }
                }
                (Event::Exited, ReadState::Open) => {
                    self.state = ReadState::Draining(Instant::now() + EXIT_GRACE);
                }
                (Event::Exited | Event::Deadline, _) => return self.end_of_stream(),
            }
        }
    }
}

/// A handle to a server process: its id, its exit status, and the shutdown sequence.
///
/// Cheap to clone (an `Arc` inside); every clone controls the same process. The process is
/// killed (its whole group, with `SIGKILL`) when the transport halves and every handle have been
/// dropped while it still runs, unless the builder turned that off with
/// [`kill_on_drop(false)`](super::StdioConnector::kill_on_drop).
#[derive(Debug, Clone)]
pub struct ChildHandle {
    shared: Arc<Process>,
}

impl ChildHandle {
    /// The server's process id, which is also the id of the process group it leads.
    ///
    /// After the server has exited the id may belong to another process.
    pub fn id(&self) -> u32 {
        self.shared.pid
    }

    /// The exit status, or `None` while the server runs (or if waiting for it failed).
    pub fn exit_status(&self) -> Option<ExitStatus> {
        match self.shared.current_exit() {
            Some(Ok(status)) => Some(status),
            _ => None,
        }
    }

    /// True once the server process has exited (and been reaped).
    pub fn has_exited(&self) -> bool {
        self.shared.has_exited()
    }

    /// Waits for the server process to exit, without asking it to.
    ///
    /// # Errors
    /// [`ProcessError::Wait`] if the operating system could not report the exit;
    /// [`ProcessError::SupervisorGone`] if the runtime that spawned the process shut down.
    pub async fn wait(&self) -> Result<ExitStatus, ProcessError> {
        let mut exit = self.shared.exit.clone();
        // Only the change matters here; the value is read below, after the borrow is dropped.
        let _ = exit.wait_for(Option::is_some).await.map(|_| ());
        match self.shared.current_exit() {
            Some(Ok(status)) => Ok(status),
            Some(Err(error)) => Err(ProcessError::Wait(error)),
            None => Err(ProcessError::SupervisorGone),
        }
    }

    /// Waits for the exit for at most `limit`; `None` if the server still runs after it.
    async fn wait_at_most(&self, limit: Duration) -> Option<Result<ExitStatus, ProcessError>> {
        tokio::time::timeout(limit, self.wait()).await.ok()
    }

    /// Closes the server's stdin, as [`TransportSender::close`] on the sender does, but from
    /// anywhere: a send blocked on a full pipe fails with `is_closed()`. Idempotent.
    pub fn close_stdin(&self) {
        self.shared.stdin.close();
    }

    /// Sends `SIGKILL` to the server's process group and returns without waiting; use
    /// [`wait`](Self::wait) to learn when it is gone. Does nothing once the server has exited.
    /// As after [`shutdown`](Self::shutdown), the receiver then ends with `None`.
    ///
    /// # Errors
    /// [`ProcessError::Signal`] if the signal could not be sent (e.g. not permitted).
    pub fn kill(&self) -> Result<(), ProcessError> {
        self.shared.shutting_down.store(true, Ordering::Release);
        self.shared.signal_group(Signal::SIGKILL)
    }

    /// Stops the server with the shutdown sequence and the timeouts set on the builder (by
    /// default 2 s and 2 s): close stdin and wait; then `SIGTERM` to the process group and wait;
    /// then `SIGKILL` to the group. Returns the exit status.
    ///
    /// Returns at once if the server has already exited. Calling it from several places at once
    /// is harmless: every call returns when the process is gone. After a shutdown the receiver
    /// ends with `None`, not with an exit error.
    ///
    /// # Errors
    /// As [`wait`](Self::wait), and [`ProcessError::Signal`] if `SIGKILL` could not be sent.
    pub async fn shutdown(&self) -> Result<ExitStatus, ProcessError> {
        self.shutdown_with(self.shared.timeouts).await
    }

    /// Like [`shutdown`](Self::shutdown), with other timeouts for this call.
    ///
    /// # Errors
    /// As [`shutdown`](Self::shutdown).
    pub async fn shutdown_with(
        &self,
        timeouts: ShutdownTimeouts,
    ) -> Result<ExitStatus, ProcessError> {
        let shared = &self.shared;
        shared.shutting_down.store(true, Ordering::Release);
        if shared.has_exited() {
            return self.wait().await;
        }

        tracing::debug!(pid = shared.pid, "shutdown: closing the server's stdin");
        shared.stdin.close();
        if let Some(done) = self.wait_at_most(timeouts.stdin_close()).await {
            return done;
        }

        tracing::debug!(
            pid = shared.pid,
            "shutdown: sending SIGTERM to the process group"
        );
        if let Err(error) = shared.signal_group(Signal::SIGTERM) {
            tracing::warn!(pid = shared.pid, %error, "shutdown: SIGTERM failed");
        }
        if let Some(done) = self.wait_at_most(timeouts.terminate()).await {
            return done;
        }

        tracing::debug!(
            pid = shared.pid,
            "shutdown: sending SIGKILL to the process group"
        );
        shared.signal_group(Signal::SIGKILL)?;
        self.wait().await
    }
}
