//! # tidewire-ws
//!
//! **Planned, not yet implemented.** This crate will hold a WebSocket transport (subprotocol
//! `mcp`, one JSON-RPC message per text frame), server and client. WebSocket is not part of any
//! MCP revision; it is offered as a documented custom transport, like the official SDKs did. It
//! will be a `Sink + Stream` adapter over [`tidewire_core::transport::sink_stream`].
//!
//! Until then it exports nothing.
