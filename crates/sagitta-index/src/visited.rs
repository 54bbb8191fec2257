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
