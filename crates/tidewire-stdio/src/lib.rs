//! # tidewire-stdio
//!
//! The MCP stdio transport: newline-delimited JSON-RPC over a process's stdin and stdout.
//!
//! - [`server`]: serve over this process's own stdin and stdout, as a server started by an MCP
//!   client does.
//! - [`client`]: start a server program as a child process, talk to it over its pipes, and stop
//!   it cleanly (Unix only for now).
//!
//! Both sides produce a [`Transport`](tidewire_core::transport::Transport) for the session engine
//! in `tidewire-core`. Framing, the message-size limit and the JSON-RPC error answers to bad lines
//! come from [`tidewire_core::transport::framed`], so they behave as on every other transport.
//!
//! ## Example
//!
//! Start a child process and exchange a message with it. `cat` is no MCP server, but it writes
//! back every line it reads, which is enough to show the plumbing; a real client passes the
//! transport to the session engine instead of using the halves directly.
//!
//! ```
//! # #[cfg(unix)]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tidewire_core::jsonrpc::{Message, Notification};
//! use tidewire_core::transport::{Envelope, Transport, TransportReceiver, TransportSender};
//! use tidewire_stdio::client::{StderrMode, StdioConnector};
//!
//! let transport = StdioConnector::command("cat")
//!     .stderr(StderrMode::Null)
//!     .spawn()?;
//! // Keep a handle before the transport is split and moved away.
//! let server = transport.handle();
//! let (mut to_server, mut from_server) = transport.split();
//!
//! let hello = Notification::new("notifications/initialized", None);
//! to_server.send(Envelope::new(hello.clone())).await?;
//! if let Some(echoed) = from_server.recv().await {
//!     assert_eq!(echoed?.message, Message::Notification(hello));
//! }
//!
//! // Close stdin, wait, then SIGTERM, wait, then SIGKILL, as far as needed.
//! let status = server.shutdown().await?;
//! assert!(status.success());
//! # Ok(()) }
//! # #[cfg(not(unix))]
//! # fn main() {}
//! ```
//!
//! A server does the mirror image:
//!
//! ```no_run
//! # #[tokio::main]
//! # async fn main() {
//! // Logs go to stderr: stdout carries protocol messages only.
//! eprintln!("starting");
//! let transport = tidewire_stdio::server::transport();
//! // Run the session over `transport`; it ends when the client closes our stdin.
//! # drop(transport);
//! # }
//! ```
//!
//! ## Feature flags
//!
//! | feature  | default | enables |
//! |----------|---------|---------|
//! | `server` | yes     | [`server`]: a transport over this process's stdin and stdout |
//! | `client` | yes     | [`client`]: spawn and supervise a server process (Unix; pulls `nix` and Tokio's `process`) |
//!
//! ## Shutdown
//!
//! MCP has no shutdown message. The stdio rules are:
//!
//! - **A server stops when its stdin ends.** [`server::transport`]'s receiver returns `None` at
//!   end-of-file, so the session finishes and the server exits. A server may also end the
//!   connection by closing its stdout.
//! - **A client stops a server in three steps:** close its stdin and wait; then send `SIGTERM`
//!   and wait; then send `SIGKILL`. [`ChildHandle::shutdown`](client::ChildHandle::shutdown)
//!   does exactly this, by default waiting 2 seconds at each step
//!   ([`ShutdownTimeouts`](client::ShutdownTimeouts)). Signals go to the server's whole
//!   **process group**, so helpers it started (say the real server behind `npx`) stop with it.
//! - Closing the sending half ([`TransportSender::close`](tidewire_core::transport::TransportSender::close))
//!   closes the child's stdin, the polite first step on its own.
//! - When the server process exits, anything it left running in its group is killed, and the
//!   receiving half ends once the server's output is read: with `None` after a clean exit or a
//!   requested shutdown, or with a fatal error naming the exit status
//!   ([`ServerExited`](client::ServerExited)) after a crash. The session engine then fails every
//!   request still waiting for an answer.
//! - Dropping the transport halves and every handle while the server still runs kills its group
//!   with `SIGKILL` right away (nothing blocks in `Drop`); turn that off with
//!   [`StdioConnector::kill_on_drop`](client::StdioConnector::kill_on_drop). If the Tokio runtime that
//!   spawned the server shuts down first, the group is killed then.
//! - The exit status is available from [`ChildHandle::wait`](client::ChildHandle::wait) and
//!   [`ChildHandle::exit_status`](client::ChildHandle::exit_status).

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

#[cfg(all(feature = "client", unix))]
pub mod client;
#[cfg(feature = "server")]
pub mod server;
