//! After Redis loses its data (a restart without persistence), the places of live sessions
//! are gone until their replicas write them again. Until then a place that is missing does not
//! mean the session is: a request for one is answered `503` with `Retry-After: 1` (try again),
//! not `404` (which tells the client to start a new session and lose the old one's state).
//!
//! Two keys tell the two cases apart, with no clock: `places:epoch`, written once (`NX`) and
//! never expiring, so it is missing only while Redis has lost its data and no replica has
//! written since; and `places:settling`, set for [`SETTLING`] by the heartbeat that finds the
//! epoch missing and writes it again. A replica's heartbeat that finds its own `alive` key
//! missing writes its places at once, so every live session is placed again within about one
//! heartbeat; the window covers that with room to spare. A replica starting on an empty Redis
//! writes the epoch without the window: there is nothing to wait for then.

use std::time::Duration;

use super::routing::HEARTBEAT;
use super::shared::{ALIVE_FOR, Routing, millis};

/// How long after Redis lost its data a missing place is not taken to mean a missing session.
pub(super) const SETTLING: Duration = Duration::from_secs(3 * HEARTBEAT.as_secs());

/// The heartbeat: this replica is alive (`KEYS[1]`, for `ARGV[1]` ms); the epoch (`KEYS[2]`)
/// written if missing, and then the settling window (`KEYS[3]`, `ARGV[2]` ms) opened. Returns
/// 1 when this replica's `alive` key was still there, 0 when it was gone (Redis lost its data,
/// or this replica was silent past `ALIVE_FOR`): its places are to be written again now.
const HEARTBEAT_SCRIPT: &str = r"
local was = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], 1, 'PX', ARGV[1])
if redis.call('SET', KEYS[2], 1, 'NX') then
  redis.call('SET', KEYS[3], 1, 'PX', ARGV[2])
end
return was
";

impl Routing {
    /// The epoch key: missing only while Redis has lost its data.
    pub(super) fn epoch_key(&self) -> String {
        self.redis.key("places:epoch")
    }

    /// The settling window's key: there for [`SETTLING`] after the epoch was written again.
    pub(super) fn settling_key(&self) -> String {
        self.redis.key("places:settling")
    }

    /// Says this replica is alive; when Redis had lost that (and with it, likely, this
    /// replica's places), writes the places again at once. Errors are logged: the next beat
    /// tries again.
    pub(super) async fn beat(&self) {
        let kept: Result<i64, _> = redis::cmd("EVAL")
            .arg(HEARTBEAT_SCRIPT)
            .arg(3)
            .arg(self.alive_key(&self.node))
            .arg(self.epoch_key())
            .arg(self.settling_key())
            .arg(millis(ALIVE_FOR))
            .arg(millis(SETTLING))
            .query_async(&mut self.redis.connection())
            .await;
        match kept {
            Ok(1) => {}
            Ok(_) => {
                tracing::warn!(
                    "this replica's heartbeat was gone from Redis; writing its sessions' places again"
                );
                self.keep_places().await;
            }
            Err(error) => tracing::warn!(%error, "cannot tell Redis this replica is alive"),
        }
    }
}
