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
