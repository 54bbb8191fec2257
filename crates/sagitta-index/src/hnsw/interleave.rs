//! Several queries searched together on one thread (issue 20 §2): software pipelining of
//! the layer-0 beam's dependent misses.
//!
//! One query's beam waits twice per expansion: for the expanded node's link block, and
//! for its fresh neighbors' code rows. Alone, a thread can only prefetch a few rows ahead
//! of itself. Here each query is a *lane*, and a thread visits its lanes in turn, each
//! visit one of two steps: **links** (read the popped node's neighbors, prefetched at the
//! lane's previous visit; keep the unvisited; prefetch their rows) or **rows** (score the
//! rows prefetched at the previous visit, update the beam, pop the next node and prefetch
//! its links). Between two visits of a lane the thread works on the other lanes, so a
//! lane's misses are in flight while the others compute.
//!
//! Every lane scores the same nodes in the same order as [`HnswIndex::search`] would, so
//! the results are the same, bit for bit (tested).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::search::{rescore_in_order, HnswSearchParams, SearchHit};
use super::storage::{F32Scorer, Scorer, Sq8Scorer, Sq8Store};
use super::HnswIndex;
use crate::top_k::{Neighbor, TopK};
use crate::visited::VisitedHash;

/// Queries a thread searches together (2, 4 and 8 measured alike here; BENCHMARKS.md,
/// issue 20).
pub const LANES: usize = 4;

/// A lane's next step.
#[derive(Clone, Copy)]
enum Step {
    /// Read the links of this node (prefetched) and prefetch its fresh neighbors' rows.
    Links(u32),
    /// Score the fresh rows (prefetched) and pop the next node.
    Rows,
    Done,
}

struct Lane<'a> {
    scorer: Sq8Scorer<'a>,
    candidates: BinaryHeap<Reverse<Neighbor>>,
    results: TopK,
    fresh: Vec<u32>,
    step: Step,
}

impl HnswIndex {
    /// The SQ8 search of each of `queries` (prepared: normalized for cosine), `LANES` at a
    /// time, into `out` (one list per query, cleared first). Same answers as
    /// [`HnswIndex::search`].
    pub(crate) fn search_lanes(
        &self,
        store: &Sq8Store,
        queries: &[&[f32]],
        params: HnswSearchParams,
        out: &mut Vec<Vec<SearchHit>>,
    ) {
        out.clear();
        let mut visited: Vec<VisitedHash> = (0..LANES).map(|_| VisitedHash::new()).collect();
        for group in queries.chunks(LANES) {
            let codes: Vec<(Vec<u8>, f32)> = group
                .iter()
                .map(|query| {
                    let mut codes = vec![0u8; self.params.dim];
                    let norm = store.quantizer.encode_query(query, &mut codes);
                    (codes, norm)
                })
                .collect();
            for set in &mut visited[..group.len()] {
                set.clear();
            }
            let found = self.walk_lanes(store, &codes, params, &mut visited[..group.len()]);
            for (query, candidates) in group.iter().zip(found) {
                out.push(self.rescored(query, &candidates, params));
            }
        }
    }

    /// The layer-0 beams of one group of lanes, each descended to layer 0 first; returns
    /// each lane's best `rescore` candidates by code distance, closest first.
    fn walk_lanes(
        &self,
        store: &Sq8Store,
        codes: &[(Vec<u8>, f32)],
        params: HnswSearchParams,
        visited: &mut [VisitedHash],
    ) -> Vec<Vec<Neighbor>> {
        let ef = params.ef.max(params.k);
        let mut lanes: Vec<Lane<'_>> = codes
            .iter()
            .zip(visited.iter_mut())
            .map(|((query, norm), visited)| {
                let scorer = Sq8Scorer {
                    query,
                    query_norm_squared: *norm,
                    store,
                    kernels: self.kernels(),
                    metric: self.params.metric,
                    distance_count: None,
                    screen: None,
                };
                self.start_lane(scorer, ef, visited)
            })
            .collect();
        let mut neighbors = Vec::with_capacity(self.graph.m0);
        let mut busy = true;
        while busy {
            busy = false;
            for (lane, visited) in lanes.iter_mut().zip(visited.iter_mut()) {
                match lane.step {
                    Step::Links(node) => self.links_step(lane, node, visited, &mut neighbors),
                    Step::Rows => self.rows_step(lane),
                    Step::Done => continue,
                }
                busy = true;
            }
        }
        let rescore = params.rescore_depth();
        lanes
            .into_iter()
            .map(|lane| {
                let mut found = lane.results.into_sorted();
                found.truncate(rescore);
                found
            })
            .collect()
    }

    /// A lane at layer 0: the greedy descent done, the entry in its beam, its first step
    /// a pop.
    fn start_lane<'a>(
        &self,
        scorer: Sq8Scorer<'a>,
        ef: usize,
        visited: &mut VisitedHash,
    ) -> Lane<'a> {
        let mut lane = Lane {
            scorer,
            candidates: BinaryHeap::with_capacity(ef * 4),
            results: TopK::new(ef),
            fresh: Vec::with_capacity(self.graph.m0),
            step: Step::Done,
        };
        let Some(current) = self
            .entry_snapshot()
            .and_then(|(entry, max_level)| self.descend(&lane.scorer, entry, max_level))
        else {
            return lane;
        };
        visited.insert(current.id);
        lane.candidates.push(Reverse(current));
        if !self.deleted.contains(current.id) {
            lane.results.push(current);
        }
        lane.step = Step::Rows;
        lane
    }

    fn links_step(
        &self,
        lane: &mut Lane<'_>,
        node: u32,
        visited: &mut VisitedHash,
        neighbors: &mut Vec<u32>,
    ) {
        self.graph.neighbors_into(node, 0, neighbors);
        lane.fresh.clear();
        for id in neighbors.iter() {
            if visited.insert(*id) {
                lane.fresh.push(*id);
                lane.scorer.prefetch(*id);
            }
        }
        lane.step = Step::Rows;
    }

    fn rows_step(&self, lane: &mut Lane<'_>) {
        for id in &lane.fresh {
            let Some(distance) = lane.scorer.distance(*id) else {
                continue;
            };
            if !lane.results.is_full() || distance < lane.results.threshold() {
                let neighbor = Neighbor { distance, id: *id };
                lane.candidates.push(Reverse(neighbor));
                if !self.deleted.contains(*id) {
                    lane.results.push(neighbor);
                }
            }
        }
        lane.fresh.clear();
        lane.step = match lane.candidates.pop() {
            Some(Reverse(next))
                if !(lane.results.is_full() && next.distance > lane.results.threshold()) =>
            {
                self.graph.prefetch_links(next.id);
                Step::Links(next.id)
            }
            _ => Step::Done,
        };
    }

    /// The best `k` of `candidates` re-scored on the f32 rows, as hits.
    fn rescored(
        &self,
        query: &[f32],
        candidates: &[Neighbor],
        params: HnswSearchParams,
    ) -> Vec<SearchHit> {
        let exact = F32Scorer {
            query,
            vectors: &self.vectors,
            kernels: self.kernels(),
            metric: self.params.metric,
            distance_count: None,
        };
        self.hits(rescore_in_order(&exact, candidates), params.k)
    }
}
