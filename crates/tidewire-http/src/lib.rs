//! # tidewire-http
//!
//! The Streamable HTTP transport of the Model Context Protocol (2025-03-26 and later): a server
//! that mounts one MCP endpoint in any axum app ([`server`]), and a client ([`client`], built on
//! reqwest and eventsource-stream). Both are adapters over `tidewire_core::transport`: the
//! session engine above them is the same as on every transport.
//!
//! | feature  | default | what it brings                       |
//! |----------|---------|--------------------------------------|
//! | `server` | yes     | [`server`]: axum router, sessions    |
//! | `client` | yes     | [`client`]: reqwest-based client     |

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

#[cfg(feature = "server")]
pub mod server;

#[cfg(feature = "client")]
pub mod client;

/// reqwest, for the setters `__http_client_setters!` writes in other crates.
#[cfg(feature = "client")]
#[doc(hidden)]
pub use reqwest as __reqwest;
