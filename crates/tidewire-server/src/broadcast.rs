//! Bus events to this process's session-era connections: list changes and resource updates,
//! queued where there is room and never waited for. A client whose queue is full is owed a list
//! change (see [`catch_up`](crate::catch_up)) and loses a resource update; both are counted and
//! logged, at `warn` at most every [`DROP_WARNING_EVERY`].

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use tidewire_core::schema::{
    NotificationType, PromptListChangedNotification, ResourceListChangedNotification,
    ResourceUpdatedNotification, ResourceUpdatedNotificationParams, ToolListChangedNotification,
};
use tidewire_core::session::Peer;

use crate::bus::BusEvent;
use crate::catch_up::ListKind;
use crate::connection::Connection;
use crate::state::ServerState;

/// At most one `warn` per this long about broadcasts that clients lost (the rest go to `debug`).
const DROP_WARNING_EVERY: Duration = Duration::from_secs(10);

impl<C> ServerState<C> {
    /// Delivers a bus event to this process's session-era connections.
    pub(crate) fn deliver_to_sessions(&self, event: &BusEvent) {
        match event {
            BusEvent::ToolsListChanged => {
                self.broadcast_list_change(ListKind::Tools, ToolListChangedNotification::METHOD);
            }
            BusEvent::ResourcesListChanged => self.broadcast_list_change(
                ListKind::Resources,
                ResourceListChangedNotification::METHOD,
            ),
            BusEvent::PromptsListChanged => {
                self.broadcast_list_change(ListKind::Prompts, PromptListChangedNotification::METHOD)
            }
            // Only listen streams hear of tasks (the session era's go to their requester).
            BusEvent::TaskChanged { .. }
            | BusEvent::TaskCancelled { .. }
            | BusEvent::TaskAnswered { .. } => {}
            BusEvent::ResourceUpdated { uri } => {
                self.broadcast::<ResourceUpdatedNotification>(
                    &self.live_peers(|c| c.hears_broadcasts() && c.is_subscribed(uri)),
                    || ResourceUpdatedNotificationParams::new(uri),
                );
            }
        }
    }

    /// The peers of the live connections that pass `filter`.
    pub(crate) fn live_peers(&self, filter: impl Fn(&Connection) -> bool) -> Vec<Peer> {
        self.live_connections(filter)
            .iter()
            .filter_map(|c| c.peer().cloned())
            .collect()
    }

    /// Queues a notification for each of `peers` where there is room now; returns how many took
    /// it. Waiting on one would hold up every peer after it.
    fn broadcast<N: NotificationType>(
        &self,
        peers: &[Peer],
        params: impl Fn() -> N::Params,
    ) -> usize {
        let mut told = 0;
        let mut dropped = 0;
        for peer in peers {
            match peer.try_notify::<N>(params()) {
                Ok(()) => told += 1,
                Err(error) if error.is_queue_full() => dropped += 1,
                // Closed meanwhile: nobody left to tell.
                Err(error) => {
                    tracing::debug!(%error, method = N::METHOD, "a broadcast was not sent");
                }
            }
        }
        if dropped > 0 {
            self.count_dropped(N::METHOD, dropped, peers.len());
        }
        told
    }

    /// Queues a list change for every live connection where there is room now, and owes it to
    /// the others.
    fn broadcast_list_change(&self, kind: ListKind, method: &'static str) {
        // Only sessions: a connection that only carried stateless requests hears list changes
        // through `subscriptions/listen`, never unasked.
        let connections = self.live_connections(Connection::hears_broadcasts);
        let mut owed = 0;
        for connection in &connections {
            let Some(peer) = connection.peer() else {
                continue;
            };
            match kind.try_send(peer) {
                Ok(()) => {}
                Err(error) if error.is_queue_full() => {
                    owed += 1;
                    connection.owed().owe(connection.peer(), kind);
                }
                // Closed meanwhile: nobody left to tell.
                Err(error) => tracing::debug!(%error, method, "a broadcast was not sent"),
            }
        }
        if owed > 0 {
            self.count_dropped(method, owed, connections.len());
        }
    }

    /// Counts notifications lost by clients that do not keep up, and logs it: at `warn` at most
    /// once per [`DROP_WARNING_EVERY`], otherwise at `debug`.
    fn count_dropped(&self, method: &'static str, dropped: u64, clients: usize) {
        let total = self
            .dropped_notifications
            .fetch_add(dropped, Ordering::Relaxed)
            .saturating_add(dropped);
        let now = Instant::now();
        let warn = {
            let mut last = self
                .last_drop_warning
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let due = last.is_none_or(|at| now.duration_since(at) >= DROP_WARNING_EVERY);
            if due {
                *last = Some(now);
            }
            due
        };
        if warn {
            tracing::warn!(
                method,
                dropped,
                clients,
                total,
                "clients whose outbound queue is full lost a broadcast notification \
                 (this warning is repeated at most every 10 s)"
            );
        } else {
            tracing::debug!(
                method,
                dropped,
                clients,
                total,
                "clients lost a broadcast notification"
            );
        }
    }
}
