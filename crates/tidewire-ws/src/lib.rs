//! # tidewire-ws
//!
//! A WebSocket transport for the Model Context Protocol, server ([`server`], an axum route) and
//! client ([`client`], tokio-tungstenite). WebSocket is in no MCP revision: this is a custom
//! transport, framed the way the official SDKs' WebSocket transports did it, so their clients
//! and servers interoperate with it.
//!
//! ## The framing (our custom transport's specification)
//! 1. The client opens a WebSocket (RFC 6455) with a GET upgrade, offering the subprotocol
//!    `mcp` in `Sec-WebSocket-Protocol`; the server chooses `mcp` and echoes it.
//! 2. Every JSON-RPC message travels as exactly one **text** frame (UTF-8 JSON, no envelope, no
//!    batching). Requests, responses and notifications go both ways on the one connection.
//! 3. A **binary** frame closes the connection with code 1003; a message over the size limit
//!    (8 MiB by default) with 1009; text that is not UTF-8 with 1007. Text that is not valid
//!    JSON-RPC is answered with a JSON-RPC error (`-32700` or `-32600`) and the connection goes
//!    on, as on every tidewire transport.
//! 4. The lifecycle is MCP's handshake (`initialize` first); the connection is the session, so
//!    there is no session id.
//! 5. Either side pings a peer that has been silent for its ping interval (20 s by default) and
//!    drops a peer silent for the interval plus the pong timeout (20 s), closing with 1001.
//! 6. Closing the session sends a close frame with 1000. There is **no resumption**: when the
//!    connection ends, calls in flight fail with an error naming why, the server cancels the
//!    requests it was running for that connection, and a client connects again for a new
//!    session.
//!
//! | feature  | default | what it brings                          |
//! |----------|---------|-----------------------------------------|
//! | `server` | yes     | [`server`]: an axum WebSocket route     |
//! | `client` | yes     | [`client`]: a tokio-tungstenite client  |
//!
//! The socket library's types do not appear in this API: both sides are adapters over
//! [`tidewire_core::transport`] and hand the engine a [`WsTransport`].

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod connection;

#[cfg(feature = "server")]
pub mod server;

#[cfg(feature = "client")]
pub mod client;

pub use connection::{WsReceiver, WsSender, WsTransport, close_code};

/// The WebSocket subprotocol this transport speaks: `mcp`.
pub const SUBPROTOCOL: &str = "mcp";
