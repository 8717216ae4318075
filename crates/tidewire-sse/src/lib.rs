//! # tidewire-sse
//!
//! The legacy HTTP+SSE transport of the Model Context Protocol (revision 2024-11-05, deprecated
//! since 2025-03-26 but still spoken by many servers and clients): a GET stream whose first
//! event names the URL to POST messages to, and which then carries every server message.
//!
//! - [`server`]: an axum router with the stream and the POST endpoint, one engine session per
//!   stream.
//! - [`client`]: a reqwest client transport. Trying Streamable HTTP first and falling back to
//!   this one is `tidewire::connect::with_fallback`, in the facade, above the transports.
//! - The `Host`/`Origin` rules are `tidewire_core::http::HostPolicy`, shared by every
//!   tidewire HTTP transport.
//!
//! Both sides are adapters over [`tidewire_core::transport`]: requests, progress,
//! cancellation and timeouts behave as on every other transport.
//!
//! | feature    | default | what it brings                                                     |
//! |------------|---------|--------------------------------------------------------------------|
//! | `server`   | yes     | [`server`]                                                         |
//! | `client`   | yes     | [`client`]                                                         |
//!
//! ## Cancel safety
//! Dropping a request future on the client cancels the request as on every transport (the
//! engine POSTs `notifications/cancelled`). Closing the client closes the stream, and the
//! server then ends the session and cancels whatever it was still running for it.

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

#[cfg(feature = "server")]
pub mod server;

#[cfg(feature = "client")]
pub mod client;
