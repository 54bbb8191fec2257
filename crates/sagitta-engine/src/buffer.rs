//! The write buffer of a shard: the points written since its last seal, in slots (a
//! contiguous vector array, so an exact scan streams memory), searchable as soon as a write
//! is applied.
//!
//! Slots are never reused: a re-upsert retires the old slot and appends a new one, so slot
//! `s` can be node `s` of an HNSW graph that a background indexer grows behind the writes
//! ([`BufferGraph`]). A search walks the graph over the indexed prefix of the slots and
//! scans only the tail exactly; when the buffer is sealed, its graph becomes the segment's
//! index as it is, instead of being rebuilt.

use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use sagitta_index::hnsw::{HnswIndex, HnswSearchParams};
use serde_json::Value;

use crate::codec::Operation;
use crate::filter::Filter;
use crate::point::{Distance, Point, PointId, SideVector};
use crate::query::{hit_distance, ShardHit, SideQuery};
use crate::spaces::SpaceSlice;

#[derive(Default)]
pub(crate) struct Buffer {
    /// The live slot of each id.
    pub slots: HashMap<PointId, usize>,
    /// The id of each slot; `None` once retired (deleted or re-upserted).
    pub ids: Vec<Option<PointId>>,
    /// The id each slot was written with, retired or not (a sealed graph keeps retired
    /// slots as deleted nodes, which still need an id in the segment's listing).
    pub slot_ids: Vec<PointId>,
    vectors: Vec<f32>,
    /// Parsed once at apply time so filters never re-parse JSON.
    payloads: Vec<Option<Arc<Value>>>,
    /// Each slot's side vectors (empty in a collection without any).
    side: Vec<Vec<Option<SideVector>>>,
    pub graph: Option<Arc<BufferGraph>>,
}

/// An HNSW graph over the first `indexed` slots of a buffer (slot `s` is node
/// `offset + s`), grown by the indexer while writes go on. Only the holder of `growing` adds
/// to it.
///
/// The graph is either the buffer's own (`offset` 0) or the graph of a sealed segment that
/// had room to spare (its *host*, whose points are nodes `0..offset`): then the buffer's
/// points join the host's graph, a search walks one graph for both, and the seal saves that
/// graph as the segment that replaces the host.
pub(crate) struct BufferGraph {
    pub index: Arc<HnswIndex>,
    /// Node of slot 0: the host segment's size, 0 for a graph of the buffer's own.
    pub offset: usize,
    /// The host segment's id, if the graph is a host's.
    pub host: Option<u64>,
    indexed: AtomicUsize,
    pub growing: Mutex<()>,
}

impl BufferGraph {
    /// A graph of the buffer's own.
    pub fn new(index: HnswIndex) -> BufferGraph {
        BufferGraph {
            index: Arc::new(index),
            offset: 0,
            host: None,
            indexed: AtomicUsize::new(0),
            growing: Mutex::new(()),
        }
    }

    /// The buffer's points join the graph of segment `host`, whose nodes are `0..offset`.
    pub fn hosted(index: Arc<HnswIndex>, host: u64, offset: usize) -> BufferGraph {
        BufferGraph {
            index,
            offset,
            host: Some(host),
            indexed: AtomicUsize::new(0),
            growing: Mutex::new(()),
        }
    }

    /// Slots the graph can still take.
    pub fn slot_capacity(&self) -> usize {
        self.index.capacity().saturating_sub(self.offset)
    }

    /// The slot of graph node `node`, if it is one of this buffer's.
    pub fn slot_of(&self, node: u32) -> Option<usize> {
        let node = node as usize;
        (node >= self.offset && node < self.offset + self.indexed()).then(|| node - self.offset)
    }

    /// Marks slot `slot` deleted in the graph (if it is indexed).
    pub fn mark_slot_deleted(&self, slot: usize) {
        if slot < self.indexed() {
            self.index.mark_deleted((self.offset + slot) as u64);
        }
    }

    /// Slots `0..indexed()` are nodes of the graph.
    pub fn indexed(&self) -> usize {
        self.indexed.load(Ordering::Acquire)
    }

    /// Adds `vectors` as the slots from `indexed()` on; the caller holds `growing`.
    pub fn extend(&self, vectors: &[f32], dim: usize) -> Result<(), sagitta_index::IndexError> {
        let first = self.offset + self.indexed();
        debug_assert_eq!(
            self.index.len(),
            first,
            "nodes are slots shifted by the offset"
        );
        let count = vectors.len() / dim;
        let labels: Vec<u64> = (first as u64..(first + count) as u64).collect();
        self.index.add(vectors, &labels, 0)?;
        self.indexed
            .store(first - self.offset + count, Ordering::Release);
        Ok(())
    }
}

impl Buffer {
    /// Merges (`merge`) or replaces each listed point's payload with the object `payload`.
    /// Unknown ids are skipped; `payload` was validated as a JSON object before logging.
    fn change_payloads(&mut self, ids: &[PointId], payload: &str, merge: bool) {
        let Ok(Value::Object(update)) = serde_json::from_str::<Value>(payload) else {
            return;
        };
        for id in ids {
            let Some(slot) = self.slots.get(id).copied() else {
                continue;
            };
            let mut object = match (self.payloads[slot].as_deref(), merge) {
                (Some(Value::Object(current)), true) => current.clone(),
                _ => serde_json::Map::new(),
            };
            object.extend(update.clone());
            self.payloads[slot] = Some(Arc::new(Value::Object(object)));
        }
    }

    /// Retires a live slot: gone from every read, a deleted node of the graph (if the
    /// indexer got to it; otherwise the indexer marks it when it does).
    fn retire(&mut self, slot: usize) {
        if let Some(id) = self.ids[slot].take() {
            self.slots.remove(&id);
        }
        self.payloads[slot] = None;
        self.side[slot] = Vec::new();
        if let Some(graph) = &self.graph {
            graph.mark_slot_deleted(slot);
        }
    }

    /// Slots written so far, live or retired.
    pub fn slot_count(&self) -> usize {
        self.ids.len()
    }

    /// The vectors of slots `from..to` (row-major), for the indexer.
    pub fn vectors_of(&self, from: usize, to: usize, dim: usize) -> Vec<f32> {
        self.vectors[from * dim..to * dim].to_vec()
    }

    /// Marks retired slots among `from..to` deleted in the graph (after the indexer added
    /// them: a slot retired while it was being added had no node to mark yet).
    pub fn mark_retired(&self, graph: &BufferGraph, from: usize, to: usize) {
        for slot in from..to {
            if self.ids[slot].is_none() {
                graph.mark_slot_deleted(slot);
            }
        }
    }

    /// Every slot as listed in a segment built from the graph: id and payload per node.
    pub fn listing(&self) -> Vec<Point> {
        crate::segment::listing(&self.slot_ids, &self.payloads)
    }

    pub fn apply(&mut self, operation: Operation, dim: usize) {
        match operation {
            Operation::Upsert(points) => {
                for point in points {
                    if let Some(old) = self.slots.get(&point.id).copied() {
                        self.retire(old);
                    }
                    let slot = self.ids.len();
                    self.ids.push(Some(point.id));
                    self.slot_ids.push(point.id);
                    self.vectors.extend_from_slice(&point.vector);
                    debug_assert_eq!(self.vectors.len(), self.ids.len() * dim);
                    // Payloads were validated as JSON objects before they were logged.
                    self.payloads.push(
                        point
                            .payload
                            .and_then(|text| serde_json::from_str(&text).ok())
                            .map(Arc::new),
                    );
                    self.side.push(point.side);
                    self.slots.insert(point.id, slot);
                }
            }
            Operation::Delete(ids) => {
                for id in ids {
                    if let Some(slot) = self.slots.get(&id).copied() {
                        self.retire(slot);
                    }
                }
            }
            Operation::SetPayload { ids, payload } => self.change_payloads(&ids, &payload, true),
            Operation::OverwritePayload { ids, payload } => {
                self.change_payloads(&ids, &payload, false);
            }
            Operation::DeletePayloadKeys { ids, keys } => {
                for id in ids {
                    let Some(slot) = self.slots.get(&id).copied() else {
                        continue;
                    };
                    if let Some(Value::Object(map)) = self.payloads[slot].as_deref() {
                        let mut map = map.clone();
                        for key in &keys {
                            map.remove(key);
                        }
                        self.payloads[slot] = Some(Arc::new(Value::Object(map)));
                    }
                }
            }
        }
    }
}

/// How [`Buffer::search`] treats the buffer's graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BufferPlan {
    /// Scan every slot.
    Exact,
    /// Walk the graph with this beam, scan the slots it does not hold yet.
    Graph(usize),
    /// Scan only the slots the graph does not hold yet (the graph was walked already).
    Tail,
}

/// A scored candidate; ordered so the heap's root is the worst kept. Ties in distance
/// break by point id, as the collection orders its results, so which of several equally
/// close points fills the last place does not depend on where they are stored.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    /// Lower is closer.
    pub distance: f32,
    pub id: PointId,
    pub slot: usize,
}

impl Eq for Candidate {}
impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.distance
            .total_cmp(&other.distance)
            .then(self.id.cmp(&other.id))
            .then(self.slot.cmp(&other.slot))
    }
}

impl Buffer {
    pub fn point(&self, slot: usize, dim: usize) -> Point {
        Point {
            id: self.ids[slot].expect("live slot"),
            vector: self.vectors[slot * dim..(slot + 1) * dim].to_vec(),
            payload: self.payloads[slot].as_deref().map(Value::to_string),
            side: self.side[slot].clone(),
        }
    }

    pub fn points(&self, dim: usize) -> Vec<Point> {
        self.ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.is_some())
            .map(|(slot, _)| self.point(slot, dim))
            .collect()
    }

    /// Ids passing `filter`, except those in `excluded`.
    pub fn matching_ids(
        &self,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
    ) -> Vec<PointId> {
        self.slots
            .iter()
            .filter(|(id, slot)| {
                !excluded.is_some_and(|excluded| excluded.contains(*id))
                    && filter.is_none_or(|f| f.matches(id, self.payloads[**slot].as_deref()))
            })
            .map(|(id, _)| *id)
            .collect()
    }

    /// Up to `limit` ids passing `filter` from `start` on, in id order, except those in
    /// `excluded` (the filter is evaluated up to the last match only).
    pub fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
        limit: usize,
    ) -> Vec<PointId> {
        let mut candidates: Vec<(PointId, usize)> = self
            .slots
            .iter()
            .filter(|(id, _)| {
                start.is_none_or(|start| **id >= start)
                    && !excluded.is_some_and(|excluded| excluded.contains(*id))
            })
            .map(|(id, slot)| (*id, *slot))
            .collect();
        candidates.sort_unstable_by_key(|(id, _)| *id);
        candidates
            .into_iter()
            .filter(|(id, slot)| {
                filter.is_none_or(|f| f.matches(id, self.payloads[*slot].as_deref()))
            })
            .take(limit)
            .map(|(id, _)| id)
            .collect()
    }

    /// Whether slot `slot` holds a live point not in `excluded`.
    pub fn is_live(&self, slot: usize, excluded: Option<&HashSet<PointId>>) -> bool {
        self.ids[slot].is_some_and(|id| !excluded.is_some_and(|excluded| excluded.contains(&id)))
    }

    /// Adds to `heap` the top `k` live, not `excluded` slots the graph holds, walked with
    /// beam `ef`; false (nothing added) if the walk failed.
    fn walk(
        &self,
        graph: &BufferGraph,
        query: &[f32],
        (k, ef): (usize, usize),
        excluded: Option<&HashSet<PointId>>,
        distance: Distance,
        heap: &mut BinaryHeap<Candidate>,
    ) -> bool {
        let live = |node: u32| {
            graph
                .slot_of(node)
                .is_some_and(|slot| self.is_live(slot, excluded))
        };
        let params = HnswSearchParams::new(k, ef.max(k));
        let Ok(hits) = graph.index.search_filtered(query, params, live) else {
            return false;
        };
        heap.extend(hits.into_iter().filter_map(|hit| {
            let slot = graph.slot_of(hit.node)?;
            Some(Candidate {
                distance: hit_distance(hit.score, distance),
                id: self.ids[slot]?,
                slot,
            })
        }));
        true
    }

    /// Top-`k` among live slots passing `filter`, skipping ids in `excluded`. Without a
    /// filter and with [`BufferPlan::Graph`], HNSW over the indexed slots plus an exact scan
    /// of the rest; with [`BufferPlan::Tail`] only that scan (the caller walked the graph
    /// with its host's); otherwise an exact scan of every slot (a filtered buffer search
    /// stays exact: the buffer is small and filters can be selective). `dim` is the
    /// stored vectors' width, `query` a vector of `space` (slots without a vector there are
    /// skipped).
    #[allow(clippy::too_many_arguments)]
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
        dim: usize,
        space: SpaceSlice,
        plan: BufferPlan,
    ) -> Vec<ShardHit> {
        let distance = space.distance;
        let kernels = sagitta_kernels::kernels();
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
        let from = match (&self.graph, plan, filter) {
            (Some(graph), BufferPlan::Tail, None) => graph.indexed(),
            // The walk fills the heap; if it fails (impossible with validated parameters)
            // the next arm scans every slot rather than fail the query.
            (Some(graph), BufferPlan::Graph(ef), None)
                if self.walk(graph, query, (k, ef), excluded, distance, &mut heap) =>
            {
                graph.indexed()
            }
            _ => 0,
        };
        for (slot, id) in self.ids.iter().enumerate().skip(from) {
            let Some(id) = id else {
                continue;
            };
            if excluded.is_some_and(|excluded| excluded.contains(id))
                || filter.is_some_and(|f| !f.matches(id, self.payloads[slot].as_deref()))
            {
                continue;
            }
            let Some(row) = space.of(&self.vectors[slot * dim..(slot + 1) * dim]) else {
                continue;
            };
            let candidate = Candidate {
                distance: match distance {
                    Distance::Euclid => (kernels.l2_squared_f32)(query, row),
                    Distance::Cosine | Distance::Dot => -(kernels.dot_f32)(query, row),
                },
                id: *id,
                slot,
            };
            offer(&mut heap, k, candidate);
        }
        self.hits(heap, dim)
    }

    /// The kept candidates, closest first, as hits with their points.
    fn hits(&self, heap: BinaryHeap<Candidate>, dim: usize) -> Vec<ShardHit> {
        heap.into_sorted_vec()
            .into_iter()
            .map(|candidate| ShardHit {
                distance: candidate.distance,
                point: self.point(candidate.slot, dim),
            })
            .collect()
    }
}

/// Keeps `candidate` if the heap holds fewer than `k` or it beats the worst kept.
fn offer(heap: &mut BinaryHeap<Candidate>, k: usize, candidate: Candidate) {
    if heap.len() < k {
        heap.push(candidate);
    } else if let Some(mut worst) = heap.peek_mut() {
        if candidate < *worst {
            *worst = candidate;
        }
    }
}

impl Buffer {
    /// Live slots passing `filter` and not `excluded`, with their vector in side space
    /// `space`.
    fn side_rows<'a>(
        &'a self,
        space: usize,
        filter: Option<&'a Filter>,
        excluded: Option<&'a HashSet<PointId>>,
    ) -> impl Iterator<Item = (usize, PointId, &'a SideVector)> + 'a {
        self.ids.iter().enumerate().filter_map(move |(slot, id)| {
            let id = (*id)?;
            if excluded.is_some_and(|excluded| excluded.contains(&id))
                || filter.is_some_and(|f| !f.matches(&id, self.payloads[slot].as_deref()))
            {
                return None;
            }
            let vector = self.side[slot].get(space)?.as_ref()?;
            Some((slot, id, vector))
        })
    }

    /// Top-`k` by `query` in side space `space` among live slots passing `filter` and
    /// not `excluded` that it scores ([`SideQuery::distance_to`]): an exact scan. `dim` is
    /// the stored dense vectors' width.
    pub fn search_side(
        &self,
        (query, space): (SideQuery<'_>, usize),
        k: usize,
        filter: Option<&Filter>,
        excluded: Option<&HashSet<PointId>>,
        dim: usize,
    ) -> Vec<ShardHit> {
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
        for (slot, id, vector) in self.side_rows(space, filter, excluded) {
            let Some(distance) = query.distance_to(vector) else {
                continue;
            };
            let candidate = Candidate { distance, id, slot };
            offer(&mut heap, k, candidate);
        }
        self.hits(heap, dim)
    }

    /// Adds to `counts[i]` the live slots not `excluded` whose vector in sparse space
    /// `space` has `indices[i]` (`indices` ascending).
    pub fn sparse_frequencies(
        &self,
        space: usize,
        indices: &[u32],
        excluded: Option<&HashSet<PointId>>,
        counts: &mut [usize],
    ) {
        let sparse = self.side_rows(space, None, excluded);
        for vector in sparse.filter_map(|(_, _, vector)| vector.as_sparse()) {
            for index in vector.indices() {
                if let Ok(at) = indices.binary_search(index) {
                    counts[at] += 1;
                }
            }
        }
    }
}
