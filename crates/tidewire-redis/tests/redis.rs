//! The Redis seams against a real `redis-server` (`TIDEWIRE_REDIS_SERVER`; skipped with a
//! reason when unset, required in CI): the bus delivers an event published on one replica to
//! every replica's subscribers once each; the task store keeps, replaces, refuses, lists and
//! bounds records as the in-memory one does; the shared key is drawn once; the event store
//! serves from memory and copies every event, in order, to a Redis stream that expires and is
//! forgotten with its session.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tidewire_http::server::{EventStore, EventStoreLimits, StoredEvent};
use tidewire_redis::{Redis, RedisError, RedisEventStore, RedisTaskStore, shared_key_ring};
use tidewire_server::bus::{BusEvent, NotificationBus};
use tidewire_server::schema::TaskStatus;
use tidewire_server::tasks::{TaskLimits, TaskRecord, TaskStore, TaskStoreError};
use tidewire_tests::LIMIT;
use tidewire_tests::external::RedisServer;
use tokio::sync::mpsc;

#[tokio::test]
async fn an_event_published_on_one_replica_reaches_every_replica_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let a = Redis::connect(&server.url(), "bus-test").await.expect("a");
        let b = Redis::connect(&server.url(), "bus-test").await.expect("b");
        let other = Redis::connect(&server.url(), "another-server")
            .await
            .expect("c");
        let (bus_a, bus_b, bus_other) = (
            a.bus().await.expect("bus a"),
            b.bus().await.expect("bus b"),
            other.bus().await.expect("bus c"),
        );
        let heard = |bus: &dyn NotificationBus| {
            let (tx, rx) = mpsc::unbounded_channel();
            let subscription = bus.subscribe(Arc::new(move |event: &BusEvent| {
                let _ = tx.send(event.clone());
            }));
            (subscription, rx)
        };
        let (_sa, mut on_a) = heard(&bus_a);
        let (_sb, mut on_b) = heard(&bus_b);
        let (_sc, mut on_other) = heard(&bus_other);
        let updated = BusEvent::ResourceUpdated {
            uri: "test://counter".into(),
        };
        bus_b.publish(updated.clone());
        bus_b.publish(BusEvent::ToolsListChanged);
        for heard in [&mut on_a, &mut on_b] {
            assert_eq!(heard.recv().await, Some(updated.clone()));
            assert_eq!(
                heard.recv().await,
                Some(BusEvent::ToolsListChanged),
                "in order"
            );
        }
        // A marker through the other server's bus: nothing of this server's came before it.
        bus_other.publish(BusEvent::PromptsListChanged);
        assert_eq!(on_other.recv().await, Some(BusEvent::PromptsListChanged));
        // Once each: a last event, and nothing between.
        bus_a.publish(BusEvent::ResourcesListChanged);
        for heard in [&mut on_a, &mut on_b] {
            assert_eq!(heard.recv().await, Some(BusEvent::ResourcesListChanged));
            assert!(heard.try_recv().is_err(), "no event twice");
        }
    })
    .await
    .expect("within the limit");
}

fn record(id: &str, owner: Option<&str>) -> TaskRecord {
    TaskRecord::new(id.into(), "crawl".into(), None, owner.map(str::to_owned))
}

#[tokio::test]
async fn the_task_store_keeps_replaces_lists_and_bounds_records_for_every_replica() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let limits = TaskLimits {
            max_tasks: 3,
            max_tasks_per_owner: 3,
            max_record_bytes: 4096,
            default_ttl: Duration::from_secs(60),
            ..TaskLimits::default()
        };
        let here = RedisTaskStore::new(
            &Redis::connect(&server.url(), "t").await.expect("r"),
            limits,
        );
        let there = RedisTaskStore::new(
            &Redis::connect(&server.url(), "t").await.expect("r"),
            limits,
        );
        here.insert(record("t1", None)).await.expect("t1");
        here.insert(record("t2", Some("alice"))).await.expect("t2");
        here.insert(record("t3", Some("bob"))).await.expect("t3");
        assert!(matches!(
            here.insert(record("t4", None)).await,
            Err(TaskStoreError::Full(3))
        ));

        // Another replica reads what this one wrote, with the ttl the store allows.
        let got = there.get("t2").await.expect("get").expect("kept");
        assert_eq!(got.owner.as_deref(), Some("alice"));
        assert_eq!(got.ttl, Some(Duration::from_secs(60)));
        assert_eq!(there.get("nope").await.expect("get"), None);

        // Replaced while running; an ended record stays as it ended.
        let mut working = got.clone();
        working.status_message = Some("half way".into());
        assert!(there.update(working).await.expect("update"));
        let mut cancelled = here.get("t2").await.expect("get").expect("kept");
        assert_eq!(cancelled.status_message.as_deref(), Some("half way"));
        cancelled.status = TaskStatus::Cancelled;
        assert!(here.update(cancelled).await.expect("cancel"));
        let mut late = got.clone();
        late.status = TaskStatus::Completed;
        assert!(
            !there.update(late).await.expect("refused"),
            "ended stays ended"
        );
        assert_eq!(
            here.get("t2").await.expect("get").expect("kept").status,
            TaskStatus::Cancelled
        );
        assert!(
            !here
                .update(record("never-inserted", None))
                .await
                .expect("unknown")
        );

        // Too large: refused, the record stays.
        let mut big = here.get("t1").await.expect("get").expect("kept");
        big.status_message = Some("x".repeat(5000));
        assert!(matches!(
            there.update(big).await,
            Err(TaskStoreError::TooLarge { limit: 4096, .. })
        ));

        // Listing: oldest first, what the owner may see, a page after a cursor.
        let ids = |records: Vec<TaskRecord>| records.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(
            ids(there.list(Some("alice"), None, 10).await.expect("list")),
            ["t1", "t2"]
        );
        assert_eq!(ids(there.list(None, None, 10).await.expect("list")), ["t1"]);
        assert_eq!(
            ids(there.list(Some("bob"), Some("t1"), 10).await.expect("list")),
            ["t3"]
        );
        assert_eq!(
            ids(there.list(Some("alice"), None, 1).await.expect("list")),
            ["t1"]
        );
    })
    .await
    .expect("within the limit");
}

#[tokio::test]
async fn every_replica_gets_the_same_sealing_key_and_it_is_drawn_once() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let a = Redis::connect(&server.url(), "keys").await.expect("a");
        let b = Redis::connect(&server.url(), "keys").await.expect("b");
        shared_key_ring(&a).await.expect("ring a");
        let drawn = redis_cli_get(&server, "tidewire:keys:state-key").await;
        assert_eq!(drawn.len(), 64, "32 bytes in hex");
        // Another replica, and this one again: the key stays the one drawn first.
        shared_key_ring(&b).await.expect("ring b");
        shared_key_ring(&a).await.expect("ring a again");
        assert_eq!(
            redis_cli_get(&server, "tidewire:keys:state-key").await,
            drawn
        );
    })
    .await
    .expect("within the limit");
}

fn event(seq: u64, last: bool) -> StoredEvent {
    StoredEvent {
        seq,
        data: Bytes::from(format!(
            r#"{{"jsonrpc":"2.0","method":"n","params":{{"i":{seq}}}}}"#
        )),
        last,
    }
}

async fn plain(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url())
        .expect("client")
        .get_multiplexed_async_connection()
        .await
        .expect("conn")
}

#[tokio::test]
async fn the_event_store_copies_each_event_in_order_and_forgets_with_its_session() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let redis = Redis::connect(&server.url(), "events")
            .await
            .expect("redis");
        let ttl = Duration::from_secs(60);
        let store = RedisEventStore::new(
            &redis,
            ttl,
            EventStoreLimits::default().events_per_stream(100),
        );
        for seq in 1..=3 {
            store.append("s1", 1, event(seq, false)).await;
        }
        // The path the HTTP server takes: kept and copied without a future per event.
        for seq in 4..=5 {
            store
                .try_append("s1", 1, event(seq, seq == 5))
                .expect("never waits");
        }
        // Not copied: the standalone stream, and a stream whose first event is its response.
        store.append("s1", 0, event(1, false)).await;
        store.append("s1", 2, event(1, true)).await;
        store.append("s1", 3, event(1, false)).await;
        store.append("s2", 1, event(1, false)).await;
        // Read from memory at once; in Redis once copied.
        assert_eq!(store.after("s1", 1, 3).await.len(), 2);
        assert_eq!(
            store.try_after("s1", 1, 3).map(|events| events.len()),
            Some(2),
            "read from memory without waiting"
        );
        store.flush().await;
        let copied = store.copied("s1", 1, 2).await.expect("copied");
        assert_eq!(
            copied,
            vec![event(3, false), event(4, false), event(5, true)]
        );
        assert!(
            store
                .copied("s1", 1, 5)
                .await
                .expect("none after")
                .is_empty()
        );
        assert!(
            store
                .copied("s1", 7, 0)
                .await
                .expect("no stream")
                .is_empty()
        );
        assert!(
            store
                .copied("s1", 0, 0)
                .await
                .expect("standalone")
                .is_empty()
        );
        assert!(store.copied("s1", 2, 0).await.expect("quick").is_empty());
        assert_eq!(
            store.after("s1", 2, 0).await.len(),
            1,
            "kept in memory all the same"
        );
        let mut c = plain(&server).await;
        let left: i64 = redis::cmd("PTTL")
            .arg("tidewire:events:events:s1:1")
            .query_async(&mut c)
            .await
            .expect("PTTL");
        assert!(
            left > 50_000 && left <= 60_000,
            "expires with the session: {left} ms"
        );
        // The copy keeps what memory keeps: the last 100 events (the events per stream).
        for seq in 6..=400 {
            store.append("s2", 2, event(seq, false)).await;
        }
        store.flush().await;
        let len: usize = redis::cmd("XLEN")
            .arg("tidewire:events:events:s2:2")
            .query_async(&mut c)
            .await
            .expect("XLEN");
        assert_eq!(len, 100, "capped as in memory");
        let first = store.copied("s2", 2, 0).await.expect("copied");
        assert_eq!(first.first().map(|e| e.seq), Some(301));
        // One stream forgotten, then a whole session.
        store.forget("s1", Some(1)).await;
        store.flush().await;
        assert!(store.copied("s1", 1, 0).await.expect("gone").is_empty());
        assert_eq!(store.copied("s1", 3, 0).await.expect("kept").len(), 1);
        store.forget("s2", None).await;
        store.forget("s1", None).await;
        store.flush().await;
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg("tidewire:events:*")
            .query_async(&mut c)
            .await
            .expect("KEYS");
        assert!(keys.is_empty(), "nothing left: {keys:?}");
        assert_eq!(store.copies_dropped(), 0);
        // What Redis holds is checked before it is replayed: a line break could forge frames.
        let _: () = redis::cmd("XADD")
            .arg("tidewire:events:events:s3:1")
            .arg("1-0")
            .arg("d")
            .arg("{}\n\nevent: message\ndata: {}")
            .arg("l")
            .arg(0)
            .query_async(&mut c)
            .await
            .expect("XADD");
        let refused = store.copied("s3", 1, 0).await;
        assert!(
            matches!(refused, Err(RedisError::Corrupt { .. })),
            "{refused:?}"
        );
    })
    .await
    .expect("within the limit");
}

/// The copy of a stream is bounded in bytes as its memory copy is: large events push the
/// oldest out of both.
#[tokio::test]
async fn the_event_copy_in_redis_is_bounded_in_bytes_as_memory_is() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let redis = Redis::connect(&server.url(), "bytes").await.expect("redis");
        const BUDGET: usize = 64 * 1024;
        let limits = EventStoreLimits::default().bytes_per_stream(BUDGET);
        let store = RedisEventStore::new(&redis, Duration::from_secs(60), limits);
        let big = |seq: u64| StoredEvent {
            seq,
            data: Bytes::from(format!(r#"{{"i":{seq},"pad":"{}"}}"#, "x".repeat(10_000))),
            last: false,
        };
        for seq in 1..=50 {
            store.append("s", 1, big(seq)).await;
        }
        store.flush().await;
        let in_memory = store.after("s", 1, 0).await;
        let copied = store.copied("s", 1, 0).await.expect("copied");
        let bytes: usize = copied.iter().map(|e| e.data.len()).sum();
        assert!(bytes <= BUDGET, "{bytes} bytes copied, over {BUDGET}");
        assert_eq!(copied, in_memory, "the copy holds what memory holds");
        // Each 10 KB event counts the 16 KiB buffer it holds (and its bookkeeping): three fit.
        assert!(copied.len() >= 3, "the newest are kept: {}", copied.len());
        assert_eq!(copied.last().map(|e| e.seq), Some(50));
    })
    .await
    .expect("within the limit");
}

/// The value at `key`, read with a plain client.
async fn redis_cli_get(server: &RedisServer, key: &str) -> String {
    let client = redis::Client::open(server.url()).expect("client");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("conn");
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut connection)
        .await
        .expect("GET")
}

/// Issue 26, item 9: two replicas with one node id broke routing (404 through the other), and
/// the default id (`pid-<pid>`) repeats across containers. Now a replica claims its id, and a
/// second one under the same id refuses to start while the first lives; ids drawn by default
/// differ.
#[tokio::test]
async fn a_node_id_is_one_live_replica_s_alone() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let idle = Duration::from_secs(60);
        let a = Redis::connect(&server.url(), "ids").await.expect("a");
        let b = Redis::connect(&server.url(), "ids").await.expect("b");
        let first = tidewire_redis::SessionRouting::start(&a, "same", idle)
            .await
            .expect("the first replica named `same`");
        let second = tidewire_redis::SessionRouting::start(&b, "same", idle).await;
        assert!(
            matches!(second, Err(RedisError::NodeTaken { ref node, .. }) if node == "same"),
            "{:?}",
            second.err()
        );
        tidewire_redis::SessionRouting::start(&b, "other", idle)
            .await
            .expect("another id starts");
        drop(first);
        assert_ne!(
            tidewire_redis::random_node_id(),
            tidewire_redis::random_node_id()
        );
    })
    .await
    .expect("within the limit");
}

/// Issue 26, item 10: task answers over 64 KiB were published, dropped by every replica that
/// read them (over the bus's limit), and acknowledged to the client all the same. Now the bus
/// refuses what it cannot carry, so the server can say so instead.
#[tokio::test]
async fn an_event_the_bus_cannot_carry_is_refused_not_lost() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let a = Redis::connect(&server.url(), "big").await.expect("a");
        let bus = a.bus().await.expect("bus");
        let mut responses = serde_json::Map::new();
        responses.insert("q".into(), serde_json::Value::String("x".repeat(70_000)));
        let refused = bus.try_publish(BusEvent::TaskAnswered {
            task_id: "t".into(),
            responses,
        });
        assert!(
            matches!(
                refused,
                Err(tidewire_server::bus::BusRefused::TooLarge { max: 65_536, .. })
            ),
            "{refused:?}"
        );
        bus.try_publish(BusEvent::ToolsListChanged)
            .expect("a small event goes");
    })
    .await
    .expect("within the limit");
}

/// Issue 26, item 11, on the shared store: one owner at its quota cannot take everyone's
/// room, and `tasks/list` reads only what the caller may see (its tasks and those without an
/// owner), in creation order.
#[tokio::test]
async fn one_owner_cannot_fill_the_shared_store_and_lists_read_only_its_own() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let limits = TaskLimits {
            max_tasks: 10,
            max_tasks_per_owner: 2,
            ..TaskLimits::default()
        };
        let store = RedisTaskStore::new(
            &Redis::connect(&server.url(), "q").await.expect("r"),
            limits,
        );
        store
            .insert(record("m1", Some("mallory")))
            .await
            .expect("m1");
        store
            .insert(record("m2", Some("mallory")))
            .await
            .expect("m2");
        assert_eq!(
            store.insert(record("m3", Some("mallory"))).await,
            Err(TaskStoreError::OwnerFull(2))
        );
        store
            .insert(record("a1", Some("alice")))
            .await
            .expect("alice starts");
        store
            .insert(record("u1", None))
            .await
            .expect("no owner, no quota");
        let ids = |records: Vec<TaskRecord>| -> Vec<String> {
            records.into_iter().map(|r| r.id).collect()
        };
        let mallory = store.list(Some("mallory"), None, 10).await.expect("list");
        assert_eq!(ids(mallory), ["m1", "m2", "u1"]);
        let alice = store.list(Some("alice"), None, 10).await.expect("list");
        assert_eq!(ids(alice), ["a1", "u1"]);
        let page = store
            .list(Some("mallory"), Some("m1"), 1)
            .await
            .expect("list");
        assert_eq!(ids(page), ["m2"]);
        assert_eq!(ids(store.list(None, None, 10).await.expect("list")), ["u1"]);
    })
    .await
    .expect("within the limit");
}

/// Issue 26, item 11, in bytes: a quota of tasks alone let one owner hold its tasks' worth of
/// 1 MiB records. Owners' bytes and the store's are bounded as in memory, on every replica.
#[tokio::test]
async fn one_owner_cannot_fill_the_shared_store_with_bytes_either() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let limits = TaskLimits {
            max_record_bytes: 4096,
            max_bytes_per_owner: 3_000,
            max_bytes: 6_000,
            ..TaskLimits::default()
        };
        let here = RedisTaskStore::new(
            &Redis::connect(&server.url(), "b").await.expect("r"),
            limits,
        );
        let there = RedisTaskStore::new(
            &Redis::connect(&server.url(), "b").await.expect("r"),
            limits,
        );
        let sized = |id: &str, owner: Option<&str>, bytes: usize| {
            let mut task = record(id, owner);
            task.status_message = Some("x".repeat(bytes));
            task
        };
        let whose = |outcome: Result<(), TaskStoreError>| match outcome {
            Err(TaskStoreError::BytesFull { whose, limit, .. }) => Some((whose, limit)),
            Ok(()) => None,
            Err(other) => panic!("{other:?}"),
        };
        here.insert(sized("m1", Some("mallory"), 2_000))
            .await
            .expect("m1");
        assert_eq!(
            whose(there.insert(sized("m2", Some("mallory"), 2_000)).await),
            Some(("your", 3_000)),
            "the other replica counts the same bytes"
        );
        // Growing past the quota is refused and the record stays; shrinking gives bytes back.
        assert_eq!(
            whose(
                there
                    .update(sized("m1", Some("mallory"), 3_500))
                    .await
                    .map(|_| ())
            ),
            Some(("your", 3_000))
        );
        let kept = here.get("m1").await.expect("get").expect("kept");
        assert_eq!(kept.status_message.map(|m| m.len()), Some(2_000));
        assert!(
            here.update(sized("m1", Some("mallory"), 100))
                .await
                .expect("shrunk")
        );
        there
            .insert(sized("m2", Some("mallory"), 2_000))
            .await
            .expect("room again");
        here.insert(sized("a1", Some("alice"), 2_000))
            .await
            .expect("alice has her own");
        assert_eq!(
            whose(there.insert(sized("u1", None, 2_000)).await),
            Some(("the store's", 6_000))
        );
        here.insert(sized("u2", None, 200))
            .await
            .expect("within the store's");
    })
    .await
    .expect("within the limit");
}

/// A TCP proxy to Redis whose connections open before [`Freezer::freeze`] stop carrying bytes
/// (kept open, silent: a frozen path), while later ones pass.
struct Freezer {
    url: String,
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl Freezer {
    async fn start(redis_url: &str) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        let target = redis_url
            .trim_start_matches("redis://")
            .trim_end_matches('/')
            .to_owned();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("redis://{}/", listener.local_addr().expect("address"));
        let generation = Arc::new(AtomicU64::new(0));
        let current = generation.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                    continue;
                };
                let born = current.load(Ordering::SeqCst);
                let current = current.clone();
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
                    let (mut cr, mut cw) = client.into_split();
                    let (mut sr, mut sw) = server.into_split();
                    let live = move || current.load(Ordering::SeqCst) == born;
                    let live2 = live.clone();
                    let up = async move {
                        let mut buffer = [0u8; 8192];
                        while let Ok(n) = cr.read(&mut buffer).await {
                            if n == 0 || !live() || sw.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        std::future::pending::<()>().await;
                    };
                    let down = async move {
                        let mut buffer = [0u8; 8192];
                        while let Ok(n) = sr.read(&mut buffer).await {
                            if n == 0 || !live2() || cw.write_all(&buffer[..n]).await.is_err() {
                                break;
                            }
                        }
                        std::future::pending::<()>().await;
                    };
                    // Frozen, the halves stay open and silent until the test ends.
                    tokio::join!(up, down);
                });
            }
        });
        Self { url, generation }
    }

    fn freeze(&self) {
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Issue 26, item 8: a subscription whose path to Redis froze (a proxy stopped carrying its
/// bytes, the connection still open) was never noticed: the replica heard nothing again. Now
/// its pings go unanswered, it subscribes again on a new connection, and events reach it.
#[tokio::test]
async fn a_subscription_whose_path_froze_is_made_again() {
    let Some(server) = RedisServer::start() else {
        return;
    };
    tokio::time::timeout(LIMIT, async {
        let proxy = Freezer::start(&server.url()).await;
        let behind = Redis::connect(&proxy.url, "frozen")
            .await
            .expect("through the proxy");
        let direct = Redis::connect(&server.url(), "frozen")
            .await
            .expect("direct");
        let (bus_behind, bus_direct) = (
            behind.bus().await.expect("bus"),
            direct.bus().await.expect("bus"),
        );
        let (tx, mut heard) = mpsc::unbounded_channel();
        let _subscription = bus_behind.subscribe(Arc::new(move |event: &BusEvent| {
            let _ = tx.send(event.clone());
        }));
        bus_direct.publish(BusEvent::ToolsListChanged);
        assert_eq!(heard.recv().await, Some(BusEvent::ToolsListChanged));

        proxy.freeze();
        // Events published while the subscription is down are lost (as documented): publish
        // again on a cadence until one arrives through the new subscription.
        let marker = BusEvent::ResourceUpdated {
            uri: "test://after-the-freeze".into(),
        };
        let mut every = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                _ = every.tick() => bus_direct.publish(marker.clone()),
                event = heard.recv() => {
                    if event.as_ref() == Some(&marker) {
                        break;
                    }
                }
            }
        }
    })
    .await
    .expect("the frozen subscription was noticed and made again within the limit");
}
