//! A small cache of hot pages (issue 15 §2), bounded in bytes, evicting by CLOCK: each
//! resident page has a referenced bit set by every hit; the hand sweeps the slots, clearing
//! set bits and evicting the first page whose bit was already clear. A page hit once since
//! the hand last passed it survives one more sweep, so pages read by many queries (upper
//! partitions, popular rerank pages) stay and a scan of cold pages passes through.
//!
//! Pages are shared as `Arc<Page>`: a reader keeps its copy while the cache evicts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Page, PAGE_BYTES};

/// A page of a file: the file's number (the caller's) and the page number in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageKey {
    pub file: u64,
    pub page: u64,
}

struct Slot {
    key: PageKey,
    page: Arc<Page>,
    referenced: bool,
}

#[derive(Default)]
struct Clock {
    slots: Vec<Slot>,
    index: HashMap<PageKey, usize>,
    hand: usize,
}

/// Hits, misses and what is resident.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCacheCounters {
    pub hits: u64,
    pub misses: u64,
    pub resident_bytes: u64,
    pub capacity_bytes: u64,
}

pub struct PageCache {
    capacity: usize,
    clock: Mutex<Clock>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl PageCache {
    /// A cache of at most `capacity_bytes` of pages (whole pages; 0 caches nothing).
    pub fn new(capacity_bytes: usize) -> PageCache {
        PageCache {
            capacity: capacity_bytes / PAGE_BYTES,
            clock: Mutex::new(Clock::default()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The page if resident (marking it referenced); counts a hit or a miss.
    pub fn get(&self, key: PageKey) -> Option<Arc<Page>> {
        let mut clock = self.clock.lock();
        let found = clock.index.get(&key).copied().map(|slot| {
            let slot = &mut clock.slots[slot];
            slot.referenced = true;
            Arc::clone(&slot.page)
        });
        drop(clock);
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Makes `page` resident under `key` (replacing a page of the same key), evicting by
    /// CLOCK when full. A new page starts unreferenced: it must be hit to outlive a sweep.
    pub fn insert(&self, key: PageKey, page: Arc<Page>) {
        if self.capacity == 0 {
            return;
        }
        let mut clock = self.clock.lock();
        if let Some(slot) = clock.index.get(&key).copied() {
            clock.slots[slot].page = page;
            return;
        }
        let slot = Slot {
            key,
            page,
            referenced: false,
        };
        if clock.slots.len() < self.capacity {
            let at = clock.slots.len();
            clock.slots.push(slot);
            clock.index.insert(key, at);
            return;
        }
        let victim = clock.sweep();
        let evicted = std::mem::replace(&mut clock.slots[victim], slot).key;
        clock.index.remove(&evicted);
        clock.index.insert(key, victim);
        debug_assert_eq!(clock.index.len(), clock.slots.len());
    }

    pub fn counters(&self) -> PageCacheCounters {
        let resident = self.clock.lock().slots.len();
        PageCacheCounters {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            resident_bytes: (resident * PAGE_BYTES) as u64,
            capacity_bytes: (self.capacity * PAGE_BYTES) as u64,
        }
    }
}

impl Clock {
    /// The slot to evict: the first from the hand whose referenced bit is clear, clearing
    /// the set bits it passes (at most one full turn plus one step). Leaves the hand after it.
    fn sweep(&mut self) -> usize {
        loop {
            let at = self.hand;
            self.hand = (self.hand + 1) % self.slots.len();
            let slot = &mut self.slots[at];
            if !slot.referenced {
                return at;
            }
            slot.referenced = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(page: u64) -> PageKey {
        PageKey { file: 1, page }
    }

    fn page(byte: u8) -> Arc<Page> {
        Arc::new(Page([byte; PAGE_BYTES]))
    }

    #[test]
    fn capacity_is_whole_pages_and_never_exceeded() {
        let cache = PageCache::new(3 * PAGE_BYTES + 100);
        for number in 0..10 {
            cache.insert(key(number), page(number as u8));
            assert!(cache.counters().resident_bytes <= 3 * PAGE_BYTES as u64);
        }
        assert_eq!(cache.counters().capacity_bytes, 3 * PAGE_BYTES as u64);
        let resident: Vec<u64> = (0..10).filter(|n| cache.get(key(*n)).is_some()).collect();
        assert_eq!(
            resident,
            vec![7, 8, 9],
            "unreferenced pages leave first in, first out"
        );
        assert!(PageCache::new(PAGE_BYTES - 1).get(key(0)).is_none());
    }

    #[test]
    fn a_page_hit_since_the_last_sweep_survives_and_a_cold_scan_passes_through() {
        let cache = PageCache::new(4 * PAGE_BYTES);
        for number in 0..4 {
            cache.insert(key(number), page(number as u8));
        }
        // page 0 is hot; pages 100.. are a scan of cold pages
        for cold in 100..120 {
            assert_eq!(cache.get(key(0)).unwrap().0[0], 0);
            cache.insert(key(cold), page(1));
        }
        assert!(
            cache.get(key(0)).is_some(),
            "the hot page was evicted by a cold scan"
        );
        let counters = cache.counters();
        assert_eq!(counters.hits, 21);
        assert_eq!(counters.misses, 0);
        assert!(cache.get(key(1)).is_none());
        assert_eq!(cache.counters().misses, 1);
    }

    #[test]
    fn inserting_a_resident_key_replaces_its_page() {
        let cache = PageCache::new(2 * PAGE_BYTES);
        cache.insert(key(5), page(1));
        cache.insert(key(5), page(2));
        assert_eq!(cache.get(key(5)).unwrap().0[0], 2);
        assert_eq!(cache.counters().resident_bytes, PAGE_BYTES as u64);
    }
}
