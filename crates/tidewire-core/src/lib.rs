//! # tidewire-core
//!
//! The foundation of tidewire, a Rust SDK for the Model Context Protocol: JSON-RPC 2.0, the MCP
//! schema as typed Rust, the message-stream trait every transport implements, and the session
//! engine that runs one connection (requests, progress, cancellation, timeouts).
//!
//! Most users want the `tidewire` facade, or `tidewire-server` / `tidewire-client`, which build
//! on this crate. Use it directly to speak raw JSON-RPC, or to write a transport.
//!
//! ```
//! use serde_json::{Value, json};
//! use tidewire_core::jsonrpc::{ErrorObject, Request};
//! use tidewire_core::session::{Handler, NoHandler, RequestContext, Session, SessionOptions};
//! use tidewire_core::transport::memory;
//!
//! /// Counts to `n`, reporting progress at each step.
//! struct Counter;
//!
//! impl Handler for Counter {
//!     async fn handle_request(&self, request: Request, ctx: RequestContext) -> Result<Value, ErrorObject> {
//!         let n = request.params.as_ref().and_then(|p| p["n"].as_u64()).unwrap_or(0);
//!         for i in 1..=n {
//!             ctx.report_progress(i as f64, Some(n as f64), None)
//!                 .await
//!                 .map_err(ErrorObject::internal)?;
//!         }
//!         Ok(json!({ "counted": n }))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (a, b) = memory::duplex();
//! let _server = Session::spawn(a, Counter, SessionOptions::default());
//! let client = Session::spawn(b, NoHandler, SessionOptions::default());
//!
//! let mut seen = Vec::new();
//! let (request, progress) = client.request_raw("count", Some(json!({ "n": 3 }))).progress_stream();
//! let result = request.await?;
//! futures::StreamExt::for_each(progress, |p| {
//!     seen.push(p.progress);
//!     async {}
//! })
//! .await;
//! assert_eq!(result, json!({ "counted": 3 }));
//! assert_eq!(seen, vec![1.0, 2.0, 3.0]);
//! # Ok(()) }
//! ```
//!
//! ## Modules
//! - [`jsonrpc`]: ids (`1` ≠ `"1"`), messages, the wire error object and codes.
//! - [`schema`]: every request, result and notification of 2024-11-05 … 2025-11-25, typed, with
//!   marker types (`CallTool`, `ListTools`, …) tying each method to its params and result, and
//!   `compat` to speak to peers on older revisions.
//! - [`transport`]: the message-stream trait, [`transport::Envelope`] and its route, the one
//!   [`transport::Codec`] (size limit, error answers), and adapters: newline-framed byte streams,
//!   `Sink + Stream`, in-memory.
//! - [`session`]: the engine. See its docs for timeouts, progress and what dropping a request
//!   future does ("Cancel safety").
//! - [`progress`]: progress values and the errors of the monotonic guard.
//! - [`version`]: the protocol revisions and `initialize` negotiation.
//! - [`lifecycle`]: whether a server takes new work, its requests in flight (graceful drain,
//!   readiness).

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub mod extensions;
#[cfg(feature = "http")]
pub mod http;
pub mod jsonrpc;
pub mod lifecycle;
pub mod progress;
pub mod queue;
mod random_id;
pub mod schema;
pub mod session;
pub mod stateless;
pub mod text;
pub mod transport;
pub mod version;

pub use extensions::Extensions;
pub use random_id::random_id;
pub use version::ProtocolVersion;

/// The `http` crate, for the setters `__request_header_setters!` writes in other crates.
#[cfg(feature = "http")]
#[doc(hidden)]
pub use ::http as __http;
