//! HNSW storage: the graph as flat arrays of atomics, the f32 vector rows, the SQ8 code rows,
//! and the scorers that turn a node id into a distance.
//!
//! Layer 0 is one `AtomicU32` array with a fixed block per node: `[count, n_1 .. n_m0]`.
//! Upper layers (a ~1/m fraction of nodes) get one boxed block per node holding every level.
//! Readers load links with `Acquire` and never lock; writers hold the node's mutex, write the
//! entries, then publish the count with `Release`. A reader may see a mix of an old and a new
//! list, but every entry it sees is a node id whose rows were published before it was linked.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

use parking_lot::Mutex;
use sagitta_kernels::{AppendSlab, Kernels};

use super::screen::BitScreen;
use crate::metric::Metric;
use crate::quantizer::Sq8Quantizer;

pub(crate) struct Graph {
    pub m: usize,
    pub m0: usize,
    level0: Vec<AtomicU32>,
    upper: Vec<OnceLock<Box<[AtomicU32]>>>,
    levels: Vec<AtomicU8>,
    locks: Vec<Mutex<()>>,
}

impl Graph {
    pub fn new(m: usize, capacity: usize) -> Graph {
        let mut graph = Graph {
            m,
            m0: 2 * m,
            level0: sagitta_kernels::zeroed_atomic_u32s(capacity * (1 + 2 * m)),
            upper: Vec::new(),
            levels: Vec::new(),
            locks: Vec::new(),
        };
        graph.grow(capacity);
        graph
    }

    pub fn grow(&mut self, capacity: usize) {
        let block = 1 + self.m0;
        self.level0
            .resize_with(capacity * block, || AtomicU32::new(0));
        self.upper.resize_with(capacity, OnceLock::new);
        self.levels.resize_with(capacity, || AtomicU8::new(0));
        self.locks.resize_with(capacity, || Mutex::new(()));
    }

    pub fn capacity(&self) -> usize {
        self.levels.len()
    }

    /// Records `level` for `node` and allocates its upper-layer blocks. Called once per node
    /// before the node is linked anywhere.
    pub fn init_node(&self, node: u32, level: usize) {
        self.levels[node as usize].store(
            u8::try_from(level).expect("level <= MAX_LEVEL"),
            Ordering::Release,
        );
        if level > 0 {
            let words = level * (1 + self.m);
            let block: Box<[AtomicU32]> = (0..words).map(|_| AtomicU32::new(0)).collect();
            let _ = self.upper[node as usize].set(block);
        }
    }

    #[inline]
    pub fn level(&self, node: u32) -> usize {
        self.levels[node as usize].load(Ordering::Acquire) as usize
    }

    #[inline]
    pub fn lock(&self, node: u32) -> parking_lot::MutexGuard<'_, ()> {
        self.locks[node as usize].lock()
    }

    #[inline]
    fn block(&self, node: u32, layer: usize) -> &[AtomicU32] {
        if layer == 0 {
            let block = 1 + self.m0;
            let start = node as usize * block;
            &self.level0[start..start + block]
        } else {
            let block = 1 + self.m;
            match self.upper[node as usize].get() {
                Some(blocks) if layer * block <= blocks.len() => {
                    &blocks[(layer - 1) * block..layer * block]
                }
                _ => &[],
            }
        }
    }

    /// Copies the neighbors of `node` on `layer` into `out` (cleared first).
    #[inline]
    pub fn neighbors_into(&self, node: u32, layer: usize, out: &mut Vec<u32>) {
        out.clear();
        let block = self.block(node, layer);
        let Some((count, entries)) = block.split_first() else {
            return;
        };
        let count = (count.load(Ordering::Acquire) as usize).min(entries.len());
        out.extend(entries[..count].iter().map(|e| e.load(Ordering::Acquire)));
    }

    /// Prefetches the link block of `node` on layer 0.
    #[inline]
    pub fn prefetch_links(&self, node: u32) {
        let block = 1 + self.m0;
        let start = node as usize * block;
        if let Some(first) = self.level0.get(start..start + block) {
            sagitta_kernels::prefetch_slice(first);
        }
    }

    /// Replaces the neighbor list. Caller holds `lock(node)`. A node without this layer
    /// (only possible from a corrupt file, which `load` rejects) is left untouched.
    pub fn set_neighbors(&self, node: u32, layer: usize, neighbors: &[u32]) {
        let block = self.block(node, layer);
        let Some((count, entries)) = block.split_first() else {
            debug_assert!(false, "node {node} has no layer {layer}");
            return;
        };
        let kept = neighbors.len().min(entries.len());
        debug_assert_eq!(kept, neighbors.len(), "neighbor list over capacity");
        for (entry, id) in entries.iter().zip(&neighbors[..kept]) {
            entry.store(*id, Ordering::Release);
        }
        count.store(u32::try_from(kept).expect("<= m0"), Ordering::Release);
    }

    /// Appends one neighbor if there is room; returns false when the list is full (or the
    /// node has no such layer).
    pub fn try_append(&self, node: u32, layer: usize, neighbor: u32) -> bool {
        let block = self.block(node, layer);
        let Some((count, entries)) = block.split_first() else {
            return false;
        };
        let current = count.load(Ordering::Acquire) as usize;
        if current >= entries.len() {
            return false;
        }
        entries[current].store(neighbor, Ordering::Release);
        count.store(
            u32::try_from(current + 1).expect("<= m0"),
            Ordering::Release,
        );
        true
    }

    pub fn memory_bytes(&self) -> usize {
        let upper: usize = self
            .upper
            .iter()
            .filter_map(OnceLock::get)
            .map(|block| block.len() * 4)
            .sum();
        self.level0.len() * 4
            + upper
            + self.upper.len() * std::mem::size_of::<OnceLock<Box<[AtomicU32]>>>()
            + self.levels.len()
            + self.locks.len() * std::mem::size_of::<Mutex<()>>()
    }

    /// Raw words of a node's block on `layer` (count first), for serialization.
    pub fn block_words(&self, node: u32, layer: usize) -> impl Iterator<Item = u32> + '_ {
        self.block(node, layer)
            .iter()
            .map(|word| word.load(Ordering::Acquire))
    }

    /// Restores a block word-for-word (load path; the node is not yet visible to readers).
    pub fn restore_block(&self, node: u32, layer: usize, words: &[u32]) {
        let block = self.block(node, layer);
        assert_eq!(block.len(), words.len());
        for (target, word) in block.iter().zip(words) {
            target.store(*word, Ordering::Relaxed);
        }
    }
}

/// A bitset of deleted nodes, readable without locks.
pub(crate) struct DeletedSet {
    words: Vec<AtomicU64>,
}

impl DeletedSet {
    pub fn new(capacity: usize) -> DeletedSet {
        let mut set = DeletedSet { words: Vec::new() };
        set.grow(capacity);
        set
    }
    pub fn grow(&mut self, capacity: usize) {
        self.words
            .resize_with(capacity.div_ceil(64), || AtomicU64::new(0));
    }
    #[inline]
    pub fn contains(&self, node: u32) -> bool {
        let word = self.words[node as usize / 64].load(Ordering::Acquire);
        word & (1u64 << (node % 64)) != 0
    }
    /// Marks `node`; returns true if it was not already marked.
    pub fn insert(&self, node: u32) -> bool {
        let bit = 1u64 << (node % 64);
        self.words[node as usize / 64].fetch_or(bit, Ordering::AcqRel) & bit == 0
    }
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().map(|w| w.load(Ordering::Acquire))
    }
    pub fn memory_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// SQ8 traversal data: the trained quantizer and one code row per node.
pub(crate) struct Sq8Store {
    pub quantizer: Sq8Quantizer,
    pub codes: AppendSlab<i8>,
}

impl Sq8Store {
    pub fn new(quantizer: Sq8Quantizer, capacity: usize) -> Sq8Store {
        let stride = quantizer.stride();
        Sq8Store {
            quantizer,
            codes: AppendSlab::new(capacity, stride),
        }
    }
}

/// Turns a node id into a distance to one query. Monomorphized per kind (no `dyn` on the
/// scoring path).
pub(crate) trait Scorer {
    /// `None` when the node's rows are not yet published.
    fn distance(&self, node: u32) -> Option<f32>;
    fn prefetch(&self, node: u32);
    /// The cheaper first pass, if this scorer has one ([`super::screen`]).
    fn screen(&self) -> Option<&BitScreen<'_>> {
        None
    }
}

/// Exact scoring against f32 rows.
pub(crate) struct F32Scorer<'a> {
    pub query: &'a [f32],
    pub vectors: &'a AppendSlab<f32>,
    pub kernels: &'static Kernels,
    pub metric: Metric,
    /// Counts evaluations when statistics are requested (one predictable branch otherwise).
    pub distance_count: Option<&'a Cell<usize>>,
}

impl Scorer for F32Scorer<'_> {
    #[inline]
    fn distance(&self, node: u32) -> Option<f32> {
        let row = &self.vectors.row(node as usize)?[..self.query.len()];
        if let Some(count) = self.distance_count {
            count.set(count.get() + 1);
        }
        Some(match self.metric {
            Metric::L2 => (self.kernels.l2_squared_f32)(self.query, row),
            Metric::Cosine | Metric::Dot => -(self.kernels.dot_f32)(self.query, row),
        })
    }
    #[inline]
    fn prefetch(&self, node: u32) {
        if let Some(row) = self.vectors.row(node as usize) {
            sagitta_kernels::prefetch_slice(row);
        }
    }
}

/// Approximate scoring of an SQ8 query (`code + 128` as u8) against SQ8 rows.
/// 768-d: 12 `vpdpbusd` over 13 cache lines per distance.
pub(crate) struct Sq8Scorer<'a> {
    pub query: &'a [u8],
    pub query_norm_squared: f32,
    pub store: &'a Sq8Store,
    pub kernels: &'static Kernels,
    pub metric: Metric,
    pub distance_count: Option<&'a Cell<usize>>,
    /// The 1-bit first pass of a search (none while building).
    pub screen: Option<BitScreen<'a>>,
}

impl Scorer for Sq8Scorer<'_> {
    #[inline]
    fn screen(&self) -> Option<&BitScreen<'_>> {
        self.screen.as_ref()
    }
    #[inline]
    fn distance(&self, node: u32) -> Option<f32> {
        let row = self.store.codes.row(node as usize)?;
        if let Some(count) = self.distance_count {
            count.set(count.get() + 1);
        }
        let dim = self.query.len();
        let raw = (self.kernels.dot_u8_i8)(self.query, &row[..dim]);
        let (code_sum, norm_squared) = self.store.quantizer.row_aux(row);
        let scale = self.store.quantizer.scale();
        #[allow(clippy::cast_precision_loss)]
        let dot = scale * scale * (i64::from(raw) - 128 * i64::from(code_sum)) as f32;
        Some(match self.metric {
            Metric::L2 => self.query_norm_squared + norm_squared - 2.0 * dot,
            Metric::Cosine | Metric::Dot => -dot,
        })
    }
    #[inline]
    fn prefetch(&self, node: u32) {
        if let Some(row) = self.store.codes.row(node as usize) {
            sagitta_kernels::prefetch_slice(row);
        }
    }
}
