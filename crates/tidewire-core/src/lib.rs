//! # tidewire-core
//!
//! The foundation of tidewire, a Rust SDK for the Model Context Protocol: JSON-RPC 2.0, the MCP
//! schema as typed Rust, the message-stream trait every transport implements, and the session
//! engine that runs one connection (requests, progress, cancellation, timeouts).
//!
//! Most users want the `tidewire` facade crate, or `tidewire-server` / `tidewire-client`.

pub mod jsonrpc;
pub mod progress;
pub mod schema;
pub mod session;
pub mod transport;
pub mod version;

pub use version::ProtocolVersion;
