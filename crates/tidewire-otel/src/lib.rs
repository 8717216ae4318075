//! # tidewire-otel
//!
//! OpenTelemetry for tidewire, in the MCP semantic conventions of OpenTelemetry (the GenAI
//! conventions' `mcp` page): a span per MCP request and notification, named
//! `{mcp.method.name} {target}` and attributed as the conventions say; trace context
//! (`traceparent`, `tracestate`, `baggage`) carried in `params._meta`; the conventions' duration
//! histograms; a Prometheus text endpoint (feature `prometheus`) and OTLP/HTTP export (feature
//! `otlp`).
//!
//! The spans are [`tracing`] spans: with a `tracing-opentelemetry` layer in the application's
//! subscriber (what [`Telemetry::layer`] gives) they become OpenTelemetry spans, and any other `tracing`
//! subscriber sees the same spans. The server and client crates call this crate only with their
//! feature `otel` on; without it, nothing of it is on their hot path.
//!
//! ```
//! use serde_json::json;
//!
//! tidewire_otel::propagation::install();
//! // A request's `_meta` with trace context, as a client writes it …
//! let meta = json!({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"});
//! // … is the remote parent of the server's span.
//! let parent = tidewire_otel::propagation::extract(Some(&meta));
//! use opentelemetry::trace::TraceContextExt as _;
//! assert_eq!(
//!     parent.span().span_context().trace_id().to_string(),
//!     "4bf92f3577b34da6a3ce929d0e0e4736"
//! );
//! ```

#![forbid(unsafe_code)]

mod install;
pub mod metrics;
mod observer;
pub mod operation;
#[cfg(feature = "otlp")]
mod otlp;
#[cfg(feature = "prometheus")]
pub mod prometheus;
pub mod propagation;
pub mod semconv;

pub use install::{Telemetry, TelemetryBuilder, TelemetryError, lean_layer};

use std::sync::atomic::{AtomicBool, Ordering};

/// Whether telemetry is on: off until [`activate`] (which [`TelemetryBuilder::install`] calls),
/// so a build with the feature `otel` whose program sets up no telemetry pays one atomic load
/// per message and nothing more.
static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Turns telemetry on: from now on every message is an [`Operation`] (a span, a duration).
/// [`TelemetryBuilder::install`] calls it; a program that installs its own providers and
/// `tracing-opentelemetry` layer calls it itself.
pub fn activate() {
    ACTIVE.store(true, Ordering::Release);
}

/// True once [`activate`] ran.
pub fn is_active() -> bool {
    ACTIVE.load(Ordering::Acquire)
}
pub use observer::TracingObserver;
pub use operation::{Message, Network, Operation, Outcome, Side};
