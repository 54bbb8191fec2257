//! The label → node map. A segment numbers its points 0, 1, 2, … in node order, so its
//! labels equal their nodes: that leading run is held as one number, and only labels
//! outside it are hashed (~30 bytes a point saved at 1M points).

use std::collections::HashMap;

#[derive(Default)]
pub(crate) struct LabelMap {
    /// Labels `0..identity` are present, each at the node of the same number.
    identity: usize,
    /// Every other label. Never holds a label below `identity`: the run grows only while
    /// this is empty.
    others: HashMap<u64, u32>,
}

impl LabelMap {
    pub fn get(&self, label: u64) -> Option<u32> {
        if label < self.identity as u64 {
            return Some(u32::try_from(label).expect("identity run < MAX_POINTS"));
        }
        self.others.get(&label).copied()
    }

    pub fn contains(&self, label: u64) -> bool {
        self.get(label).is_some()
    }

    /// Adds `label` at `node`; false (and nothing changed) when the label is present.
    pub fn insert(&mut self, label: u64, node: u32) -> bool {
        if self.contains(label) {
            return false;
        }
        if self.others.is_empty() && node as usize == self.identity && label == u64::from(node) {
            self.identity += 1;
        } else {
            self.others.insert(label, node);
        }
        true
    }

    pub fn memory_bytes(&self) -> usize {
        self.others.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::LabelMap;

    #[test]
    fn identity_run_then_hashed_labels() {
        let mut map = LabelMap::default();
        for node in 0..100u32 {
            assert!(map.insert(u64::from(node), node));
        }
        assert_eq!(map.memory_bytes(), 0, "the identity run takes no table");
        assert!(!map.insert(42, 100), "a label in the run is present");
        assert!(map.insert(7_000, 100));
        // the run stops growing once anything is hashed: label 101 at node 101 is hashed
        assert!(map.insert(101, 101));
        assert!(map.insert(100, 102), "label 100 is not in the run");
        assert_eq!(map.get(99), Some(99));
        assert_eq!(map.get(100), Some(102));
        assert_eq!(map.get(101), Some(101));
        assert_eq!(map.get(7_000), Some(100));
        assert_eq!(map.get(103), None);
        assert!(!map.insert(7_000, 103));
    }
}
