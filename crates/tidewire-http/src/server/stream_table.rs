//! The table of one session's streams, which also keeps its finished POST streams in the order
//! they finished: expiring them looks at the oldest few, not at every stream. (Expiry runs as
//! every POST stream opens and finishes; a pass over every stream was ~1.4k instructions a
//! request for a session holding its most.)

use std::collections::VecDeque;
use std::iter::Chain;
use std::ops::Deref;
use std::time::Duration;

use tokio::time::Instant;

use super::event_store::{StreamId, StreamTable};

/// What the table reads of a stream.
pub(crate) trait Finishing {
    /// When a reader passed the end of this POST stream, if one has.
    fn finished_at(&self) -> Option<Instant>;
    /// Whether a reader is on it (a finished stream with a reader is never expired).
    fn attached(&self) -> bool;
}

/// The streams by id (read through `Deref`), and the finished ones oldest first.
///
/// The map is changed only through the table's own [`insert`](Self::insert),
/// [`get_mut`](Self::get_mut), [`remove`](Self::remove) and [`retain`](Self::retain) (there is
/// no `DerefMut`), so the order holds exactly the streams of the table that have finished, as
/// long as a stream's finishing, set through `get_mut`, is noted through
/// [`note_finished`](Self::note_finished).
pub(crate) struct Table<S> {
    streams: StreamTable<S>,
    /// The ids of the streams with a `finished_at`, by that instant, oldest first.
    finished: VecDeque<StreamId>,
}

impl<S> Default for Table<S> {
    fn default() -> Self {
        Self {
            streams: StreamTable::default(),
            finished: VecDeque::new(),
        }
    }
}

impl<S> Deref for Table<S> {
    type Target = StreamTable<S>;

    fn deref(&self) -> &Self::Target {
        &self.streams
    }
}

/// The ids [`Table::expire`] took out: the first without an allocation.
pub(crate) type Expired = Chain<std::option::IntoIter<StreamId>, std::vec::IntoIter<StreamId>>;

impl<S: Finishing> Table<S> {
    /// Notes that stream `id` has just finished (its `finished_at` set to now); one that had
    /// finished before moves to the back.
    pub(crate) fn note_finished(&mut self, id: StreamId) {
        self.forget_finished(id);
        self.finished.push_back(id);
    }

    /// Puts `stream` in the table as `id`, and returns the stream it replaces (which leaves the
    /// order of the finished ones).
    pub(crate) fn insert(&mut self, id: StreamId, stream: S) -> Option<S> {
        let finished = stream.finished_at().is_some();
        let replaced = self.streams.insert(id, stream);
        if replaced.as_ref().is_some_and(|s| s.finished_at().is_some()) {
            self.forget_finished(id);
        }
        if finished {
            self.finished.push_back(id);
        }
        replaced
    }

    /// Stream `id`, to change. One whose `finished_at` is set here is noted through
    /// [`note_finished`](Self::note_finished).
    pub(crate) fn get_mut(&mut self, id: &StreamId) -> Option<&mut S> {
        self.streams.get_mut(id)
    }

    /// Takes stream `id` out of the table.
    pub(crate) fn remove(&mut self, id: &StreamId) -> Option<S> {
        let stream = self.streams.remove(id)?;
        if stream.finished_at().is_some() {
            self.forget_finished(*id);
        }
        Some(stream)
    }

    /// Keeps the streams `keep` says to keep.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&StreamId, &mut S) -> bool) {
        self.streams.retain(keep);
        let streams = &self.streams;
        self.finished.retain(|id| streams.contains_key(id));
    }

    /// Takes out the finished streams no reader is on that are past `grace`, and the oldest
    /// ones past the `kept` most recent; returns their ids (for the store to forget).
    pub(crate) fn expire(&mut self, kept: usize, grace: Duration) -> Expired {
        let cutoff = Instant::now().checked_sub(grace);
        let stale = |at: Instant| cutoff.is_some_and(|cutoff| at <= cutoff);
        let mut excess = self.finished.len().saturating_sub(kept);
        let (mut first, mut more) = (None, Vec::new());
        let mut at_index = 0;
        while let Some(&id) = self.finished.get(at_index) {
            let Some(stream) = self.streams.get(&id) else {
                // Not in the table (cannot happen while the order is kept as documented).
                self.finished.remove(at_index);
                continue;
            };
            let is_stale = stream.finished_at().is_some_and(stale);
            // Oldest first: once nothing is in excess, the first stream still in its grace
            // says every later one is too.
            if excess == 0 && !is_stale {
                break;
            }
            if stream.attached() {
                at_index += 1;
                continue;
            }
            excess = excess.saturating_sub(1);
            self.finished.remove(at_index);
            self.streams.remove(&id);
            match first {
                None => first = Some(id),
                Some(_) => more.push(id),
            }
        }
        first.into_iter().chain(more)
    }

    /// Takes `id` out of the finished order, if it is there (a look at a few ids: the order
    /// holds the finished streams only, which a session keeps few of).
    fn forget_finished(&mut self, id: StreamId) {
        if let Some(at_index) = self.finished.iter().position(|f| *f == id) {
            self.finished.remove(at_index);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake {
        finished_at: Option<Instant>,
        attached: bool,
    }

    impl Finishing for Fake {
        fn finished_at(&self) -> Option<Instant> {
            self.finished_at
        }
        fn attached(&self) -> bool {
            self.attached
        }
    }

    fn stream(finished_at: Option<Instant>) -> Fake {
        Fake {
            finished_at,
            attached: false,
        }
    }

    fn finish(table: &mut Table<Fake>, id: StreamId, at: Instant) {
        table.insert(id, stream(Some(at)));
        table.note_finished(id);
    }

    /// A table of streams that finished at one instant, in the order of `ids`.
    fn finished_together(ids: impl Iterator<Item = StreamId>) -> Table<Fake> {
        let (mut table, now) = (Table::default(), Instant::now());
        for id in ids {
            finish(&mut table, id, now);
        }
        table
    }

    /// What the table expired, and what it still holds, in id order.
    fn after(table: &mut Table<Fake>, kept: usize, grace: Duration) -> (Vec<u64>, Vec<u64>) {
        let gone: Vec<_> = table.expire(kept, grace).collect();
        let mut left: Vec<_> = table.keys().copied().collect();
        left.sort_unstable();
        (gone, left)
    }

    #[test]
    fn the_oldest_past_the_most_kept_go_first_and_a_stream_with_a_reader_stays() {
        let mut table = finished_together(1..=5);
        table.get_mut(&1).expect("held").attached = true;
        let hour = Duration::from_secs(3600);
        // Five finished, three kept: two in excess; 1 has a reader, so 2 and 3 go.
        assert_eq!(after(&mut table, 3, hour), (vec![2, 3], vec![1, 4, 5]));
        // Nothing in excess now (1, 4, 5): nothing goes.
        assert_eq!(after(&mut table, 3, hour), (vec![], vec![1, 4, 5]));
    }

    #[test]
    fn a_stream_past_its_grace_goes_though_the_table_has_room() {
        let mut table = Table::default();
        let now = Instant::now();
        finish(&mut table, 1, now);
        // Finished "later" than the expiry below looks: within any grace.
        finish(&mut table, 2, now + Duration::from_secs(3600));
        assert_eq!(after(&mut table, 8, Duration::ZERO), (vec![1], vec![2]));
    }

    #[test]
    fn a_stream_removed_or_finished_again_keeps_the_order_exact() {
        let mut table = finished_together(1..=3);
        assert!(table.remove(&2).is_some());
        // 1 finishes again: it is now the newest, so 3 is the oldest.
        table.note_finished(1);
        table.insert(4, stream(None));
        let hour = Duration::from_secs(3600);
        assert_eq!(after(&mut table, 1, hour), (vec![3], vec![1, 4]));
        table.retain(|id, _| *id != 1);
        assert!(table.finished.is_empty(), "{:?}", table.finished);
    }

    #[test]
    fn a_finished_stream_replaced_by_insert_leaves_the_order() {
        let mut table = finished_together(1..=2);
        assert!(table.insert(1, stream(None)).is_some(), "replaced");
        assert_eq!(Vec::from(table.finished.clone()), vec![2]);
        let hour = Duration::from_secs(3600);
        // Only 2 is finished: with none kept, only 2 goes.
        assert_eq!(after(&mut table, 0, hour), (vec![2], vec![1]));
    }
}
