//! The server's and the client's spans (feature `otel` of both), exported in-process: a request
//! whose caller wrote `_meta.traceparent` with trace id T yields a client span, child of it,
//! and a server span with trace id T, the client's span as its parent, named and attributed as
//! OpenTelemetry's MCP conventions say — on Streamable HTTP in both eras, legacy HTTP+SSE,
//! WebSocket in both eras and in memory. An error sets the span's status and `error.type`;
//! progress reports are events of the span. (Over stdio, the server is another process:
//! `crates/tidewire-cli/tests/telemetry.rs` exports its spans over OTLP.)
//!
//! One test in its own binary: the `tracing` subscriber it installs is the process's.

use opentelemetry::trace::{SpanKind, Status, TracerProvider as _};
use opentelemetry::{KeyValue, Value as OtelValue};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tidewire_tests::LIMIT;
use tidewire_tests::harness::{Counters, HttpMode, TransportUnderTest, connect_with, peer_client};
use tokio::time::timeout;
use tracing_subscriber::layer::SubscriberExt as _;

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a OtelValue> {
    span.attributes
        .iter()
        .find(|KeyValue { key: k, .. }| k.as_str() == key)
        .map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> Option<String> {
    attribute(span, key).map(|v| v.as_str().into_owned())
}

/// The exporter every span of this test binary goes to (the subscriber, installed once, is the
/// process's); each test picks its own spans out by their trace ids.
fn exporter() -> &'static InMemorySpanExporter {
    static EXPORTER: std::sync::OnceLock<InMemorySpanExporter> = std::sync::OnceLock::new();
    EXPORTER.get_or_init(|| {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("telemetry-test")));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        tidewire_otel::propagation::install();
        // Providers of the test's own, so telemetry is turned on by hand.
        tidewire_otel::activate();
        exporter
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traceparent_in_meta_is_the_parent_of_the_servers_span_on_every_transport() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let exporter = exporter();

        let transports = [
            TransportUnderTest::Memory,
            TransportUnderTest::Http(HttpMode::Sse),
            TransportUnderTest::Stateless(Box::new(TransportUnderTest::Http(HttpMode::Sse))),
            TransportUnderTest::LegacySse,
            TransportUnderTest::WebSocket,
            TransportUnderTest::Stateless(Box::new(TransportUnderTest::WebSocket)),
        ];
        for (n, transport) in transports.iter().enumerate() {
            let name = transport.name();
            let counters = std::sync::Arc::new(Counters::default());
            let builder = match transport {
                TransportUnderTest::Stateless(_) => {
                    peer_client(&counters).era(tidewire_client::Era::Modern)
                }
                _ => peer_client(&counters),
            };
            let h = timeout(LIMIT, connect_with(transport, builder, counters))
                .await
                .expect("connected in time");
            let trace = format!("4bf92f3577b34da6a3ce929d0e0e47{n:02x}");
            let parent = "00f067aa0ba902b7";
            let traceparent = format!("00-{trace}-{parent}-01");
            let answer = timeout(
                LIMIT,
                h.client.request_raw(
                    "tools/call",
                    json!({"name": "echo", "arguments": {"text": "traced"},
                       "_meta": {"traceparent": traceparent}}),
                ),
            )
            .await
            .expect("in time")
            .expect("answered");
            assert_eq!(answer["content"][0]["text"], "traced", "{name}");
            let refused = timeout(
                LIMIT,
                h.client.request_raw(
                    "tools/call",
                    json!({"name": "no-such-tool", "arguments": {},
                       "_meta": {"traceparent": traceparent}}),
                ),
            )
            .await
            .expect("in time");
            assert!(refused.is_err(), "{name}: an unknown tool is an error");

            let spans = exporter.get_finished_spans().expect("spans");
            let ours: Vec<&SpanData> = spans
                .iter()
                .filter(|s| s.span_context.trace_id().to_string() == trace)
                .collect();
            let echo = ours
                .iter()
                .find(|s| s.name == "tools/call echo" && s.span_kind == SpanKind::Server)
                .unwrap_or_else(|| panic!("{name}: no server `tools/call echo` span in {ours:#?}"));
            // The client's span (feature `otel` of the client) is the child of the traceparent
            // the caller wrote, and the parent of the server's: the trace crosses the wire.
            let sent = ours
                .iter()
                .find(|s| s.name == "tools/call echo" && s.span_kind == SpanKind::Client)
                .unwrap_or_else(|| panic!("{name}: no client `tools/call echo` span in {ours:#?}"));
            assert_eq!(sent.parent_span_id.to_string(), parent, "{name}");
            assert_eq!(echo.parent_span_id, sent.span_context.span_id(), "{name}");
            assert_eq!(text(echo, "mcp.method.name").as_deref(), Some("tools/call"));
            assert_eq!(text(echo, "gen_ai.tool.name").as_deref(), Some("echo"));
            assert_eq!(
                text(echo, "gen_ai.operation.name").as_deref(),
                Some("execute_tool")
            );
            assert!(text(echo, "jsonrpc.request.id").is_some(), "{name}");
            assert!(text(echo, "mcp.protocol.version").is_some(), "{name}");
            assert_eq!(echo.status, Status::Unset, "{name}");
            assert!(text(echo, "error.type").is_none(), "{name}");
            if name.contains("HTTP") {
                assert_eq!(text(echo, "network.protocol.name").as_deref(), Some("http"));
            }

            let failed = ours
                .iter()
                .find(|s| s.name == "tools/call no-such-tool" && s.span_kind == SpanKind::Server)
                .unwrap_or_else(|| panic!("{name}: no span of the failed call in {ours:#?}"));
            assert!(matches!(failed.status, Status::Error { .. }), "{name}");
            let code = text(failed, "error.type").expect("error.type");
            assert!(
                code.starts_with('-'),
                "{name}: a JSON-RPC code, not {code:?}"
            );
            assert_eq!(text(failed, "rpc.response.status_code"), Some(code));

            // Without a traceparent of the caller's, the client's span starts the trace and the
            // server's continues it.
            let before = exporter.get_finished_spans().expect("spans").len();
            timeout(
                LIMIT,
                h.client.call_tool("echo", json!({"text": "untraced"})),
            )
            .await
            .expect("in time")
            .expect("answered");
            let spans = exporter.get_finished_spans().expect("spans");
            let new = &spans[before..];
            let sent = new
                .iter()
                .find(|s| s.name == "tools/call echo" && s.span_kind == SpanKind::Client)
                .unwrap_or_else(|| panic!("{name}: no client span in {new:#?}"));
            let served = new
                .iter()
                .find(|s| s.name == "tools/call echo" && s.span_kind == SpanKind::Server)
                .unwrap_or_else(|| panic!("{name}: no server span in {new:#?}"));
            assert_eq!(
                served.span_context.trace_id(),
                sent.span_context.trace_id(),
                "{name}"
            );
            assert_eq!(served.parent_span_id, sent.span_context.span_id(), "{name}");

            // Progress reports are events of the server's span.
            let before = exporter.get_finished_spans().expect("spans").len();
            timeout(
                LIMIT,
                h.client
                    .call_tool("crawl", json!({"urls": ["a", "b", "c"], "delay_ms": 1}))
                    .on_progress(|_| {}),
            )
            .await
            .expect("in time")
            .expect("answered");
            let spans = exporter.get_finished_spans().expect("spans");
            let crawl = spans[before..]
                .iter()
                .find(|s| s.name == "tools/call crawl" && s.span_kind == SpanKind::Server)
                .unwrap_or_else(|| panic!("{name}: no server span of the crawl"));
            let reports = crawl
                .events
                .iter()
                .filter(|e| e.name == "notifications/progress")
                .count();
            assert_eq!(reports, 3, "{name}: {:?}", crawl.events);
            println!("{name}: the server's spans continue the trace {trace}");
        }
    })
    .await
    .expect("the test took longer than its limit");
}

/// A tidewire client's trace reaches a handler of the official Python SDK's server: the
/// `trace_id` tool of `tests/py/otel_peer.py` answers the trace id its handler runs in (the SDK
/// extracts the context from `_meta`), which is the client span's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tidewire_clients_trace_reaches_a_python_servers_handler() {
    tokio::time::timeout(std::time::Duration::from_secs(60), async {
        let exporter = exporter();
        let Some(peers) = tidewire_tests::external::python_peers() else {
            return;
        };
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/py/otel_peer.py");
        let child = tidewire_stdio::client::StdioConnector::command(&peers.python)
            .args([script, "server"])
            .stderr(tidewire_stdio::client::StderrMode::Inherit)
            .spawn()
            .expect("spawn the Python server");
        let client = timeout(
            LIMIT,
            tidewire_client::Client::builder(tidewire_core::schema::Implementation::new(
                "otel-interop",
                "1",
            ))
            .era(tidewire_client::Era::Legacy)
            .connect(child),
        )
        .await
        .expect("in time")
        .expect("connected");
        let answer = timeout(LIMIT, client.call_tool("trace_id", json!({})))
            .await
            .expect("in time")
            .expect("answered");
        let seen = answer.content[0].as_text().expect("text").to_owned();
        let spans = exporter.get_finished_spans().expect("spans");
        let sent = spans
            .iter()
            .find(|s| s.name == "tools/call trace_id" && s.span_kind == SpanKind::Client)
            .unwrap_or_else(|| panic!("no client span in {spans:#?}"));
        assert_eq!(seen, sent.span_context.trace_id().to_string());
        assert_ne!(seen, "0".repeat(32), "the handler ran in a trace");
        println!("the Python server's handler ran in trace {seen}, the tidewire client's");
    })
    .await
    .expect("the test took longer than its limit");
}
