//! Metrics in the Prometheus text format, for a scraper: a [`Telemetry`](crate::Telemetry)
//! built with `prometheus()` keeps them in a registry, and
//! [`router`](PrometheusMetrics::router) serves it at `/metrics`.
//!
//! Names follow the exporter's translation: `mcp.server.operation.duration` in seconds is the
//! histogram `mcp_server_operation_duration_seconds` (`_bucket`, `_sum`, `_count`), and the
//! attribute `mcp.method.name` the label `mcp_method_name`.

/// The registry a Prometheus exporter of the meter provider writes to
/// ([`Telemetry::prometheus`](crate::Telemetry::prometheus)).
#[derive(Clone, Debug)]
pub struct PrometheusMetrics {
    registry: prometheus::Registry,
}

impl PrometheusMetrics {
    pub(crate) fn new(registry: prometheus::Registry) -> Self {
        Self { registry }
    }

    /// Every metric now, in the Prometheus text format.
    pub fn render(&self) -> String {
        let families = self.registry.gather();
        prometheus::TextEncoder::new()
            .encode_to_string(&families)
            .unwrap_or_else(|error| format!("# the metrics cannot be encoded: {error}\n"))
    }

    /// A router answering `GET /metrics` with [`render`](Self::render).
    pub fn router(&self) -> axum::Router {
        let metrics = self.clone();
        axum::Router::new().route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(axum::http::header::CONTENT_TYPE, prometheus::TEXT_FORMAT)],
                        metrics.render(),
                    )
                }
            }),
        )
    }
}
