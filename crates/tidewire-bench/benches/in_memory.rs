//! In-process round trips over tidewire's in-memory transport: a client session calls the
//! benchmark server's `echo` tool, with no I/O in between (encode, decode, routing, the engine).
//!
//! ```sh
//! cargo bench -p tidewire-bench --bench in_memory
//! ```

#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use tidewire_bench::peers::tidewire_server;
use tidewire_core::session::{NoHandler, Peer, Session, SessionOptions};
use tidewire_core::transport::memory;

async fn connect() -> Peer {
    let (a, b) = memory::duplex();
    let (_server_peer, driver) = tidewire_server().serve(a);
    tokio::spawn(driver);
    let client = Session::spawn(b, NoHandler, SessionOptions::default());
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
                      "clientInfo": {"name": "bench", "version": "1"}});
    client
        .request_raw("initialize", Some(init))
        .await
        .expect("initialize");
    client
        .notify_raw("notifications/initialized", None)
        .await
        .expect("initialized");
    client
}

fn echo(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = runtime.block_on(connect());
    let params = json!({"name": "echo", "arguments": {"text": "hello"}});
    let mut group = c.benchmark_group("in_memory");
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("echo_round_trip", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let t = Instant::now();
                for _ in 0..iters {
                    client
                        .request_raw("tools/call", Some(params.clone()))
                        .await
                        .expect("echo");
                }
                t.elapsed()
            })
        })
    });
    group.bench_function("echo_32_in_flight", |b| {
        b.iter_custom(|iters| {
            runtime.block_on(async {
                let t = Instant::now();
                let mut left = iters;
                while left > 0 {
                    let batch = left.min(32);
                    left -= batch;
                    let calls = (0..batch).map(|_| {
                        client
                            .request_raw("tools/call", Some(params.clone()))
                            .into_future()
                    });
                    for result in futures::future::join_all(calls).await {
                        result.expect("echo");
                    }
                }
                t.elapsed()
            })
        })
    });
    group.finish();
}

criterion_group!(benches, echo);
criterion_main!(benches);
