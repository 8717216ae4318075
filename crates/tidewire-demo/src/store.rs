//! [`DemoStore`]: where the peer tools keep what outlives a call (the counter, the record of
//! the latest crawl), so several replicas of the demo can share it.

use std::pin::Pin;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde::{Deserialize, Serialize};

/// A future a [`DemoStore`] returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Why the demo's store could not answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(String);

impl StoreError {
    /// An error saying `what` went wrong.
    pub fn new(what: impl Into<String>) -> Self {
        Self(what.into())
    }
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the demo's shared state: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

/// Where the demo server's peer tools keep their state: the `test://counter` value that `bump`
/// increments, and the status of the most recent `crawl` that `crawl_status` reports.
///
/// The default, [`MemoryDemoStore`], is one process's memory. Replicas behind a load balancer
/// share one store (`tidewire serve --redis` keeps it in Redis), so a `crawl_status` or a read of
/// the counter answers the same whichever replica the request lands on.
pub trait DemoStore: Send + Sync + std::fmt::Debug + 'static {
    /// Adds one to the counter; the new value.
    fn bump(&self) -> StoreFuture<'_, u64>;

    /// The counter's value (0 before any bump).
    fn counter(&self) -> StoreFuture<'_, u64>;

    /// Starts the record of a new crawl with `status`, which becomes the one
    /// [`latest_crawl`](Self::latest_crawl) reports; its number.
    fn start_crawl(&self, status: CrawlStatus) -> StoreFuture<'_, u64>;

    /// Replaces the status of crawl `crawl` with `status`, unless a newer crawl has started
    /// since (then nothing changes).
    fn record_crawl(&self, crawl: u64, status: CrawlStatus) -> StoreFuture<'_, ()>;

    /// The status of the most recent crawl; `None` before any.
    fn latest_crawl(&self) -> StoreFuture<'_, Option<CrawlStatus>>;
}

/// A [`DemoStore`] in this process's memory: the default.
#[derive(Debug, Default)]
pub struct MemoryDemoStore {
    inner: Mutex<Book>,
}

/// What a [`MemoryDemoStore`] holds.
#[derive(Debug, Default)]
struct Book {
    counter: u64,
    latest: u64,
    status: Option<CrawlStatus>,
}

impl MemoryDemoStore {
    /// An empty store: the counter at 0, no crawl yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl DemoStore for MemoryDemoStore {
    fn bump(&self) -> StoreFuture<'_, u64> {
        let mut book = self.book();
        book.counter = book.counter.saturating_add(1);
        let value = book.counter;
        Box::pin(std::future::ready(Ok(value)))
    }

    fn counter(&self) -> StoreFuture<'_, u64> {
        let value = self.book().counter;
        Box::pin(std::future::ready(Ok(value)))
    }

    fn start_crawl(&self, status: CrawlStatus) -> StoreFuture<'_, u64> {
        let mut book = self.book();
        book.latest += 1;
        book.status = Some(status);
        let crawl = book.latest;
        Box::pin(std::future::ready(Ok(crawl)))
    }

    fn record_crawl(&self, crawl: u64, status: CrawlStatus) -> StoreFuture<'_, ()> {
        let mut book = self.book();
        if book.latest == crawl {
            book.status = Some(status);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn latest_crawl(&self) -> StoreFuture<'_, Option<CrawlStatus>> {
        let status = self.book().status.clone();
        Box::pin(std::future::ready(Ok(status)))
    }
}

/// What `crawl_status` reports about the most recent `crawl`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrawlStatus {
    /// URLs done (each one waited out in full).
    pub completed: u64,
    /// True when the crawl stopped before doing every URL (cancelled, or its connection ended).
    pub cancelled: bool,
    /// True once the crawl has stopped, whether done or cancelled.
    pub finished: bool,
    /// How many URLs the crawl was given.
    pub total: u64,
    /// When the crawl stopped, in milliseconds since the Unix epoch (wall clock); `null` while
    /// it runs and before any crawl.
    pub stopped_at_ms: Option<u64>,
    /// How the crawl stopped; `null` while it runs and before any crawl.
    #[serde(default)]
    pub stopped: Option<CrawlStop>,
}

/// How a crawl stopped ([`CrawlStatus::stopped`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CrawlStop {
    /// It did every URL.
    Completed,
    /// It saw the cancellation between two URLs and returned (the cooperative way: the URL in
    /// flight was finished first).
    Cooperative,
    /// Its task was dropped mid-URL (a cancellation under `CancelPolicy::Abort`, or a runtime
    /// shutting down): only its drop guard ran.
    Dropped,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_newer_crawl_owns_the_record_and_the_counter_counts() {
        tokio::time::timeout(std::time::Duration::from_secs(300), async move {
            let store = MemoryDemoStore::new();
            assert_eq!(store.latest_crawl().await, Ok(None));
            let first = store.start_crawl(CrawlStatus::default()).await.unwrap();
            let second = store
                .start_crawl(CrawlStatus {
                    total: 2,
                    ..CrawlStatus::default()
                })
                .await
                .unwrap();
            assert_ne!(first, second);
            // The first crawl stopping late does not overwrite the second's record.
            let stale = CrawlStatus {
                finished: true,
                ..CrawlStatus::default()
            };
            store.record_crawl(first, stale).await.unwrap();
            assert_eq!(store.latest_crawl().await.unwrap().unwrap().total, 2);
            assert!(!store.latest_crawl().await.unwrap().unwrap().finished);

            assert_eq!(store.counter().await, Ok(0));
            assert_eq!(store.bump().await, Ok(1));
            assert_eq!(store.bump().await, Ok(2));
            assert_eq!(store.counter().await, Ok(2));
        })
        .await
        .expect("the test hung: it took longer than 300 s");
    }
}
