//! # tidewire-sse
//!
//! **Planned, not yet implemented.** This crate will hold the legacy HTTP+SSE transport of the
//! Model Context Protocol (2024-11-05): a GET stream that first names its POST endpoint, then
//! carries every server message, server and client side. Like every tidewire transport it will be
//! an adapter over [`tidewire_core::transport`].
//!
//! Until then it exports nothing.
