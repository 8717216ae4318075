//! # tidewire
//!
//! A Rust SDK for the Model Context Protocol (MCP), client and server, whose progress and
//! cancellation work the same on every transport and in both protocol eras (the session
//! revisions up to 2025-11-25, and the stateless 2026-07-28).
//!
//! ```toml
//! [dependencies]
//! tidewire = { version = "0.1", features = ["http-server"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Every item has one path through this crate: [`server`], [`client`], [`schema`] (every
//! request, result and notification type), the transports ([`stdio`], `http`, `sse`, `ws`), and
//! [`prelude`] for what nearly every program uses. [`schemars`], [`serde`] and [`serde_json`] are
//! re-exported at the versions tidewire uses, so tool argument types can derive through them
//! (see [`prelude`]).
//!
//! | feature        | default | what it brings                                               |
//! |----------------|---------|--------------------------------------------------------------|
//! | `server`       | yes     | [`server`]: tools, resources, prompts, completion             |
//! | `client`       | yes     | [`client`]: a typed client, both eras                         |
//! | `stdio`        | yes     | [`stdio`]: serve over stdin/stdout, or spawn a server process |
//! | `http-server`  | no      | `http::server`: Streamable HTTP in any axum app (both eras)   |
//! | `http-client`  | no      | `http::client`: Streamable HTTP clients (both eras)           |
//! | `rustls`       | no      | HTTPS for the HTTP clients                                    |
//! | `sse-server`   | no      | `sse::server`: the legacy HTTP+SSE server                     |
//! | `sse-client`   | no      | `sse::client`: its client                                     |
//! | `connect`      | no      | `connect`: an HTTP URL in whichever era and transport it speaks |
//! | `ws-server`    | no      | `ws::server`: WebSocket (a custom transport)                  |
//! | `ws-client`    | no      | `ws::client`                                                  |
//! | `http`, `sse`, `ws` | no | both halves of the transport                                  |
//! | `auth`         | no      | `auth`: OAuth 2.1 for a server (the bearer layer, metadata)   |
//! | `auth-jwt`     | no      | `auth`'s JWT (JWKS) and introspection verifiers               |
//! | `auth-client`  | no      | `auth::client`: the OAuth client the HTTP clients call        |
//! | `redis`        | no      | `redis`: the bus, task store, sealing key, session routing and event copies on Redis (scale-out) |
//! | `full`         | no      | everything                                                    |
//!
//! The core ([`core`]: JSON-RPC, the schema, the transport trait, the session engine) is
//! always there.
//!
//! A tool server over stdio:
//!
//! ```no_run
//! # #[cfg(all(feature = "server", feature = "stdio-server"))]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tidewire::prelude::*;
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "tidewire::serde")]
//! #[schemars(crate = "tidewire::schemars")]
//! struct Greet {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! let server = Server::builder(Implementation::new("hello", "1.0.0"))
//!     .tool("greet", "Says hello", |args: Greet, _ctx| async move {
//!         Ok(CallToolResult::text(format!("hello, {}", args.name)))
//!     })
//!     .build();
//! server.run(tidewire::stdio::server::transport()).await?;
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

pub use tidewire_core as core;
pub use tidewire_core::schema;

pub use schemars;
pub use serde;
pub use serde_json;

#[cfg(feature = "client")]
pub use tidewire_client as client;
#[cfg(feature = "server")]
pub use tidewire_server as server;
#[cfg(any(feature = "stdio-server", feature = "stdio-client"))]
pub use tidewire_stdio as stdio;

#[cfg(feature = "auth")]
pub use tidewire_auth as auth;
#[cfg(any(feature = "http-server", feature = "http-client"))]
pub use tidewire_http as http;
#[cfg(feature = "redis")]
pub use tidewire_redis as redis;
#[cfg(any(feature = "sse-server", feature = "sse-client"))]
pub use tidewire_sse as sse;
#[cfg(any(feature = "ws-server", feature = "ws-client"))]
pub use tidewire_ws as ws;

#[cfg(feature = "connect")]
pub mod connect;

/// What nearly every tidewire program uses: `use tidewire::prelude::*;`.
///
/// It brings the server and client types (with their features), the schema types a tool
/// returns, and the derives a tool's argument type needs: [`Deserialize`](serde::Deserialize) and [`JsonSchema`](schemars::JsonSchema).
/// Those derives expand to paths of the `serde` and `schemars` crates, so either depend on
/// `serde` (with `derive`) and `schemars` 1 yourself, or point the derives at tidewire's
/// re-exports:
///
/// ```
/// use tidewire::prelude::*;
///
/// #[derive(Deserialize, JsonSchema)]
/// #[serde(crate = "tidewire::serde")]
/// #[schemars(crate = "tidewire::schemars")]
/// struct Crawl {
///     /// The pages to fetch.
///     urls: Vec<String>,
/// }
///
/// let schema = tidewire::schemars::schema_for!(Crawl);
/// assert!(schema.as_value()["properties"]["urls"].is_object());
/// ```
pub mod prelude {
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use tidewire_core::schema::{CallToolResult, ContentBlock, Implementation};

    #[cfg(feature = "client")]
    pub use tidewire_client::{Client, ClientBuilder, ClientError, Era, TaskHandle, TaskStart};
    #[cfg(feature = "server")]
    pub use tidewire_server::{CancelPolicy, Context, NoArgs, Server, ServerBuilder, ToolError};
}

/// The Rust snippets of the README and of `docs/`, compiled as doctests so they stay true.
/// They use every transport: `cargo test --workspace` turns the features on, through the tests
/// crate's `full`.
#[cfg(all(doctest, feature = "full"))]
mod doc_snippets {
    #[doc = include_str!("../../../README.md")]
    pub struct Readme;
    #[doc = include_str!("../../../docs/progress-and-cancellation.md")]
    pub struct ProgressAndCancellation;
    #[doc = include_str!("../../../docs/transports.md")]
    pub struct Transports;
    #[doc = include_str!("../../../docs/eras.md")]
    pub struct Eras;
    #[doc = include_str!("../../../docs/tasks.md")]
    pub struct Tasks;
    #[doc = include_str!("../../../docs/skills.md")]
    pub struct Skills;
    #[doc = include_str!("../../../docs/auth.md")]
    pub struct Auth;
    #[doc = include_str!("../../../docs/scale-out.md")]
    pub struct ScaleOut;
}
