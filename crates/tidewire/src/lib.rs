//! # tidewire
//!
//! A Rust SDK for the Model Context Protocol (MCP), client and server, whose progress and
//! cancellation work the same on every transport.
//!
//! This facade re-exports the tidewire crates behind features:
//!
//! | feature  | default | what it brings                                         |
//! |----------|---------|--------------------------------------------------------|
//! | `server` | yes     | [`server`]: tools, resources, prompts, completion       |
//! | `client` | yes     | [`client`]: a typed client session                      |
//! | `stdio`  | yes     | [`stdio`]: serve over stdin/stdout, or spawn a server   |
//! | `http`   | no      | `http`: Streamable HTTP, axum server and reqwest client |
//! | `sse`    | no      | `sse`: legacy HTTP+SSE, and the fallback to it          |
//! | `ws`     | no      | `ws`: WebSocket (a custom transport), server and client |
//!
//! The core ([`core`]: JSON-RPC, the schema, transports, the session engine) is always there.
//!
//! ```no_run
//! # #[cfg(all(feature = "server", feature = "stdio"))]
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tidewire::core::schema::{CallToolResult, Implementation};
//! use tidewire::server::{NoArgs, Server};
//!
//! let server = Server::builder(Implementation::new("hello", "1.0.0"))
//!     .tool("hello", "Says hello", |_: NoArgs, _ctx| async move {
//!         Ok(CallToolResult::text("hello"))
//!     })
//!     .build();
//! server.run(tidewire::stdio::server::transport()).await?;
//! # Ok(()) }
//! ```

pub use tidewire_core as core;

#[cfg(feature = "client")]
pub use tidewire_client as client;
#[cfg(feature = "server")]
pub use tidewire_server as server;
#[cfg(feature = "stdio")]
pub use tidewire_stdio as stdio;

#[cfg(feature = "http")]
pub use tidewire_http as http;
#[cfg(feature = "sse")]
pub use tidewire_sse as sse;
#[cfg(feature = "ws")]
pub use tidewire_ws as ws;
