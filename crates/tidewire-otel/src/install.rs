//! [`Telemetry`]: the providers a program installs once at start — traces and metrics over
//! OTLP/HTTP, metrics for a Prometheus scraper — and the `tracing` layer that turns tidewire's
//! spans into OpenTelemetry spans.

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

/// Why telemetry could not be set up.
#[derive(Debug)]
pub struct TelemetryError(String);

impl std::fmt::Display for TelemetryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot set up telemetry: {}", self.0)
    }
}

impl std::error::Error for TelemetryError {}

/// What to set up (see [`Telemetry::builder`]).
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it installs"]
#[cfg_attr(not(all(feature = "otlp", feature = "prometheus")), allow(dead_code))]
pub struct TelemetryBuilder {
    service: String,
    otlp: Option<String>,
    prometheus: bool,
}

/// The installed providers. Keep it for the life of the program, and call
/// [`shutdown`](Self::shutdown) before exiting, so what is batched is exported.
#[derive(Debug)]
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: SdkMeterProvider,
    #[cfg(feature = "prometheus")]
    prometheus: Option<crate::prometheus::PrometheusMetrics>,
}

impl Telemetry {
    /// Telemetry for the service named `service` (the resource's `service.name`).
    pub fn builder(service: impl Into<String>) -> TelemetryBuilder {
        TelemetryBuilder {
            service: service.into(),
            otlp: None,
            prometheus: false,
        }
    }

    /// The tracer the `tracing` layer writes to, when traces are exported.
    pub fn tracer(&self) -> Option<SdkTracer> {
        use opentelemetry::trace::TracerProvider as _;
        self.tracer_provider
            .as_ref()
            .map(|provider| provider.tracer("tidewire"))
    }

    /// A `tracing` layer exporting tidewire's spans (and any other span the subscriber
    /// enables), when traces are exported.
    ///
    /// Its spans carry the MCP conventions' attributes and nothing of `tracing`'s own: no
    /// source location (`code.*`), thread (`thread.*`), target or busy and idle times, which
    /// `tracing-opentelemetry` adds by default (every enter and exit of a span timed, a thread
    /// name copied into every span): about a tenth of what telemetry costs a request
    /// (docs/performance.md). For them, build a layer of your own on [`tracer`](Self::tracer).
    pub fn layer<S>(&self) -> Option<tracing_opentelemetry::OpenTelemetryLayer<S, SdkTracer>>
    where
        S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    {
        self.tracer().map(|tracer| lean_layer().with_tracer(tracer))
    }

    /// The metrics for a Prometheus scraper, when asked for.
    #[cfg(feature = "prometheus")]
    pub fn prometheus(&self) -> Option<&crate::prometheus::PrometheusMetrics> {
        self.prometheus.as_ref()
    }

    /// Exports what is batched and stops the exporters.
    pub fn shutdown(&self) {
        if let Some(provider) = &self.tracer_provider
            && let Err(error) = provider.shutdown()
        {
            tracing::debug!(%error, "the tracer provider did not shut down cleanly");
        }
        if let Err(error) = self.meter_provider.shutdown() {
            tracing::debug!(%error, "the meter provider did not shut down cleanly");
        }
    }
}

impl TelemetryBuilder {
    /// Export traces and metrics over OTLP/HTTP (JSON) to the collector at `endpoint`
    /// (`http://host:4318`: `/v1/traces` and `/v1/metrics` are appended).
    #[cfg(feature = "otlp")]
    pub fn otlp(mut self, endpoint: impl Into<String>) -> Self {
        self.otlp = Some(endpoint.into());
        self
    }

    /// Keep the metrics for a Prometheus scraper ([`Telemetry::prometheus`]).
    #[cfg(feature = "prometheus")]
    pub fn prometheus(mut self) -> Self {
        self.prometheus = true;
        self
    }

    /// Builds the providers and installs them as the global ones, with W3C trace context and
    /// baggage as the propagator. Do it before the first message: instruments made before
    /// come from the no-op provider.
    ///
    /// # Errors
    /// When an exporter cannot be built.
    pub fn install(self) -> Result<Telemetry, TelemetryError> {
        let resource = || {
            Resource::builder()
                .with_service_name(self.service.clone())
                .build()
        };
        // Without `otlp` and `prometheus`, nothing adds a reader or a tracer.
        #[allow(unused_mut)]
        let mut meters = SdkMeterProvider::builder().with_resource(resource());
        #[allow(unused_mut)]
        let mut tracer_provider: Option<SdkTracerProvider> = None;
        #[cfg(feature = "otlp")]
        if let Some(endpoint) = &self.otlp {
            use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
            let base = endpoint.trim_end_matches('/');
            let client =
                crate::otlp::BlockingClient::new().map_err(|e| TelemetryError(e.to_string()))?;
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_http_client(client.clone())
                .with_protocol(Protocol::HttpJson)
                .with_endpoint(format!("{base}/v1/traces"))
                .build()
                .map_err(|e| TelemetryError(e.to_string()))?;
            tracer_provider = Some(
                SdkTracerProvider::builder()
                    .with_resource(resource())
                    .with_batch_exporter(spans)
                    .build(),
            );
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_http_client(client)
                .with_protocol(Protocol::HttpJson)
                .with_endpoint(format!("{base}/v1/metrics"))
                .build()
                .map_err(|e| TelemetryError(e.to_string()))?;
            meters = meters
                .with_reader(opentelemetry_sdk::metrics::PeriodicReader::builder(metrics).build());
        }
        #[cfg(feature = "prometheus")]
        let prometheus = if self.prometheus {
            let registry = prometheus::Registry::new();
            let exporter = opentelemetry_prometheus::exporter()
                .with_registry(registry.clone())
                .build()
                .map_err(|e| TelemetryError(e.to_string()))?;
            meters = meters.with_reader(exporter);
            Some(registry)
        } else {
            None
        };
        let meter_provider = meters.build();
        opentelemetry::global::set_meter_provider(meter_provider.clone());
        if let Some(provider) = &tracer_provider {
            opentelemetry::global::set_tracer_provider(provider.clone());
        }
        crate::propagation::install();
        crate::activate();
        Ok(Telemetry {
            tracer_provider,
            #[cfg(feature = "prometheus")]
            prometheus: prometheus.map(crate::prometheus::PrometheusMetrics::new),
            meter_provider,
        })
    }
}

/// `tracing-opentelemetry`'s layer without what the MCP conventions do not ask for (see
/// [`Telemetry::layer`]).
pub fn lean_layer<S>()
-> tracing_opentelemetry::OpenTelemetryLayer<S, opentelemetry::trace::noop::NoopTracer>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    tracing_opentelemetry::layer()
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
}
