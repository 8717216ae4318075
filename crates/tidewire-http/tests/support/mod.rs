//! What the Streamable HTTP tests share: the time limit of a test step, a scriptable fake
//! server for the client tests ([`fake_server`]), and the demo server with a hand-rolled client
//! for the server tests ([`raw`]).

#![allow(dead_code)]

pub mod fake_server;
pub mod raw;

/// How long any one test step may take before the test fails instead of hanging.
pub const LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
