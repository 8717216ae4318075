//! # tidewire
//!
//! A Rust SDK for the Model Context Protocol (MCP), client and server, whose progress and
//! cancellation work the same on every transport and in both protocol eras (the session
//! revisions up to 2025-11-25, and the stateless 2026-07-28).
//!
//! ```toml
//! [dependencies]
//! tidewire = { version = "0.1", features = ["http", "ws"] }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! ## Where things are
//!
//! - [`prelude`]: what nearly every program uses (`use tidewire::prelude::*;`): [`Server`],
//!   [`Client`], [`Context`], [`CallToolResult`], [`Implementation`], the derives a tool's
//!   argument type needs.
//! - [`server`]: tools, resources, prompts, completion, tasks, skills; a handler's
//!   [`Context`] reports progress, asks the client questions and sees its cancellation.
//! - [`client`]: typed calls with progress, cancellation and timeouts, in either era.
//! - [`schema`]: every request, result and notification type of every revision.
//! - [`core`]: JSON-RPC, the transport trait and the session engine, for a
//!   transport or an engine of your own.
//! - [`connect`]: an HTTP URL in whichever era and transport its server speaks.
//! - [`auth`]: OAuth 2.1 for a server (the bearer layer) and for a client; [`redis`]: replicas
//!   that share their state on Redis.
//! - [`schemars`](https://docs.rs/schemars/1), [`serde`] and [`serde_json`] at the versions
//!   tidewire uses (`tidewire::schemars`, …), so argument types derive through them.
//!
//! Each transport, server side and client side:
//!
//! | transport | server | client |
//! |---|---|---|
//! | stdio | [`stdio::server::transport`] | [`stdio::client::StdioConnector`] (spawns the server) |
//! | Streamable HTTP, both eras on one endpoint | [`http::server::StreamableHttp`] with [`http::server::HttpConfig`] | [`http::client::StreamableHttpConnector`] (sessions), [`http::client::StatelessHttpConnector`] (2026-07-28), or [`connect::auto`] to choose |
//! | WebSocket | [`ws::server::WebSocket`] with [`ws::server::WsConfig`] | [`ws::client::WebSocketConnector`] |
//! | legacy HTTP+SSE (2024-11-05) | [`sse::server::LegacySse`] | [`sse::client::LegacySseConnector`], or [`connect::with_fallback`] |
//! | in-memory | [`core::transport::memory::duplex`] | the other half |
//!
//! ## A server on HTTP and WebSocket, and a client that cancels
//!
//! One server, built once and given (cloned) to each transport; a client that asks for a crawl
//! with progress and cancels it after the third report. Under
//! [`CancelPolicy::Cooperative`](server::CancelPolicy) the tool stops between two pages
//! (`ctx.check_cancelled()?`); under the default it is dropped at its next `.await`.
//!
//! ```no_run
//! # #[cfg(all(feature = "http", feature = "ws"))]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tidewire::http::client::StreamableHttpConnector;
//! use tidewire::http::server::{HttpConfig, StreamableHttp};
//! use tidewire::prelude::*;
//! use tidewire::ws::server::{WebSocket, WsConfig};
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "tidewire::serde")]
//! #[schemars(crate = "tidewire::schemars")]
//! struct Crawl {
//!     /// The pages to fetch.
//!     urls: Vec<String>,
//! }
//!
//! let server = Server::builder(Implementation::new("crawler", "1.0.0"))
//!     .tool("crawl", "Fetches each URL", |args: Crawl, ctx: Context| async move {
//!         let total = args.urls.len();
//!         for (done, url) in (1..).zip(&args.urls) {
//!             ctx.check_cancelled()?; // between two pages, never inside one
//!             // ... fetch `url` ...
//!             ctx.progress(done).of(total as f64).message(format!("fetched {url}")).await?;
//!         }
//!         Ok(CallToolResult::text(format!("crawled {total} URLs")))
//!     })
//!     .cancel_policy_for("crawl", CancelPolicy::Cooperative)
//!     .build();
//!
//! // Streamable HTTP at /mcp and WebSocket at /ws, in one axum app.
//! let app = StreamableHttp::new(HttpConfig::default(), server.clone())
//!     .router("/mcp")
//!     .merge(WebSocket::new(WsConfig::default(), server).router("/ws"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! tokio::spawn(tidewire::http::server::serve(listener, app));
//!
//! // A client: progress as it comes, and a cancel after the third report.
//! let transport = StreamableHttpConnector::new("http://127.0.0.1:3000/mcp").connect().await?;
//! let client = Client::builder(Implementation::new("agent", "1.0.0"))
//!     .connect(transport)
//!     .await?;
//! let mut reports = 0;
//! let outcome = client
//!     .call_tool("crawl", tidewire::serde_json::json!({"urls": ["a", "b", "c", "d", "e"]}))
//!     .on_progress_with_cancel(move |p, call| {
//!         println!("{p}"); // 3/5: fetched c
//!         reports += 1;
//!         if reports == 3 {
//!             call.cancel("three pages are enough");
//!         }
//!     })
//!     .await;
//! assert!(outcome.is_err_and(|e| e.is_cancelled()));
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! ## Features
//!
//! | feature        | default | what it brings                                               |
//! |----------------|---------|--------------------------------------------------------------|
//! | `server`       | yes     | [`server`]: tools, resources, prompts, completion             |
//! | `client`       | yes     | [`client`]: a typed client, both eras                         |
//! | `stdio`        | yes     | [`stdio`]: serve over stdin/stdout, or spawn a server process |
//! | `http-server`  | no      | [`http::server`]: Streamable HTTP in any axum app (both eras) |
//! | `http-client`  | no      | [`http::client`]: Streamable HTTP clients (both eras)         |
//! | `rustls`       | no      | HTTPS for the HTTP clients                                    |
//! | `sse-server`   | no      | [`sse::server`]: the legacy HTTP+SSE server                   |
//! | `sse-client`   | no      | [`sse::client`]: its client                                   |
//! | `connect`      | no      | [`connect`]: an HTTP URL in whichever era and transport it speaks |
//! | `ws-server`    | no      | [`ws::server`]: WebSocket (a custom transport)                |
//! | `ws-client`    | no      | [`ws::client`]                                                |
//! | `http`, `sse`, `ws` | no | both halves of the transport                                  |
//! | `auth`         | no      | [`auth`]: OAuth 2.1 for a server (the bearer layer, metadata) |
//! | `auth-jwt`     | no      | [`auth`]'s JWT (JWKS) and introspection verifiers             |
//! | `auth-client`  | no      | `auth::client`: the OAuth client the HTTP clients call        |
//! | `redis`        | no      | [`redis`]: the bus, task store, sealing key, session routing and event copies on Redis (scale-out) |
//! | `full`         | no      | everything                                                    |
//!
//! The links to a transport or an optional module resolve in documentation built with its
//! feature (docs.rs builds with all of them).
//!
//! [`Server`]: server::Server
//! [`Client`]: client::Client
//! [`Context`]: server::Context
//! [`CallToolResult`]: schema::CallToolResult
//! [`Implementation`]: schema::Implementation

#![forbid(unsafe_code)]
// Links to optional modules resolve only with their features: checked in the full build.
#![cfg_attr(not(feature = "full"), allow(rustdoc::broken_intra_doc_links))]
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
    #[doc(no_inline)]
    pub use schemars::JsonSchema;
    #[doc(no_inline)]
    pub use serde::{Deserialize, Serialize};
    #[doc(no_inline)]
    pub use tidewire_core::schema::{CallToolResult, ContentBlock, Implementation};

    #[cfg(feature = "client")]
    #[doc(no_inline)]
    pub use tidewire_client::{Client, ClientBuilder, ClientError, Era, TaskHandle, TaskStart};
    #[cfg(feature = "server")]
    #[doc(no_inline)]
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
