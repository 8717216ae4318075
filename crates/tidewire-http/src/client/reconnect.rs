//! How broken SSE streams are reconnected.

use std::time::Duration;

/// How the transport reconnects a broken SSE stream: the standalone GET stream, and the stream
/// of a POST that ended before its response (resumed by GET with `Last-Event-ID`).
///
/// Before each reconnection the transport waits the `retry` time the server last sent on that
/// stream (exactly, as the specification asks). Without one it waits `initial_delay`, doubling
/// after each unproductive attempt up to `max_delay`. An attempt is unproductive when it fails
/// (network error, HTTP error) or when the stream it opens ends without a single event; after
/// `max_attempts` unproductive attempts in a row the transport gives up on that stream (a request
/// waiting on it then fails with an error answer). An attempt that delivers an event resets the
/// count.
///
/// ```
/// use std::time::Duration;
/// use tidewire_http::client::ReconnectPolicy;
///
/// let policy = ReconnectPolicy::default()
///     .initial_delay(Duration::from_millis(250))
///     .max_delay(Duration::from_secs(10))
///     .max_attempts(8);
/// assert_eq!(policy.delay_after(0), Duration::from_millis(250));
/// assert_eq!(policy.delay_after(2), Duration::from_secs(1));
/// assert_eq!(policy.delay_after(20), Duration::from_secs(10));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconnectPolicy {
    initial_delay: Duration,
    max_delay: Duration,
    max_attempts: u32,
}

impl Default for ReconnectPolicy {
    /// 1 s, doubling up to 30 s, 5 unproductive attempts.
    fn default() -> Self {
        Self {
            initial_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(30),
            max_attempts: 5,
        }
    }
}

impl ReconnectPolicy {
    /// Never reconnect: a broken stream is given up at once.
    pub const fn never() -> Self {
        Self {
            initial_delay: Duration::ZERO,
            max_delay: Duration::ZERO,
            max_attempts: 0,
        }
    }

    /// The wait before the first reconnection when the server sent no `retry` (default 1 s).
    #[must_use]
    pub const fn initial_delay(mut self, delay: Duration) -> Self {
        self.initial_delay = delay;
        self
    }

    /// The longest wait between attempts (default 30 s).
    #[must_use]
    pub const fn max_delay(mut self, delay: Duration) -> Self {
        self.max_delay = delay;
        self
    }

    /// How many unproductive attempts in a row before giving up (default 5; 0 never
    /// reconnects).
    #[must_use]
    pub const fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The attempt limit set by [`max_attempts`](Self::max_attempts).
    pub const fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The wait after `failures` unproductive attempts in a row, when the server sent no
    /// `retry`: `initial_delay × 2^failures`, at most `max_delay`.
    pub fn delay_after(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(31)).unwrap_or(u32::MAX);
        self.initial_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay.max(self.initial_delay))
    }

    /// The wait before the next attempt: the server's `retry` when it sent one (never less, and
    /// exactly that before the first attempt), otherwise [`delay_after`](Self::delay_after).
    pub(crate) fn wait(&self, retry: Option<Duration>, failures: u32) -> Duration {
        match retry {
            Some(retry) if failures == 0 => retry,
            Some(retry) => retry.max(self.delay_after(failures)),
            None => self.delay_after(failures),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let p = ReconnectPolicy::default()
            .initial_delay(Duration::from_millis(100))
            .max_delay(Duration::from_millis(1000));
        let waits: Vec<_> = (0..6).map(|n| p.delay_after(n).as_millis()).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(p.delay_after(u32::MAX), Duration::from_millis(1000));
    }

    #[test]
    fn the_server_retry_is_waited_exactly_first() {
        let p = ReconnectPolicy::default().initial_delay(Duration::from_secs(1));
        let retry = Some(Duration::from_millis(500));
        assert_eq!(p.wait(retry, 0), Duration::from_millis(500));
        assert_eq!(p.wait(retry, 1), Duration::from_secs(2));
        assert_eq!(p.wait(None, 0), Duration::from_secs(1));
    }
}
