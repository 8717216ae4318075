//! Trace context in `params._meta`: `traceparent`, `tracestate` and `baggage`, unprefixed (the
//! MCP conventions and SEP-414), written by the sender of a request or notification and read by
//! its receiver, through the globally installed propagator.

use opentelemetry::propagation::{Extractor, Injector, TextMapCompositePropagator};
use opentelemetry_sdk::propagation::{BaggagePropagator, TraceContextPropagator};
use serde_json::{Map, Value};

/// Installs W3C trace context and baggage as the global propagator (what [`inject`] and
/// [`extract`] use). An application with its own propagator installs that instead.
pub fn install() {
    opentelemetry::global::set_text_map_propagator(TextMapCompositePropagator::new(vec![
        Box::new(TraceContextPropagator::new()),
        Box::new(BaggagePropagator::new()),
    ]));
}

/// The remote parent a message's `_meta` carries (an empty context when it carries none, or
/// none that parses: the receiver's span then starts a trace of its own).
pub fn extract(meta: Option<&Value>) -> opentelemetry::Context {
    let Some(Value::Object(meta)) = meta else {
        return opentelemetry::Context::new();
    };
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.extract(&MetaExtractor(meta))
    })
}

/// Writes `context` (a span's: `tracing_opentelemetry::OpenTelemetrySpanExt::context`) into
/// `meta`; a context without a valid span writes nothing.
pub fn inject(context: &opentelemetry::Context, meta: &mut Map<String, Value>) {
    opentelemetry::global::get_text_map_propagator(|propagator| {
        propagator.inject_context(context, &mut MetaInjector(meta));
    });
}

/// `_meta` as a carrier the propagators write to.
struct MetaInjector<'a>(&'a mut Map<String, Value>);

impl Injector for MetaInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.insert(key.to_owned(), Value::String(value));
    }
}

/// `_meta` as a carrier the propagators read: only string members count (a peer's other
/// values are not trace context).
struct MetaExtractor<'a>(&'a Map<String, Value>);

impl Extractor for MetaExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }
}

#[cfg(test)]
mod tests {
    use opentelemetry::trace::{SpanContext, TraceContextExt as _, TraceFlags, TraceState};
    use opentelemetry::trace::{SpanId, TraceId};
    use serde_json::json;

    use super::*;

    #[test]
    fn what_is_injected_is_extracted() {
        install();
        let span = SpanContext::new(
            TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").expect("hex"),
            SpanId::from_hex("b7ad6b7169203331").expect("hex"),
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        );
        let context = opentelemetry::Context::new().with_remote_span_context(span.clone());
        let mut meta = Map::new();
        meta.insert("progressToken".to_owned(), json!(1));
        inject(&context, &mut meta);
        assert_eq!(
            meta["traceparent"],
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        );
        let back = extract(Some(&Value::Object(meta)));
        assert_eq!(back.span().span_context().trace_id(), span.trace_id());
        assert_eq!(back.span().span_context().span_id(), span.span_id());
    }

    #[test]
    fn a_malformed_or_missing_traceparent_is_no_parent() {
        install();
        for meta in [
            None,
            Some(json!("not an object")),
            Some(json!({"traceparent": 7})),
            Some(json!({"traceparent": "00-zz-yy-01"})),
        ] {
            let context = extract(meta.as_ref());
            assert!(!context.span().span_context().is_valid(), "{meta:?}");
        }
    }
}
