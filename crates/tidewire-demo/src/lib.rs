//! # tidewire-demo
//!
//! The demo MCP server that `tidewire serve` runs: one server that offers two test contracts at
//! once, so the same binary can face the interop peers and the official conformance suite.
//!
//! - **The interop peer contract** (the tools every interop peer server offers): `echo`,
//!   `crawl`, `crawl_status`, `notify`, `bump`, `sample`, `elicit`, `roots`, and the subscribable
//!   resource `test://counter`.
//! - **The conformance server contract**: the `test_*` tools (text, image, audio, embedded and
//!   mixed content, logging, progress, error results, sampling, the elicitation variants,
//!   reconnection), `json_schema_2020_12_tool` with a hand-written 2020-12 input schema, the
//!   resources `test://static-text`, `test://static-binary` and `test://watched-resource`, the
//!   template `test://template/{id}/data`, four `test_*` prompts, and argument completion.
//! - **Skills** (the skills extension): `skill://pdf-processing/SKILL.md` with
//!   `references/FORMS.md`, and `skill://acme/billing/refunds/SKILL.md`.
//!
//! ```no_run
//! # async fn run(transport: tidewire_core::transport::memory::MemoryTransport) -> Result<(), Box<dyn std::error::Error>> {
//! let server = tidewire_demo::demo_server();
//! server.run(transport).await?;
//! # Ok(()) }
//! ```
//!
//! State (the counter, the record of the last crawl) lives in a [`DemoStore`] shared by every
//! connection the server serves. [`demo_server`] and [`demo_builder`] start each from a fresh
//! [`MemoryDemoStore`]; [`demo_builder_with`] takes a store several replicas share.
//!
//! Nothing here fetches anything or talks to a model: `crawl` only waits, and `sample`, `elicit`
//! and `roots` ask the connected client.

#![cfg_attr(not(test), warn(unused_crate_dependencies))]

mod conformance;
mod conformance_2026;
mod peer;
mod skills;
mod store;
mod tasks;

use std::sync::Arc;

use tidewire_core::schema::{Implementation, TaskSupport};
use tidewire_core::session::CancelPolicy;
use tidewire_server::{Server, ServerBuilder};

pub use skills::{PDF_FORMS_MD, PDF_SKILL_MD, REFUNDS_SKILL_MD, demo_skills};
pub use store::{CrawlStatus, CrawlStop, DemoStore, MemoryDemoStore, StoreError, StoreFuture};

/// The URI of the counter resource that `bump` increments.
pub const COUNTER_URI: &str = "test://counter";

/// A 1×1 red PNG, base64-encoded: the image of the conformance contract.
pub const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";

/// A minimal WAV file, base64-encoded: the audio of the conformance contract.
pub const WAV_BASE64: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// The name the demo server gives in `serverInfo`.
pub const SERVER_NAME: &str = "tidewire-demo";

/// Builds the demo server: the interop peer tools and the conformance contract in one server.
///
/// Capabilities: `tools` (listChanged), `resources` (subscribe, listChanged), `prompts`
/// (listChanged), `logging`, `completions`, and tasks (`crawl` and the task fixtures).
pub fn demo_server() -> Server {
    demo_builder().build()
}

/// The demo server's builder, for adding more (the test suite adds test-only tools), with its
/// state in a fresh [`MemoryDemoStore`].
pub fn demo_builder() -> ServerBuilder {
    demo_builder_with(Arc::new(MemoryDemoStore::new()))
}

/// The demo server's builder with its state in `store`: replicas sharing one store answer
/// `crawl_status` and reads of the counter alike.
pub fn demo_builder_with(store: Arc<dyn DemoStore>) -> ServerBuilder {
    let info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"))
        .with_title("tidewire demo server");
    let builder = Server::builder(info).instructions(
        "A test server. The interop tools (echo, crawl, notify, bump, sample, elicit, roots) and \
         the conformance tools (test_*) return fixed, documented results; nothing is fetched.",
    );
    let builder = peer::register(builder, &store);
    let builder = conformance::register(builder);
    let builder = conformance_2026::register(builder);
    let builder = skills::register(builder);
    // `crawl` runs as a task when the client allows it, and stops cooperatively.
    tasks::register(builder)
        .task_support("crawl", TaskSupport::Optional)
        .cancel_policy_for("crawl", CancelPolicy::Cooperative)
}
