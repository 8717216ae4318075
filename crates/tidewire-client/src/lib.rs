//! # tidewire-client
//!
//! The client side of the Model Context Protocol: connect to an MCP server over any tidewire
//! transport, call its tools with progress, timeouts and cancellation, read its resources and
//! prompts, hear its notifications, and answer what it asks of the client (sampling,
//! elicitation, roots).
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use futures::StreamExt;
//! use serde_json::json;
//! use tidewire_client::{ClientBuilder, ClientError};
//! use tidewire_core::schema::Implementation;
//! use tidewire_core::transport::Transport;
//!
//! async fn run(transport: impl Transport) -> Result<(), ClientError> {
//!     // Handshake: initialize, version negotiation, notifications/initialized.
//!     let client = ClientBuilder::new(Implementation::new("my-agent", "1.0.0"))
//!         .connect(transport)
//!         .await?;
//!     println!("{} speaks MCP {}", client.server_info().name, client.protocol_version());
//!     for tool in client.list_all_tools().await? {
//!         println!("tool: {}", tool.name);
//!     }
//!
//!     // Call a tool and watch its progress. Each report restarts the 30 s timeout, up to a
//!     // hard maximum of 10 minutes.
//!     let result = client
//!         .call_tool("crawl", json!({ "url": "https://example.com", "depth": 2 }))
//!         .timeout(Duration::from_secs(30))
//!         .reset_timeout_on_progress(Duration::from_secs(600))
//!         .on_progress(|p| {
//!             let percent = 100.0 * p.fraction().unwrap_or(0.0);
//!             println!("{percent:>5.1}% {}", p.message.unwrap_or_default());
//!         })
//!         .await?;
//!     println!("crawl finished (error: {})", result.is_error());
//!
//!     // Start another call, and cancel it once the server reports that it started.
//!     let (call, mut progress) = client
//!         .call_tool("crawl", json!({ "url": "https://example.org" }))
//!         .progress_stream();
//!     let call = call.send().await?;
//!     if let Some(first) = progress.next().await {
//!         println!("started: {:?}", first.message);
//!     }
//!     call.cancel("the user changed their mind"); // the server gets notifications/cancelled
//!     match call.await {
//!         Err(e) if e.is_cancelled() => println!("cancelled"),
//!         other => println!("finished first: {other:?}"),
//!     }
//!
//!     client.close().await;
//!     Ok(())
//! }
//! ```
//!
//! ## Structure
//!
//! - [`ClientBuilder`] configures a client: its identity ([`Implementation`](schema::Implementation)),
//!   the revision it offers, [`SessionOptions`] (default timeout, limits), handlers for the
//!   server's requests, a notification callback, buffer sizes. The capabilities it declares
//!   follow from the handlers set. [`connect`](ClientBuilder::connect) spawns the connection
//!   on tokio; [`connect_with_driver`](ClientBuilder::connect_with_driver) hands you its
//!   [`Driver`] instead.
//! - [`Client`] is the connected handle (cheap `Clone`, an `Arc` inside): what the server said
//!   in `initialize` ([`server_info`](Client::server_info),
//!   [`server_capabilities`](Client::server_capabilities),
//!   [`instructions`](Client::instructions), [`protocol_version`](Client::protocol_version)),
//!   typed methods for every client request (`list_*`, `list_all_*`, `read_resource`,
//!   `get_prompt`, `complete`, …), and [`request`](Client::request) as a typed escape hatch for
//!   anything else.
//! - [`CallToolBuilder`] is one tool call: timeout, reset-on-progress with a hard maximum,
//!   a progress callback or [`ToolProgress`] stream, `_meta`; `.await` it, or
//!   [`send`](CallToolBuilder::send) it for a [`ToolCall`] with the request id and a cancel
//!   handle.
//! - [`SamplingHandler`], [`ElicitationHandler`] and [`RootsHandler`] answer the server's
//!   requests; async functions and closures implement them. [`StaticRoots`] serves a list you
//!   can change while connected.
//! - [`Era`] ([`ClientBuilder::era`]) chooses a probe with fallback (the default), the stateless
//!   revision 2026-07-28, or the session era (`initialize`); [`Client::era`] says which is
//!   spoken. On the stateless revision the same calls work: questions the server asks
//!   inside `input_required` results are answered by the same handlers, round after round;
//!   [`Client::listen`] is one stream of change notifications in both eras; results with a
//!   `ttlMs` are cached ([`Client::fresh`] asks anyway). On Streamable HTTP the stateless
//!   revision needs `tidewire_http::client::StatelessHttpConnector` (or
//!   `tidewire::connect::auto`, which picks).
//! - Skills (the skills extension): [`Client::list_skills`] lists them and reads nothing;
//!   [`Client::load_skill`] reads a `SKILL.md` and checks it against its entry (size, digest,
//!   frontmatter), and [`LoadedSkill::read`] reads a listed file, checked the same way.
//! - [`NotificationStream`] delivers the server's notifications as typed
//!   [`ServerNotification`](schema::ServerNotification)s.
//! - [`ClientError`] says what went wrong, with `is_timeout` / `is_cancelled` / `is_closed` /
//!   `remote` predicates.
//!
//! ## Protocol revisions
//!
//! The client offers [`ProtocolVersion::LATEST_HANDSHAKE`] (2025-11-25) unless told otherwise,
//! and accepts any of the four handshake revisions the server answers with (2024-11-05,
//! 2025-03-26, 2025-06-18, 2025-11-25); it records the choice on the session, which then
//! speaks that revision. Any other answer fails the connection with
//! [`ClientError::UnsupportedVersion`], naming the server's version. The stateless revision
//! 2026-07-28 has no handshake: with [`Era::Auto`] (the default) or [`Era::Modern`] the client
//! speaks it where the transport can carry it (see [`Era`]).
//!
//! ## Cancel safety
//!
//! Dropping a request future (an awaited [`CallToolBuilder`], a [`ToolCall`], a typed
//! [`request`](Client::request)) before its response arrives cancels the request: the server
//! receives `notifications/cancelled` and a late response is ignored. A timeout does the same,
//! and [`ToolCall::cancel`] or a [`CancelHandle`] does it explicitly. This happens in the
//! session engine, above the transport, so it behaves the same on every transport. The only
//! exception is `initialize`, which the specification forbids cancelling: dropping
//! [`Connecting`] closes the connection instead.
//!
//! Dropping the last [`Client`] clone closes the connection.
//!
//! ## Notifications
//!
//! Every notification the server sends goes, in order, to the callback set with
//! [`ClientBuilder::on_notification`] (on the connection's reader: keep it short) and to every
//! [`NotificationStream`] from [`Client::notifications`]. Streams are bounded; one that falls
//! behind gets `Err(Lagged(n))` rather than silently missing notifications. The first stream
//! also holds what arrived between the handshake and the call.
//!
//! ## Requests from the server
//!
//! `sampling/createMessage`, `elicitation/create` and `roots/list` go to their handlers; each
//! runs in its own task with a [`RequestContext`], so it can report progress when the server
//! asked for it and notices when the server cancels. Without a handler the answer is `-32601`
//! (method not found); an elicitation mode the client did not declare, or sampling with tools
//! or context inclusion that it did not declare, is refused with `-32602`. `ping` is answered
//! by the engine.

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod builder;
mod cache;
mod call;
mod client;
mod dispatch;
mod era;
mod error;
mod handlers;
mod listen;
mod notifications;
mod reinit;
mod rounds;
mod skills;
pub mod task;
#[cfg(feature = "otel")]
mod telemetry;
mod tool_headers;

pub use builder::{
    ClientBuilder, Connecting, DEFAULT_MAX_INPUT_ROUNDS, DEFAULT_MAX_LIST_PAGES,
    DEFAULT_NOTIFICATION_BUFFER, PROBE_TIMEOUT,
};
pub use call::{CallToolBuilder, ToolCall, ToolProgress};
pub use client::Client;
pub use era::Era;
pub use error::ClientError;
pub use handlers::{
    ElicitationHandler, ElicitationModes, RootsHandler, SamplingHandler, StaticRoots,
};
pub use listen::Listen;
pub use notifications::{Lagged, NotificationStream};
pub use skills::{LoadedSkill, SkillsError};
pub use task::{TaskHandle, TaskStart};

pub use tidewire_core::ProtocolVersion;
pub use tidewire_core::progress::Progress;
/// The typed MCP schema, re-exported from `tidewire-core`.
pub use tidewire_core::schema;
pub use tidewire_core::session::{
    CancelHandle, Driver, RequestBuilder, RequestContext, SessionError, SessionOptions,
};
/// Skills: entries, digests, frontmatter and the checks of what a host read, re-exported from
/// `tidewire-skills`.
pub use tidewire_skills as skill;
