//! Three `tidewire serve --redis` replicas on a real `redis-server`, behind a real HAProxy
//! balancing round robin with no affinity (`TIDEWIRE_REDIS_SERVER`, `TIDEWIRE_HAPROXY`; skipped
//! with a reason when unset, required in CI), on the stateless revision:
//! - a listen on replica A hears a `bump` done through replica B;
//! - a task started through A is seen through B, cancelled through C, and its handler on A
//!   stops; another, asking a question, is answered through B and completes on A;
//! - the peer scenarios through the balancer, each request landing on the next replica
//!   (`input_required` rounds included: a retry's sealed state opens on any replica), but for
//!   the two that read the demo's own process state; and the same in the session era, each
//!   request for the session forwarded to the replica holding it.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};
use support::HttpServer;
use tidewire_client::{Client, Era};
use tidewire_core::schema::{Implementation, SubscriptionFilter, TaskStatus};
use tidewire_http::client::StatelessHttpClient;
use tidewire_tests::external::{RedisServer, free_port, skip};
use tidewire_tests::harness::{Counters, Harness, peer_client};
use tidewire_tests::scenarios::{run_peer_scenario, text_of};

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
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("tidewire-haproxy-{}-{port}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let mut config = format!(
        "global\n  maxconn 512\n\
         defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n\
         \x20 option http-server-close\n\
         frontend mcp\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
         backend replicas\n  balance roundrobin\n"
    );
    for (i, backend) in backends.iter().enumerate() {
        let address = backend.base().trim_start_matches("http://");
        config.push_str(&format!("  server r{i} {address}\n"));
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
    let transport = StatelessHttpClient::new(url)
        .connect()
        .await
        .expect("transport");
    Client::builder(Implementation::new("scale-out-test", "1"))
        .era(Era::Modern)
        .connect(transport)
        .await
        .expect("connected")
}

/// A client of `url` on the stateless revision that confirms whatever it is asked.
async fn confirming(url: &str) -> Client {
    Client::builder(Implementation::new("scale-out-test", "1"))
        .era(Era::Modern)
        .elicitation_handler(
            |_: tidewire_core::schema::ElicitParams,
             _: tidewire_core::session::RequestContext| async move {
                Ok(tidewire_core::schema::ElicitResult::accept(
                    [("confirm".to_owned(), true.into())].into_iter().collect(),
                ))
            },
        )
        .connect(StatelessHttpClient::new(url).connect().await.expect("transport"))
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

fn replica(redis: &RedisServer, name: &str) -> HttpServer {
    HttpServer::start_with(&["--redis", &redis.url(), "--node-id", name])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_redis_behind_a_round_robin_balancer_serve_as_one() {
    let Some(redis) = RedisServer::start() else {
        return;
    };
    let Some(haproxy) = std::env::var_os("TIDEWIRE_HAPROXY").filter(|v| !v.is_empty()) else {
        skip("TIDEWIRE_HAPROXY is not set (see .ci/run)");
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
        let counters = Arc::new(Counters::default());
        let transport = StatelessHttpClient::new(&front.url)
            .connect()
            .await
            .expect("transport");
        let client = peer_client(&counters)
            .era(Era::Modern)
            .connect(transport)
            .await
            .expect("connected through the balancer");
        let harness = Harness::for_client(client, "balancer", counters);
        let mut failures = Vec::new();
        // Not `cancel` and `subscribe`: they read what the demo keeps in its own process (the
        // last crawl's status, the counter), which the next request finds on another replica.
        for scenario in [
            "echo",
            "progress",
            "notifications",
            "sampling",
            "elicitation",
            "roots",
        ] {
            match run_peer_scenario(&harness, scenario).await {
                Ok(report) => println!("[balancer] PASS {scenario} {report}"),
                Err(error) => failures.push(format!("{scenario}: {error}")),
            }
        }
        assert!(
            failures.is_empty(),
            "through the balancer:\n{}",
            failures.join("\n")
        );
        harness.finish().await;

        // The session era through the balancer: the session lives on the replica that opened
        // it; every request that lands elsewhere is forwarded there, its stream relayed back.
        let sessions_before = sessions_known(&redis).await;
        let counters = Arc::new(Counters::default());
        let transport = tidewire_http::client::StreamableHttpClient::new(&front.url)
            .connect()
            .await
            .expect("transport");
        let client = peer_client(&counters)
            .era(Era::Legacy)
            .connect(transport)
            .await
            .expect("a session through the balancer");
        let harness = Harness::for_client(client, "balancer, sessions", counters);
        let mut failures = Vec::new();
        for scenario in [
            "echo",
            "progress",
            "notifications",
            "sampling",
            "elicitation",
            "roots",
        ] {
            match run_peer_scenario(&harness, scenario).await {
                Ok(report) => println!("[balancer, sessions] PASS {scenario} {report}"),
                Err(error) => failures.push(format!("{scenario}: {error}")),
            }
        }
        assert!(
            failures.is_empty(),
            "sessions through the balancer:\n{}",
            failures.join("\n")
        );
        // One session all along: no request met a replica that did not know it (a 404 would
        // have made the client open another).
        assert_eq!(sessions_known(&redis).await, sessions_before + 1);
        harness.finish().await;
    })
    .await
    .expect("within the limit");
}

/// The state of task `id` through `client`, polled until it is `want` (within `limit`); how
/// long that took.
async fn until_status(client: &Client, id: &str, want: TaskStatus, limit: Duration) -> Duration {
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
        let doomed = HttpServer::start_with(
            &[
                &["--redis", &redis.url(), "--node-id", "doomed"][..],
                &lease[..],
            ]
            .concat(),
        );
        let survivor = HttpServer::start_with(
            &[
                &["--redis", &redis.url(), "--node-id", "survivor"][..],
                &lease[..],
            ]
            .concat(),
        );
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
        drop(on_doomed);
        drop(doomed); // SIGKILL
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

        redis.kill();
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
        // The bus is back once a bump through B reaches A's listen again.
        let heard = async {
            loop {
                text_of(&on_b, "bump", json!({})).await.expect("bump");
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
        let task = on_a
            .call_tool("failing_job", json!({}))
            .as_task()
            .await
            .expect("tasks again")
            .task()
            .expect("a task");
        assert!(on_b.task(task.id()).state().await.is_ok(), "seen through B");
    })
    .await
    .expect("within the limit");
}
