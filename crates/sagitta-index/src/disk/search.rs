//! The disk index's searches: bound-driven (partitions, codes, waves of reads) and exact
//! (every accepted record read and ranked).

use super::{DiskHit, DiskIndex, PageReader, Pages, SearchStats};
use crate::error::Result;
use crate::top_k::{Neighbor, TopK};
use crate::Metric;

/// Fewest records a wave of reads asks for (a wave asks for `k` when `k` is larger).
const WAVE_MIN: usize = 8;
/// Records an exact scan reads at once.
const EXACT_CHUNK: usize = 256;

/// A vector that survived the scan: its estimated distance and the lower end of its bound.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    estimate: f32,
    lower: f32,
    position: u32,
    /// The partition holding `position` (the one its code was estimated against).
    partition: u32,
}

impl DiskIndex {
    /// The `k` nearest accepted vectors among the `probes` partitions nearest `query`
    /// (see the module docs), nearest first. `accept` is asked once per scanned vector
    /// (deleted or filtered-out vectors are never read).
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        probes: usize,
        accept: &dyn Fn(u32) -> bool,
        reader: &dyn PageReader,
        stats: &mut SearchStats,
    ) -> Result<Vec<DiskHit>> {
        self.search_within(query, k, probes, usize::MAX, accept, reader, stats)
    }

    /// [`DiskIndex::search`] reranking at most `rerank_limit` records (at least `k`): the
    /// candidates with the best estimates, read until the bound says no other can win or
    /// the limit is reached, whichever comes first. Where the bound is wide against the
    /// gaps between neighbours (unit vectors in high dimension) it keeps hundreds of
    /// candidates a query; the limit trades that tail of reads for recall.
    #[allow(clippy::too_many_arguments)]
    pub fn search_within(
        &self,
        query: &[f32],
        k: usize,
        probes: usize,
        rerank_limit: usize,
        accept: &dyn Fn(u32) -> bool,
        reader: &dyn PageReader,
        stats: &mut SearchStats,
    ) -> Result<Vec<DiskHit>> {
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let chosen = self.nearest_partitions(query, probes);
        stats.partitions += chosen.len();
        let rotated = self.quantizer.rotate(query);
        let mut candidates = self.scan(query, &rotated, k, &chosen, accept, stats);
        if self.extra_bits > 0 {
            stats.refined += candidates.len();
            self.refine(query, &rotated, k, &mut candidates);
        }
        stats.candidates += candidates.len();
        candidates.sort_unstable_by(|a, b| {
            a.estimate
                .total_cmp(&b.estimate)
                .then(a.position.cmp(&b.position))
        });
        // lowest lower bound from each candidate on: the stopping rule in O(1)
        let mut floor = vec![f32::INFINITY; candidates.len() + 1];
        for (index, candidate) in candidates.iter().enumerate().rev() {
            floor[index] = candidate.lower.min(floor[index + 1]);
        }
        self.rerank(
            query,
            k,
            rerank_limit.max(k),
            &candidates,
            &floor,
            reader,
            stats,
        )
    }

    /// Partitions by their centroid's distance to `query`, the nearest `probes`.
    fn nearest_partitions(&self, query: &[f32], probes: usize) -> Vec<usize> {
        let mut ranked: Vec<(f32, usize)> = (0..self.partitions())
            .filter(|p| self.starts[*p] < self.starts[*p + 1])
            .map(|p| (self.exact_distance(query, self.centroid(p)), p))
            .collect();
        let keep = probes.clamp(1, ranked.len().max(1)).min(ranked.len());
        if keep < ranked.len() {
            ranked.select_nth_unstable_by(keep, |a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            ranked.truncate(keep);
        }
        ranked.into_iter().map(|(_, p)| p).collect()
    }

    /// Estimates every accepted vector of `partitions` (`rotated` is `R·query`); keeps those
    /// whose lower bound can beat the `k`-th smallest upper bound seen.
    fn scan(
        &self,
        query: &[f32],
        rotated: &[f32],
        k: usize,
        partitions: &[usize],
        accept: &dyn Fn(u32) -> bool,
        stats: &mut SearchStats,
    ) -> Vec<Candidate> {
        let query_sq: f32 = query.iter().map(|v| v * v).sum();
        let mut uppers = TopK::new(k);
        let mut kept = Vec::new();
        let words = self.quantizer.code_words();
        let (mut weighted, mut estimates) = (Vec::new(), Vec::new());
        for partition in partitions {
            let prepared = self
                .quantizer
                .query_rotated(rotated, self.rotated_centroid(*partition));
            let (start, end) = (
                self.starts[*partition] as usize,
                self.starts[*partition + 1] as usize,
            );
            // every code of the partition in one kernel call (deleted ones are estimated
            // too, never read)
            prepared.estimate_batch(
                &self.codes[start * words..end * words],
                &self.factors[start..end],
                &self.terms[start..end],
                &mut weighted,
                &mut estimates,
            );
            for (index, (l2, bound)) in (start..end).zip(estimates.iter().copied()) {
                #[allow(clippy::cast_possible_truncation)]
                let position = index as u32;
                if !accept(position) {
                    continue;
                }
                stats.scanned += 1;
                let (estimate, bound) = self.in_metric(l2, bound, index, query_sq);
                let lower = estimate - bound;
                if lower > uppers.threshold() {
                    continue;
                }
                uppers.push(Neighbor {
                    distance: estimate + bound,
                    id: position,
                });
                kept.push(Candidate {
                    estimate,
                    lower,
                    position,
                    partition: u32::try_from(*partition).expect("partition count fits u32"),
                });
            }
        }
        let threshold = uppers.threshold();
        kept.retain(|candidate| candidate.lower <= threshold);
        kept
    }

    /// An estimated squared L2 distance and its bound in the metric's own terms: for Dot,
    /// `−⟨x,q⟩ = (‖x−q‖² − ‖x‖² − ‖q‖²) / 2`, the bound halved.
    #[inline]
    fn in_metric(&self, l2: f32, bound: f32, position: usize, query_sq: f32) -> (f32, f32) {
        match self.metric {
            Metric::L2 => (l2, bound),
            Metric::Dot | Metric::Cosine => {
                ((l2 - self.sq_norms[position] - query_sq) / 2.0, bound / 2.0)
            }
        }
    }

    /// Replaces each candidate's estimate and bound by its extended code's (an 8-bit query
    /// against `1 + extra_bits` bits a coordinate), then drops those whose refined lower
    /// bound cannot beat the `k`-th smallest refined upper bound. `candidates` come from
    /// [`DiskIndex::scan`], grouped by partition.
    fn refine(&self, query: &[f32], rotated: &[f32], k: usize, candidates: &mut Vec<Candidate>) {
        let query_sq: f32 = query.iter().map(|v| v * v).sum();
        let mut uppers = TopK::new(k);
        // candidates come grouped by partition: one fine query a partition
        let mut current: Option<(u32, crate::rabitq::RabitqQuery)> = None;
        for candidate in candidates.iter_mut() {
            let position = candidate.position as usize;
            let fine = match current {
                Some((partition, ref fine)) if partition == candidate.partition => fine,
                _ => {
                    let centroid = self.rotated_centroid(candidate.partition as usize);
                    let fine = self.quantizer.query_rotated_fine(rotated, centroid);
                    &current.insert((candidate.partition, fine)).1
                }
            };
            let (l2, bound) = fine.refine(
                self.code(position),
                self.extra_code(position),
                self.extra_bits,
                self.factors[position].norm,
                self.extra_terms[position],
            );
            let (estimate, bound) = self.in_metric(l2, bound, position, query_sq);
            candidate.estimate = estimate;
            candidate.lower = estimate - bound;
            uppers.push(Neighbor {
                distance: estimate + bound,
                id: candidate.position,
            });
        }
        let threshold = uppers.threshold();
        candidates.retain(|candidate| candidate.lower <= threshold);
    }

    /// Reads and ranks `candidates` (sorted by estimate) in waves until none left can beat
    /// the `k`-th exact distance, or `limit` have been read.
    #[allow(clippy::too_many_arguments)]
    fn rerank(
        &self,
        query: &[f32],
        k: usize,
        limit: usize,
        candidates: &[Candidate],
        floor: &[f32],
        reader: &dyn PageReader,
        stats: &mut SearchStats,
    ) -> Result<Vec<DiskHit>> {
        let wave_size = k.max(WAVE_MIN);
        let mut best = TopK::new(k);
        let mut hits: Vec<DiskHit> = Vec::new();
        let mut pages = Pages::new();
        let mut next = 0;
        let mut wave = Vec::with_capacity(wave_size);
        let mut read = 0;
        while next < candidates.len() && read < limit {
            let bar = best.threshold();
            if floor[next] > bar {
                break;
            }
            wave.clear();
            let size = wave_size.min(limit - read);
            while next < candidates.len() && wave.len() < size {
                if candidates[next].lower <= bar {
                    wave.push(candidates[next].position);
                }
                next += 1;
            }
            stats.waves += 1;
            read += wave.len();
            stats.pages += pages.add(self, &wave, reader)?;
            self.rank(query, &wave, &pages, &mut best, &mut hits, stats);
        }
        Ok(finish(hits, k))
    }

    /// Ranks the records of `positions` (their pages read) exactly: each one that can
    /// enter `best` is pushed there and kept in `hits` with its vector.
    fn rank(
        &self,
        query: &[f32],
        positions: &[u32],
        pages: &Pages,
        best: &mut TopK,
        hits: &mut Vec<DiskHit>,
        stats: &mut SearchStats,
    ) {
        for position in positions {
            let vector = pages.record(self, *position);
            let distance = self.exact_distance(query, &vector);
            stats.reranked += 1;
            if distance <= best.threshold() {
                best.push(Neighbor {
                    distance,
                    id: *position,
                });
                hits.push(DiskHit {
                    distance,
                    position: *position,
                    vector,
                });
            }
        }
    }

    /// The exact `k` nearest among `positions` (accepted vectors), every record read.
    pub fn exact(
        &self,
        query: &[f32],
        k: usize,
        positions: &[u32],
        reader: &dyn PageReader,
        stats: &mut SearchStats,
    ) -> Result<Vec<DiskHit>> {
        let mut hits = Vec::new();
        let mut best = TopK::new(k);
        for chunk in positions.chunks(EXACT_CHUNK) {
            let pages = Pages::read(self, chunk, reader)?;
            stats.pages += pages.pages.len();
            stats.waves += 1;
            self.rank(query, chunk, &pages, &mut best, &mut hits, stats);
        }
        Ok(finish(hits, k))
    }
}

/// The `k` nearest of `hits`, nearest first (ties by position).
fn finish(mut hits: Vec<DiskHit>, k: usize) -> Vec<DiskHit> {
    hits.sort_by(|a, b| {
        a.distance
            .total_cmp(&b.distance)
            .then(a.position.cmp(&b.position))
    });
    hits.truncate(k);
    hits
}
