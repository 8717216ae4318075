//! List changes a client missed because its outbound queue was full. A broadcast never waits on
//! one client; instead the change is owed, and one task per connection sends what is owed once
//! the queue has room: one notification of each kind, however many were missed (a list change
//! says only that the list changed, so one tells all).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use tidewire_core::schema::{
    EmptyParams, PromptListChangedNotification, ResourceListChangedNotification,
    ToolListChangedNotification,
};
use tidewire_core::session::{Peer, SessionError};

/// Which list changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListKind {
    Tools,
    Resources,
    Prompts,
}

impl ListKind {
    const ALL: [Self; 3] = [Self::Tools, Self::Resources, Self::Prompts];

    fn bit(self) -> u8 {
        match self {
            Self::Tools => 1,
            Self::Resources => 2,
            Self::Prompts => 4,
        }
    }

    /// Queues this list change without waiting.
    pub(crate) fn try_send(self, peer: &Peer) -> Result<(), SessionError> {
        match self {
            Self::Tools => peer.try_notify::<ToolListChangedNotification>(EmptyParams::new()),
            Self::Resources => {
                peer.try_notify::<ResourceListChangedNotification>(EmptyParams::new())
            }
            Self::Prompts => peer.try_notify::<PromptListChangedNotification>(EmptyParams::new()),
        }
    }

    /// Queues this list change, waiting for room.
    async fn send(self, peer: &Peer) -> Result<(), SessionError> {
        match self {
            Self::Tools => {
                peer.notify::<ToolListChangedNotification>(EmptyParams::new())
                    .await
            }
            Self::Resources => {
                peer.notify::<ResourceListChangedNotification>(EmptyParams::new())
                    .await
            }
            Self::Prompts => {
                peer.notify::<PromptListChangedNotification>(EmptyParams::new())
                    .await
            }
        }
    }
}

/// The list changes one connection is owed, and whether its catch-up task runs.
#[derive(Debug, Default)]
pub(crate) struct Owed {
    kinds: AtomicU8,
    sending: AtomicBool,
}

impl Owed {
    /// Notes that the connection missed a change of `kind`, and starts its catch-up task on
    /// `peer` unless it runs already (none without a peer yet). The task ends when nothing is
    /// owed, or when the connection closes.
    pub(crate) fn owe(self: &Arc<Self>, peer: Option<&Peer>, kind: ListKind) {
        self.kinds.fetch_or(kind.bit(), Ordering::AcqRel);
        if self.sending.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(peer) = peer.cloned() else {
            self.sending.store(false, Ordering::Release);
            return;
        };
        let owed = self.clone();
        tokio::spawn(async move {
            loop {
                let kinds = owed.kinds.swap(0, Ordering::AcqRel);
                if kinds == 0 {
                    owed.sending.store(false, Ordering::Release);
                    // Owed again between the swap and the store: go on, unless a new task did.
                    if owed.kinds.load(Ordering::Acquire) == 0
                        || owed.sending.swap(true, Ordering::AcqRel)
                    {
                        return;
                    }
                    continue;
                }
                for kind in ListKind::ALL {
                    if kinds & kind.bit() != 0 && kind.send(&peer).await.is_err() {
                        // The connection closed: nothing is owed to it any more.
                        return;
                    }
                }
            }
        });
    }
}
