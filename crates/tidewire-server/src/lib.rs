//! # tidewire-server
//!
//! The server side of the Model Context Protocol: describe tools, resources, prompts and
//! completion once, then serve them over any tidewire transport.
//!
//! ```no_run
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//! use tidewire_core::schema::{CallToolResult, Implementation};
//! use tidewire_server::Server;
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct Crawl {
//!     urls: Vec<String>,
//! }
//!
//! # async fn run(transport: tidewire_core::transport::memory::MemoryTransport) -> Result<(), Box<dyn std::error::Error>> {
//! let server = Server::builder(Implementation::new("crawler", "1.0.0"))
//!     .tool("crawl", "Fetches each URL", |args: Crawl, ctx| async move {
//!         let total = args.urls.len() as f64;
//!         for (i, url) in args.urls.iter().enumerate() {
//!             // Aborted here if the client cancels; no response is sent then.
//!             ctx.report_progress((i + 1) as f64, Some(total), Some(format!("Fetching {url}"))).await?;
//!         }
//!         Ok(CallToolResult::text(format!("Crawled {} URLs", args.urls.len())))
//!     })
//!     .build();
//! server.run(transport).await?;
//! # Ok(()) }
//! ```
//!
//! ## Structure
//! - [`Server`] / [`ServerBuilder`]: what the server offers; [`Server::serve`] runs one connection
//!   over a transport. List changes and resource updates are announced through the server.
//! - [`Context`]: what a handler gets: progress, cancellation, logging, and requests back to the
//!   client (sampling, elicitation, roots), all tied to the request.
//! - [`ToolError`]: a tool failure, reported as an `isError` result or a JSON-RPC error.
//!
//! ## Both eras
//! A server serves the session era (`initialize` negotiates 2024-11-05 … 2025-11-25) and the
//! stateless revision 2026-07-28 (each request carries `_meta`
//! `io.modelcontextprotocol/protocolVersion`) on the same connection or endpoint, unless told
//! otherwise ([`ServerBuilder::eras`]). Handlers are written once: the era decides the wire form
//! of progress, logs, questions to the client and list changes (see `docs/eras.md`).

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

// The modules and their layers: see `docs/architecture.md` ("Inside a crate").
mod answer;
mod broadcast;
mod builder;
pub mod bus;
mod cache;
mod calls;
mod catch_up;
mod connection;
mod context;
mod dispatch;
mod error;
mod listing;
mod registry;
mod rounds;
mod seal;
mod served;
mod server;
mod skills;
mod state;
mod stateless;
pub mod tasks;
#[cfg(feature = "otel")]
mod telemetry;
mod uri_template;

pub use builder::{NoArgs, ServerBuilder, schema_for};
pub use cache::{CacheHint, CacheItem, CacheScope};
pub use context::{Context, KeyedQuestion, ReportProgress};
pub use error::ToolError;
pub use seal::{KeyRing, KeyRingError};
pub use server::{DRAIN_CANCEL_GRACE, Drained, Server};
pub use tidewire_core::lifecycle::Lifecycle;
pub use tidewire_core::progress::{Progress, ProgressError};
pub use tidewire_core::schema;
pub use tidewire_core::session::{CancelPolicy, Cancelled, OnCancel};
pub use tidewire_core::version::Eras;
/// Skills: building them in code or from a folder, and the checks a host makes, re-exported
/// from `tidewire-skills`.
pub use tidewire_skills as skill;
pub use uri_template::UriTemplate;
