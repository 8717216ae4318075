//! What every tidewire transport on HTTP shares (the `http` feature): the `Host`/`Origin` policy
//! and its tower layer, the bounded session table, the plain HTTP answers, the headers and
//! timeouts of a client, the credentials hook, the server limits, and the SSE line decoder.
//!
//! A build with no HTTP transport (stdio alone) leaves this module out, and with it the `http`
//! crate and tower.

mod authorizer;
mod client_timeouts;
mod host_layer;
mod host_policy;
pub mod reply;
mod request_headers;
mod request_info;
mod server_limits;
pub mod sessions;
pub mod sse_lines;

pub use authorizer::{Authorizer, AuthorizerSlot};
pub use client_timeouts::ClientTimeouts;
pub use host_layer::{HostCheck, HostLayer};
pub use host_policy::{HostPolicy, HostRefused};
pub use request_headers::{InvalidHeader, RequestHeaders};
pub use request_info::HttpRequestInfo;
pub use server_limits::ServerLimits;
