//! The bookkeeping of one connection, with no I/O: requests we sent that await a response, their
//! progress sinks, and requests we received that are still running.
//!
//! Keys are JSON-RPC ids of *this connection*; nothing here is shared between connections, so
//! colliding ids of two clients never meet.
//!
//! An inbound request holds its in-flight slot until its handler task has stopped, not merely
//! until it was cancelled: a cancelled handler that is still finishing (a cooperative one, or one
//! busy between two `.await`s) leaves the id table but stays counted. Each entry has a generation,
//! and only the task that owns a generation removes it, so a new request that reuses the id of a
//! cancelled one that is still finishing is never removed by the old one's end.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::SessionError;
use crate::jsonrpc::RequestId;
use crate::progress::Progress;

/// Where the outcome of an outbound request goes.
pub(crate) type Responder = oneshot::Sender<Result<Value, SessionError>>;

/// Where the progress of an outbound request goes.
#[derive(Debug)]
pub(crate) struct ProgressSink {
    pub(crate) tx: mpsc::Sender<Progress>,
    /// Woken on every progress report (resets a timeout that resets on progress).
    pub(crate) activity: Option<Arc<Notify>>,
    /// Reports dropped because the consumer fell behind (shared with the consumer).
    pub(crate) lagged: Arc<AtomicU64>,
}

impl ProgressSink {
    pub(crate) fn new(
        tx: mpsc::Sender<Progress>,
        activity: Option<Arc<Notify>>,
        lagged: Arc<AtomicU64>,
    ) -> Self {
        Self {
            tx,
            activity,
            lagged,
        }
    }
}

/// An outbound request awaiting its response.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) responder: Responder,
    pub(crate) progress: Option<ProgressSink>,
    /// Fires the request's [`Exchange`](crate::transport::Exchange) token when the entry goes,
    /// however it goes (for a transport that tracks requests).
    pub(crate) _over: Option<tokio_util::sync::DropGuard>,
}

/// An inbound request whose handler is running.
#[derive(Debug)]
pub(crate) struct Inbound {
    pub(crate) cancel: CancellationToken,
    pub(crate) abort: Option<tokio::task::AbortHandle>,
    /// A cancellation, or the end of the connection, only fires the token; the task is not
    /// aborted and runs to its own return.
    pub(crate) cooperative: bool,
    /// The transport's reply slot, told when a cancel means no answer will come.
    pub(crate) reply: Option<crate::transport::ReplySlot>,
    /// Which request with this id the entry is (ids may be reused once cancelled).
    generation: u64,
}

impl Inbound {
    pub(crate) fn new(
        cancel: CancellationToken,
        cooperative: bool,
        reply: Option<crate::transport::ReplySlot>,
    ) -> Self {
        Self {
            cancel,
            abort: None,
            cooperative,
            reply,
            generation: 0,
        }
    }
}

/// What became of a progress report.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ProgressDelivery {
    Delivered,
    /// The consumer is behind; the report was dropped and counted.
    Lagged,
    /// No request with this token is waiting (finished, cancelled, or never ours).
    Unknown,
}

/// A table keyed by request id, hashed by foldhash (seeded per table) instead of SipHash: an
/// id is hashed three times per request. The peer chooses inbound ids, but a table holds at
/// most its cap, so a flood of colliding ids costs at most a scan of that many entries.
type IdTable<V> = HashMap<RequestId, V, foldhash::fast::RandomState>;

/// The per-connection tables.
#[derive(Debug)]
pub(crate) struct State {
    pending: IdTable<Pending>,
    /// Running inbound requests that can still be cancelled, by id.
    inbound: IdTable<Inbound>,
    /// The generations of cancelled inbound requests whose handlers have not stopped yet: they
    /// hold a slot but no longer their id. Empty (unallocated) unless a cancel is under way.
    stopping: Vec<u64>,
    next_generation: u64,
    max_pending: usize,
    max_inbound: usize,
}

/// Why a table refused an entry.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    Full(usize),
    Duplicate,
}

impl State {
    pub(crate) fn new(max_pending: usize, max_inbound: usize) -> Self {
        Self {
            pending: IdTable::default(),
            inbound: IdTable::default(),
            stopping: Vec::new(),
            next_generation: 0,
            max_pending,
            max_inbound,
        }
    }

    /// Registers an outbound request.
    pub(crate) fn add_pending(&mut self, id: RequestId, pending: Pending) -> Result<(), Refusal> {
        if self.pending.len() >= self.max_pending {
            return Err(Refusal::Full(self.max_pending));
        }
        match self.pending.entry(id) {
            Entry::Occupied(_) => Err(Refusal::Duplicate),
            Entry::Vacant(v) => {
                v.insert(pending);
                Ok(())
            }
        }
    }

    /// Removes an outbound request (response arrived, cancelled, timed out).
    pub(crate) fn take_pending(&mut self, id: &RequestId) -> Option<Pending> {
        let taken = self.pending.remove(id);
        release_if_empty(&mut self.pending);
        taken
    }

    /// Delivers a progress report to the outbound request that owns `token`.
    ///
    /// tidewire uses the request id as the progress token, so the token is the key.
    pub(crate) fn deliver_progress(
        &mut self,
        token: &RequestId,
        progress: Progress,
    ) -> ProgressDelivery {
        let Some(sink) = self
            .pending
            .get_mut(token)
            .and_then(|p| p.progress.as_mut())
        else {
            return ProgressDelivery::Unknown;
        };
        if let Some(activity) = &sink.activity {
            activity.notify_one();
        }
        match sink.tx.try_send(progress) {
            Ok(()) => ProgressDelivery::Delivered,
            Err(mpsc::error::TrySendError::Full(_)) => {
                sink.lagged.fetch_add(1, Ordering::Relaxed);
                ProgressDelivery::Lagged
            }
            // The consumer dropped its stream; the request itself is still awaited.
            Err(mpsc::error::TrySendError::Closed(_)) => ProgressDelivery::Delivered,
        }
    }

    /// Registers a running inbound request and returns its generation, which
    /// [`set_abort`](Self::set_abort) and [`finish_inbound`](Self::finish_inbound) name it by.
    ///
    /// Refused when a request with this id is running and not cancelled (ids must be unique
    /// among requests in flight), or when the running requests, cancelled ones that have not
    /// stopped included, fill the table.
    pub(crate) fn add_inbound(&mut self, id: RequestId, inbound: Inbound) -> Result<u64, Refusal> {
        if self.inbound.contains_key(&id) {
            return Err(Refusal::Duplicate);
        }
        if self.inbound_len() >= self.max_inbound {
            return Err(Refusal::Full(self.max_inbound));
        }
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1);
        let mut inbound = inbound;
        inbound.generation = generation;
        self.inbound.insert(id, inbound);
        Ok(generation)
    }

    /// Attaches the task's abort handle once it is spawned.
    pub(crate) fn set_abort(
        &mut self,
        id: &RequestId,
        generation: u64,
        abort: tokio::task::AbortHandle,
    ) {
        if let Some(entry) = self.inbound.get_mut(id)
            && entry.generation == generation
        {
            entry.abort = Some(abort);
        }
    }

    /// Takes a running request out of the id table because the peer cancelled it, and returns
    /// it (to fire its token and abort its task). It keeps its slot until its task stops and
    /// calls [`finish_inbound`](Self::finish_inbound); meanwhile its id is free again.
    pub(crate) fn cancel_inbound(&mut self, id: &RequestId) -> Option<Inbound> {
        let entry = self.inbound.remove(id)?;
        release_if_empty(&mut self.inbound);
        self.stopping.push(entry.generation);
        Some(entry)
    }

    /// Frees the slot of the request with `generation`, whose task has stopped (returned, or
    /// dropped after an abort). Leaves alone another request that reuses the id. Returns whether
    /// the request was still counted (false after [`drain`](Self::drain)).
    pub(crate) fn finish_inbound(&mut self, id: &RequestId, generation: u64) -> bool {
        if let Some(entry) = self.inbound.get(id)
            && entry.generation == generation
        {
            self.inbound.remove(id);
            release_if_empty(&mut self.inbound);
            return true;
        }
        // Rare: only a cancelled request gets here.
        match self.stopping.iter().position(|g| *g == generation) {
            Some(at) => {
                self.stopping.swap_remove(at);
                if self.stopping.is_empty() {
                    self.stopping = Vec::new();
                }
                true
            }
            None => false,
        }
    }

    /// The number of outbound requests awaiting responses.
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// The number of inbound requests running, cancelled ones whose handlers have not stopped
    /// included.
    pub(crate) fn inbound_len(&self) -> usize {
        self.inbound.len() + self.stopping.len()
    }

    /// Empties the outbound table, returning what was in it.
    pub(crate) fn drain_pending(&mut self) -> Vec<Pending> {
        self.pending.drain().map(|(_, p)| p).collect()
    }

    /// Empties both tables (the connection ended), returning what was in them. Cancelled
    /// requests still stopping are forgotten: their tokens have fired already.
    pub(crate) fn drain(&mut self) -> (Vec<Pending>, Vec<Inbound>) {
        self.stopping = Vec::new();
        (
            self.pending.drain().map(|(_, p)| p).collect(),
            self.inbound.drain().map(|(_, i)| i).collect(),
        )
    }
}

/// Gives an emptied table's memory back: an idle connection then holds no table at all (a
/// server holds many idle connections; the next request allocates a small table again).
fn release_if_empty<K, V, S: Default>(table: &mut HashMap<K, V, S>) {
    if table.is_empty() && table.capacity() > 0 {
        *table = HashMap::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(
        progress: Option<ProgressSink>,
    ) -> (Pending, oneshot::Receiver<Result<Value, SessionError>>) {
        let (tx, rx) = oneshot::channel();
        (
            Pending {
                responder: tx,
                progress,
                _over: None,
            },
            rx,
        )
    }

    #[test]
    fn pending_table_is_bounded_and_rejects_duplicates() {
        let mut s = State::new(2, 2);
        let (a, _ra) = pending(None);
        let (b, _rb) = pending(None);
        let (c, _rc) = pending(None);
        let (d, _rd) = pending(None);
        assert!(s.add_pending(RequestId::Number(1), a).is_ok());
        assert_eq!(
            s.add_pending(RequestId::Number(1), b),
            Err(Refusal::Duplicate)
        );
        assert!(
            s.add_pending(RequestId::from("1"), c).is_ok(),
            "\"1\" differs from 1"
        );
        assert_eq!(
            s.add_pending(RequestId::Number(3), d),
            Err(Refusal::Full(2))
        );
        assert!(s.take_pending(&RequestId::Number(1)).is_some());
        assert!(s.take_pending(&RequestId::Number(1)).is_none());
        assert_eq!(s.pending_len(), 1);
    }

    #[test]
    fn progress_goes_to_its_own_request_and_lag_is_counted() {
        let mut s = State::new(8, 8);
        let (tx, mut rx) = mpsc::channel(1);
        let lagged = Arc::new(AtomicU64::new(0));
        let (p, _r) = pending(Some(ProgressSink::new(tx, None, lagged.clone())));
        s.add_pending(RequestId::Number(7), p).expect("add");
        let (other, _r2) = pending(None);
        s.add_pending(RequestId::Number(8), other).expect("add");
        assert_eq!(
            s.deliver_progress(&RequestId::Number(7), Progress::new(1.0)),
            ProgressDelivery::Delivered
        );
        assert_eq!(
            s.deliver_progress(&RequestId::Number(7), Progress::new(2.0)),
            ProgressDelivery::Lagged
        );
        assert_eq!(
            s.deliver_progress(&RequestId::Number(8), Progress::new(1.0)),
            ProgressDelivery::Unknown,
            "a request that asked for no progress gets none"
        );
        assert_eq!(
            s.deliver_progress(&RequestId::from("7"), Progress::new(1.0)),
            ProgressDelivery::Unknown
        );
        assert_eq!(rx.try_recv().expect("first").progress, 1.0);
        assert_eq!(lagged.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn inbound_table_is_bounded() {
        let mut s = State::new(1, 1);
        let inbound = || Inbound::new(CancellationToken::new(), false, None);
        let first = s
            .add_inbound(RequestId::Number(1), inbound())
            .expect("room");
        assert_eq!(
            s.add_inbound(RequestId::Number(1), inbound()),
            Err(Refusal::Duplicate)
        );
        assert_eq!(
            s.add_inbound(RequestId::Number(2), inbound()),
            Err(Refusal::Full(1))
        );
        assert!(s.finish_inbound(&RequestId::Number(1), first));
        assert_eq!(s.inbound_len(), 0);
        assert!(s.add_inbound(RequestId::Number(2), inbound()).is_ok());
        let (p, i) = s.drain();
        assert!(p.is_empty());
        assert_eq!(i.len(), 1);
    }

    #[test]
    fn a_cancelled_request_keeps_its_slot_until_it_stops_but_frees_its_id() {
        let mut s = State::new(8, 2);
        let inbound = || Inbound::new(CancellationToken::new(), false, None);
        let id = RequestId::Number(1);
        let old = s.add_inbound(id.clone(), inbound()).expect("room");
        assert!(s.cancel_inbound(&id).is_some());
        assert!(
            s.cancel_inbound(&id).is_none(),
            "a second cancel finds nothing"
        );
        assert_eq!(s.inbound_len(), 1, "still counted while it stops");
        // The id is free again: a new request may reuse it, and both are counted.
        let new = s.add_inbound(id.clone(), inbound()).expect("reused id");
        assert_ne!(old, new);
        assert_eq!(s.inbound_len(), 2);
        assert_eq!(
            s.add_inbound(RequestId::Number(2), inbound()),
            Err(Refusal::Full(2)),
            "the stopping request holds a slot"
        );
        // The old one's end frees its own slot, not the new request's entry.
        assert!(s.finish_inbound(&id, old));
        assert_eq!(s.inbound_len(), 1);
        assert!(
            s.cancel_inbound(&id).is_some(),
            "the new one is still cancellable"
        );
        assert!(s.finish_inbound(&id, new));
        assert!(!s.finish_inbound(&id, new), "freed once");
        assert_eq!(s.inbound_len(), 0);
    }
}
