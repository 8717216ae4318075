//! The instruments: the conventions' duration histograms, made once from the global meter
//! provider (install it before the first message: instruments made before come from the no-op
//! provider and stay no-ops), and observable gauges of what a process holds.

use std::sync::OnceLock;

use opentelemetry::metrics::Histogram;

use crate::semconv as sc;

const METER: &str = "tidewire";

fn duration(name: &'static str, description: &'static str) -> Histogram<f64> {
    opentelemetry::global::meter(METER)
        .f64_histogram(name)
        .with_unit("s")
        .with_description(description)
        .with_boundaries(sc::DURATION_BUCKETS.to_vec())
        .build()
}

/// `mcp.server.operation.duration`: from a message's arrival to its answer (or, for a
/// notification, its handling).
pub fn server_operation_duration() -> &'static Histogram<f64> {
    static H: OnceLock<Histogram<f64>> = OnceLock::new();
    H.get_or_init(|| {
        duration(
            sc::MCP_SERVER_OPERATION_DURATION,
            "The duration of an MCP request or notification as observed on the receiver",
        )
    })
}

/// `mcp.client.operation.duration`: from sending a request to its answer.
pub fn client_operation_duration() -> &'static Histogram<f64> {
    static H: OnceLock<Histogram<f64>> = OnceLock::new();
    H.get_or_init(|| {
        duration(
            sc::MCP_CLIENT_OPERATION_DURATION,
            "The duration of an MCP request or notification as observed on the sender",
        )
    })
}

/// `mcp.server.session.duration`: from a session's start to its end.
pub fn server_session_duration() -> &'static Histogram<f64> {
    static H: OnceLock<Histogram<f64>> = OnceLock::new();
    H.get_or_init(|| {
        duration(
            sc::MCP_SERVER_SESSION_DURATION,
            "The duration of an MCP session as observed on the MCP server",
        )
    })
}

/// `mcp.client.session.duration`: from a session's start (its handshake done) to its end.
pub fn client_session_duration() -> &'static Histogram<f64> {
    static H: OnceLock<Histogram<f64>> = OnceLock::new();
    H.get_or_init(|| {
        duration(
            sc::MCP_CLIENT_SESSION_DURATION,
            "The duration of an MCP session as observed on the MCP client",
        )
    })
}

/// Reports `read()` as the gauge `name` (in `unit`) at every collection, for as long as the
/// process runs: sessions open, requests in flight, listeners, and the like.
pub fn gauge(
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    read: impl Fn() -> u64 + Send + Sync + 'static,
) {
    let _gauge = opentelemetry::global::meter(METER)
        .u64_observable_gauge(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |observer| observer.observe(read(), &[]))
        .build();
}

/// Reports `read()` as the monotonic counter `name` at every collection.
pub fn counter(
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    read: impl Fn() -> u64 + Send + Sync + 'static,
) {
    let _counter = opentelemetry::global::meter(METER)
        .u64_observable_counter(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |observer| observer.observe(read(), &[]))
        .build();
}

/// Reports the values `read()` gives as the gauge `name`, one series per value of the
/// attribute `key` (tasks by status, say), at every collection.
pub fn gauge_by(
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    key: &'static str,
    read: impl Fn() -> Vec<(&'static str, u64)> + Send + Sync + 'static,
) {
    let _gauge = opentelemetry::global::meter(METER)
        .u64_observable_gauge(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |observer| observe_by(observer, key, read()))
        .build();
}

/// Reports the values `read()` gives as the monotonic counter `name`, one series per value of
/// the attribute `key`, at every collection.
pub fn counter_by(
    name: &'static str,
    description: &'static str,
    unit: &'static str,
    key: &'static str,
    read: impl Fn() -> Vec<(&'static str, u64)> + Send + Sync + 'static,
) {
    let _counter = opentelemetry::global::meter(METER)
        .u64_observable_counter(name)
        .with_description(description)
        .with_unit(unit)
        .with_callback(move |observer| observe_by(observer, key, read()))
        .build();
}

/// One observation per `(value, n)`: `n` with the attribute `key` set to `value`.
fn observe_by(
    observer: &dyn opentelemetry::metrics::AsyncInstrument<u64>,
    key: &'static str,
    values: Vec<(&'static str, u64)>,
) {
    for (value, n) in values {
        observer.observe(n, &[opentelemetry::KeyValue::new(key, value)]);
    }
}
