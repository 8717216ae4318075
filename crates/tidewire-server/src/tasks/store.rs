//! Where task records live: the [`TaskStore`] trait, and the bounded in-memory store every
//! server has by default ([`MemoryTaskStore`]).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures::future::{BoxFuture, FutureExt};

use super::record::TaskRecord;

/// Why a store refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TaskStoreError {
    /// The store holds its most tasks that have not expired.
    #[error("the task store holds its most tasks ({0}); retry when some have ended")]
    Full(usize),
    /// The task's owner holds its most tasks that have not expired (one principal cannot fill
    /// the store for everyone).
    #[error("you hold your most tasks at once ({0}); retry when some of yours have ended")]
    OwnerFull(usize),
    /// The task's owner (or, for the store's limit, everyone) holds its most bytes of records
    /// that have not expired: a new task is refused, a result that would pass it fails its
    /// task, saying so.
    #[error(
        "{whose} tasks hold {used} bytes; a record of {size} more would pass the limit of {limit}"
    )]
    BytesFull {
        /// `"your"` for an owner's quota, `"the store's"` for the store's.
        whose: &'static str,
        /// The bytes held now (the record being replaced not counted).
        used: usize,
        /// The record's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// A task's record (its result, questions and messages) is over the store's limit.
    #[error("the task's record is {size} bytes; the store keeps at most {limit} per task")]
    TooLarge {
        /// The record's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// The store itself failed (a shared store that cannot be reached, say).
    #[error("the task store failed: {0}")]
    Unavailable(String),
}

/// Where task records live. The default is a [`MemoryTaskStore`]; a store shared by several
/// processes lets any of them answer `tasks/get` for a task another one runs (a task's
/// cancellation and answers still reach the process that runs it).
///
/// A store forgets a task once its ttl has run out, and never replaces a record that has ended.
pub trait TaskStore: Send + Sync + std::fmt::Debug + 'static {
    /// Keeps a new task.
    ///
    /// # Errors
    /// [`TaskStoreError::Full`] when there is no room; [`TaskStoreError::Unavailable`].
    fn insert(&self, record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>>;

    /// The task `id`; `None` when unknown or expired.
    ///
    /// # Errors
    /// [`TaskStoreError::Unavailable`].
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>>;

    /// Replaces the record of a task it keeps; a record that has ended, or a task it no longer
    /// keeps, is left as it is (and `Ok(false)` says so).
    ///
    /// # Errors
    /// [`TaskStoreError::TooLarge`] (the record stays as it was); [`TaskStoreError::Unavailable`].
    fn update(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>>;

    /// The tasks `owner` may see, oldest first, at most `limit` of them after the task
    /// `after` (the cursor of the 2025-11-25 `tasks/list`).
    ///
    /// # Errors
    /// [`TaskStoreError::Unavailable`].
    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>>;
}

/// The limits of a [`MemoryTaskStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskLimits {
    /// The most tasks kept at once (default 10,000); past it, starting a task is refused.
    pub max_tasks: usize,
    /// The most tasks one owner (an authenticated principal) keeps at once (default 1,000);
    /// past it, that owner's next task is refused, everyone else's still start. Tasks without
    /// an owner (no authentication) are bounded by `max_tasks` alone.
    pub max_tasks_per_owner: usize,
    /// The largest record, its result included, in bytes (default 1 MiB); a task whose result
    /// is larger fails, saying so.
    pub max_record_bytes: usize,
    /// The most bytes of records one owner keeps at once (default 64 MiB): past it, that
    /// owner's next task is refused and a result that would pass it fails its task; everyone
    /// else's still run.
    pub max_bytes_per_owner: usize,
    /// The most bytes of records kept at once, every owner's and those without one (default
    /// 256 MiB), with the same effect.
    pub max_bytes: usize,
    /// How long a task is kept after its creation (default 1 hour): what a task gets when
    /// nothing else says, and the most a client may ask for (2025-11-25's `params.task.ttl`).
    pub default_ttl: Duration,
}

impl Default for TaskLimits {
    fn default() -> Self {
        Self {
            max_tasks: 10_000,
            max_tasks_per_owner: 1_000,
            max_record_bytes: 1024 * 1024,
            max_bytes_per_owner: 64 * 1024 * 1024,
            max_bytes: 256 * 1024 * 1024,
            default_ttl: Duration::from_secs(3600),
        }
    }
}

/// The default store: this process's memory, bounded by [`TaskLimits`] in tasks and bytes, in
/// all and per owner. Expired tasks are swept as new ones come, when a limit is reached.
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    limits: TaskLimits,
    kept: Mutex<Kept>,
}

/// What one owner (or the tasks without one) holds.
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    tasks: usize,
    bytes: usize,
}

/// The records, each with its size, and what they hold by owner and in all: a quota is checked
/// in one lookup, never by counting records.
#[derive(Debug, Default)]
struct Kept {
    records: HashMap<String, (TaskRecord, usize)>,
    by_owner: HashMap<Option<String>, Usage>,
    bytes: usize,
}

impl Kept {
    fn usage(&self, owner: &Option<String>) -> Usage {
        self.by_owner.get(owner).copied().unwrap_or_default()
    }

    fn add(&mut self, record: TaskRecord, size: usize) {
        self.remove(&record.id);
        let usage = self.by_owner.entry(record.owner.clone()).or_default();
        usage.tasks += 1;
        usage.bytes += size;
        self.bytes += size;
        self.records.insert(record.id.clone(), (record, size));
    }

    fn remove(&mut self, id: &str) -> Option<TaskRecord> {
        let (record, size) = self.records.remove(id)?;
        self.bytes -= size;
        if let Some(usage) = self.by_owner.get_mut(&record.owner) {
            usage.tasks -= 1;
            usage.bytes -= size;
            if usage.tasks == 0 {
                self.by_owner.remove(&record.owner);
            }
        }
        Some(record)
    }

    /// Forgets every expired record.
    fn sweep(&mut self, now: SystemTime) {
        let expired: Vec<String> = self
            .records
            .iter()
            .filter(|(_, (task, _))| task.is_expired(now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
    }
}

impl MemoryTaskStore {
    /// An empty store with `limits`.
    pub fn new(limits: TaskLimits) -> Self {
        Self {
            limits,
            kept: Mutex::new(Kept::default()),
        }
    }

    /// Tasks kept now (expired ones not yet swept included).
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Whether it keeps no task.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of records kept now (expired ones not yet swept included).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The record's size, once it is within the size limit.
    fn check_size(&self, record: &TaskRecord) -> Result<usize, TaskStoreError> {
        let size = record.weight();
        if size > self.limits.max_record_bytes {
            return Err(TaskStoreError::TooLarge {
                size,
                limit: self.limits.max_record_bytes,
            });
        }
        Ok(size)
    }

    /// Whether `size` more bytes for `owner` (having given back `freed`) fit the store's and the
    /// owner's byte limits.
    fn check_bytes(
        &self,
        kept: &Kept,
        owner: &Option<String>,
        size: usize,
        freed: usize,
    ) -> Result<(), TaskStoreError> {
        let full = |whose, used: usize, limit| {
            let used = used - freed;
            if used + size > limit {
                Err(TaskStoreError::BytesFull {
                    whose,
                    used,
                    size,
                    limit,
                })
            } else {
                Ok(())
            }
        };
        full("the store's", kept.bytes, self.limits.max_bytes)?;
        if owner.is_some() {
            full(
                "your",
                kept.usage(owner).bytes,
                self.limits.max_bytes_per_owner,
            )?;
        }
        Ok(())
    }

    /// Whether a new record of `size` for `owner` fits every limit.
    fn check_room(
        &self,
        kept: &Kept,
        owner: &Option<String>,
        size: usize,
    ) -> Result<(), TaskStoreError> {
        if kept.records.len() >= self.limits.max_tasks {
            return Err(TaskStoreError::Full(self.limits.max_tasks));
        }
        if owner.is_some() && kept.usage(owner).tasks >= self.limits.max_tasks_per_owner {
            return Err(TaskStoreError::OwnerFull(self.limits.max_tasks_per_owner));
        }
        self.check_bytes(kept, owner, size, 0)
    }
}

impl TaskStore for MemoryTaskStore {
    fn insert(&self, mut record: TaskRecord) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let outcome = (|| {
            let size = self.check_size(&record)?;
            // A client may ask for a shorter life, never a longer one: the store's room is
            // bounded in time as well as in tasks.
            let most = self.limits.default_ttl;
            record.ttl = Some(record.ttl.map_or(most, |asked| asked.min(most)));
            let mut kept = self.lock();
            if self.check_room(&kept, &record.owner, size).is_err() {
                // Expired records make room before anyone is refused.
                kept.sweep(SystemTime::now());
                self.check_room(&kept, &record.owner, size)?;
            }
            kept.add(record, size);
            Ok(())
        })();
        futures::future::ready(outcome).boxed()
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<TaskRecord>, TaskStoreError>> {
        let now = SystemTime::now();
        let mut kept = self.lock();
        let found = match kept.records.get(id) {
            Some((task, _)) if task.is_expired(now) => {
                kept.remove(id);
                None
            }
            other => other.map(|(task, _)| task.clone()),
        };
        futures::future::ready(Ok(found)).boxed()
    }

    fn update(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        let outcome = self.check_size(&record).and_then(|size| {
            let mut kept = self.lock();
            let freed = match kept.records.get(&record.id) {
                Some((task, _)) if task.is_terminal() => return Ok(false),
                Some((_, freed)) => *freed,
                None => return Ok(false),
            };
            // A record that grows must fit; one that shrinks (a failure replacing a result
            // that did not fit) always does.
            if size > freed {
                self.check_bytes(&kept, &record.owner, size, freed)?;
            }
            kept.add(record, size);
            Ok(true)
        });
        futures::future::ready(outcome).boxed()
    }

    fn list<'a>(
        &'a self,
        owner: Option<&'a str>,
        after: Option<&'a str>,
        limit: usize,
    ) -> BoxFuture<'a, Result<Vec<TaskRecord>, TaskStoreError>> {
        let now = SystemTime::now();
        let kept = self.lock();
        let mut visible: Vec<&TaskRecord> = kept
            .records
            .values()
            .map(|(task, _)| task)
            .filter(|t| !t.is_expired(now) && t.visible_to(owner))
            .collect();
        visible.sort_by(|a, b| a.created_at.cmp(&b.created_at).then(a.id.cmp(&b.id)));
        let start = after
            .and_then(|after| visible.iter().position(|t| t.id == after))
            .map_or(0, |i| i + 1);
        let page = visible
            .into_iter()
            .skip(start)
            .take(limit)
            .cloned()
            .collect();
        futures::future::ready(Ok(page)).boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> TaskRecord {
        TaskRecord::new(id.to_owned(), "tool".to_owned(), None, None)
    }

    #[tokio::test]
    async fn a_full_store_refuses_and_an_ended_record_never_changes() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryTaskStore::new(TaskLimits {
                max_tasks: 2,
                ..TaskLimits::default()
            });
            store.insert(record("a")).await.expect("a");
            store.insert(record("b")).await.expect("b");
            assert_eq!(
                store.insert(record("c")).await,
                Err(TaskStoreError::Full(2))
            );

            let mut done = store.get("a").await.expect("get").expect("kept");
            done.set_status(tidewire_core::schema::TaskStatus::Completed);
            assert_eq!(store.update(done.clone()).await, Ok(true));
            let mut again = done;
            again.status = tidewire_core::schema::TaskStatus::Working;
            assert_eq!(store.update(again).await, Ok(false));
            let kept = store.get("a").await.expect("get").expect("kept");
            assert_eq!(kept.status, tidewire_core::schema::TaskStatus::Completed);
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    /// Issue 26, item 11: one client filled the store (10,000 tasks in 8 s) and the next got
    /// -32001 for an hour. Each owner now has a quota of its own.
    #[tokio::test]
    async fn one_owner_cannot_fill_the_store_for_everyone() {
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let store = MemoryTaskStore::new(TaskLimits {
                max_tasks: 10,
                max_tasks_per_owner: 3,
                ..TaskLimits::default()
            });
            let owned = |id: &str, owner: &str| {
                TaskRecord::new(id.into(), "crawl".into(), None, Some(owner.into()))
            };
            for i in 0..3 {
                store
                    .insert(owned(&format!("m{i}"), "mallory"))
                    .await
                    .expect("room");
            }
            assert_eq!(
                store.insert(owned("m3", "mallory")).await,
                Err(TaskStoreError::OwnerFull(3))
            );
            store
                .insert(owned("a0", "alice"))
                .await
                .expect("alice still starts");
            store
                .insert(record("anonymous"))
                .await
                .expect("no owner, no quota");
        })
        .await
        .expect("in time");
    }

    /// Issue 26, item 11, in bytes: a quota of tasks alone let one owner hold its 1,000 tasks
    /// of up to 1 MiB each. Its bytes are bounded too, and so are the store's.
    #[tokio::test]
    async fn one_owner_cannot_fill_the_store_with_bytes_either() {
        tokio::time::timeout(std::time::Duration::from_secs(30), async {
            let store = MemoryTaskStore::new(TaskLimits {
                max_bytes_per_owner: 1_000,
                max_bytes: 2_500,
                ..TaskLimits::default()
            });
            // A record of `bytes` in all: its status message, less what an empty one weighs.
            let sized = |id: &str, owner: Option<&str>, bytes: usize| {
                let mut task =
                    TaskRecord::new(id.into(), "crawl".into(), None, owner.map(Into::into));
                let empty = task.weight();
                task.status_message = Some("x".repeat(bytes - empty));
                assert_eq!(task.weight(), bytes);
                task
            };
            let full = |whose, used, size, limit| {
                Err::<(), _>(TaskStoreError::BytesFull {
                    whose,
                    used,
                    size,
                    limit,
                })
            };
            let mallory = Some("mallory");
            store.insert(sized("m0", mallory, 600)).await.expect("room");
            assert_eq!(
                store.insert(sized("m1", mallory, 600)).await,
                full("your", 600, 600, 1_000)
            );
            // A result that would pass the quota is refused; the record stays as it was.
            assert_eq!(
                store.update(sized("m0", mallory, 1_200)).await,
                full("your", 0, 1_200, 1_000).map(|()| true)
            );
            assert_eq!(store.bytes(), 600);
            // Shrinking always fits, and gives the difference back.
            assert_eq!(store.update(sized("m0", mallory, 100)).await, Ok(true));
            store
                .insert(sized("m1", mallory, 800))
                .await
                .expect("room again");
            store
                .insert(sized("a0", Some("alice"), 900))
                .await
                .expect("alice has her own");
            assert_eq!(
                store.insert(sized("x", None, 900)).await,
                full("the store's", 1_800, 900, 2_500)
            );
            store
                .insert(sized("y", None, 700))
                .await
                .expect("within the store's");
            assert_eq!(store.bytes(), 2_500);
        })
        .await
        .expect("in time");
    }

    #[tokio::test]
    async fn expired_tasks_are_forgotten_and_their_room_is_given_back() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryTaskStore::new(TaskLimits {
                max_tasks: 1,
                ..TaskLimits::default()
            });
            let mut old = record("old");
            old.ttl = Some(Duration::from_millis(1));
            old.created_at = SystemTime::now() - Duration::from_secs(1);
            store.insert(old).await.expect("old");
            assert_eq!(store.get("old").await, Ok(None));
            store.insert(record("new")).await.expect("room again");
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn a_client_may_shorten_a_tasks_life_but_not_lengthen_it() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryTaskStore::new(TaskLimits {
                default_ttl: Duration::from_secs(60),
                ..TaskLimits::default()
            });
            let mut long = record("long");
            long.ttl = Some(Duration::from_secs(u64::MAX / 4));
            store.insert(long).await.expect("long");
            let mut short = record("short");
            short.ttl = Some(Duration::from_secs(5));
            store.insert(short).await.expect("short");
            assert_eq!(
                store_ttl(&store, "long").await,
                Some(Duration::from_secs(60))
            );
            assert_eq!(
                store_ttl(&store, "short").await,
                Some(Duration::from_secs(5))
            );
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    async fn store_ttl(store: &MemoryTaskStore, id: &str) -> Option<Duration> {
        store.get(id).await.expect("get").and_then(|r| r.ttl)
    }

    #[tokio::test]
    async fn a_record_over_the_byte_limit_is_refused() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryTaskStore::new(TaskLimits {
                max_record_bytes: 64,
                ..TaskLimits::default()
            });
            store.insert(record("t")).await.expect("small");
            let mut big = record("t");
            big.result = Some(tidewire_core::schema::CallToolResult::text("x".repeat(100)));
            assert!(matches!(
                store.update(big).await,
                Err(TaskStoreError::TooLarge { limit: 64, .. })
            ));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }

    #[tokio::test]
    async fn owners_see_only_their_tasks_in_pages() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryTaskStore::default();
            for (id, owner) in [
                ("1", Some("ann")),
                ("2", Some("bob")),
                ("3", Some("ann")),
                ("4", None),
            ] {
                let mut r = record(id);
                r.owner = owner.map(str::to_owned);
                store.insert(r).await.expect("insert");
            }
            let ann: Vec<String> = store
                .list(Some("ann"), None, 10)
                .await
                .expect("list")
                .into_iter()
                .map(|t| t.id)
                .collect();
            assert!(ann.contains(&"1".to_owned()) && ann.contains(&"3".to_owned()));
            assert!(!ann.contains(&"2".to_owned()));
            let first = store.list(Some("ann"), None, 1).await.expect("page");
            let next = store
                .list(Some("ann"), Some(&first[0].id), 10)
                .await
                .expect("page");
            assert!(next.iter().all(|t| t.id != first[0].id));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
