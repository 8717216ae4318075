//! Three `tidewire serve --redis` replicas on a real `redis-server`, behind a real HAProxy
//! balancing round robin with no affinity (`TIDEWIRE_REDIS_SERVER`, `TIDEWIRE_HAPROXY`; skipped
//! with a reason when unset, required in CI), on the stateless revision:
//! - a listen on replica A hears a `bump` done through replica B;
//! - a task started through A is seen through B, cancelled through C, and its handler on A
//!   stops; another, asking a question, is answered through B and completes on A;
//! - the peer scenarios through the balancer, each request landing on the next replica
//!   (`input_required` rounds included: a retry's sealed state opens on any replica; the
//!   demo's counter and crawl record are in Redis); and the same in the session era, over
//!   Streamable HTTP and legacy HTTP+SSE, each request for the session forwarded to the
//!   replica holding it.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use support::HttpServer;
use tidewire_client::{Client, Era};
use tidewire_core::schema::{Implementation, SubscriptionFilter, TaskStatus};
use tidewire_http::client::StatelessHttpConnector;
use tidewire_tests::authorization_server::{INTROSPECTION_CLIENT, TestAuthorizationServer};
use tidewire_tests::external::{RedisServer, free_port, skip};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::raw;
use tidewire_tests::scenarios::{run_peer_scenario, text_of};
use tokio::sync::mpsc;

/// A running HAProxy in front of `backends`, killed when dropped.
struct Balancer {
    child: std::process::Child,
    url: String,
    _dir: TempDir,
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct TempDir(std::path::PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// HAProxy round robin over `backends` (`http://127.0.0.1:PORT/mcp` each), every request
/// balanced on its own (the server side closes after each response), streams passed through.
async fn balancer(program: &std::path::Path, backends: &[&HttpServer]) -> Balancer {
    let addresses: Vec<String> = backends
        .iter()
        .map(|b| b.base().trim_start_matches("http://").to_owned())
        .collect();
    balancer_for(program, &addresses, "").await
}

/// HAProxy as [`balancer`], over the backends at `addresses` (`127.0.0.1:PORT`), each server
/// line ending with `server_options` (say, `check` for health checks).
async fn balancer_for(
    program: &std::path::Path,
    addresses: &[String],
    server_options: &str,
) -> Balancer {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("tidewire-haproxy-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut config = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n\
         \x20 option http-server-close\n  option abortonclose\n  option http-no-delay\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n"
    );
    if server_options.contains("check") {
        // A replica is out of the pool while /readyz is not 200 (it drains, or is down): one
        // failed check takes it out, one passed check puts it back. A request that cannot
        // connect (the replica just exited) is sent to another.
        config.push_str(
            "  option httpchk GET /readyz\n  http-check expect status 200\n  \
             default-server inter 100ms fall 1 rise 1\n  retries 3\n  option redispatch\n",
        );
    }
    for (i, address) in addresses.iter().enumerate() {
        config.push_str(&format!("  server r{i} {address} {server_options}\n"));
    }
    let file = dir.join("haproxy.cfg");
    std::fs::write(&file, config).expect("config");
    let child = std::process::Command::new(program)
        .arg("-f")
        .arg(&file)
        .arg("-db")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("start haproxy");
    // HAProxy says nothing when it listens: the port is the sign.
    let started = std::time::Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(
            started.elapsed() < support::LIMIT,
            "haproxy did not listen in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Balancer {
        child,
        url: format!("http://127.0.0.1:{port}/mcp"),
        _dir: TempDir(dir),
    }
}

async fn modern(url: &str) -> Client {
    let transport = StatelessHttpConnector::new(url)
        .connect()
        .await
        .expect("transport");
    Client::builder(Implementation::new("scale-out-test", "1"))
        .era(Era::Modern)
        .connect(transport)
        .await
        .expect("connected")
}

/// A client of `url` in the session era, over Streamable HTTP.
async fn session_client(url: &str) -> Client {
    let transport = tidewire_http::client::StreamableHttpConnector::new(url)
        .connect()
        .await
        .expect("transport");
    Client::builder(Implementation::new("scale-out-test", "1"))
        .era(Era::Legacy)
        .connect(transport)
        .await
        .expect("a session")
}

/// A client of `url` on the stateless revision that confirms whatever it is asked.
async fn confirming(url: &str) -> Client {
    confirming_with(url, None).await
}

/// The same, adding `note` to each answer when given (to make an answer of any size).
async fn confirming_with(url: &str, note: Option<String>) -> Client {
    Client::builder(Implementation::new("scale-out-test", "1"))
        .era(Era::Modern)
        .elicitation_handler(
            move |_: tidewire_core::schema::ElicitParams,
                  _: tidewire_core::session::RequestContext| {
                let mut answer = std::collections::BTreeMap::new();
                answer.insert("confirm".to_owned(), true.into());
                if let Some(note) = &note {
                    answer.insert("note".to_owned(), note.clone().into());
                }
                async move { Ok(tidewire_core::schema::ElicitResult::accept(answer)) }
            },
        )
        .connect(
            StatelessHttpConnector::new(url)
                .connect()
                .await
                .expect("transport"),
        )
        .await
        .expect("connected")
}

/// How many sessions Redis places now.
async fn sessions_known(redis: &RedisServer) -> usize {
    let client = redis::Client::open(redis.url()).expect("client");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("connection");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("tidewire:tidewire-demo:session:*")
        .query_async(&mut connection)
        .await
        .expect("KEYS");
    keys.len()
}

/// A `redis-server` started and the HAProxy program, or `None` after saying why the test skips.
fn redis_and_haproxy() -> Option<(RedisServer, std::ffi::OsString)> {
    let redis = RedisServer::start()?;
    let Some(haproxy) = std::env::var_os("TIDEWIRE_HAPROXY").filter(|v| !v.is_empty()) else {
        skip("TIDEWIRE_HAPROXY is not set (see .ci/run)");
        return None;
    };
    Some((redis, haproxy))
}

fn replica(redis: &RedisServer, name: &str) -> HttpServer {
    replica_with(redis, name, &[])
}

/// A replica named `name` on `redis`, with `extra` arguments for `tidewire serve`.
fn replica_with(redis: &RedisServer, name: &str, extra: &[&str]) -> HttpServer {
    let url = redis.url();
    let mut args = vec!["--redis", &url, "--node-id", name];
    args.extend_from_slice(extra);
    HttpServer::start_with(&args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_redis_behind_a_round_robin_balancer_serve_as_one() {
    let Some((redis, haproxy)) = redis_and_haproxy() else {
        return;
    };
    tokio::time::timeout(support::LIMIT * 2, async {
        let (a, b, c) = (
            replica(&redis, "a"),
            replica(&redis, "b"),
            replica(&redis, "c"),
        );
        let (on_a, on_b, on_c) = (
            modern(&a.url).await,
            modern(&b.url).await,
            modern(&c.url).await,
        );

        // A listen on A hears a bump done through B.
        let mut changes = on_a
            .listen(SubscriptionFilter {
                resource_subscriptions: Some(vec!["test://counter".into()]),
                ..SubscriptionFilter::default()
            })
            .await
            .expect("listen on A");
        text_of(&on_b, "bump", json!({})).await.expect("bump on B");
        changes
            .next()
            .await
            .expect("an update reaches A")
            .expect("not lagging");
        changes.end().await.expect("end");

        // A task started through A: seen through B, cancelled through C, stopped on A.
        let urls: Vec<String> = (0..100)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let task = on_a
            .call_tool("crawl", json!({ "urls": urls, "delay_ms": 100 }))
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        let seen = on_b.task(task.id()).state().await.expect("seen through B");
        assert_eq!(seen.status, TaskStatus::Working);
        on_c.task(task.id())
            .cancel()
            .await
            .expect("cancelled through C");
        assert_eq!(
            task.state().await.expect("through A").status,
            TaskStatus::Cancelled
        );
        // The handler on A stops: its crawl says cancelled, long before its 10 s would end.
        let stopped = async {
            loop {
                let status: Value = serde_json::from_str(
                    &text_of(&on_a, "crawl_status", json!({}))
                        .await
                        .expect("status"),
                )
                .expect("JSON");
                if status["cancelled"] == json!(true) {
                    return status;
                }
                assert_ne!(
                    status["finished"],
                    json!(true),
                    "the crawl ran to its end: {status}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        let status = tokio::time::timeout(Duration::from_secs(5), stopped)
            .await
            .expect("the handler on A stopped within 5 s");
        assert!(
            status["completed"].as_u64().is_some_and(|n| n < 100),
            "{status}"
        );

        // A task asking a question, started through A and answered through B: the answer
        // travels to A on the bus, and the task completes with it.
        let (starting, answering) = (confirming(&a.url).await, confirming(&b.url).await);
        let asking = starting
            .call_tool("confirm_delete", json!({ "filename": "notes.txt" }))
            .as_task()
            .await
            .expect("started on A")
            .task()
            .expect("a task");
        let answered = answering
            .task(asking.id())
            .result()
            .await
            .expect("completed");
        assert_eq!(answered.first_text(), Some("notes.txt deleted"));

        // The peer scenarios through the balancer: each request to the next replica.
        let front = balancer(std::path::Path::new(&haproxy), &[&a, &b, &c]).await;
        peer_scenarios_through(&front.url, Wire::Stateless)
            .await
            .finish()
            .await;

        // The session era through the balancer: the session lives on the replica that opened
        // it; every request that lands elsewhere is forwarded there, its stream relayed back.
        let sessions_before = sessions_known(&redis).await;
        let harness = peer_scenarios_through(&front.url, Wire::StreamableHttp).await;
        // One session all along: no request met a replica that did not know it (a 404 would
        // have made the client open another).
        assert_eq!(sessions_known(&redis).await, sessions_before + 1);
        // Its DELETE, wherever it landed, reached the owner, which forgot it.
        harness.finish().await;
        assert_eq!(sessions_known(&redis).await, sessions_before);

        // Legacy HTTP+SSE through the balancer: the stream is the session, held by the replica
        // its GET reached; each POST that lands elsewhere is forwarded there.
        let sse = front.url.replace("/mcp", "/sse");
        let harness = peer_scenarios_through(&sse, Wire::LegacySse).await;
        assert_eq!(sessions_known(&redis).await, sessions_before + 1);
        // Its stream closed, its replica forgets it (once the close has reached it).
        harness.finish().await;
        let closed = std::time::Instant::now();
        while sessions_known(&redis).await != sessions_before {
            assert!(
                closed.elapsed() < Duration::from_secs(5),
                "the legacy session's place outlived its stream"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("within the limit");
}

/// A task started on replica A, answered through replica B with more than the bus carries
/// (70,000 bytes, past its 64 KiB bound): B refuses the answer with an error that says why, and
/// acknowledges nothing; the task still waits for its answer, and a small one completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_answer_too_large_to_cross_replicas_is_refused_not_lost() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let (a, b) = (replica(&redis, "a"), replica(&redis, "b"));
        let starting = confirming(&a.url).await;
        let oversized = confirming_with(&b.url, Some("x".repeat(70_000))).await;
        let asking = starting
            .call_tool("confirm_delete", json!({ "filename": "notes.txt" }))
            .as_task()
            .await
            .expect("started on A")
            .task()
            .expect("a task");
        let id = asking.id().to_owned();
        until_status(
            &oversized,
            &id,
            TaskStatus::InputRequired,
            Duration::from_secs(10),
        )
        .await;

        let refused = oversized
            .task(&id)
            .result()
            .await
            .expect_err("an answer the bus cannot carry is refused");
        let error = refused.remote().unwrap_or_else(|| panic!("{refused:?}"));
        assert_eq!(error.code, -32602, "{error:?}");
        assert!(
            error.message.contains("cannot reach it"),
            "the error says why: {error:?}"
        );
        println!("a 70,000-byte answer through B: {}", error.message);
        // Nothing was acknowledged: the task still waits on A for its answer.
        let state = starting.task(&id).state().await.expect("state");
        assert_eq!(state.status, TaskStatus::InputRequired, "{state:?}");

        // A small answer through B crosses, and the task completes with it.
        let answering = confirming(&b.url).await;
        let answered = answering.task(&id).result().await.expect("completed");
        assert_eq!(answered.first_text(), Some("notes.txt deleted"));
    })
    .await
    .expect("within the limit");
}

/// The value of the counter `name` (its Prometheus name, without labels) on the replica's
/// `/metrics`; 0 before it is first reported.
async fn counter(server: &HttpServer, name: &str) -> u64 {
    let url = server.metrics.as_deref().expect("started with metrics");
    let text = support::http_client()
        .get(url)
        .send()
        .await
        .expect("scraped")
        .text()
        .await
        .expect("text");
    text.lines()
        .filter(|line| line.split(['{', ' ']).next() == Some(name))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|value| value as u64)
        .sum()
}

/// Issue 28: a replica counts the requests it forwarded to the owner of their session, and
/// the owner those it served for others, as counters on `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_counts_what_it_forwards_and_what_it_serves_for_others() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let url = redis.url();
        let (a, b) = (
            HttpServer::start_with_metrics(&["--redis", &url, "--node-id", "a"]),
            HttpServer::start_with_metrics(&["--redis", &url, "--node-id", "b"]),
        );
        const FORWARDED: &str = "tidewire_redis_requests_forwarded_total";
        const SERVED: &str = "tidewire_redis_requests_served_forwarded_total";
        // Opened on A, then used through B.
        let front = switch(vec![a.base().to_owned(), b.base().to_owned()], 0, 1).await;
        let session = session_client(&front.url).await;
        for n in 0..3 {
            let text = format!("forwarded {n}");
            assert_eq!(
                text_of(&session, "echo", json!({ "text": text })).await,
                Ok(text)
            );
        }
        // notifications/initialized and three calls at least went from B to A.
        let (sent, served) = (counter(&b, FORWARDED).await, counter(&a, SERVED).await);
        assert!(sent >= 4, "B forwarded {sent}");
        assert!(served >= 4, "A served {served} for others");
        assert_eq!(counter(&a, FORWARDED).await, 0, "A holds the session");
        assert_eq!(counter(&b, SERVED).await, 0, "nothing was forwarded to B");
        session.close().await;
    })
    .await
    .expect("within the limit");
}

/// How a client reaches the balancer.
#[derive(Debug, Clone, Copy)]
enum Wire {
    /// The stateless revision (2026-07-28) over HTTP.
    Stateless,
    /// The session era over Streamable HTTP.
    StreamableHttp,
    /// The session era over legacy HTTP+SSE.
    LegacySse,
}

/// The peer scenarios against `url` over `wire`, every one. On the stateless revision each request
/// lands on the next replica: `cancel` reads the crawl's status back from another replica than
/// ran it, and `subscribe` reads the counter another one bumped (the demo keeps both in Redis).
/// The client stays open.
async fn peer_scenarios_through(url: &str, wire: Wire) -> Harness {
    let counters = Arc::new(Counters::default());
    let client = match wire {
        Wire::Stateless => {
            let transport = StatelessHttpConnector::new(url).connect().await;
            peer_client(&counters)
                .era(Era::Modern)
                .connect(transport.expect("transport"))
                .await
        }
        Wire::StreamableHttp => {
            let transport = tidewire_http::client::StreamableHttpConnector::new(url)
                .connect()
                .await;
            peer_client(&counters)
                .era(Era::Legacy)
                .connect(transport.expect("transport"))
                .await
        }
        Wire::LegacySse => {
            let transport = tidewire_sse::client::LegacySseConnector::new(url)
                .connect()
                .await;
            peer_client(&counters)
                .era(Era::Legacy)
                .connect(transport.expect("transport"))
                .await
        }
    }
    .expect("connected through the balancer");
    let harness = Harness::for_client(client, "balancer", counters);
    let mut failures = Vec::new();
    for scenario in tidewire_tests::scenarios::PEER_SCENARIOS {
        match run_peer_scenario(&harness, scenario).await {
            Ok(report) => println!("[balancer, {wire:?}] PASS {scenario} {report}"),
            Err(error) => failures.push(format!("{scenario}: {error}")),
        }
    }
    assert!(
        failures.is_empty(),
        "through the balancer ({wire:?}):\n{}",
        failures.join("\n")
    );
    harness
}

/// The state of task `id` through `client`, polled until it is `want` (within `limit`); how
/// long that took.
async fn until_status(client: &Client, id: &str, want: TaskStatus, limit: Duration) -> Duration {
    // Polled, to see what a plain reader sees (a watch is tested beside it).
    let started = std::time::Instant::now();
    loop {
        let state = client.task(id).state().await.expect("state");
        if state.status == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < limit,
            "still {:?} after {limit:?}",
            state.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_replica_dies_fails_once_its_lease_runs_out() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let lease = ["--task-lease", "1s"];
        let doomed = replica_with(&redis, "doomed", &lease);
        let survivor = replica_with(&redis, "survivor", &lease);
        let (on_doomed, on_survivor) = (modern(&doomed.url).await, modern(&survivor.url).await);
        let urls: Vec<String> = (0..100)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let task = on_doomed
            .call_tool("crawl", json!({ "urls": urls, "delay_ms": 100 }))
            .as_task()
            .await
            .expect("started")
            .task()
            .expect("a task");
        let id = task.id().to_owned();
        // Renewed while its replica lives: still working well past one lease.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            on_survivor.task(&id).state().await.expect("state").status,
            TaskStatus::Working,
            "a live replica keeps its task's lease"
        );
        // A watch through the survivor hears of the failure when the lease runs out: the
        // survivor's listen reads the task then (no one has to poll it).
        let watcher = modern(&survivor.url).await;
        let mut watch = Box::pin(watcher.task(&id).watch());
        let first = watch.next().await.expect("an item").expect("the task");
        assert_eq!(first.task.status, TaskStatus::Working);
        drop(on_doomed);
        drop(doomed); // SIGKILL
        let killed = std::time::Instant::now();
        let mut last = first;
        while let Some(item) = tokio::time::timeout(Duration::from_secs(4), watch.next())
            .await
            .expect("the failure is pushed within 4 s of the kill (a poll would take 5 s or more)")
        {
            last = item.expect("the task");
        }
        let heard = killed.elapsed();
        assert_eq!(last.task.status, TaskStatus::Failed, "{last:?}");
        assert!(heard < Duration::from_secs(4), "heard after {heard:?}");
        println!("a watch heard the dead replica's task fail {heard:?} after the kill (lease 1 s)");
        let took = until_status(
            &on_survivor,
            &id,
            TaskStatus::Failed,
            Duration::from_secs(10),
        )
        .await;
        println!("the dead replica's task failed {took:?} after the kill (lease 1 s)");
        let state = on_survivor.task(&id).state().await.expect("state");
        assert!(
            state
                .status_message
                .as_deref()
                .is_some_and(|m| m.contains("lease ran out")),
            "{state:?}"
        );
    })
    .await
    .expect("within the limit");
}

/// Redis killed and restarted (then flushed) under load through two replicas: no call hangs,
/// calls that need no Redis never fail, the bus and the forwarded session come back within
/// seconds, and the session is never answered 404 (its client keeps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_is_reported_meanwhile_and_recovered_from() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    let program = std::path::PathBuf::from(std::env::var_os("TIDEWIRE_REDIS_SERVER").expect("set"));
    tokio::time::timeout(support::LIMIT, async {
        let (a, b) = (replica(&redis, "a"), replica(&redis, "b"));
        let (on_a, on_b) = (modern(&a.url).await, modern(&b.url).await);
        let mut changes = on_a
            .listen(SubscriptionFilter {
                resource_subscriptions: Some(vec!["test://counter".into()]),
                ..SubscriptionFilter::default()
            })
            .await
            .expect("listen on A");

        // A session opened on A and used through B (forwarded).
        let front = switch(vec![a.base().to_owned(), b.base().to_owned()], 0, 1).await;
        let session = session_client(&front.url).await;
        assert_eq!(
            text_of(&session, "echo", json!({"text": "before"}))
                .await
                .as_deref(),
            Ok("before")
        );

        // Load through both replicas for the whole outage: plain calls on each, calls that need
        // Redis (the demo's counter) and calls on the forwarded session.
        let mut load = Load::start(vec![
            ("echo on A", on_a.clone(), "echo"),
            ("echo on B", on_b.clone(), "echo"),
            ("bump on B", on_b.clone(), "bump"),
            ("session echo through B", session.clone(), "echo"),
        ])
        .await;

        let killed = std::time::Instant::now();
        redis.kill();
        // Every caller calls while Redis is away.
        load.each_calls_again().await;
        println!(
            "every caller called while Redis was away ({:?})",
            killed.elapsed()
        );
        // Meanwhile: a task cannot be kept, and the call says why.
        let refused = on_a
            .call_tool("failing_job", json!({}))
            .as_task()
            .await
            .expect_err("no store, no task");
        assert!(refused.to_string().contains("redis"), "{refused}");
        // Plain calls go on: nothing else needs Redis.
        assert!(
            text_of(&on_b, "echo", json!({"text": "still here"}))
                .await
                .is_ok()
        );

        let port = redis.port;
        let restarted = std::time::Instant::now();
        let _redis = RedisServer::start_on(&program, port);
        // The bus is back once a bump through B reaches A's listen again. The demo keeps the
        // counter in Redis too: a bump meanwhile fails, saying so, and is tried again.
        let heard = async {
            loop {
                if let Err(error) = text_of(&on_b, "bump", json!({})).await {
                    assert!(error.contains("Redis"), "{error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                if let Ok(Some(_)) =
                    tokio::time::timeout(Duration::from_millis(200), changes.next()).await
                {
                    return restarted.elapsed();
                }
            }
        };
        let took = tokio::time::timeout(Duration::from_secs(15), heard)
            .await
            .expect("the bus recovered within 15 s");
        println!("the bus recovered {took:?} after Redis came back");
        // The session is not lost: A writes its place again, and B forwards to it once more.
        let placed = std::time::Instant::now();
        while sessions_known(&_redis).await == 0 {
            assert!(
                placed.elapsed() < Duration::from_secs(10),
                "the place never came back"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        println!(
            "the session's place was back {:?} after Redis",
            restarted.elapsed()
        );
        let took = until_forwarded(&session, restarted).await;
        println!("the session was forwarded again {took:?} after Redis");
        assert_eq!(session.reinitializations(), 0, "the same session");
        let task = on_a
            .call_tool("failing_job", json!({}))
            .as_task()
            .await
            .expect("tasks again")
            .task()
            .expect("a task");
        assert!(on_b.task(task.id()).state().await.is_ok(), "seen through B");

        // Each caller succeeds again after the restart, within seconds.
        tokio::time::timeout(Duration::from_secs(10), load.each_answered_after(restarted))
            .await
            .expect("every caller was answered again within 10 s of the restart");
        println!(
            "every caller was answered again {:?} after Redis",
            restarted.elapsed()
        );
        // Every call under load ended within its limit; calls that need no Redis never failed.
        let tallies = load.stop().await;
        for tally in &tallies {
            println!("{tally}");
            assert_eq!(tally.hung, 0, "{tally}");
            if tally.what.starts_with("echo on") {
                assert!(
                    tally.failures.is_empty(),
                    "a call that needs no Redis failed: {tally}"
                );
            }
        }
        let bump = tallies
            .iter()
            .find(|t| t.what == "bump on B")
            .expect("bump");
        assert!(
            bump.failed_between(killed, restarted) > 0,
            "the counter's calls failed while Redis was away: {bump}"
        );
        assert_eq!(
            session.reinitializations(),
            0,
            "the same session under load"
        );

        // Redis losing its data with no restart at all: the session through B is refused for a
        // moment (503, try again), never answered 404 (which would end it), until A, finding
        // its heartbeat gone, writes its place again.
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut redis_connection(&_redis).await)
            .await
            .expect("FLUSHALL");
        let took = until_forwarded(&session, std::time::Instant::now()).await;
        println!("the session was forwarded again {took:?} after FLUSHALL");
        assert_eq!(
            session.reinitializations(),
            0,
            "the same session after FLUSHALL"
        );
    })
    .await
    .expect("within the limit");
}

/// Calls `echo` on `session` until it is answered, each failure a `503` (the request refused
/// for now, the session kept), for at most 10 s; returns how long after `since` that was.
async fn until_forwarded(session: &Client, since: std::time::Instant) -> Duration {
    while let Err(error) = text_of(session, "echo", json!({"text": "again"})).await {
        assert!(error.contains("503"), "{error}");
        assert!(
            since.elapsed() < Duration::from_secs(10),
            "not forwarded again within 10 s: {error}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    since.elapsed()
}

/// How long one call under [`Load`] may take before it counts as hung: past the Redis command
/// limit and the pub/sub ping window, well inside the test's own limit.
const CALL_LIMIT: Duration = Duration::from_secs(8);

/// Callers each calling one tool in a loop, one call at a time, until stopped.
struct Load {
    stop: tokio::sync::watch::Sender<bool>,
    callers: Vec<tokio::task::JoinHandle<CallerTally>>,
    /// Per caller: how its calls went so far.
    progress: Vec<tokio::sync::watch::Receiver<Progress>>,
}

/// How one caller's calls went so far.
#[derive(Clone, Copy, Default)]
struct Progress {
    /// Calls ended, whatever their outcome.
    ended: usize,
    /// When the last call that succeeded ended.
    last_ok: Option<std::time::Instant>,
}

/// What one caller of a [`Load`] saw.
struct CallerTally {
    what: &'static str,
    /// When each call that succeeded ended.
    ok: Vec<std::time::Instant>,
    /// When each call that failed ended.
    failures: Vec<std::time::Instant>,
    /// What the first failure said.
    first_error: Option<String>,
    /// Calls that did not end within [`CALL_LIMIT`].
    hung: usize,
    slowest: Duration,
}

impl CallerTally {
    fn failed_between(&self, from: std::time::Instant, to: std::time::Instant) -> usize {
        self.failures
            .iter()
            .filter(|t| **t > from && **t < to)
            .count()
    }
}

impl std::fmt::Display for CallerTally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} ok, {} failed, {} hung, slowest {:?}",
            self.what,
            self.ok.len(),
            self.failures.len(),
            self.hung,
            self.slowest
        )?;
        if let Some(error) = &self.first_error {
            write!(f, " (first error: {error})")?;
        }
        Ok(())
    }
}

impl Load {
    /// Starts the callers; returns once each has had one call answered.
    async fn start(callers: Vec<(&'static str, Client, &'static str)>) -> Self {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let mut progress = Vec::new();
        let callers = callers
            .into_iter()
            .map(|(what, client, tool)| {
                let stopped = stopped.clone();
                let (tell, told) = tokio::sync::watch::channel(Progress::default());
                progress.push(told);
                tokio::spawn(async move {
                    let mut tally = CallerTally {
                        what,
                        ok: Vec::new(),
                        failures: Vec::new(),
                        first_error: None,
                        hung: 0,
                        slowest: Duration::ZERO,
                    };
                    while !*stopped.borrow() {
                        let started = std::time::Instant::now();
                        let args = if tool == "echo" {
                            json!({"text": what})
                        } else {
                            json!({})
                        };
                        let call = text_of(&client, tool, args);
                        match tokio::time::timeout(CALL_LIMIT, call).await {
                            Ok(Ok(_)) => {
                                let now = std::time::Instant::now();
                                tally.ok.push(now);
                                tell.send_modify(|p| p.last_ok = Some(now));
                            }
                            Ok(Err(error)) => {
                                tally.failures.push(std::time::Instant::now());
                                tally.first_error.get_or_insert(error);
                                // A failing call returns at once: pace the retries.
                                tokio::time::sleep(Duration::from_millis(20)).await;
                            }
                            Err(_) => tally.hung += 1,
                        }
                        tally.slowest = tally.slowest.max(started.elapsed());
                        tell.send_modify(|p| p.ended += 1);
                    }
                    tally
                })
            })
            .collect();
        let mut load = Self {
            stop,
            callers,
            progress,
        };
        for progress in &mut load.progress {
            progress
                .wait_for(|p| p.last_ok.is_some())
                .await
                .expect("a caller ended before its first answer");
        }
        load
    }

    /// Returns once every caller has made a whole call since this was called (the second
    /// call to end from now started after it).
    async fn each_calls_again(&mut self) {
        for progress in &mut self.progress {
            let mark = progress.borrow_and_update().ended;
            progress
                .wait_for(|p| p.ended >= mark + 2)
                .await
                .expect("a caller ended early");
        }
    }

    /// Returns once every caller has had a call succeed that ended after `since`.
    async fn each_answered_after(&mut self, since: std::time::Instant) {
        for progress in &mut self.progress {
            progress
                .wait_for(|p| p.last_ok.is_some_and(|at| at > since))
                .await
                .expect("a caller ended early");
        }
    }

    async fn stop(self) -> Vec<CallerTally> {
        let _ = self.stop.send(true);
        let mut tallies = Vec::new();
        for caller in self.callers {
            tallies.push(caller.await.expect("a caller panicked"));
        }
        tallies
    }
}

/// A front of the test's own that sends the first request to one backend and every later one
/// to the backend chosen now: which replica relays, and when it changes, is the test's to say
/// (HAProxy's round robin would decide for it).
struct Switch {
    url: String,
    current: Arc<std::sync::atomic::AtomicUsize>,
    /// Requests that resumed a stream (`Last-Event-ID`).
    resumed: Arc<std::sync::atomic::AtomicUsize>,
    /// While false, requests wait here before they go on.
    open: tokio::sync::watch::Sender<bool>,
}

async fn switch(backends: Vec<String>, first: usize, then: usize) -> Switch {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let current = Arc::new(AtomicUsize::new(then));
    let resumed = Arc::new(AtomicUsize::new(0));
    let opened = Arc::new(AtomicBool::new(false));
    let (open, gate) = tokio::sync::watch::channel(true);
    let resuming = resumed.clone();
    let http = support::http_client();
    let chosen = current.clone();
    let forward = move |request: axum::extract::Request| {
        let (backends, http, chosen, opened, resuming, mut gate) = (
            backends.clone(),
            http.clone(),
            chosen.clone(),
            opened.clone(),
            resuming.clone(),
            gate.clone(),
        );
        async move {
            let _ = gate.wait_for(|open| *open).await;
            if request.headers().contains_key("last-event-id") {
                resuming.fetch_add(1, Ordering::SeqCst);
            }
            let index = if opened.swap(true, Ordering::SeqCst) {
                chosen.load(Ordering::SeqCst)
            } else {
                first
            };
            let (parts, body) = request.into_parts();
            let body = axum::body::to_bytes(body, 16 << 20)
                .await
                .unwrap_or_default();
            let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
            let mut outgoing = http.request(parts.method, format!("{}{path}", backends[index]));
            for (name, value) in &parts.headers {
                if name != axum::http::header::HOST && name != axum::http::header::CONTENT_LENGTH {
                    outgoing = outgoing.header(name, value);
                }
            }
            let Ok(answer) = outgoing.body(body).send().await else {
                return axum::response::Response::builder()
                    .status(502)
                    .body(axum::body::Body::empty())
                    .expect("response");
            };
            let mut response = axum::response::Response::builder().status(answer.status());
            for (name, value) in answer.headers() {
                if name != axum::http::header::CONTENT_LENGTH
                    && name != axum::http::header::TRANSFER_ENCODING
                {
                    response = response.header(name, value);
                }
            }
            response
                .body(axum::body::Body::from_stream(answer.bytes_stream()))
                .expect("response")
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let app = axum::Router::new().fallback(forward);
    tokio::spawn(async move { axum::serve(listener, app).await });
    Switch {
        url,
        current,
        resumed,
        open,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relaying_replica_killed_mid_stream_loses_nothing_the_client_resumes_through_another() {
    use std::sync::atomic::Ordering;

    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT * 2, async {
        let owner = replica(&redis, "owner");
        let relay = replica(&redis, "relay");
        let spare = replica(&redis, "spare");
        let base = |s: &HttpServer| s.base().to_owned();
        let front = switch(vec![base(&owner), base(&relay), base(&spare)], 0, 1).await;
        let transport = tidewire_http::client::StreamableHttpConnector::new(&front.url)
            .connect()
            .await
            .expect("transport");
        // Room for every progress report (the client drops those a slow reader leaves behind):
        // what is measured here is the transport's exactly-once.
        let client = Client::builder(Implementation::new("scale-out-test", "1"))
            .era(Era::Legacy)
            .session_options(
                tidewire_core::session::SessionOptions::default().progress_buffer(16_384),
            )
            .connect(transport)
            .await
            .expect("a session opened on the owner");
        // A call whose stream carries 5,000 progress notifications, a millisecond apart.
        const COUNT: usize = 5000;
        let urls: Vec<String> = (0..COUNT)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let (progress, mut steps) = mpsc::unbounded_channel();
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call_tool("crawl", json!({ "urls": urls, "delay_ms": 1 }))
                    .no_timeout()
                    .on_progress(move |p| {
                        let _ = progress.send(p.progress);
                    })
                    .await
            }
        });
        let mut seen = vec![0u32; COUNT + 1];
        let mut relay = Some(relay);
        for received in 1..=COUNT {
            let Some(step) = steps.recv().await else {
                let outcome = call.await.expect("joined");
                panic!("the stream ended after {} steps: {outcome:?}", received - 1);
            };
            seen[step as usize] += 1;
            if received == 1000 {
                // Mid-stream: from now on the front sends to the spare, and the relay dies.
                front.current.store(2, Ordering::SeqCst);
                drop(relay.take()); // SIGKILL
            }
        }
        let result = call
            .await
            .expect("joined")
            .expect("the call's answer arrives");
        assert_eq!(
            result.first_text(),
            Some(format!("Crawled {COUNT} URLs").as_str())
        );
        assert!(relay.is_none(), "the relay was killed mid-stream");
        assert!(
            front.resumed.load(Ordering::SeqCst) >= 1,
            "the client resumed the broken stream (Last-Event-ID) through the spare"
        );
        let not_once: Vec<usize> = (1..=COUNT).filter(|&i| seen[i] != 1).collect();
        assert!(
            not_once.is_empty(),
            "not exactly once: {:?}",
            &not_once[..not_once.len().min(10)]
        );
        // The session lives on: a new call works through the spare.
        assert_eq!(
            text_of(&client, "echo", json!({"text": "after"}))
                .await
                .expect("echo"),
            "after"
        );
        drop(owner);
        drop(spare);
    })
    .await
    .expect("within the limit");
}

/// A connection to the test's Redis.
async fn redis_connection(redis: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(redis.url())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("connection")
}

/// Waits (polling Redis, which announces nothing) until `done` holds, within `limit`.
async fn until_redis<F>(redis: &RedisServer, limit: Duration, what: &str, done: F)
where
    F: AsyncFn(&mut redis::aio::MultiplexedConnection) -> bool,
{
    let mut connection = redis_connection(redis).await;
    let started = std::time::Instant::now();
    while !done(&mut connection).await {
        assert!(started.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether some stream's copy in Redis holds more than `events` events and ends with a POST's
/// response.
async fn a_response_is_copied(
    connection: &mut redis::aio::MultiplexedConnection,
    events: usize,
) -> bool {
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("tidewire:tidewire-demo:events:*:*")
        .query_async(connection)
        .await
        .expect("KEYS");
    for key in keys {
        let len: usize = redis::cmd("XLEN")
            .arg(&key)
            .query_async(connection)
            .await
            .expect("XLEN");
        if len <= events {
            continue;
        }
        let newest: Vec<(String, Vec<String>)> = redis::cmd("XREVRANGE")
            .arg(&key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(connection)
            .await
            .expect("XREVRANGE");
        if newest
            .iter()
            .any(|(_, fields)| fields.windows(2).any(|w| w[0] == "l" && w[1] == "1"))
        {
            return true;
        }
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_dead_owner_wrote_is_replayed_through_another_replica() {
    use std::sync::atomic::Ordering;

    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT * 2, async {
        let owner = replica(&redis, "owner");
        let relay = replica(&redis, "relay");
        let spare = replica(&redis, "spare");
        let base = |s: &HttpServer| s.base().to_owned();
        let front = switch(vec![base(&owner), base(&relay), base(&spare)], 0, 1).await;
        let transport = tidewire_http::client::StreamableHttpConnector::new(&front.url)
            .connect()
            .await
            .expect("transport");
        let client = Client::builder(Implementation::new("scale-out-test", "1"))
            .era(Era::Legacy)
            .session_options(
                tidewire_core::session::SessionOptions::default().progress_buffer(16_384),
            )
            .connect(transport)
            .await
            .expect("a session opened on the owner");
        const COUNT: usize = 2000;
        let urls: Vec<String> = (0..COUNT)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let (progress, mut steps) = mpsc::unbounded_channel();
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call_tool("crawl", json!({ "urls": urls, "delay_ms": 1 }))
                    .no_timeout()
                    .on_progress(move |p| {
                        let _ = progress.send(p.progress);
                    })
                    .await
            }
        });
        let mut seen = vec![0u32; COUNT + 1];
        for _ in 0..200 {
            let step = steps.recv().await.expect("a step, relayed");
            seen[step as usize] += 1;
        }
        // The relay dies with 200 steps read; the client's resumption waits at the front
        // while the owner finishes the call (its response copied to Redis) and dies too.
        front.open.send_replace(false);
        front.current.store(2, Ordering::SeqCst);
        drop(relay); // SIGKILL
        until_redis(
            &redis,
            Duration::from_secs(20),
            "the call's response copied",
            async |c: &mut redis::aio::MultiplexedConnection| a_response_is_copied(c, COUNT).await,
        )
        .await;
        drop(owner); // SIGKILL
        let killed = std::time::Instant::now();
        until_redis(
            &redis,
            Duration::from_secs(10),
            "the owner's heartbeat gone",
            async |c: &mut redis::aio::MultiplexedConnection| {
                let alive: bool = redis::cmd("EXISTS")
                    .arg("tidewire:tidewire-demo:node:owner:alive")
                    .query_async(c)
                    .await
                    .expect("EXISTS");
                !alive
            },
        )
        .await;
        front.open.send_replace(true);
        let result = call
            .await
            .expect("joined")
            .expect("the call's answer arrives, replayed by the spare");
        println!(
            "the call's answer arrived {:?} after its owner was killed",
            killed.elapsed()
        );
        assert_eq!(
            result.first_text(),
            Some(format!("Crawled {COUNT} URLs").as_str())
        );
        while let Ok(step) = steps.try_recv() {
            seen[step as usize] += 1;
        }
        let not_once: Vec<usize> = (1..=COUNT).filter(|&i| seen[i] != 1).collect();
        assert!(
            not_once.is_empty(),
            "not exactly once: {:?}",
            &not_once[..not_once.len().min(10)]
        );
        assert!(front.resumed.load(Ordering::SeqCst) >= 1);
        // The session died with its owner: the client starts a new one on the spare.
        let recovered = std::time::Instant::now();
        loop {
            match text_of(&client, "echo", json!({"text": "again"})).await {
                Ok(text) => {
                    assert_eq!(text, "again");
                    break;
                }
                Err(error) => {
                    assert!(error.contains("new session"), "{error}");
                    assert!(recovered.elapsed() < Duration::from_secs(5), "{error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        assert_eq!(client.reinitializations(), 1);
        drop(spare);
    })
    .await
    .expect("within the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owner_killed_fails_its_calls_within_seconds_and_the_client_starts_over() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let owner = replica(&redis, "owner");
        let relay = replica(&redis, "relay");
        let front = switch(vec![owner.base().to_owned(), relay.base().to_owned()], 0, 1).await;
        let client = session_client(&front.url).await;
        let urls: Vec<String> = (0..300)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let (started, mut progress) = mpsc::unbounded_channel();
        let call = tokio::spawn({
            let client = client.clone();
            async move {
                client
                    .call_tool("crawl", json!({ "urls": urls, "delay_ms": 100 }))
                    .no_timeout()
                    .on_progress(move |p| {
                        let _ = started.send(p.progress);
                    })
                    .await
            }
        });
        progress.recv().await.expect("the call runs, relayed");
        let killed = std::time::Instant::now();
        drop(owner); // SIGKILL
        let failed = call.await.expect("joined");
        let took = killed.elapsed();
        assert!(failed.is_err(), "the call cannot end well: {failed:?}");
        assert!(took < Duration::from_secs(10), "it failed after {took:?}");
        println!("the in-flight call failed {took:?} after the owner was killed: {failed:?}");
        // The client starts a new session, on the replica that is left (a call that meets the
        // 404 before it has fails, saying to retry); calls work again.
        let recovered = std::time::Instant::now();
        loop {
            match text_of(&client, "echo", json!({"text": "again"})).await {
                Ok(text) => {
                    assert_eq!(text, "again");
                    break;
                }
                Err(error) => {
                    assert!(error.contains("new session"), "{error}");
                    assert!(recovered.elapsed() < Duration::from_secs(5), "{error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        assert_eq!(client.reinitializations(), 1);
        println!("calls worked again {:?} later", recovered.elapsed());
    })
    .await
    .expect("within the limit");
}

/// A process stopped (`SIGSTOP`) for as long as this lives, continued when it drops.
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Self {
        let status = std::process::Command::new("kill")
            .args(["-STOP", &pid.to_string()])
            .status()
            .expect("kill -STOP");
        assert!(status.success(), "kill -STOP {pid}");
        Self(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-CONT", &self.0.to_string()])
            .status();
    }
}

/// A request forwarded to its session's owner, whose answer can no longer come back (the owner
/// does not read its inbox, and then Redis, which would carry the answer, goes away): the
/// relaying replica answers 503 within seconds, as soon as it finds it cannot see the owner
/// alive, not after the 30 s it gives an owner to start answering. CI once caught such a call
/// hanging past 8 s when Redis was killed with a forwarded request in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_whose_answer_cannot_come_back_is_refused_within_seconds() {
    let Some(mut redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let url = redis.url();
        let owner = replica(&redis, "owner");
        let relay = HttpServer::start_with_metrics(&["--redis", &url, "--node-id", "relay"]);
        const FORWARDED: &str = "tidewire_redis_requests_forwarded_total";
        let front = switch(vec![owner.base().to_owned(), relay.base().to_owned()], 0, 1).await;
        let session = session_client(&front.url).await;
        assert_eq!(
            text_of(&session, "echo", json!({"text": "through the relay"})).await,
            Ok("through the relay".to_owned())
        );
        let before = counter(&relay, FORWARDED).await;
        let stopped = Stopped::new(owner.pid());
        let call = tokio::spawn({
            let session = session.clone();
            async move { text_of(&session, "echo", json!({"text": "lost"})).await }
        });
        // The relay has published the request on the owner's inbox: nobody reads it.
        while counter(&relay, FORWARDED).await == before {
            tokio::task::yield_now().await;
        }
        redis.kill();
        let killed = std::time::Instant::now();
        let refused = call.await.expect("joined").expect_err("no answer can come");
        let took = killed.elapsed();
        assert!(refused.contains("503"), "{refused}");
        assert!(
            took < Duration::from_secs(8),
            "refused {took:?} after Redis went: {refused}"
        );
        println!("refused {took:?} after Redis went: {refused}");
        drop(stopped);
    })
    .await
    .expect("within the limit");
}

/// One JSON-RPC POST to `url` with `token` (and `session`): status, session id, body.
async fn post_as(
    url: &str,
    token: &str,
    session: Option<&str>,
    message: Value,
) -> (u16, Option<String>, String) {
    let http = support::http_client();
    let request = raw::post(&http, url, Some(token), session, message.to_string());
    let response = request.send().await.expect("sent");
    let status = response.status().as_u16();
    let id = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, id, response.text().await.expect("body"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_authorization_a_forwarded_request_acts_for_the_subject_its_replica_verified() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(60), async {
        let auth = TestAuthorizationServer::start(3600).await;
        // Behind a balancer every replica is one resource: the URL clients use.
        let resource = "http://mcp.example.test/mcp";
        let (client_id, secret) = INTROSPECTION_CLIENT;
        let introspection = auth.introspection_endpoint();
        let protected = |name: &str| {
            HttpServer::start_with_env(
                &[
                    "--redis",
                    &redis.url(),
                    "--node-id",
                    name,
                    "--auth-issuer",
                    &auth.issuer,
                    "--auth-introspection",
                    &introspection,
                    "--auth-client-id",
                    client_id,
                    "--auth-audience",
                    resource,
                    "--auth-scope",
                    "mcp:use",
                ],
                &[("TIDEWIRE_AUTH_CLIENT_SECRET", secret)],
            )
        };
        let (a, b) = (protected("a"), protected("b"));
        let alice = auth.access_token_for("alice", "mcp:use", resource);
        let bob = auth.access_token_for("bob", "mcp:use", resource);

        let (status, session, _) = post_as(&a.url, &alice, None, raw::initialize_request()).await;
        assert_eq!(status, 200);
        let session = session.expect("a session id");
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (status, _, _) = post_as(&a.url, &alice, Some(&session), initialized).await;
        assert_eq!(status, 202);

        // Alice's session, used through B: forwarded to A with the subject B verified.
        let echo = |id: u64| {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"text": "through B"}}})
        };
        let (status, _, body) = post_as(&b.url, &alice, Some(&session), echo(2)).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("through B"), "{body}");
        // Bob's valid token does not open Alice's session, on either replica.
        let (status, _, _) = post_as(&b.url, &bob, Some(&session), echo(3)).await;
        assert_eq!(status, 404);
        let (status, _, _) = post_as(&a.url, &bob, Some(&session), echo(4)).await;
        assert_eq!(status, 404);
        // No token at all is stopped by B's own layer, before any forwarding.
        let unauthenticated = support::http_client()
            .post(&b.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &session)
            .header("content-type", "application/json")
            .body(echo(5).to_string())
            .send()
            .await
            .expect("sent");
        assert_eq!(unauthenticated.status().as_u16(), 401);
        // And Alice's session goes on.
        let (status, _, body) = post_as(&b.url, &alice, Some(&session), echo(6)).await;
        assert_eq!(status, 200, "{body}");

        // A session of Alice's whose replica died, with a stream's response copied to Redis:
        // it is replayed to Alice only.
        let mut connection = redis::Client::open(redis.url())
            .expect("client")
            .get_multiplexed_async_connection()
            .await
            .expect("connection");
        let ghost = "0123456789abcdef0123456789abcdef";
        let () = redis::pipe()
            .cmd("HSET")
            .arg(format!("tidewire:tidewire-demo:session:{ghost}"))
            .arg("owner")
            .arg("a-replica-that-died")
            .arg("subject")
            .arg("alice")
            .ignore()
            .cmd("XADD")
            .arg(format!("tidewire:tidewire-demo:events:{ghost}:1"))
            .arg("1-0")
            .arg("d")
            .arg(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#)
            .arg("l")
            .arg(1)
            .ignore()
            .query_async(&mut connection)
            .await
            .expect("written");
        let resume = |token: &str| {
            support::http_client()
                .get(&b.url)
                .bearer_auth(token)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", ghost)
                .header("mcp-protocol-version", "2025-11-25")
                .header("last-event-id", "1-0")
                .send()
        };
        let refused = resume(&bob).await.expect("sent");
        assert_eq!(refused.status().as_u16(), 404);
        let replayed = resume(&alice).await.expect("sent");
        assert_eq!(replayed.status().as_u16(), 200);
        let body = replayed.text().await.expect("body");
        assert!(body.contains(r#""id":7"#), "{body}");
    })
    .await
    .expect("within the limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_used_only_through_another_replica_outlives_its_idle_timeout() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let with_timeout =
            |name: &str| replica_with(&redis, name, &["--session-idle-timeout", "2s"]);
        let (a, b) = (with_timeout("a"), with_timeout("b"));
        // Opened on A; every later request lands on B and is forwarded to A.
        let front = switch(vec![a.base().to_owned(), b.base().to_owned()], 0, 1).await;
        let session = session_client(&front.url).await;
        // Used for twice its idle timeout: A must keep its place in Redis fresh from the
        // forwarded requests alone, or B stops finding it and the session is lost (404).
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(4) {
            assert_eq!(
                text_of(&session, "echo", json!({"text": "via B"}))
                    .await
                    .as_deref(),
                Ok("via B")
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        assert_eq!(session.reinitializations(), 0, "the same session all along");
        assert_eq!(sessions_known(&redis).await, 1);
    })
    .await
    .expect("within the limit");
}

/// A replica serves at most `--max-forwarded-streams` forwarded streams at once: past it a
/// call is answered 503 at once, while the client's answer to an elicitation a held call waits
/// on — a message, in a budget of its own — still gets through, and the held call completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_forwarded_streams_a_replica_refuses_calls_but_not_the_answers_they_wait_for() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let bounded = |name: &str| replica_with(&redis, name, &["--max-forwarded-streams", "2"]);
        let (a, b) = (bounded("a"), bounded("b"));
        // Opened on A; every later request lands on B and is forwarded to A.
        let front = switch(vec![a.base().to_owned(), b.base().to_owned()], 0, 1).await;
        let (asked_tx, mut asked) = mpsc::channel::<()>(1);
        let release = Arc::new(tokio::sync::Semaphore::new(0));
        let answering = release.clone();
        let transport = tidewire_http::client::StreamableHttpConnector::new(&front.url)
            .connect()
            .await
            .expect("transport");
        let client = Client::builder(Implementation::new("scale-out-test", "1"))
            .era(Era::Legacy)
            .elicitation_handler(
                move |_: tidewire_core::schema::ElicitParams,
                      _: tidewire_core::session::RequestContext| {
                    let (asked, release) = (asked_tx.clone(), answering.clone());
                    async move {
                        let _ = asked.send(()).await;
                        let _ = release.acquire().await;
                        Ok(tidewire_core::schema::ElicitResult::accept(
                            [("name".to_owned(), "Ada".into())].into_iter().collect(),
                        ))
                    }
                },
            )
            .connect(transport)
            .await
            .expect("a session");
        // The session's GET stream holds one of A's two permits; the held call takes the other.
        let held = tokio::spawn({
            let client = client.clone();
            async move { text_of(&client, "elicit", json!({"message": "Your name?"})).await }
        });
        asked
            .recv()
            .await
            .expect("the elicitation reached the client");
        let refused = text_of(&client, "echo", json!({"text": "one too many"}))
            .await
            .expect_err("no permit is left for another call");
        assert!(
            refused.contains("503") && refused.contains("most forwarded streams"),
            "a clear refusal: {refused}"
        );
        release.add_permits(1);
        let answered = held
            .await
            .expect("join")
            .expect("the held call gets its answer through and completes");
        assert!(answered.contains("Ada"), "{answered}");
        assert_eq!(
            text_of(&client, "echo", json!({"text": "again"}))
                .await
                .as_deref(),
            Ok("again"),
            "the permit is back once the call is over"
        );
        assert_eq!(client.reinitializations(), 0, "the same session all along");
    })
    .await
    .expect("within the limit");
}

/// Sends `head` (a request head, `Host` and all, ending in a blank line) to `base`'s address
/// and nothing of its body; the status line of the answer.
async fn status_of_bodiless(base: &str, head: String) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    stream.write_all(head.as_bytes()).await.expect("head");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 1024];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        let read = stream.read(&mut buffer).await.expect("read");
        if read == 0 {
            break;
        }
        answer.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Issue 26, item 7: a replica read a body it forwards before the `Host` check, past the
/// endpoint's body limit, outside its body budget and with no read timeout (8 stalled bodies:
/// +116 MiB, still open after 38 s). Now it checks what a request served there would pass
/// first: a `Content-Length` over the limit is 413 before a byte is read, a foreign `Host` 403,
/// a body that does not arrive 408 after the read timeout; nothing reaches the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_passes_the_same_checks_first() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(support::LIMIT, async {
        let b_args = ["--body-read-timeout", "1s"];
        let (a, b) = (replica(&redis, "a"), replica_with(&redis, "b", &b_args));
        let a_url = format!("{}/mcp", a.base());
        let session = raw::open_session(&support::http_client(), &a_url, None).await;
        let host = b.base().trim_start_matches("http://").to_owned();
        let head = |host: &str, length: u64| {
            format!(
                "POST /mcp HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
                 accept: application/json, text/event-stream\r\nmcp-session-id: {session}\r\n\
                 mcp-protocol-version: 2025-11-25\r\ncontent-length: {length}\r\n\r\n"
            )
        };
        let too_long = status_of_bodiless(b.base(), head(&host, 1 << 30)).await;
        assert!(too_long.contains(" 413 "), "{too_long}");
        let foreign = status_of_bodiless(b.base(), head("evil.example", 10)).await;
        assert!(foreign.contains(" 403 "), "{foreign}");
        // A body that never comes is given up after B's read timeout (it waited forever).
        let stalled = status_of_bodiless(b.base(), head(&host, 100)).await;
        assert!(stalled.contains(" 408 "), "{stalled}");
    })
    .await
    .expect("within the limit: B answered at once, without waiting for a body");
}

/// A replica named `name` on `redis`, started here so its stderr can be read (a drain says when
/// it starts there): the process, its `/mcp` URL and its stderr's lines.
async fn replica_watched(
    redis: &RedisServer,
    name: &str,
    bind: &str,
) -> (
    tokio::process::Child,
    String,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>,
) {
    use tokio::io::AsyncBufReadExt as _;
    let url = redis.url();
    let mut child = tokio::process::Command::new(support::BIN)
        .args(["serve", "--bind", bind, "--redis", &url, "--node-id", name])
        .args(["--drain-timeout", "10"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start a replica");
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mcp = tokio::time::timeout(support::LIMIT, stdout.next_line())
        .await
        .expect("the URL in time")
        .expect("stdout")
        .expect("a first line");
    let stderr = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    (child, mcp, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_replica_gives_up_its_sessions_so_another_answers_them_404_at_once() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(120), async {
        let (mut a, on_a, mut a_says) = replica_watched(&redis, "drain-a", "127.0.0.1:0").await;
        let b = replica(&redis, "drain-b");
        let http = support::http_client();
        let initialize = raw::initialize_request();
        let opened = raw::post(&http, &on_a, None, None, initialize.to_string())
            .send()
            .await
            .expect("initialize on A");
        assert_eq!(opened.status(), 200);
        let session = raw::session_id(&opened);
        drop(opened.text().await);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = raw::post(&http, &on_a, None, Some(&session), initialized.to_string())
            .send()
            .await
            .expect("initialized");
        assert_eq!(ack.status(), 202);
        // Through B, the session's requests are forwarded to A.
        let ping = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string();
        let through_b = raw::post(&http, &b.url, None, Some(&session), ping(1))
            .send()
            .await
            .expect("ping through B");
        assert_eq!(through_b.status(), 200, "forwarded to A");
        drop(through_b.text().await);

        // A crawl of 3 s keeps A draining a while.
        let urls: Vec<String> = (1..=6)
            .map(|i| format!("https://example.com/{i}"))
            .collect();
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "crawl", "arguments": {"urls": urls, "delay_ms": 500}}});
        let crawl = tokio::spawn({
            let (http, on_a, session) = (http.clone(), on_a.clone(), session.clone());
            async move {
                let response = raw::post(&http, &on_a, None, Some(&session), call.to_string())
                    .send()
                    .await
                    .expect("crawl on A");
                response.text().await.unwrap_or_default()
            }
        });
        // Its first progress need not be awaited: the drain waits for the crawl either way.
        sigterm(&a).await;
        loop {
            let line = tokio::time::timeout(support::LIMIT, a_says.next_line())
                .await
                .expect("A's stderr in time")
                .expect("stderr")
                .expect("A says it drains");
            if line.contains("draining") {
                break;
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = a_says.next_line().await {} });

        // A has given up the session: B answers 404 at once, while A still drains.
        let started = std::time::Instant::now();
        let through_b = raw::post(&http, &b.url, None, Some(&session), ping(3))
            .send()
            .await
            .expect("ping through B");
        assert_eq!(through_b.status(), 404, "A gave up its session's place");
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(!crawl.is_finished(), "A still serves the crawl");

        let crawl = tokio::time::timeout(support::LIMIT, crawl)
            .await
            .expect("the crawl ends")
            .expect("ran");
        assert!(
            crawl.contains("Crawled 6 URLs"),
            "the crawl completes on A: {crawl}"
        );
        let status = tokio::time::timeout(Duration::from_secs(10), a.wait())
            .await
            .expect("A exits within its drain timeout")
            .expect("wait");
        assert!(status.success(), "{status}");
    })
    .await
    .expect("the test ends in time");
}

/// Sends `child` SIGTERM.
async fn sigterm(child: &tokio::process::Child) {
    let pid = child.id().expect("running");
    let signalled = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .expect("kill");
    assert!(signalled.success());
}

/// Sends `child` SIGTERM and waits for it to exit, within its drain timeout; its exit status.
async fn terminate(child: &mut tokio::process::Child) -> std::process::ExitStatus {
    sigterm(child).await;
    tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("exits within its drain timeout")
        .expect("wait")
}

/// Waits until `base`'s `/readyz` answers 200.
async fn until_ready(http: &reqwest::Client, base: &str) {
    let started = std::time::Instant::now();
    loop {
        if let Ok(answer) = http.get(format!("{base}/readyz")).send().await
            && answer.status() == 200
        {
            return;
        }
        assert!(
            started.elapsed() < support::LIMIT,
            "{base} not ready in time"
        );
        // Nothing announces readiness but the endpoint itself; poll it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(Default)]
struct Tally {
    made: std::sync::atomic::AtomicUsize,
    completed: std::sync::atomic::AtomicUsize,
    failed: std::sync::atomic::AtomicUsize,
    progress: std::sync::atomic::AtomicUsize,
    /// Told of each completed call.
    completions: tokio::sync::Notify,
}

impl Tally {
    fn complete(&self) {
        self.completed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.completions.notify_waiters();
    }

    /// Returns once `more` calls have completed from now.
    async fn completes(&self, more: usize) {
        let target = self.completed.load(std::sync::atomic::Ordering::SeqCst) + more;
        loop {
            let told = self.completions.notified();
            let mut told = std::pin::pin!(told);
            // Registered before the count is read again: no completion slips between.
            told.as_mut().enable();
            if self.completed.load(std::sync::atomic::Ordering::SeqCst) >= target {
                return;
            }
            told.await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_behind_a_checking_balancer_loses_no_call() {
    use std::sync::atomic::Ordering::Relaxed;
    let Some((redis, haproxy)) = redis_and_haproxy() else {
        return;
    };
    tokio::time::timeout(Duration::from_secs(240), async {
        let addresses: Vec<String> = (0..2)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let mut replicas = Vec::new();
        for (i, address) in addresses.iter().enumerate() {
            let (child, _, says) = replica_watched(&redis, &format!("roll-{i}"), address).await;
            tokio::spawn(async move {
                let mut says = says;
                while let Ok(Some(_)) = says.next_line().await {}
            });
            replicas.push(child);
        }
        let front = balancer_for(std::path::Path::new(&haproxy), &addresses, "check").await;
        let http = support::http_client();

        // Four clients on the stateless revision, each calling a crawl with progress
        // (4 URLs × 100 ms) through the balancer, one call after another, until told to stop.
        let tally = Arc::new(Tally::default());
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut clients = Vec::new();
        for _ in 0..4 {
            let client = modern(&front.url).await;
            let (tally, stopping) = (tally.clone(), stopping.clone());
            clients.push(tokio::spawn(async move {
                let urls: Vec<String> = (1..=4)
                    .map(|i| format!("https://example.com/{i}"))
                    .collect();
                while !stopping.load(Relaxed) {
                    tally.made.fetch_add(1, Relaxed);
                    let counted = tally.clone();
                    let call = client
                        .call_tool("crawl", json!({ "urls": urls, "delay_ms": 100 }))
                        .on_progress(move |_| {
                            counted.progress.fetch_add(1, Relaxed);
                        })
                        .await;
                    match call {
                        Ok(result)
                            if result.content.first().and_then(|c| c.as_text())
                                == Some("Crawled 4 URLs") =>
                        {
                            tally.complete();
                        }
                        other => {
                            eprintln!("a call failed: {other:?}");
                            tally.failed.fetch_add(1, Relaxed);
                        }
                    }
                }
            }));
        }
        // Restart each replica in turn, while the clients call: SIGTERM, its exit, start it
        // again on the same address and name, and wait until it is ready.
        for (i, address) in addresses.iter().enumerate() {
            tally.completes(4).await;
            let status = terminate(&mut replicas[i]).await;
            assert!(
                status.success(),
                "replica {i} exits 0 after its drain: {status}"
            );
            let (child, _, says) = replica_watched(&redis, &format!("roll-{i}"), address).await;
            tokio::spawn(async move {
                let mut says = says;
                while let Ok(Some(_)) = says.next_line().await {}
            });
            replicas[i] = child;
            until_ready(&http, &format!("http://{address}")).await;
        }
        tally.completes(4).await;
        stopping.store(true, Relaxed);
        for client in clients {
            tokio::time::timeout(support::LIMIT, client)
                .await
                .expect("the clients stop")
                .expect("ran");
        }
        let (made, completed, failed, progress) = (
            tally.made.load(Relaxed),
            tally.completed.load(Relaxed),
            tally.failed.load(Relaxed),
            tally.progress.load(Relaxed),
        );
        println!(
            "rolling restart of 2 replicas: {made} calls made, {completed} completed, \
             {failed} failed, {progress} progress notifications"
        );
        assert_eq!(failed, 0, "no call failed");
        assert_eq!(completed, made, "every call completed");
        assert!(progress >= completed * 4, "every call had its progress");
    })
    .await
    .expect("the test ends in time");
}
