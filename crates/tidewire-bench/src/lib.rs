//! # tidewire-bench
//!
//! Benchmarks tidewire against the official Rust SDK (`rmcp`) and a raw-HTTP ceiling, in one
//! run. The binaries do the work; this library holds what they share and what can be tested
//! without a load run:
//!
//! - [`stats`]: percentiles of latency samples and the median / min / max of rounds;
//! - [`report`]: the table of medians with min–max and the ratio of tidewire to rmcp and to the
//!   ceiling per row, and its JSON form;
//! - [`counting`]: what every peer server counts for `bench --counts` (allocations, tasks)
//!   and the `GET /counts` route that reads it;
//! - [`peers`]: the tidewire peer server (tools `echo` and `progress`), shared by `bench-server`
//!   and the in-memory criterion bench.
//!
//! The binaries: `bench-server` (tidewire), `rmcp-bench-server` (rmcp), `ceiling-server` (a plain
//! axum handler and a line-in/line-out stdio loop) and `bench`, the load generator that starts
//! them in turn and prints the table. See `docs/performance.md`.

pub mod counting;
pub mod peers;
pub mod report;
pub mod stats;
