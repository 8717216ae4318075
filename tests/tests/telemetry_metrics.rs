//! The client's `mcp.client.session.duration` (feature `otel`): a session-era client records
//! its session once, with the revision it spoke, when the session ends — on `close`, and when
//! the connection ends under it; a client of the stateless revision has no session to record.
//!
//! One test in its own binary: the meter provider it installs is the process's, and no other
//! test's clients may add to what it counts.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use tidewire_tests::LIMIT;
use tidewire_tests::harness::{Counters, HttpMode, TransportUnderTest, connect_with, peer_client};
use tokio::time::timeout;

/// How many sessions the histogram counts so far, by revision.
fn sessions(provider: &SdkMeterProvider, exporter: &InMemoryMetricExporter) -> Vec<(String, u64)> {
    provider.force_flush().expect("flushed");
    let batches = exporter.get_finished_metrics().expect("metrics");
    let Some(last) = batches.last() else {
        return Vec::new();
    };
    let mut counted = Vec::new();
    for scope in last.scope_metrics() {
        for metric in scope.metrics() {
            if metric.name() != "mcp.client.session.duration" {
                continue;
            }
            let AggregatedMetrics::F64(MetricData::Histogram(histogram)) = metric.data() else {
                panic!("not a histogram of seconds: {:?}", metric.data());
            };
            for point in histogram.data_points() {
                let version = point
                    .attributes()
                    .find(|kv| kv.key.as_str() == "mcp.protocol.version")
                    .map(|kv| kv.value.as_str().into_owned())
                    .unwrap_or_default();
                counted.push((version, point.count()));
            }
        }
    }
    counted.sort();
    counted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_clients_session_is_recorded_once_when_it_ends() {
    timeout(Duration::from_secs(60), async {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        opentelemetry::global::set_meter_provider(provider.clone());
        tidewire_otel::activate();
        assert_eq!(sessions(&provider, &exporter), []);

        // Closed by the client: recorded by the time `close` returns.
        let counters = Arc::new(Counters::default());
        let h = timeout(
            LIMIT,
            connect_with(
                &TransportUnderTest::Memory,
                peer_client(&counters),
                counters,
            ),
        )
        .await
        .expect("connected in time");
        let version = h.client.protocol_version().as_str().to_owned();
        h.client.close().await;
        h.client.close().await;
        assert_eq!(sessions(&provider, &exporter), [(version.clone(), 1)]);

        // A client of the stateless revision holds no session: nothing more.
        let counters = Arc::new(Counters::default());
        let stateless =
            TransportUnderTest::Stateless(Box::new(TransportUnderTest::Http(HttpMode::Sse)));
        let h = timeout(
            LIMIT,
            connect_with(
                &stateless,
                peer_client(&counters).era(tidewire_client::Era::Modern),
                counters,
            ),
        )
        .await
        .expect("connected in time");
        h.client.close().await;
        assert_eq!(sessions(&provider, &exporter), [(version.clone(), 1)]);

        // Ended by the server (it drains, and closes its connections): recorded when the
        // client sees the end.
        let counters = Arc::new(Counters::default());
        let h = timeout(
            LIMIT,
            connect_with(
                &TransportUnderTest::WebSocket,
                peer_client(&counters),
                counters,
            ),
        )
        .await
        .expect("connected in time");
        let client = h.client.clone();
        let server = h.server.clone().expect("an in-process server");
        timeout(LIMIT, server.drain(Duration::ZERO))
            .await
            .expect("drained in time");
        timeout(LIMIT, client.closed())
            .await
            .expect("the client sees its session end");
        timeout(LIMIT, async {
            while sessions(&provider, &exporter) != [(version.clone(), 2)] {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the second session recorded");
        client.close().await;
        assert_eq!(sessions(&provider, &exporter), [(version, 2)]);
    })
    .await
    .expect("within the limit");
}
