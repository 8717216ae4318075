//! # tidewire-http
//!
//! **Planned, not yet implemented.** This crate will hold the Streamable HTTP transport of the
//! Model Context Protocol (2025-03-26 and later): a server that is a `tower::Service` / axum
//! `Router` mounting one endpoint (POST replies as JSON or SSE, a GET stream for server-initiated
//! messages, sessions, resumability with `Last-Event-ID`) and a client built on reqwest and
//! eventsource-stream. Both are adapters over [`tidewire_core::transport`]; nothing above the
//! transport changes when they land.
//!
//! Until then it exports nothing. Use `tidewire-stdio` or the in-memory transport.
