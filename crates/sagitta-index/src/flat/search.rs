//! Batched exact search.

use super::FlatIndex;
use crate::error::Result;
use crate::limits::{check_range, MAX_EF};
use crate::metric::{check_batch, normalize_into, Metric};
use crate::threads::{effective_threads, for_each_chunk};
use crate::top_k::{Neighbor, TopK};
use crate::MISSING_ID;

/// Queries scored together against one tile of rows.
const QUERIES_PER_PASS: usize = 16;
/// Rows per tile: 1,024 × 768 × 4 B = 3 MB at 768-d, 1.5 MB at 384-d (L2/L3-resident).
const ROWS_PER_TILE: usize = 1_024;

/// Results of a batch search: `ids[i*k..(i+1)*k]`, `scores` likewise, closest first.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchResults {
    pub k: usize,
    pub ids: Vec<u64>,
    pub scores: Vec<f32>,
}

impl SearchResults {
    pub(crate) fn new(query_count: usize, k: usize) -> SearchResults {
        SearchResults {
            k,
            ids: vec![MISSING_ID; query_count * k],
            scores: vec![f32::NAN; query_count * k],
        }
    }
}

impl FlatIndex {
    /// Exact top-`k` for each row of `queries` using `threads` threads (0 = all cores).
    pub fn search(&self, queries: &[f32], k: usize, threads: usize) -> Result<SearchResults> {
        self.search_filtered(queries, k, threads, |_| true)
    }

    /// Exact top-`k` among rows for which `accept(row)` holds.
    pub fn search_filtered(
        &self,
        queries: &[f32],
        k: usize,
        threads: usize,
        accept: impl Fn(usize) -> bool + Sync,
    ) -> Result<SearchResults> {
        check_range("k", k, 1, MAX_EF)?;
        let query_count = check_batch(queries, self.dim)?;
        let mut prepared = queries.to_vec();
        if self.metric == Metric::Cosine {
            for row in prepared.chunks_exact_mut(self.dim) {
                let copy = row.to_vec();
                normalize_into(&copy, row);
            }
        }
        let threads = effective_threads(threads, query_count.div_ceil(QUERIES_PER_PASS));
        let results = parking_lot::Mutex::new(SearchResults::new(query_count, k));
        for_each_chunk(query_count, QUERIES_PER_PASS, threads, |start, end| {
            let found = self.scan(&prepared[start * self.dim..end * self.dim], k, &accept);
            let mut guard = results.lock();
            for (offset, neighbors) in found.into_iter().enumerate() {
                let base = (start + offset) * k;
                for (slot, neighbor) in neighbors.into_iter().enumerate() {
                    guard.ids[base + slot] = self.labels[neighbor.id as usize];
                    guard.scores[base + slot] = self.metric.score_from_distance(neighbor.distance);
                }
            }
            Ok::<(), crate::IndexError>(())
        })?;
        Ok(results.into_inner())
    }

    /// Scores a few prepared queries against every row, tile by tile.
    fn scan(
        &self,
        queries: &[f32],
        k: usize,
        accept: &(impl Fn(usize) -> bool + Sync),
    ) -> Vec<Vec<Neighbor>> {
        let query_count = queries.len() / self.dim;
        let mut heaps: Vec<TopK> = (0..query_count).map(|_| TopK::new(k)).collect();
        let mut scores = vec![0.0f32; query_count * ROWS_PER_TILE];
        let mut tile_start = 0;
        while tile_start < self.len() {
            let tile_end = (tile_start + ROWS_PER_TILE).min(self.len());
            let rows = tile_end - tile_start;
            let tile = &self.vectors[tile_start * self.dim..tile_end * self.dim];
            let out = &mut scores[..query_count * rows];
            match self.metric {
                Metric::Cosine | Metric::Dot => {
                    sagitta_kernels::dot_f32_many(queries, tile, self.dim, out);
                }
                Metric::L2 => sagitta_kernels::l2_squared_f32_many(queries, tile, self.dim, out),
            }
            let negate = self.metric != Metric::L2;
            for (query_index, heap) in heaps.iter_mut().enumerate() {
                for (offset, score) in out[query_index * rows..(query_index + 1) * rows]
                    .iter()
                    .enumerate()
                {
                    let distance = if negate { -*score } else { *score };
                    // `!is_full()` keeps +inf distances (huge finite inputs) while there is room.
                    if (!heap.is_full() || distance < heap.threshold())
                        && accept(tile_start + offset)
                    {
                        #[allow(clippy::cast_possible_truncation)]
                        heap.push(Neighbor {
                            distance,
                            id: (tile_start + offset) as u32,
                        });
                    }
                }
            }
            tile_start = tile_end;
        }
        heaps.into_iter().map(TopK::into_sorted).collect()
    }
}
