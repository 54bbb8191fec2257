//! Per-thread visited sets with epoch tags: clearing is O(1) (bump the epoch), the array is
//! re-zeroed only when the epoch wraps every 65,535 searches.

use std::cell::RefCell;

pub(crate) struct VisitedSet {
    tags: Vec<u16>,
    epoch: u16,
}

impl VisitedSet {
    fn new() -> VisitedSet {
        VisitedSet {
            tags: Vec::new(),
            epoch: 0,
        }
    }

    /// Starts a new search over ids `< capacity`.
    fn reset(&mut self, capacity: usize) {
        if self.tags.len() < capacity {
            self.tags.resize(capacity, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.tags.fill(0);
            self.epoch = 1;
        }
    }

    /// Marks `id`; returns true if it was not yet visited in this search.
    #[inline]
    pub fn insert(&mut self, id: u32) -> bool {
        let slot = &mut self.tags[id as usize];
        if *slot == self.epoch {
            false
        } else {
            *slot = self.epoch;
            true
        }
    }
}

thread_local! {
    static VISITED: RefCell<VisitedSet> = RefCell::new(VisitedSet::new());
}

/// Runs `body` with this thread's visited set, reset for ids `< capacity`.
pub(crate) fn with_visited<R>(capacity: usize, body: impl FnOnce(&mut VisitedSet) -> R) -> R {
    VISITED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut set) => {
            set.reset(capacity);
            body(&mut set)
        }
        // A search started from inside another search's predicate: use a fresh set.
        Err(_) => {
            let mut set = VisitedSet::new();
            set.reset(capacity);
            body(&mut set)
        }
    })
}

/// A visited set for one query as a small open-addressing hash table of node ids: a
/// query visits ~10³ nodes, so the table stays in L1/L2 where the epoch array of a
/// 100k-node index is 200 KB a query (and a thread's interleaved lanes would need one
/// each). Grows (doubling) when half full; cleared per query in O(its size).
pub(crate) struct VisitedHash {
    slots: Vec<u32>,
    len: usize,
}

const EMPTY_SLOT: u32 = u32::MAX;
/// Slots a fresh table starts with (16 KB).
const INITIAL_SLOTS: usize = 4_096;

impl VisitedHash {
    pub(crate) fn new() -> VisitedHash {
        VisitedHash {
            slots: vec![EMPTY_SLOT; INITIAL_SLOTS],
            len: 0,
        }
    }

    /// Forgets every id (keeps the table's size).
    pub(crate) fn clear(&mut self) {
        if self.len > 0 {
            self.slots.fill(EMPTY_SLOT);
            self.len = 0;
        }
    }

    #[inline]
    fn home(id: u32, mask: usize) -> usize {
        // Fibonacci hashing: the multiply spreads consecutive ids over the table
        (id.wrapping_mul(0x9E37_79B1) as usize) & mask
    }

    /// Marks `id` (never `u32::MAX`, which no node has); true if it was not yet marked.
    #[inline]
    pub(crate) fn insert(&mut self, id: u32) -> bool {
        let mask = self.slots.len() - 1;
        let mut slot = Self::home(id, mask);
        loop {
            let current = self.slots[slot];
            if current == id {
                return false;
            }
            if current == EMPTY_SLOT {
                self.slots[slot] = id;
                self.len += 1;
                if 2 * self.len > self.slots.len() {
                    self.grow();
                }
                return true;
            }
            slot = (slot + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let doubled = vec![EMPTY_SLOT; self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, doubled);
        let mask = self.slots.len() - 1;
        for id in old.into_iter().filter(|id| *id != EMPTY_SLOT) {
            let mut slot = Self::home(id, mask);
            while self.slots[slot] != EMPTY_SLOT {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::VisitedHash;

    #[test]
    fn the_hash_set_marks_each_id_once_across_growth_and_clears() {
        let mut set = VisitedHash::new();
        // past several doublings, ids spread and clustered alike
        let ids: Vec<u32> = (0..20_000u32)
            .map(|i| if i % 2 == 0 { i } else { i * 7_919 })
            .collect();
        for id in &ids {
            assert!(set.insert(*id), "{id} first time");
        }
        for id in &ids {
            assert!(!set.insert(*id), "{id} again");
        }
        set.clear();
        assert!(set.insert(ids[123]) && !set.insert(ids[123]));
        assert!(set.insert(u32::MAX - 1));
    }
}
