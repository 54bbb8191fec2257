//! Heaps of (distance, id) ordered by distance, used by every search.

use std::cmp::Ordering;

/// A candidate: internal id and distance (lower is closer). Ordered by distance, then id,
/// so ties break deterministically.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Neighbor {
    pub distance: f32,
    pub id: u32,
}

impl Eq for Neighbor {}

impl Ord for Neighbor {
    #[inline]
    fn cmp(&self, other: &Self) -> Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then(self.id.cmp(&other.id))
    }
}

impl PartialOrd for Neighbor {
    #[inline]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Keeps the `capacity` closest items seen; the root is the farthest kept.
pub(crate) struct TopK {
    capacity: usize,
    heap: std::collections::BinaryHeap<Neighbor>,
}

impl TopK {
    pub fn new(capacity: usize) -> TopK {
        TopK {
            capacity,
            heap: std::collections::BinaryHeap::with_capacity(capacity + 1),
        }
    }

    /// The distance an item must beat to enter (infinity while not full).
    #[inline]
    pub fn threshold(&self) -> f32 {
        if self.heap.len() < self.capacity {
            f32::INFINITY
        } else {
            self.heap.peek().map_or(f32::INFINITY, |top| top.distance)
        }
    }

    #[inline]
    pub fn push(&mut self, candidate: Neighbor) {
        if self.capacity == 0 {
            return;
        }
        if self.heap.len() < self.capacity {
            self.heap.push(candidate);
        } else if let Some(mut top) = self.heap.peek_mut() {
            if candidate < *top {
                *top = candidate;
            }
        }
    }

    /// Closest first.
    pub fn into_sorted(self) -> Vec<Neighbor> {
        self.heap.into_sorted_vec()
    }
}

impl TopK {
    #[inline]
    pub fn is_full(&self) -> bool {
        self.heap.len() >= self.capacity
    }
}
