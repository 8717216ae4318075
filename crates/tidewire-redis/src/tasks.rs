//! [`RedisTaskStore`]: task records in Redis, for every replica to read.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use redis::Script;
use tidewire_server::tasks::{TaskLimits, TaskRecord, TaskStore, TaskStoreError};

use crate::Redis;

/// Keeps a new task unless the store is full, or its owner holds its quota, in tasks or bytes.
/// KEYS: the record, the index (by creation), the owner's index (or the index of tasks without
/// one), the expiry index (by expiry), the sizes of every record (a hash), the bytes they hold
/// (a counter), the sizes of the owner's records (a hash). ARGV: the record's JSON, whether it
/// has ended, its ttl in ms, its creation in ms, its id, the most tasks, the records' key
/// prefix, the owner's quota in tasks (0: none), now in ms, its expiry in ms, the record's
/// size, the most bytes, the owner's quota in bytes (0: none), the longest ttl in ms. Returns
/// `{1}` (kept), `{0}` (full), `{-1}` (the owner's quota of tasks), `{-2, used}` (the store's
/// bytes), `{-3, used}` (the owner's bytes).
///
/// Room is made from the expiry index (the expired ids, found by score, their sizes given
/// back), never by reading every record. An owner's bytes are summed from its sizes hash on
/// each of its inserts (a scan bounded by its task quota), and its index and sizes are checked
/// against what still exists only when it is at a quota.
const INSERT: &str = r"
local size = tonumber(ARGV[11])
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6])
   or tonumber(redis.call('GET', KEYS[6]) or '0') + size > tonumber(ARGV[12]) then
  local gone = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[9])
  for _, id in ipairs(gone) do
    redis.call('ZREM', KEYS[2], id)
    local freed = redis.call('HGET', KEYS[5], id)
    if freed then
      redis.call('DECRBY', KEYS[6], freed)
      redis.call('HDEL', KEYS[5], id)
    end
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[9]) end
  if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[6]) then return {0} end
  local used = tonumber(redis.call('GET', KEYS[6]) or '0')
  if used + size > tonumber(ARGV[12]) then return {-2, used} end
end
local quota = tonumber(ARGV[8])
local bytes_quota = tonumber(ARGV[13])
local function owner_bytes()
  local used = 0
  for _, held in ipairs(redis.call('HVALS', KEYS[7])) do used = used + tonumber(held) end
  return used
end
if quota > 0 and (redis.call('ZCARD', KEYS[3]) >= quota or owner_bytes() + size > bytes_quota) then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
    if redis.call('EXISTS', ARGV[7] .. id) == 0 then
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[7], id)
    end
  end
  if redis.call('ZCARD', KEYS[3]) >= quota then return {-1} end
  local used = owner_bytes()
  if used + size > bytes_quota then return {-3, used} end
end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'ended', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[10], ARGV[5])
redis.call('HSET', KEYS[5], ARGV[5], size)
redis.call('INCRBY', KEYS[6], size)
if quota > 0 then
  redis.call('HSET', KEYS[7], ARGV[5], size)
  redis.call('PEXPIRE', KEYS[7], ARGV[14])
end
return {1}
";

/// Replaces a record that is still kept and has not ended, unless it grows past the store's
/// or its owner's bytes. KEYS: the record, the sizes of every record, the bytes they hold, the
/// sizes of the owner's records. ARGV: its JSON, whether it has ended, its id, its size, the
/// most bytes, the owner's quota in bytes (0: no owner). Returns `{1}` (replaced), `{0}` (not
/// kept, or ended), `{-2, used}`, `{-3, used}` (as [`INSERT`]; `used` without this record).
const UPDATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return {0} end
if redis.call('HGET', KEYS[1], 'ended') == '1' then return {0} end
local size = tonumber(ARGV[4])
local before = tonumber(redis.call('HGET', KEYS[2], ARGV[3]) or '0')
if size > before then
  local used = tonumber(redis.call('GET', KEYS[3]) or '0') - before
  if used + size > tonumber(ARGV[5]) then return {-2, used} end
  local bytes_quota = tonumber(ARGV[6])
  if bytes_quota > 0 then
    local mine = 0
    for _, held in ipairs(redis.call('HVALS', KEYS[4])) do mine = mine + tonumber(held) end
    mine = mine - tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '0')
    if mine + size > bytes_quota then return {-3, mine} end
  end
end
redis.call('HSET', KEYS[1], 'record', ARGV[1], 'ended', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[3], size)
redis.call('INCRBY', KEYS[3], size - before)
if tonumber(ARGV[6]) > 0 then redis.call('HSET', KEYS[4], ARGV[3], size) end
return {1}
";

/// Records read per round trip while listing.
const LIST_CHUNK: usize = 100;

/// Task records in Redis, bounded as the in-memory store is ([`TaskLimits`]: tasks, tasks per
/// owner, bytes per record, per owner and in all, the longest ttl; a record's bytes are its
/// stored JSON). Each record is a hash that expires with the
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

    /// The index of `owner`'s tasks, or of the tasks without an owner.
    fn owner_index(&self, owner: Option<&str>) -> String {
        self.owner_key("tasks:owner", "tasks:unowned", owner)
    }

    /// The sizes of `owner`'s records, or of those without an owner.
    fn owner_sizes(&self, owner: Option<&str>) -> String {
        self.owner_key("tasks:owner-bytes", "tasks:unowned-bytes", owner)
    }

    /// `prefix:HEX` for `owner`, `unowned` without one. An owner's name is hex-encoded:
    /// whatever it holds, it cannot reach another key.
    fn owner_key(&self, prefix: &str, unowned: &str, owner: Option<&str>) -> String {
        match owner {
            Some(owner) => {
                let hex: String = owner.bytes().map(|b| format!("{b:02x}")).collect();
                self.redis.key(&format!("{prefix}:{hex}"))
            }
            None => self.redis.key(unowned),
        }
    }

    /// What a script's refusal of `size` bytes means.
    fn bytes_full(&self, answer: &[i64], size: usize) -> TaskStoreError {
        let used = answer
            .get(1)
            .map_or(0, |u| usize::try_from(*u).unwrap_or(0));
        let (whose, limit) = if answer.first() == Some(&-3) {
            ("your", self.limits.max_bytes_per_owner)
        } else {
            ("the store's", self.limits.max_bytes)
        };
        TaskStoreError::BytesFull {
            whose,
            used,
            size,
            limit,
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
            let size = json.len();
            let bytes_quota = if record.owner.is_some() {
                self.limits.max_bytes_per_owner
            } else {
                0
            };
            let longest = u64::try_from(most.as_millis()).unwrap_or(u64::MAX).max(1);
            let kept: Vec<i64> = self
                .insert
                .key(self.record_key(&record.id))
                .key(self.redis.key("tasks"))
                .key(self.owner_index(record.owner.as_deref()))
                .key(self.redis.key("tasks:expiry"))
                .key(self.redis.key("tasks:sizes"))
                .key(self.redis.key("tasks:bytes"))
                .key(self.owner_sizes(record.owner.as_deref()))
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
                .arg(size)
                .arg(self.limits.max_bytes)
                .arg(bytes_quota)
                .arg(longest)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            match kept.first() {
                Some(1) => Ok(()),
                Some(0) => Err(TaskStoreError::Full(self.limits.max_tasks)),
                Some(-1) => Err(TaskStoreError::OwnerFull(self.limits.max_tasks_per_owner)),
                Some(-2 | -3) => Err(self.bytes_full(&kept, size)),
                _ => Err(TaskStoreError::Unavailable(format!(
                    "redis: the insert script answered {kept:?}"
                ))),
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
            let size = json.len();
            let bytes_quota = if record.owner.is_some() {
                self.limits.max_bytes_per_owner
            } else {
                0
            };
            let mut connection = self.redis.connection();
            let replaced: Vec<i64> = self
                .update
                .key(self.record_key(&record.id))
                .key(self.redis.key("tasks:sizes"))
                .key(self.redis.key("tasks:bytes"))
                .key(self.owner_sizes(record.owner.as_deref()))
                .arg(json)
                .arg(ended(&record))
                .arg(&record.id)
                .arg(size)
                .arg(self.limits.max_bytes)
                .arg(bytes_quota)
                .invoke_async(&mut connection)
                .await
                .map_err(|e| unavailable(&e))?;
            match replaced.first() {
                Some(1) => Ok(true),
                Some(0) => Ok(false),
                Some(-2 | -3) => Err(self.bytes_full(&replaced, size)),
                _ => Err(TaskStoreError::Unavailable(format!(
                    "redis: the update script answered {replaced:?}"
                ))),
            }
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
