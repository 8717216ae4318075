//! [`AccessLease`]: how long the credential that opened a long-lived channel (a WebSocket, an
//! SSE stream) keeps it open.
//!
//! An HTTP request is authorized once and is over. A channel it opens is not: a WebSocket or a
//! GET stream can outlive its token by hours, and a token revoked at the authorization server
//! must stop working there too. An authentication layer puts a lease in the request's
//! extensions; whatever keeps a channel open after the request ends it when
//! [`ended`](AccessLease::ended) completes.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;

/// What a re-check of the credential found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCheck {
    /// Still valid, until `expires_at` (if it says).
    Valid {
        /// When it stops being valid.
        expires_at: Option<SystemTime>,
    },
    /// No longer valid (revoked, or its grant narrowed): the channel ends now.
    Revoked,
    /// Could not be decided (the verifier is unreachable): the channel goes on until the
    /// expiry already known, and the next re-check asks again.
    Unknown,
}

/// Why a leased channel ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseEnd {
    /// The credential's expiry passed.
    Expired,
    /// A re-check found it no longer valid.
    Revoked,
}

impl fmt::Display for LeaseEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Expired => "the access token expired",
            Self::Revoked => "the access token is no longer valid",
        })
    }
}

type Check = Arc<dyn Fn() -> BoxFuture<'static, LeaseCheck> + Send + Sync>;

/// How long a credential keeps a channel open: until its expiry, and while a re-check every
/// `interval` finds it valid. Cloned freely; [`ended`](Self::ended) is the channel's deadline.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use tidewire_core::transport::{AccessLease, LeaseCheck};
///
/// let lease = AccessLease::until(Some(SystemTime::now() + Duration::from_secs(3600)))
///     .recheck_every(Duration::from_secs(60), || {
///         Box::pin(async { LeaseCheck::Valid { expires_at: None } })
///     });
/// # let _ = lease;
/// ```
#[derive(Clone)]
pub struct AccessLease {
    expires_at: Option<SystemTime>,
    recheck: Option<(Duration, Check)>,
}

impl fmt::Debug for AccessLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessLease")
            .field("expires_at", &self.expires_at)
            .field(
                "recheck_every",
                &self.recheck.as_ref().map(|(every, _)| every),
            )
            .finish()
    }
}

/// The shortest re-check interval: a lease never asks its verifier more often than this.
pub const MIN_RECHECK_INTERVAL: Duration = Duration::from_millis(10);
/// The longest a lease sleeps at once (so a far expiry cannot overflow a deadline).
const MAX_SLEEP: Duration = Duration::from_secs(24 * 3600);

impl AccessLease {
    /// A lease that ends at `expires_at` (never, when `None`), with no re-check.
    pub fn until(expires_at: Option<SystemTime>) -> Self {
        Self {
            expires_at,
            recheck: None,
        }
    }

    /// Re-checks the credential every `interval` (at least [`MIN_RECHECK_INTERVAL`]) with
    /// `check`; the lease ends when a check answers [`LeaseCheck::Revoked`], and a
    /// [`LeaseCheck::Valid`] moves its expiry.
    #[must_use]
    pub fn recheck_every(
        mut self,
        interval: Duration,
        check: impl Fn() -> BoxFuture<'static, LeaseCheck> + Send + Sync + 'static,
    ) -> Self {
        self.recheck = Some((interval.max(MIN_RECHECK_INTERVAL), Arc::new(check)));
        self
    }

    /// When the credential expires, as last known.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at
    }

    /// Completes when the channel must end: at the expiry, or at the first re-check that finds
    /// the credential no longer valid. Pending forever for a lease with neither.
    pub async fn ended(self) -> LeaseEnd {
        use tokio::time::Instant;
        // The expiry on the runtime's clock, so timers and tests agree on it.
        let deadline_of = |at: Option<SystemTime>| {
            at.map(|at| {
                let left = at.duration_since(SystemTime::now()).unwrap_or_default();
                Instant::now() + left.min(MAX_SLEEP * 365)
            })
        };
        let mut deadline = deadline_of(self.expires_at);
        loop {
            let now = Instant::now();
            if deadline.is_some_and(|d| d <= now) {
                return LeaseEnd::Expired;
            }
            let wake = match (&self.recheck, deadline) {
                (Some((every, _)), Some(d)) => (now + *every).min(d),
                (Some((every, _)), None) => now + *every,
                (None, Some(d)) => d,
                (None, None) => return std::future::pending().await,
            };
            tokio::time::sleep_until(wake.min(now + MAX_SLEEP)).await;
            if deadline.is_some_and(|d| d <= Instant::now()) {
                return LeaseEnd::Expired;
            }
            let Some((_, check)) = &self.recheck else {
                continue;
            };
            match check().await {
                LeaseCheck::Valid { expires_at } => deadline = deadline_of(expires_at),
                LeaseCheck::Revoked => return LeaseEnd::Revoked,
                LeaseCheck::Unknown => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_lease_ends_at_its_expiry() {
        tokio::time::timeout(std::time::Duration::from_secs(3600), async {
            let lease = AccessLease::until(Some(SystemTime::now() + Duration::from_millis(300)));
            let ended = tokio::time::timeout(Duration::from_secs(5), lease.ended()).await;
            assert_eq!(ended, Ok(LeaseEnd::Expired));
            let past = AccessLease::until(Some(SystemTime::now() - Duration::from_secs(1)));
            assert_eq!(past.ended().await, LeaseEnd::Expired);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test(start_paused = true)]
    async fn a_recheck_that_finds_the_token_revoked_ends_it_and_unknown_goes_on() {
        tokio::time::timeout(std::time::Duration::from_secs(3600), async {
            let checks = Arc::new(AtomicUsize::new(0));
            let counted = checks.clone();
            let lease =
                AccessLease::until(None).recheck_every(Duration::from_secs(60), move || {
                    let n = counted.fetch_add(1, Ordering::SeqCst);
                    Box::pin(async move {
                        match n {
                            0 => LeaseCheck::Valid { expires_at: None },
                            1 => LeaseCheck::Unknown,
                            _ => LeaseCheck::Revoked,
                        }
                    })
                });
            let ended = tokio::time::timeout(Duration::from_secs(3600), lease.ended()).await;
            assert_eq!(ended, Ok(LeaseEnd::Revoked));
            assert_eq!(checks.load(Ordering::SeqCst), 3);
        })
        .await
        .expect("the test took longer than its limit");
    }

    #[tokio::test(start_paused = true)]
    async fn without_expiry_or_recheck_it_never_ends() {
        tokio::time::timeout(std::time::Duration::from_secs(3600), async {
            let ended =
                tokio::time::timeout(Duration::from_secs(3600), AccessLease::until(None).ended())
                    .await;
            assert!(ended.is_err());
        })
        .await
        .expect("the test took longer than its limit");
    }
}
