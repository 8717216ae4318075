//! [`RedisTaskStore`]: task records in Redis, for every replica to read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use redis::Script;
use tidewire_server::tasks::{TaskLimits, TaskRecord, TaskStore, TaskStoreError};

use crate::Redis;

/// Keeps a new task unless the store is full (after dropping the index entries of records
/// that have expired). KEYS: the record, the index. ARGV: the record's JSON, whether it has
/// ended, its ttl in ms, its creation in ms, its id, the most tasks, the records' key prefix.
const INSERT: &str = r"
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if redis.call('EXISTS', ARGV[7] .. id) == 0 then redis.call('ZREM', KEYS[2], id) end
  end
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return 0 end
end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'ended', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
return 1
";

/// Replaces a record that is still kept and has not ended. KEYS: the record. ARGV: its JSON,
/// whether it has ended.
const UPDATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'ended') == '1' then return 0 end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'ended', ARGV[2])
return 1
";

/// Records read per round trip while listing.
const LIST_CHUNK: usize = 100;

/// Task records in Redis, bounded as the in-memory store is ([`TaskLimits`]: tasks, bytes per
/// record, the longest ttl). Each record is a hash that expires with the task's ttl; an index
/// (a sorted set by creation) orders `tasks/list` and counts the tasks. Inserting and
/// replacing run as scripts inside Redis, so two replicas never both replace a record that
/// one of them has just ended.
#[derive(Debug, Clone)]
pub struct RedisTaskStore {
    redis: Redis,
    limits: TaskLimits,
    insert: Script,
    update: Script,
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn unavailable(error: &redis::RedisError) -> TaskStoreError {
    TaskStoreError::Unavailable(format!("redis: {error}"))
}

impl RedisTaskStore {
    /// A store on `redis`, bounded by `limits`.
    pub fn new(redis: &Redis, limits: TaskLimits) -> Self {
        Self {
            redis: redis.clone(),
            limits,
            insert: Script::new(INSERT),
            update: Script::new(UPDATE),
        }
    }

    fn record_key(&self, id: &str) -> String {
        self.redis.key(&format!("task:{id}"))
    }

    /// The record as stored, once it is within the size limit.
    fn encode(&self, record: &TaskRecord) -> Result<String, TaskStoreError> {
        let json = serde_json::to_string(record)
            .map_err(|e| TaskStoreError::Unavailable(format!("the record: {e}")))?;
        if json.len() > self.limits.max_record_bytes {
            return Err(TaskStoreError::TooLarge {
                size: json.len(),
                limit: self.limits.max_record_bytes,
            });
        }
        Ok(json)
    }

    fn decode(&self, id: &str, json: &str) -> Result<TaskRecord, TaskStoreError> {
        serde_json::from_str(json).map_err(|e| {
            TaskStoreError::Unavailable(format!("the record of task {id:?} in Redis: {e}"))
        })
    }
}

fn ended(record: &TaskRecord) -> &'static str {
    if record.is_terminal() { "1" } else { "0" }
}

impl TaskStore for RedisTaskStore {
    fn insert(&self, mut record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        Box::pin(async move {
            let most = self.limits.default_ttl;
            let ttl = record.ttl.map_or(most, |asked| asked.min(most));
            record.ttl = Some(ttl);
            let json = self.encode(&record)?;
            let ttl_ms =
                u64::try_from(ttl.max(Duration::from_millis(1)).as_millis()).unwrap_or(u64::MAX);
            let mut connection = self.redis.connection();
            let kept: i64 = self
                .insert
                .key(self.record_key(&record.id))
                .key(self.redis.key("tasks"))
                .arg(json)
                .arg(ended(&record))
                .arg(ttl_ms)
                .arg(millis(record.created_at))
                .arg(&record.id)
                .arg(self.limits.max_tasks)
                .arg(self.redis.key("task:"))
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            if kept == 0 {
                return Err(TaskStoreError::Full(self.limits.max_tasks));
            }
            Ok(())
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            let mut connection = self.redis.connection();
            let json: Option<String> = redis::cmd("HGET")
                .arg(self.record_key(id))
                .arg("record")
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            json.map(|json| self.decode(id, &json)).transpose()
        })
    }

    fn update(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        Box::pin(async move {
            let json = self.encode(&record)?;
            let mut connection = self.redis.connection();
            let replaced: i64 = self
                .update
                .key(self.record_key(&record.id))
                .arg(json)
                .arg(ended(&record))
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            Ok(replaced == 1)
        })
    }

    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>> {
        Box::pin(async move {
            let mut connection = self.redis.connection();
            let index = self.redis.key("tasks");
            let ids: Vec<String> = redis::cmd("ZRANGE")
                .arg(&index)
                .arg(0)
                .arg(-1)
                .query_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            let start = after
                .and_then(|after| ids.iter().position(|id| id == after))
                .map_or(0, |i| i + 1);
            let now = SystemTime::now();
            let mut found = Vec::new();
            let mut gone = Vec::new();
            for chunk in ids.get(start..).unwrap_or_default().chunks(LIST_CHUNK) {
                let mut pipe = redis::pipe();
                for id in chunk {
                    pipe.cmd("HGET").arg(self.record_key(id)).arg("record");
                }
                let records: Vec<Option<String>> = pipe
                    .query_async(&mut connection)
                    .await
                    .map_err(|e| unavailable(&e))?;
                for (id, json) in chunk.iter().zip(records) {
                    let Some(json) = json else {
                        gone.push(id.clone());
                        continue;
                    };
                    let record = self.decode(id, &json)?;
                    if !record.is_expired(now) && record.visible_to(owner) {
                        found.push(record);
                    }
                }
                if found.len() >= limit {
                    break;
                }
            }
            if !gone.is_empty() {
                // Expired records leave the index as they are met.
                let _: Result<i64, _> = redis::cmd("ZREM")
                    .arg(&index)
                    .arg(&gone)
                    .query_async(&mut connection)
                    .await;
            }
            found.truncate(limit);
            Ok(found)
        })
    }
}
