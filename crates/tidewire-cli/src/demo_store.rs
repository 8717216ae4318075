//! `RedisDemoStore`: the demo's peer-tool state (the counter, the latest crawl) in Redis, so
//! every replica of `tidewire serve --redis` answers `crawl_status` and reads of the counter
//! alike. Two keys, whatever the traffic: `app:counter` (a number) and `app:crawl` (a hash of
//! the latest crawl's number and status, which a stale crawl's late write never replaces).

use tidewire_demo::{CrawlStatus, DemoStore, StoreError, StoreFuture};
use tidewire_redis::Redis;
use tidewire_redis::redis::{self, Script};

/// Starts a new crawl record: its number (one more than the last), and its status.
const START: &str = r"
local crawl = redis.call('HINCRBY', KEYS[1], 'crawl', 1)
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return crawl
";

/// Replaces the status when the record is still crawl ARGV[1]'s.
const RECORD: &str = r"
if redis.call('HGET', KEYS[1], 'crawl') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'status', ARGV[2])
  return 1
end
return 0
";

/// The demo's state in Redis, in the demo server's namespace.
#[derive(Debug)]
pub(crate) struct RedisDemoStore {
    redis: Redis,
    start: Script,
    record: Script,
}

impl RedisDemoStore {
    pub(crate) fn new(redis: &Redis) -> Self {
        Self {
            redis: redis.clone(),
            start: Script::new(START),
            record: Script::new(RECORD),
        }
    }

    fn counter_key(&self) -> String {
        self.redis.key("app:counter")
    }

    fn crawl_key(&self) -> String {
        self.redis.key("app:crawl")
    }
}

fn unavailable(error: &redis::RedisError) -> StoreError {
    StoreError::new(format!("Redis: {error}"))
}

fn encode(status: &CrawlStatus) -> Result<String, StoreError> {
    serde_json::to_string(status).map_err(|e| StoreError::new(format!("a crawl status: {e}")))
}

impl DemoStore for RedisDemoStore {
    fn bump(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut connection = self.redis.connection();
            redis::cmd("INCR")
                .arg(self.counter_key())
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))
        })
    }

    fn counter(&self) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let mut connection = self.redis.connection();
            let value: Option<String> = redis::cmd("GET")
                .arg(self.counter_key())
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            value.map_or(Ok(0), |text| {
                text.parse().map_err(|_| {
                    StoreError::new(format!("{} does not hold a count", self.counter_key()))
                })
            })
        })
    }

    fn start_crawl(&self, status: CrawlStatus) -> StoreFuture<'_, u64> {
        Box::pin(async move {
            let json = encode(&status)?;
            let mut connection = self.redis.connection();
            self.start
                .key(self.crawl_key())
                .arg(json)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))
        })
    }

    fn record_crawl(&self, crawl: u64, status: CrawlStatus) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            let json = encode(&status)?;
            let mut connection = self.redis.connection();
            let _replaced: i64 = self
                .record
                .key(self.crawl_key())
                .arg(crawl)
                .arg(json)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            Ok(())
        })
    }

    fn latest_crawl(&self) -> StoreFuture<'_, Option<CrawlStatus>> {
        Box::pin(async move {
            let mut connection = self.redis.connection();
            let json: Option<String> = redis::cmd("HGET")
                .arg(self.crawl_key())
                .arg("status")
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            json.map(|json| {
                serde_json::from_str(&json).map_err(|e| {
                    StoreError::new(format!("{} holds no crawl status: {e}", self.crawl_key()))
                })
            })
            .transpose()
        })
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)]
mod tests {
    use super::*;
    use tidewire_tests::external::RedisServer;

    #[tokio::test]
    async fn replicas_share_the_counter_and_a_stale_crawl_never_replaces_the_latest() {
        let Some(server) = RedisServer::start() else {
            return;
        };
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let url = server.url();
            let (a, b) = (
                RedisDemoStore::new(&Redis::connect(&url, "demo-store").await.expect("Redis")),
                RedisDemoStore::new(&Redis::connect(&url, "demo-store").await.expect("Redis")),
            );
            assert_eq!(b.counter().await, Ok(0));
            assert_eq!(a.bump().await, Ok(1));
            assert_eq!(b.bump().await, Ok(2));
            assert_eq!(a.counter().await, Ok(2));

            assert_eq!(b.latest_crawl().await, Ok(None));
            let first = a.start_crawl(CrawlStatus::default()).await.expect("start");
            let newer = CrawlStatus {
                total: 3,
                ..CrawlStatus::default()
            };
            let second = b.start_crawl(newer.clone()).await.expect("start");
            assert_ne!(first, second);
            // The first crawl's late end leaves the second's record alone.
            let stale = CrawlStatus {
                finished: true,
                cancelled: true,
                ..CrawlStatus::default()
            };
            a.record_crawl(first, stale).await.expect("record");
            assert_eq!(a.latest_crawl().await, Ok(Some(newer)));
            let done = CrawlStatus {
                total: 3,
                completed: 3,
                finished: true,
                ..CrawlStatus::default()
            };
            b.record_crawl(second, done.clone()).await.expect("record");
            assert_eq!(a.latest_crawl().await, Ok(Some(done)));

            // What Redis holds in another form is an error naming the key, not a panic.
            let mut connection = a.redis.connection();
            let () = redis::cmd("SET")
                .arg(a.counter_key())
                .arg("not a number")
                .query_async(&mut connection)
                .await
                .expect("SET");
            let error = b.counter().await.expect_err("not a count");
            assert!(error.to_string().contains("app:counter"), "{error}");
            let () = redis::cmd("HSET")
                .arg(a.crawl_key())
                .arg("status")
                .arg("{")
                .query_async(&mut connection)
                .await
                .map(|_: i64| ())
                .expect("HSET");
            let error = b.latest_crawl().await.expect_err("not a status");
            assert!(error.to_string().contains("app:crawl"), "{error}");
        })
        .await
        .expect("within the limit");
    }
}
