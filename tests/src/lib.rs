//! # tidewire-tests
//!
//! The test support of the tidewire workspace (not published):
//! - [`suite_server`]: the demo server plus a few tools that only tests need;
//! - [`harness`]: a client connected to that server over each transport, so a scenario is
//!   written once and run on every transport;
//! - [`scenarios`]: the eight peer scenarios of the interop contract, usable against any server
//!   that implements it (ours, or the official Python SDK's);
//! - [`raw`]: Streamable HTTP spoken by hand (an `initialize`, a POST with its headers);
//! - [`external`]: finding the outside programs (Python peers, official schemas) through
//!   environment variables;
//! - [`authorization_server`]: a small OAuth authorization server whose tokens can be made to
//!   expire, be revoked and be rotated, for the end-to-end authorization tests;
//! - [`fuzz`]: the harness of the fuzz targets (`tests/fuzz.rs`): proptest on stable Rust, for a
//!   case count or a time set by the environment.

pub mod authorization_server;
pub mod external;
pub mod fuzz;
pub mod harness;
pub mod raw;
pub mod scenarios;
mod suite_server;

pub use suite_server::suite_server;

/// How long any one test step may take before the test fails instead of hanging: generous,
/// since CI runs on two cores with everything else, and never reached by a passing test.
pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// An HTTP client for tests: every request (its body included) fails after [`LIMIT`] instead
/// of waiting for ever on a server that stopped answering.
///
/// # Panics
/// When the TLS backend cannot start (never on loopback HTTP).
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(LIMIT)
        .build()
        .expect("an HTTP client")
}
