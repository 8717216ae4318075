//! One stream's kept events, and the blocks its notifications' texts are copied into.
//!
//! A notification's text came in its own allocation, and the store used to keep that
//! allocation until the event was dropped — long after it was written, so a burst's every
//! event was freed cold, one by one, once the store was full (the session era's progress
//! cell: 1.0 µs a notification on a fresh store, 1.4–2.6 µs on a full one). Here a stream's
//! notifications are copied into blocks that grow by doubling, and a block is freed whole when
//! its last event goes; the sender's allocation is freed at once, while it is still in the
//! cache. A response (the event that ends a POST stream) is kept as it came: it is most often
//! the stream's only event, and copying it would cost an allocation it does not need.

use std::collections::VecDeque;

use bytes::BytesMut;

use super::event::StoredEvent;

/// What one kept event costs beside its text, when its text is in its own allocation: the
/// `Bytes` header the text shares (an allocation of its own), its slot in a `VecDeque` that may
/// be half empty, its sequence number and order, and the allocator's bookkeeping of both
/// allocations.
pub(super) const EVENT_OVERHEAD: usize = 160;

/// What one kept event whose text is in a block costs beside its text: its slot in a
/// `VecDeque` that may be half empty. The block's bytes are counted with the block.
pub(super) const BLOCK_EVENT_OVERHEAD: usize = 2 * std::mem::size_of::<Entry>();

/// The smallest buffer the encoder makes: it starts at 128 bytes and doubles.
pub(super) const SMALLEST_BUFFER: usize = 128;

/// A stream's first block: room for a few notifications.
pub(super) const FIRST_BLOCK: usize = 1024;

/// Blocks double up to this size (an event larger than it gets a block of its own size).
pub(super) const LARGEST_BLOCK: usize = 16 << 10;

/// What keeping `event` in its own allocation costs in memory, as near as can be told from
/// here: its text is the encoder's `Vec`, which grew by doubling and whose whole capacity the
/// `Bytes` keeps, so the text's length rounded up to a power of two (at least 128 bytes), plus
/// [`EVENT_OVERHEAD`]. Counting the length alone let the store hold about twice its budget
/// (the soak: a 64 MiB budget behind some 130 MiB of resident memory).
pub(super) fn cost(event: &StoredEvent) -> usize {
    let data = event.data.len();
    data.checked_next_power_of_two()
        .unwrap_or(data)
        .max(SMALLEST_BUFFER)
        + EVENT_OVERHEAD
}

/// One kept event: its place in the store's order of arrival, and whether its text is in one
/// of the stream's blocks.
#[derive(Debug)]
pub(super) struct Entry {
    pub order: u64,
    pub event: StoredEvent,
    in_block: bool,
}

/// A block of texts: its capacity, counted against the limits from the moment it is made, and
/// how many kept events' texts are in it.
#[derive(Debug)]
struct Block {
    capacity: usize,
    events: usize,
}

/// One stream's kept events, oldest first. The bytes it counts are its events' costs plus its
/// blocks' capacities, and they change only through [`push`](Self::push) and
/// [`pop_front`](Self::pop_front).
#[derive(Debug, Default)]
pub(super) struct Kept {
    events: VecDeque<Entry>,
    bytes: usize,
    /// The highest `seq` a reader has taken: what is at or below it is kept only for
    /// resumption, and goes before what nobody has read yet.
    pub delivered: u64,
    /// The free end of the newest block, where the next notification's text goes.
    tail: BytesMut,
    /// The blocks that hold kept events' texts (and the newest, which may hold none yet),
    /// oldest first; kept events in blocks use them in the same order.
    blocks: VecDeque<Block>,
}

impl Kept {
    /// The events kept, oldest first.
    pub fn events(&self) -> &VecDeque<Entry> {
        &self.events
    }

    /// The bytes this stream costs, as the limits count them.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// True when no event is kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// The arrival order of the oldest event, if it was read already.
    pub fn oldest_read(&self) -> Option<u64> {
        self.events
            .front()
            .filter(|e| e.event.seq <= self.delivered)
            .map(|e| e.order)
    }

    /// What [`push`](Self::push)ing `event` would add to this stream's bytes (a new block
    /// counts whole).
    pub fn charge_for(&self, event: &StoredEvent) -> usize {
        if event.last {
            return cost(event);
        }
        let len = event.data.len();
        if self.tail.capacity() >= len {
            BLOCK_EVENT_OVERHEAD
        } else {
            BLOCK_EVENT_OVERHEAD + self.next_block(len)
        }
    }

    /// The size of the block made for a text of `len` bytes that does not fit the newest one.
    fn next_block(&self, len: usize) -> usize {
        let grown = self.blocks.back().map_or(FIRST_BLOCK, |b| {
            b.capacity.saturating_mul(2).min(LARGEST_BLOCK)
        });
        grown.max(len)
    }

    /// Keeps `event` as the newest, and returns the bytes this stream counts now minus the
    /// bytes it counted before (a block left empty behind a new one is given back here).
    /// A response is kept as it came; a notification's text is copied into the newest block.
    pub fn push(&mut self, order: u64, mut event: StoredEvent) -> Change {
        let before = self.bytes;
        let in_block = !event.last;
        if in_block {
            let len = event.data.len();
            if self.tail.capacity() < len {
                let size = self.next_block(len);
                if self.blocks.back().is_some_and(|b| b.events == 0)
                    && let Some(empty) = self.blocks.pop_back()
                {
                    self.bytes -= empty.capacity;
                }
                self.tail = BytesMut::with_capacity(size);
                self.blocks.push_back(Block {
                    capacity: size,
                    events: 0,
                });
                self.bytes += size;
            }
            self.tail.extend_from_slice(&event.data);
            event.data = self.tail.split().freeze();
            if let Some(block) = self.blocks.back_mut() {
                block.events += 1;
            }
            self.bytes += BLOCK_EVENT_OVERHEAD;
        } else {
            self.bytes += cost(&event);
        }
        self.events.push_back(Entry {
            order,
            event,
            in_block,
        });
        Change::between(before, self.bytes)
    }

    /// Drops the oldest event, and returns it with the bytes freed: its own cost, and its
    /// block's when it was the block's last event (the newest block stays while the stream
    /// keeps anything, for the texts to come; a stream that keeps nothing frees all).
    pub fn pop_front(&mut self) -> Option<(StoredEvent, usize)> {
        let entry = self.events.pop_front()?;
        let before = self.bytes;
        if entry.in_block {
            self.bytes -= BLOCK_EVENT_OVERHEAD;
            if let Some(front) = self.blocks.front_mut() {
                front.events = front.events.saturating_sub(1);
                if front.events == 0
                    && self.blocks.len() > 1
                    && let Some(done) = self.blocks.pop_front()
                {
                    self.bytes -= done.capacity;
                }
            }
        } else {
            self.bytes -= cost(&entry.event);
        }
        if self.events.is_empty() {
            for block in self.blocks.drain(..) {
                self.bytes -= block.capacity;
            }
            self.tail = BytesMut::new();
        }
        Some((entry.event, before - self.bytes))
    }
}

/// How a stream's bytes moved in one [`Kept::push`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Change {
    /// Bytes added.
    pub added: usize,
    /// Bytes given back.
    pub freed: usize,
}

impl Change {
    fn between(before: usize, after: usize) -> Self {
        Self {
            added: after.saturating_sub(before),
            freed: before.saturating_sub(after),
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn note(seq: u64, len: usize) -> StoredEvent {
        StoredEvent {
            seq,
            data: Bytes::from(vec![b'a' + (seq % 26) as u8; len]),
            last: false,
        }
    }

    /// The bytes counted are always the events' costs plus the blocks' capacities.
    fn check(kept: &Kept) {
        let events: usize = kept
            .events
            .iter()
            .map(|e| {
                if e.in_block {
                    BLOCK_EVENT_OVERHEAD
                } else {
                    cost(&e.event)
                }
            })
            .sum();
        let blocks: usize = kept.blocks.iter().map(|b| b.capacity).sum();
        assert_eq!(kept.bytes, events + blocks);
        let in_blocks = kept.events.iter().filter(|e| e.in_block).count();
        assert_eq!(
            in_blocks,
            kept.blocks.iter().map(|b| b.events).sum::<usize>()
        );
    }

    #[test]
    fn notifications_share_blocks_that_double_and_go_whole() {
        let mut kept = Kept::default();
        let mut charged = 0;
        for seq in 1..=100 {
            let event = note(seq, 100);
            let expected = kept.charge_for(&event);
            let change = kept.push(seq, event);
            assert_eq!(
                change.added, expected,
                "the charge foretold is the charge made"
            );
            charged += change.added;
            check(&kept);
        }
        assert_eq!(kept.bytes(), charged);
        // 10,000 bytes of text: blocks of 1, 2, 4 and 8 KiB.
        let sizes: Vec<usize> = kept.blocks.iter().map(|b| b.capacity).collect();
        assert_eq!(sizes, vec![1024, 2048, 4096, 8192]);
        // Each text is the one sent, in order.
        for (i, entry) in kept.events.iter().enumerate() {
            assert_eq!(entry.event.data, note(i as u64 + 1, 100).data);
        }
        // The first block's ten texts go one by one; the block goes with the tenth.
        for seq in 1..=9 {
            let (event, freed) = kept.pop_front().expect("kept");
            assert_eq!(event.seq, seq);
            assert_eq!(freed, BLOCK_EVENT_OVERHEAD);
        }
        let (_, freed) = kept.pop_front().expect("kept");
        assert_eq!(freed, BLOCK_EVENT_OVERHEAD + 1024);
        check(&kept);
        while kept.pop_front().is_some() {
            check(&kept);
        }
        assert_eq!(
            kept.bytes(),
            0,
            "a stream that keeps nothing counts nothing"
        );
        assert!(kept.blocks.is_empty());
    }

    #[test]
    fn a_response_is_kept_as_it_came_and_a_large_text_gets_its_own_block() {
        let mut kept = Kept::default();
        let response = StoredEvent {
            seq: 1,
            data: Bytes::from_static(b"{\"result\":{}}"),
            last: true,
        };
        let change = kept.push(1, response.clone());
        assert_eq!(change.added, cost(&response));
        assert!(kept.blocks.is_empty(), "no block for a response");
        let large = note(2, 5000);
        let change = kept.push(2, large.clone());
        assert_eq!(change.added, BLOCK_EVENT_OVERHEAD + 5000);
        assert_eq!(kept.events()[1].event.data, large.data);
        check(&kept);
        // The response goes; the notification's block stays while its event is kept.
        let (first, freed) = kept.pop_front().expect("kept");
        assert!(first.last);
        assert_eq!(freed, cost(&response));
        check(&kept);
    }

    #[test]
    fn an_emptied_newest_block_is_given_back_when_another_is_made() {
        let response = StoredEvent {
            seq: 3,
            data: Bytes::from_static(b"{}"),
            last: true,
        };
        let mut kept = Kept::default();
        kept.push(1, note(1, 1000));
        // The stream's only event goes: its block with it.
        let (_, freed) = kept.pop_front().expect("kept");
        assert_eq!(freed, BLOCK_EVENT_OVERHEAD + 1024);
        assert_eq!(kept.bytes(), 0);
        kept.push(2, note(2, 1000));
        kept.push(3, response.clone());
        // The notification goes; its block, the newest, stays for the texts to come.
        let (_, freed) = kept.pop_front().expect("kept");
        assert_eq!(freed, BLOCK_EVENT_OVERHEAD);
        check(&kept);
        // A text that does not fit: the empty block is given back as the new one is made.
        let change = kept.push(4, note(4, 3000));
        assert_eq!(change.added, 3000 + BLOCK_EVENT_OVERHEAD - 1024);
        assert_eq!(kept.blocks.len(), 1);
        assert_eq!(kept.bytes(), cost(&response) + 3000 + BLOCK_EVENT_OVERHEAD);
        check(&kept);
    }
}
