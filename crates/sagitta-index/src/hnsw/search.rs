//! Search: greedy descent through the upper layers, a best-first beam of width `ef` on
//! layer 0 (on SQ8 codes when quantized), then exact re-scoring of the best candidates.

use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::screen::{BitScorer, BitScreen};
use super::storage::{F32Scorer, Scorer, Sq8Scorer, Sq8Store};
use super::HnswIndex;
use crate::error::Result;
use crate::flat::SearchResults;
use crate::limits::{check_range, MAX_EF};
use crate::metric::{check_batch, normalize_into, Metric};
use crate::threads::{effective_threads, for_each_chunk};
use crate::top_k::{Neighbor, TopK};
use crate::visited::with_visited;

/// Rows a layer search prefetches ahead of the one it scores. Prefetching every fresh row
/// at once (up to 2·m rows of 13 lines at 768-d SQ8) overflows the core's ~24 miss buffers
/// and stalls on the prefetches themselves; a window of 4 keeps enough misses in flight
/// (synthetic 768-d, 200k rows, 2 threads: build 19.3 s -> 16.8 s).
const PREFETCH_AHEAD: usize = 4;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Layer(pub usize);

#[derive(Clone, Copy, Debug)]
pub(crate) struct LayerSearch {
    pub ef: usize,
    pub layer: Layer,
}

/// Search parameters. `ef` is raised to `k` when smaller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HnswSearchParams {
    pub k: usize,
    pub ef: usize,
    /// With SQ8: how many of the best candidates are re-scored on f32 (`None` =
    /// [`default_rescore`]`(k)`, capped at `ef`).
    pub rescore: Option<usize>,
    /// Traverse on f32 even when SQ8 codes exist.
    pub exact_traversal: bool,
    /// With SQ8: screen neighbors on their 1-bit codes first ([`super::screen`]) where the
    /// index has them ([`HnswIndex::enable_first_pass`]). Off by default (slower here).
    pub first_pass: bool,
    /// With SQ8 and the first pass's codes: walk the graph on the 1-bit codes alone,
    /// then score the beam's `ef` nodes on SQ8 and the best of those on f32.
    pub bit_walk: bool,
    /// Batch searches walk [`super::LANES`] queries at a time on each thread
    /// ([`super::interleave`]; same answers). Off by default: slower here.
    pub interleave: bool,
}

impl HnswSearchParams {
    pub fn new(k: usize, ef: usize) -> HnswSearchParams {
        HnswSearchParams {
            k,
            ef,
            rescore: None,
            exact_traversal: false,
            first_pass: false,
            bit_walk: false,
            interleave: false,
        }
    }

    /// Candidates an SQ8 walk keeps for the exact re-score: [`HnswSearchParams::rescore`]
    /// or [`default_rescore`], at least `k`.
    pub(crate) fn rescore_depth(&self) -> usize {
        self.rescore
            .unwrap_or_else(|| default_rescore(self.k))
            .max(self.k)
    }

    fn validate(&self) -> Result<()> {
        check_range("k", self.k, 1, MAX_EF)?;
        check_range("ef", self.ef, 1, MAX_EF)?;
        if let Some(rescore) = self.rescore {
            check_range("rescore", rescore, 1, MAX_EF)?;
        }
        Ok(())
    }
}

/// Candidates re-scored exactly after an SQ8 traversal when the caller does not say:
/// `max(4·k, 32)`. SQ8 distance error is small next to neighbor gaps, so the true top-k sits
/// well inside the top 4·k approximate candidates (debian-minilm 100k: recall identical to
/// re-scoring all `ef` at ef = 32..256), and each skipped re-score saves one random f32 row.
pub fn default_rescore(k: usize) -> usize {
    (4 * k).max(32)
}

/// Work one search did, for estimates of bytes moved per query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SearchStats {
    /// Distance evaluations during traversal (SQ8 codes or f32 rows).
    pub traversal_distance_count: usize,
    /// Exact f32 re-scores after an SQ8 traversal.
    pub rescore_distance_count: usize,
    /// Neighbors scored on their 1-bit codes by the first pass (those it keeps are
    /// scored on SQ8 too, and counted in `traversal_distance_count`).
    pub screened_count: usize,
}

/// One result: internal node, external label, score (similarity, or squared L2 distance).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SearchHit {
    pub node: u32,
    pub label: u64,
    pub score: f32,
}

impl HnswIndex {
    /// Top-`k` for one query. Deleted points are never returned.
    pub fn search(&self, query: &[f32], params: HnswSearchParams) -> Result<Vec<SearchHit>> {
        self.search_filtered(query, params, |_| true)
    }

    /// Top-`k` among nodes for which `accept(node)` holds — the predicate hook filters and
    /// tombstones use. Rejected nodes are still traversed (they keep the graph connected)
    /// but never enter the result set.
    pub fn search_filtered(
        &self,
        query: &[f32],
        params: HnswSearchParams,
        accept: impl Fn(u32) -> bool,
    ) -> Result<Vec<SearchHit>> {
        let prepared = self.prepare_query(query, params)?;
        let mut query_codes = Vec::new();
        Ok(self.search_prepared(&prepared, &mut query_codes, params, &accept, None))
    }

    /// Validates one query and its parameters; returns it normalized for cosine. A search
    /// that re-scores needs the rows in memory.
    fn prepare_query(&self, query: &[f32], params: HnswSearchParams) -> Result<Vec<f32>> {
        self.check_rows_here()?;
        self.prepare_codes_query(query, params)
    }

    fn check_rows_here(&self) -> Result<()> {
        if self.rows_outside {
            return Err(crate::IndexError::VectorsElsewhere {
                operation: "an exact re-score (search_codes gives the candidates)",
            });
        }
        Ok(())
    }

    /// [`HnswIndex::prepare_query`] without the rows.
    fn prepare_codes_query(&self, query: &[f32], params: HnswSearchParams) -> Result<Vec<f32>> {
        params.validate()?;
        check_batch(query, self.params.dim)?;
        if query.len() != self.params.dim {
            return Err(crate::IndexError::WrongVectorDimension {
                expected: self.params.dim,
                received: query.len(),
            });
        }
        let mut prepared = query.to_vec();
        if self.params.metric == Metric::Cosine {
            normalize_into(query, &mut prepared);
        }
        Ok(prepared)
    }

    /// [`HnswIndex::search`] that also reports the work done ([`SearchStats`]).
    pub fn search_with_stats(
        &self,
        query: &[f32],
        params: HnswSearchParams,
    ) -> Result<(Vec<SearchHit>, SearchStats)> {
        let prepared = self.prepare_query(query, params)?;
        let counts = [Cell::new(0), Cell::new(0), Cell::new(0)];
        let hits =
            self.search_prepared(&prepared, &mut Vec::new(), params, &|_| true, Some(&counts));
        Ok((
            hits,
            SearchStats {
                traversal_distance_count: counts[0].get(),
                rescore_distance_count: counts[1].get(),
                screened_count: counts[2].get(),
            },
        ))
    }

    /// Batch search: `queries` row-major, `threads` threads (0 = all cores).
    pub fn search_batch(
        &self,
        queries: &[f32],
        params: HnswSearchParams,
        threads: usize,
    ) -> Result<SearchResults> {
        params.validate()?;
        self.check_rows_here()?;
        let dim = self.params.dim;
        let query_count = check_batch(queries, dim)?;
        let threads = effective_threads(threads, query_count);
        let results = parking_lot::Mutex::new(SearchResults::new(query_count, params.k));
        let chunk = (query_count / (threads * 8)).clamp(1, 64);
        let lanes = self
            .sq8
            .get()
            .filter(|_| params.interleave && !params.exact_traversal && !params.first_pass);
        for_each_chunk(query_count, chunk, threads, |start, end| {
            if let Some(store) = lanes {
                let prepared = self.prepared_rows(&queries[start * dim..end * dim]);
                let rows: Vec<&[f32]> = prepared.chunks_exact(dim).collect();
                let mut found = Vec::with_capacity(rows.len());
                self.search_lanes(store, &rows, params, &mut found);
                let local: Vec<(usize, Vec<SearchHit>)> = (start..end).zip(found).collect();
                results.lock().fill(local, params.k);
                return Ok(());
            }
            let mut prepared = vec![0.0f32; dim];
            let mut query_codes = Vec::new();
            let mut local: Vec<(usize, Vec<SearchHit>)> = Vec::with_capacity(end - start);
            for index in start..end {
                let query = &queries[index * dim..(index + 1) * dim];
                if self.params.metric == Metric::Cosine {
                    normalize_into(query, &mut prepared);
                } else {
                    prepared.copy_from_slice(query);
                }
                let hits =
                    self.search_prepared(&prepared, &mut query_codes, params, &|_| true, None);
                local.push((index, hits));
            }
            results.lock().fill(local, params.k);
            Ok::<(), crate::IndexError>(())
        })?;
        Ok(results.into_inner())
    }

    /// `queries` (row-major) as the search sees them: normalized for cosine.
    fn prepared_rows(&self, queries: &[f32]) -> Vec<f32> {
        let mut prepared = queries.to_vec();
        if self.params.metric == Metric::Cosine {
            for (row, query) in prepared
                .chunks_exact_mut(self.params.dim)
                .zip(queries.chunks_exact(self.params.dim))
            {
                normalize_into(query, row);
            }
        }
        prepared
    }

    fn search_prepared(
        &self,
        query: &[f32],
        query_codes: &mut Vec<u8>,
        params: HnswSearchParams,
        accept: &impl Fn(u32) -> bool,
        counts: Option<&[Cell<usize>; 3]>,
    ) -> Vec<SearchHit> {
        let Some((entry, max_level)) = self.entry_snapshot() else {
            return Vec::new();
        };
        let ef = params.ef.max(params.k);
        let accept_live = |node: u32| !self.deleted.contains(node) && accept(node);
        let kernels = self.kernels();
        let metric = self.params.metric;
        let exact = F32Scorer {
            query,
            vectors: &self.vectors,
            kernels,
            metric,
            distance_count: counts.map(|c| &c[0]),
        };
        let candidates = match self.sq8.get() {
            Some(store) if !params.exact_traversal => {
                let rescorer = F32Scorer {
                    distance_count: counts.map(|c| &c[1]),
                    ..exact
                };
                let found =
                    self.sq8_candidates(store, query, query_codes, params, &accept_live, counts);
                rescore_in_order(&rescorer, &found)
            }
            _ => self.beam(&exact, entry, max_level, ef, &accept_live),
        };
        self.hits(candidates, params.k)
    }

    /// The first `k` of `found` (closest first) as hits: labels and scores.
    pub(crate) fn hits(&self, found: Vec<Neighbor>, k: usize) -> Vec<SearchHit> {
        found
            .into_iter()
            .take(k)
            .map(|neighbor| SearchHit {
                node: neighbor.id,
                label: self.label(neighbor.id),
                score: self.params.metric.score_from_distance(neighbor.distance),
            })
            .collect()
    }

    /// The SQ8 walk: the best `rescore` candidates ([`HnswSearchParams::rescore`], at least
    /// `k`) among the nodes `accept` takes, closest first by their code distance. `counts`
    /// (when statistics are asked for): SQ8 scores, re-scores (unused here), screens.
    fn sq8_candidates(
        &self,
        store: &Sq8Store,
        query: &[f32],
        query_codes: &mut Vec<u8>,
        params: HnswSearchParams,
        accept: &impl Fn(u32) -> bool,
        counts: Option<&[Cell<usize>; 3]>,
    ) -> Vec<Neighbor> {
        let Some((entry, max_level)) = self.entry_snapshot() else {
            return Vec::new();
        };
        query_codes.resize(self.params.dim, 0);
        let query_norm_squared = store.quantizer.encode_query(query, query_codes);
        let scorer = Sq8Scorer {
            query: query_codes,
            query_norm_squared,
            store,
            kernels: self.kernels(),
            metric: self.params.metric,
            distance_count: counts.map(|c| &c[0]),
            screen: self
                .bits
                .get()
                .filter(|_| params.first_pass)
                .map(|bits| bits.screen(query, self.params.metric, counts.map(|c| &c[2]))),
        };
        let ef = params.ef.max(params.k);
        let walk = self.bits.get().filter(|_| params.bit_walk);
        let mut found = match walk {
            Some(bits) => {
                let screen = bits.screen(query, self.params.metric, counts.map(|c| &c[2]));
                let found = self.beam(&BitScorer(screen), entry, max_level, ef, accept);
                let plain = Sq8Scorer {
                    screen: None,
                    ..scorer
                };
                rescore_in_order(&plain, &found)
            }
            None => self.beam(&scorer, entry, max_level, ef, accept),
        };
        found.truncate(params.rescore_depth());
        found
    }

    /// The candidates an exact re-score of one query would take, for a caller that keeps
    /// the rows ([`HnswIndex::rows_outside`]): the SQ8 walk's best `rescore` nodes (see
    /// [`HnswSearchParams::rescore`]) among those `accept` takes, closest first, each with
    /// its code distance ("lower is closer"). The query is normalized for cosine here as in
    /// [`HnswIndex::search`]: the caller re-scores against the normalized query.
    pub fn search_codes(
        &self,
        query: &[f32],
        params: HnswSearchParams,
        accept: impl Fn(u32) -> bool,
    ) -> Result<Vec<(u32, f32)>> {
        let store = self.sq8.get().ok_or(crate::IndexError::NoCodes)?;
        let prepared = self.prepare_codes_query(query, params)?;
        let accept_live = |node: u32| !self.deleted.contains(node) && accept(node);
        let found = self.sq8_candidates(
            store,
            &prepared,
            &mut Vec::new(),
            params,
            &accept_live,
            None,
        );
        Ok(found
            .into_iter()
            .map(|neighbor| (neighbor.id, neighbor.distance))
            .collect())
    }

    /// Greedy descent to layer 1, then the layer-0 beam. Closest first.
    fn beam<S: Scorer>(
        &self,
        scorer: &S,
        entry: u32,
        max_level: usize,
        ef: usize,
        accept: &impl Fn(u32) -> bool,
    ) -> Vec<Neighbor> {
        let Some(current) = self.descend(scorer, entry, max_level) else {
            return Vec::new();
        };
        self.search_layer(
            scorer,
            &[current],
            LayerSearch {
                ef,
                layer: Layer(0),
            },
            accept,
        )
    }

    /// The greedy descent from `entry` (on `max_level`) to the closest node it finds on
    /// layer 1, where the layer-0 beam starts; `None` when the entry's row is unpublished.
    pub(crate) fn descend<S: Scorer>(
        &self,
        scorer: &S,
        entry: u32,
        max_level: usize,
    ) -> Option<Neighbor> {
        let mut current = Neighbor {
            distance: scorer.distance(entry)?,
            id: entry,
        };
        for layer in (1..=max_level).rev() {
            current = self.greedy_step(scorer, current, layer);
        }
        Some(current)
    }

    /// Moves to the closest neighbor on `layer` until no neighbor is closer.
    pub(crate) fn greedy_step<S: Scorer>(
        &self,
        scorer: &S,
        mut current: Neighbor,
        layer: usize,
    ) -> Neighbor {
        let mut neighbors = Vec::with_capacity(self.graph.m0);
        loop {
            let mut moved = false;
            self.graph.neighbors_into(current.id, layer, &mut neighbors);
            for id in &neighbors {
                if let Some(distance) = scorer.distance(*id) {
                    if distance < current.distance {
                        current = Neighbor { distance, id: *id };
                        moved = true;
                    }
                }
            }
            if !moved {
                return current;
            }
        }
    }

    /// Best-first search of one layer with a beam of `ef`; returns up to `ef` accepted
    /// nodes, closest first.
    pub(crate) fn search_layer<S: Scorer>(
        &self,
        scorer: &S,
        entry_points: &[Neighbor],
        search: LayerSearch,
        accept: impl Fn(u32) -> bool,
    ) -> Vec<Neighbor> {
        let layer = search.layer.0;
        with_visited(self.capacity(), |visited| {
            let mut candidates: BinaryHeap<Reverse<Neighbor>> =
                BinaryHeap::with_capacity(search.ef * 4);
            let mut results = TopK::new(search.ef);
            for entry in entry_points {
                if visited.insert(entry.id) {
                    candidates.push(Reverse(*entry));
                    if accept(entry.id) {
                        results.push(*entry);
                    }
                }
            }
            let mut neighbors = Vec::with_capacity(self.graph.m0);
            let mut fresh = Vec::with_capacity(self.graph.m0);
            while let Some(Reverse(candidate)) = candidates.pop() {
                if results.is_full() && candidate.distance > results.threshold() {
                    break;
                }
                if let Some(Reverse(next)) = candidates.peek() {
                    self.graph.prefetch_links(next.id);
                }
                self.graph
                    .neighbors_into(candidate.id, layer, &mut neighbors);
                fresh.clear();
                for id in &neighbors {
                    if visited.insert(*id) {
                        fresh.push(*id);
                    }
                }
                if let Some(screen) = scorer.screen().filter(|_| results.is_full()) {
                    screen_fresh(screen, &mut fresh, results.threshold());
                }
                for id in fresh.iter().take(PREFETCH_AHEAD) {
                    scorer.prefetch(*id);
                }
                for (index, id) in fresh.iter().enumerate() {
                    if let Some(ahead) = fresh.get(index + PREFETCH_AHEAD) {
                        scorer.prefetch(*ahead);
                    }
                    let Some(distance) = scorer.distance(*id) else {
                        continue;
                    };
                    if !results.is_full() || distance < results.threshold() {
                        let neighbor = Neighbor { distance, id: *id };
                        candidates.push(Reverse(neighbor));
                        if accept(*id) {
                            results.push(neighbor);
                        }
                    }
                }
            }
            results.into_sorted()
        })
    }
}

/// Keeps the `fresh` neighbors whose first-pass lower bound is below `threshold` (the
/// beam's worst as the expansion began; it only falls during one, so this keeps a
/// superset of what could enter). Every row is prefetched first: a 1-bit row is a line or
/// two, so the misses of one expansion overlap instead of queueing behind a window.
fn screen_fresh(screen: &BitScreen<'_>, fresh: &mut Vec<u32>, threshold: f32) {
    for id in fresh.iter() {
        screen.prefetch(*id);
    }
    fresh.retain(|id| {
        screen
            .lower_bound(*id)
            .is_none_or(|bound| bound < threshold)
    });
}

impl SearchResults {
    /// Writes each query's hits into its row of `k` slots.
    fn fill(&mut self, found: Vec<(usize, Vec<SearchHit>)>, k: usize) {
        for (index, hits) in found {
            for (slot, hit) in hits.into_iter().enumerate() {
                self.ids[index * k + slot] = hit.label;
                self.scores[index * k + slot] = hit.score;
            }
        }
    }
}

/// `candidates` re-scored by `exact`, closest first; rows are prefetched a window ahead (a
/// 384-d f32 row is 24 lines, usually in DRAM: the vectors are the index's largest part).
pub(crate) fn rescore_in_order(exact: &impl Scorer, candidates: &[Neighbor]) -> Vec<Neighbor> {
    for candidate in candidates.iter().take(PREFETCH_AHEAD) {
        exact.prefetch(candidate.id);
    }
    let mut rescored = Vec::with_capacity(candidates.len());
    for (index, candidate) in candidates.iter().enumerate() {
        if let Some(ahead) = candidates.get(index + PREFETCH_AHEAD) {
            exact.prefetch(ahead.id);
        }
        if let Some(distance) = exact.distance(candidate.id) {
            rescored.push(Neighbor {
                distance,
                id: candidate.id,
            });
        }
    }
    rescored.sort_unstable();
    rescored
}
