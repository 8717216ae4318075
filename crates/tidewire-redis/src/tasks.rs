//! [`RedisTaskStore`]: task records in Redis, for every replica to read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use redis::Script;
use tidewire_server::tasks::{TaskLimits, TaskRecord, TaskStore, TaskStoreError};

use crate::Redis;

/// Keeps a new task unless the store is full, or its owner holds its quota. KEYS: the record,
/// the index (by creation), the owner's index (or the index of tasks without one), the expiry
/// index (by expiry). ARGV: the record's JSON, whether it has ended, its ttl in ms, its
/// creation in ms, its id, the most tasks, the records' key prefix, the owner's quota (0:
/// none), now in ms, its expiry in ms. Returns 1 (kept), 0 (full), -1 (the owner's quota).
///
/// Room is made from the expiry index (the expired ids, found by score), never by reading
/// every record; an owner's index is checked against what still exists only when that owner
/// is at its quota (a scan bounded by the quota).
const INSERT: &str = r"
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[9])
  for _, id in ipairs(gone) do redis.call('ZREM', KEYS[2], id) end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[9]) end
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return 0 end
end
local quota = tonumber(ARGV[8])
if quota > 0 and redis.call('ZCARD', KEYS[3]) >= quota then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    if redis.call('EXISTS', ARGV[7] .. id) == 0 then redis.call('ZREM', KEYS[3], id) end
  end
  if redis.call('ZCARD', KEYS[3]) >= quota then return -1 end
end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'ended', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[5])
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

/// Task records in Redis, bounded as the in-memory store is ([`TaskLimits`]: tasks, tasks per
/// owner, bytes per record, the longest ttl). Each record is a hash that expires with the
/// task's ttl; an index (a sorted set by creation) counts the tasks, one per owner (and one for
/// tasks without an owner) orders `tasks/list` and bounds its cost by what the caller may see,
/// and one by expiry makes room without reading records. Inserting and
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

    /// The index of `owner`'s tasks, or of the tasks without an owner. An owner's name is
    /// hex-encoded: whatever it holds, it cannot reach another key.
    fn owner_index(&self, owner: Option<&str>) -> String {
        match owner {
            Some(owner) => {
                let hex: String = owner.bytes().map(|b| format!("{b:02x}")).collect();
                self.redis.key(&format!("tasks:owner:{hex}"))
            }
            None => self.redis.key("tasks:unowned"),
        }
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
            let now = millis(SystemTime::now());
            let quota = if record.owner.is_some() {
                self.limits.max_tasks_per_owner.max(1)
            } else {
                0
            };
            let kept: i64 = self
                .insert
                .key(self.record_key(&record.id))
                .key(self.redis.key("tasks"))
                .key(self.owner_index(record.owner.as_deref()))
                .key(self.redis.key("tasks:expiry"))
                .arg(json)
                .arg(ended(&record))
                .arg(ttl_ms)
                .arg(millis(record.created_at))
                .arg(&record.id)
                .arg(self.limits.max_tasks)
                .arg(self.redis.key("task:"))
                .arg(quota)
                .arg(now)
                .arg(now.saturating_add(ttl_ms))
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            match kept {
                0 => Err(TaskStoreError::Full(self.limits.max_tasks)),
                -1 => Err(TaskStoreError::OwnerFull(self.limits.max_tasks_per_owner)),
                _ => Ok(()),
            }
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
            // Only what the caller may see: its own tasks and those without an owner, merged in
            // creation order. Never the whole index.
            let mut indexes = vec![self.owner_index(None)];
            if owner.is_some() {
                indexes.push(self.owner_index(owner));
            }
            let mut scored: Vec<(String, f64)> = Vec::new();
            for index in &indexes {
                let part: Vec<(String, f64)> = redis::cmd("ZRANGE")
                    .arg(index)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query_async(&mut connection)
                    .await
                    .map_err(|e| unavailable(&e))?;
                scored.extend(part);
            }
            scored.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
            let ids: Vec<String> = scored.into_iter().map(|(id, _)| id).collect();
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
                // Expired records leave the indexes as they are met.
                for index in indexes.iter().chain([&self.redis.key("tasks")]) {
                    let _: Result<i64, _> = redis::cmd("ZREM")
                        .arg(index)
                        .arg(&gone)
                        .query_async(&mut connection)
                        .await;
                }
            }
            found.truncate(limit);
            Ok(found)
        })
    }
}
