//! The 1-bit first pass of an SQ8 search (issue 20 §2): every node also keeps a 1-bit
//! RaBitQ code of its vector against one centroid (the mean of up to 50,000 of the rows
//! when the pass is enabled), and the layer-0 beam scores a visited node's fresh neighbors on those codes
//! first. A neighbor whose distance **lower bound** (estimate minus RaBitQ's error bound)
//! cannot beat the beam's current worst is dropped without reading its SQ8 row; only the
//! rest are scored on SQ8 as before.
//!
//! Bytes per neighbor: at 384-d a 1-bit row is one cache line (48 B of code, 16 B of
//! factors) against the SQ8 row's seven; at 768-d two against thirteen. The codes of
//! 100k × 384-d are 6.4 MB (they stay in the L3), the SQ8 rows 45 MB (they do not). A
//! dropped neighbor could not have entered the beam unless its true distance fell outside
//! the bound (ε₀ = 1.9: rare, tested as a recall floor against the plain SQ8 walk).
//!
//! Measured here it does not pay (BENCHMARKS.md, issue 20): it scores ~40% fewer SQ8 rows
//! at the same recall, but each expansion waits for one more miss, and the search is
//! slower. So it is opt-in: [`HnswIndex::enable_first_pass`] codes an index's rows (the
//! codes are derived from the f32 rows and not saved, so the file format does not change;
//! an index whose rows live elsewhere has no first pass), and
//! [`super::HnswSearchParams::first_pass`] uses them.

use std::cell::Cell;

use sagitta_kernels::AppendSlab;

use super::storage::Scorer;
use super::HnswIndex;
use crate::error::{IndexError, Result};
use crate::metric::Metric;
use crate::rabitq::{Rabitq, RabitqQuery, ScanTerms};
use crate::threads::{effective_threads, for_each_chunk};

/// The rotation's seed (any fixed value: the codes are never stored).
const SCREEN_SEED: u64 = 0x5C4E_E171_F1A5_7BA5;

/// Words of factors after a row's code: `‖x − c‖`, `1 / fit`, the code's set bits and
/// `‖x‖²`, as f32 bits two to a word (the bound's spread follows from `1 / fit`; the set
/// bits are stored because the index crate's `count_ones` has no POPCNT to compile to).
const FACTOR_WORDS: usize = 2;

/// One 1-bit code row per node, with its factors: `code_words + 2` u64s, so a 384-d row
/// is exactly one cache line.
pub(crate) struct BitStore {
    rabitq: Rabitq,
    centroid: Vec<f32>,
    rows: AppendSlab<u64>,
}

impl BitStore {
    /// A store for `capacity` rows whose centroid is the mean of `sample` (row-major,
    /// `dim` wide; at least one row).
    pub fn new(sample: &[f32], dim: usize, capacity: usize) -> Result<BitStore> {
        let rabitq = Rabitq::new(dim, SCREEN_SEED)?;
        let mut centroid = vec![0.0f64; dim];
        let rows = sample.len() / dim;
        for row in sample.chunks_exact(dim) {
            for (sum, value) in centroid.iter_mut().zip(row) {
                *sum += f64::from(*value);
            }
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
        let centroid = centroid
            .iter()
            .map(|sum| (sum / rows.max(1) as f64) as f32)
            .collect();
        let stride = AppendSlab::<u64>::aligned_stride(rabitq.code_words() + FACTOR_WORDS);
        Ok(BitStore {
            rows: AppendSlab::new(capacity, stride),
            rabitq,
            centroid,
        })
    }

    /// Codes `vector` as node `node`'s row (once; a second write is ignored, as the slab
    /// refuses it).
    pub fn write(&self, node: usize, vector: &[f32]) {
        let words = self.rabitq.code_words();
        let mut scratch = vec![0.0f32; self.rabitq.padded_dim()];
        let mut row = vec![0u64; words + FACTOR_WORDS];
        let factors = self
            .rabitq
            .encode(vector, &self.centroid, &mut scratch, &mut row[..words]);
        let terms = self.rabitq.scan_terms(&row[..words], factors);
        let norm_squared: f32 = vector.iter().map(|v| v * v).sum();
        row[words] = pack(factors.norm, terms.inverse_fit);
        row[words + 1] = pack(terms.set, norm_squared);
        let _ = self.rows.write_row(node, &row);
    }

    pub fn grow(&mut self, capacity: usize) {
        self.rows.grow(capacity);
    }

    pub fn row_bytes(&self) -> usize {
        self.rows.stride() * 8
    }

    pub fn memory_bytes(&self) -> usize {
        self.rows.memory_bytes() + self.centroid.len() * 4
    }

    /// The screen of one query (normalized for cosine, as the rows are).
    /// `count` counts the rows screened when statistics are asked for.
    pub fn screen<'a>(
        &'a self,
        query: &[f32],
        metric: Metric,
        count: Option<&'a Cell<usize>>,
    ) -> BitScreen<'a> {
        BitScreen {
            query: self.rabitq.query(query, &self.centroid),
            query_norm_squared: query.iter().map(|v| v * v).sum(),
            store: self,
            metric,
            count,
        }
    }
}

fn pack(low: f32, high: f32) -> u64 {
    u64::from(low.to_bits()) | (u64::from(high.to_bits()) << 32)
}

#[allow(clippy::cast_possible_truncation)]
fn unpack(word: u64) -> (f32, f32) {
    (
        f32::from_bits(word as u32),
        f32::from_bits((word >> 32) as u32),
    )
}

/// One query's view of a [`BitStore`].
pub(crate) struct BitScreen<'a> {
    query: RabitqQuery,
    query_norm_squared: f32,
    store: &'a BitStore,
    metric: Metric,
    count: Option<&'a Cell<usize>>,
}

impl BitScreen<'_> {
    /// A lower bound on node `node`'s distance in the scorers' units (squared L2, or
    /// `−⟨x, q⟩` for Cosine and Dot); `None` while its row is unpublished.
    #[inline]
    pub fn lower_bound(&self, node: u32) -> Option<f32> {
        self.scored(node, 1.0)
    }

    /// The 1-bit estimate of node `node`'s distance, in the scorers' units.
    #[inline]
    pub fn estimate(&self, node: u32) -> Option<f32> {
        self.scored(node, 0.0)
    }

    /// The estimate less `bounds` times its RaBitQ error bound, in the scorers' units.
    #[inline]
    fn scored(&self, node: u32, bounds: f32) -> Option<f32> {
        let row = self.store.rows.row(node as usize)?;
        if let Some(count) = self.count {
            count.set(count.get() + 1);
        }
        let words = self.store.rabitq.code_words();
        let (norm, inverse_fit) = unpack(row[words]);
        let (set, norm_squared) = unpack(row[words + 1]);
        let terms = ScanTerms {
            set,
            inverse_fit,
            spread: self.store.rabitq.spread_of(inverse_fit),
        };
        let (estimate, bound) = self.query.estimate_with(&row[..words], norm, terms);
        let squared = estimate - bounds * bound;
        Some(match self.metric {
            Metric::L2 => squared,
            // ‖x − q‖² = ‖x‖² + ‖q‖² − 2⟨x, q⟩
            Metric::Cosine | Metric::Dot => {
                0.5 * (squared - norm_squared - self.query_norm_squared)
            }
        })
    }

    #[inline]
    pub fn prefetch(&self, node: u32) {
        if let Some(row) = self.store.rows.row(node as usize) {
            sagitta_kernels::prefetch_slice(row);
        }
    }
}

/// Traversal on the 1-bit codes alone ([`super::HnswSearchParams::bit_walk`]): the beam
/// orders nodes by their estimates; the caller scores what it finds on SQ8, then f32.
pub(crate) struct BitScorer<'a>(pub BitScreen<'a>);

impl Scorer for BitScorer<'_> {
    #[inline]
    fn distance(&self, node: u32) -> Option<f32> {
        self.0.estimate(node)
    }
    #[inline]
    fn prefetch(&self, node: u32) {
        self.0.prefetch(node);
    }
}

/// Rows the centroid is taken over when the store is made from stored rows.
const CENTROID_ROWS_MAX: usize = 50_000;

impl HnswIndex {
    /// Gives an SQ8 index whose rows are in memory its 1-bit first pass: codes every
    /// node on `threads` threads (0 = all cores); nodes added later are coded as they are
    /// published. Returns false (and does nothing) without trained SQ8 codes, with the
    /// rows elsewhere, or when the index has its first pass already. The codes are not
    /// saved: a loaded index needs this call again.
    pub fn enable_first_pass(&mut self, threads: usize) -> Result<bool> {
        let count = self.len();
        if self.sq8.get().is_none() || self.rows_outside || self.bits.get().is_some() || count == 0
        {
            return Ok(false);
        }
        let sample = self.strided_sample(count, CENTROID_ROWS_MAX)?;
        let store = BitStore::new(&sample, self.params.dim, self.capacity())?;
        let threads = effective_threads(threads, count);
        for_each_chunk(count, 4_096, threads, |start, end| {
            for node in start..end {
                store.write(node, self.stored_row(node)?);
            }
            Ok::<(), IndexError>(())
        })?;
        let _ = self.bits.set(store);
        Ok(true)
    }
}
