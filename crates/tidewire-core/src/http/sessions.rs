//! [`SessionTable`]: the bounded table of sessions an HTTP server transport keeps (Streamable
//! HTTP, HTTP+SSE), with its idle reaper and its session ids.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError, Weak};
use std::time::Duration;

use crate::random_id;

/// The header that names a session over HTTP: `Mcp-Session-Id`. Streamable HTTP carries it
/// both ways; the legacy HTTP+SSE server puts it on its stream's response too (for a layer in
/// front, which routes by it).
pub const SESSION_ID_HEADER: http::HeaderName = http::HeaderName::from_static("mcp-session-id");

/// A session as the table sees it.
pub trait TableEntry: Send + Sync + 'static {
    /// How long the session has been idle, or `None` while it is busy (a request running, a
    /// stream open): a busy session never expires.
    fn idle_for(&self) -> Option<Duration>;
    /// Ends the session: its streams close, its engine stops.
    fn end(&self);
    /// Housekeeping done at every sweep of the reaper (for example dropping finished streams
    /// past their grace). Nothing by default.
    fn sweep(&self) {}
    /// Who opened the session, when an authentication layer said; only requests acting for
    /// the same principal may use it ([`SessionTable::get_for`]). None by default.
    fn owner(&self) -> Option<&crate::transport::Principal> {
        None
    }
}

/// The sessions of one server endpoint, by id, at most `max` of them, the idle ones ended by a
/// reaper that runs for as long as the table lives.
pub struct SessionTable<S> {
    sessions: Mutex<HashMap<Arc<str>, Arc<S>>>,
    max: usize,
    idle_timeout: Duration,
    reaper: Once,
    /// New sessions are refused while it drains.
    lifecycle: crate::lifecycle::Lifecycle,
}

impl<S> std::fmt::Debug for SessionTable<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionTable")
            .field(
                "sessions",
                &self
                    .sessions
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .len(),
            )
            .field("max", &self.max)
            .field("idle_timeout", &self.idle_timeout)
            .finish()
    }
}

/// The table is full: the new session was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableFull {
    /// The table's limit.
    pub max: usize,
}

/// Why no session can be opened now (see [`SessionTable::fresh_id`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoNewSession {
    /// The table holds its maximum of sessions.
    #[error("the server holds its maximum of {} sessions", .0.max)]
    Full(TableFull),
    /// The system has no randomness to draw a session id from.
    #[error("no randomness to draw a session id from")]
    NoRandomness,
    /// The server drains ([`Lifecycle`](crate::lifecycle::Lifecycle)): it takes no new session.
    #[error("the server is shutting down")]
    Draining,
}

impl<S: TableEntry> SessionTable<S> {
    /// A table of at most `max` sessions (at least one), ending those idle for `idle_timeout`.
    pub fn new(max: usize, idle_timeout: Duration) -> Self {
        Self {
            sessions: Mutex::new(HashMap::new()),
            max: max.max(1),
            idle_timeout,
            reaper: Once::new(),
            lifecycle: crate::lifecycle::Lifecycle::default(),
        }
    }

    /// The table refuses new sessions while `lifecycle` drains ([`NoNewSession::Draining`]).
    #[must_use]
    pub fn with_lifecycle(mut self, lifecycle: crate::lifecycle::Lifecycle) -> Self {
        self.lifecycle = lifecycle;
        self
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Arc<str>, Arc<S>>> {
        // Every critical section leaves the map consistent, so a poisoned lock is still usable.
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh id for a session about to be opened: refused while the server drains, when the
    /// table is full (checked again by [`admit`](Self::admit), for two openings racing for the
    /// last place) or when no id can be drawn ([`random_id`]).
    ///
    /// # Errors
    /// [`NoNewSession`], which [`http_reply::no_new_session`](super::reply::no_new_session)
    /// answers.
    pub fn fresh_id(&self) -> Result<Arc<str>, NoNewSession> {
        if self.lifecycle.is_draining() {
            return Err(NoNewSession::Draining);
        }
        if self.is_full() {
            return Err(NoNewSession::Full(TableFull { max: self.max }));
        }
        random_id().map(Arc::from).ok_or(NoNewSession::NoRandomness)
    }

    /// Sessions now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when there is none.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// True when a new session would be refused.
    pub fn is_full(&self) -> bool {
        self.len() >= self.max
    }

    /// The session `id`.
    pub fn get(&self, id: &str) -> Option<Arc<S>> {
        self.lock().get(id).cloned()
    }

    /// The session with this id, when a request acting for `principal` may use it: another
    /// principal's session is as unknown as one that never was, so a caller answers both alike
    /// and nothing leaks (see [`Principal::may_use`](crate::transport::Principal::may_use)).
    pub fn get_for(
        &self,
        id: &str,
        principal: Option<&crate::transport::Principal>,
    ) -> Option<Arc<S>> {
        self.get(id)
            .filter(|session| crate::transport::Principal::may_use(session.owner(), principal))
    }

    /// Admits `session` under `id` if there is room, checked under the lock (two sessions
    /// racing for the last place: one wins), and starts the reaper with the first one.
    ///
    /// # Errors
    /// [`TableFull`] when the table holds its maximum; the session is not ended.
    pub fn admit(self: &Arc<Self>, id: Arc<str>, session: Arc<S>) -> Result<(), TableFull> {
        {
            let mut sessions = self.lock();
            if sessions.len() >= self.max {
                return Err(TableFull { max: self.max });
            }
            sessions.insert(id, session);
        }
        self.start_reaper();
        Ok(())
    }

    /// Takes session `id` out of the table, without ending it.
    pub fn remove(&self, id: &str) -> Option<Arc<S>> {
        self.lock().remove(id)
    }

    /// Takes session `id` out and ends it; false when there was none.
    pub fn end(&self, id: &str) -> bool {
        match self.remove(id) {
            Some(session) => {
                session.end();
                true
            }
            None => false,
        }
    }

    /// Ends every session.
    pub fn end_all(&self) {
        let sessions: Vec<Arc<S>> = self.lock().drain().map(|(_, s)| s).collect();
        for session in sessions {
            session.end();
        }
    }

    /// Sweeps a few times per idle timeout (at least every 30 s), for as long as the table
    /// lives: every session's housekeeping, then the idle ones end.
    fn start_reaper(self: &Arc<Self>) {
        self.reaper.call_once(|| {
            let weak: Weak<Self> = Arc::downgrade(self);
            let timeout = self.idle_timeout;
            let every = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let Some(table) = weak.upgrade() else { return };
                    let expired: Vec<Arc<str>> = table
                        .lock()
                        .iter()
                        .filter(|(_, s)| {
                            s.sweep();
                            s.idle_for().is_some_and(|idle| idle >= timeout)
                        })
                        .map(|(id, _)| id.clone())
                        .collect();
                    for id in expired {
                        if table.end(&id) {
                            tracing::debug!(session = %id, "an idle session expired");
                        }
                    }
                }
            });
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[derive(Default)]
    struct Entry {
        busy: bool,
        ended: AtomicBool,
    }

    impl TableEntry for Entry {
        fn idle_for(&self) -> Option<Duration> {
            (!self.busy).then_some(Duration::from_secs(3600))
        }
        fn end(&self) {
            self.ended.store(true, Ordering::Relaxed);
        }
    }

    // Virtual time: the reaper's sleeps and the wait below advance it, nothing waits for real.
    #[tokio::test(start_paused = true)]
    async fn admits_up_to_the_limit_and_reaps_only_idle_sessions() {
        let check = async {
            let table = Arc::new(SessionTable::new(2, Duration::from_millis(40)));
            let idle = Arc::new(Entry::default());
            let busy = Arc::new(Entry {
                busy: true,
                ..Entry::default()
            });
            table.admit("a".into(), idle.clone()).expect("room");
            table.admit("b".into(), busy.clone()).expect("room");
            assert_eq!(
                table.admit("c".into(), Arc::new(Entry::default())),
                Err(TableFull { max: 2 })
            );
            while table.get("a").is_some() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert!(idle.ended.load(Ordering::Relaxed));
            assert!(!busy.ended.load(Ordering::Relaxed));
            assert_eq!(table.len(), 1);
            table.end_all();
            assert!(busy.ended.load(Ordering::Relaxed));
            assert!(table.is_empty());
        };
        tokio::time::timeout(Duration::from_secs(5), check)
            .await
            .expect("in time");
    }
}
