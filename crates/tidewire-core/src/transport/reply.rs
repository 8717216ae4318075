//! Where the answer to one inbound request goes: the transport's side of the request, carried
//! by the request into the engine and back out on every message the engine sends for it.
//!
//! The inbound twin of [`Exchange`](super::Exchange). A transport that routes by request
//! (Streamable HTTP puts a request's answer and everything related to it on the POST that
//! carried it) attaches a [`ReplySlot`] to the inbound request's envelope; the engine puts a clone
//! on the request's response and on every message its handler sends, so the transport reads the
//! destination from the message instead of keeping a table of requests beside the engine's. The
//! engine tells the slot when no answer will come ([`ReplyTarget::abandoned`]: the request was
//! cancelled), and lets go of it when the request's handler has ended and its answer is written,
//! so the target's `Drop` is the end of the request on the transport's side.

use std::any::Any;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::jsonrpc::RequestId;

/// What a transport keeps for one inbound request (a stream, a waiting HTTP body), behind a
/// [`ReplySlot`].
pub trait ReplyTarget: Any + Send + Sync + fmt::Debug {
    /// No answer will come: the request was cancelled. Called at most once, before the target
    /// drops; the handler may still be running (under a cooperative cancel policy), but nothing
    /// more is sent for the request. The default does nothing.
    fn abandoned(&self) {}

    /// The handler did not answer on its first poll: the answer comes later, from the
    /// request's own task. Called at most once, soon after the engine took the request. A
    /// transport that waits a little for a quick answer (to send it with its response head)
    /// can stop waiting for free here and bound the rest of its wait with a timer. The default
    /// does nothing.
    fn deferred(&self) {}
}

/// The transport's side of one inbound request, shared with the engine (cheap to clone: an
/// `Arc` inside).
///
/// Attach one to an inbound request's [`Envelope`](super::Envelope) (`envelope.reply`); every
/// message the engine sends for that request carries a clone, and
/// [`target`](Self::target) gives the transport's own type back.
#[derive(Clone)]
pub struct ReplySlot(Arc<Inner<dyn ReplyTarget>>);

/// The target is the last member, unsized: the slot is one allocation, not an `Arc` and a `Box`.
struct Inner<T: ?Sized> {
    id: RequestId,
    abandoned: AtomicBool,
    target: T,
}

impl ReplySlot {
    /// A slot for the request with this id, holding the transport's target.
    pub fn new(id: RequestId, target: impl ReplyTarget) -> Self {
        Self(Arc::new(Inner {
            id,
            abandoned: AtomicBool::new(false),
            target,
        }))
    }

    /// The id of the request.
    pub fn id(&self) -> &RequestId {
        &self.0.id
    }

    /// The transport's target, when it is a `T`.
    pub fn target<T: ReplyTarget>(&self) -> Option<&T> {
        let target: &dyn Any = &self.0.target;
        target.downcast_ref::<T>()
    }

    /// Whether the engine said no answer will come.
    pub fn is_abandoned(&self) -> bool {
        self.0.abandoned.load(Ordering::Acquire)
    }

    /// Tells the target that the answer comes later ([`ReplyTarget::deferred`]).
    pub(crate) fn defer(&self) {
        self.0.target.deferred();
    }

    /// Tells the target that no answer will come (once; later calls do nothing).
    pub(crate) fn abandon(&self) {
        if !self.0.abandoned.swap(true, Ordering::AcqRel) {
            self.0.target.abandoned();
        }
    }
}

impl fmt::Debug for ReplySlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplySlot")
            .field("id", &self.0.id)
            .field("abandoned", &self.is_abandoned())
            .field("target", &&self.0.target)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[derive(Debug)]
    struct Other;

    impl ReplyTarget for Other {}

    #[derive(Debug)]
    struct Counting(Arc<AtomicUsize>, Arc<AtomicUsize>);

    impl ReplyTarget for Counting {
        fn abandoned(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    impl Drop for Counting {
        fn drop(&mut self) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn abandoned_once_and_dropped_with_the_last_clone() {
        let (abandoned, dropped) = (Arc::default(), Arc::default());
        let slot = ReplySlot::new(
            RequestId::Number(7),
            Counting(Arc::clone(&abandoned), Arc::clone(&dropped)),
        );
        let clone = slot.clone();
        assert!(slot.target::<Counting>().is_some());
        assert!(
            slot.target::<Other>().is_none(),
            "only its own type reads back"
        );
        assert_eq!(*clone.id(), RequestId::Number(7));
        slot.abandon();
        clone.abandon();
        assert!(clone.is_abandoned());
        assert_eq!(abandoned.load(Ordering::SeqCst), 1);
        drop(slot);
        assert_eq!(dropped.load(Ordering::SeqCst), 0, "a clone still holds it");
        drop(clone);
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
    }
}
