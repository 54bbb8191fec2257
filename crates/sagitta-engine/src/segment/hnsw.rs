//! The HNSW segment kind: an immutable HNSW index over the points a shard's write buffer
//! held when it was sealed (SQ8 codes for the walk, f32 rows for exact re-scoring), their
//! ids and payloads, payload indexes, and a tombstone set. A write buffer's points may join
//! its graph (it is then their [`GraphHost`]).
//!
//! Files: `segment-<id>.hnsw` (sagitta-index's HNSW file), `segment-<id>.points` and
//! `segment-<id>.tomb-<generation>` (framed by [`sagitta_storage::codec::frame`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;

use sagitta_index::hnsw::{
    locality_order, permute_rows, AddProgress, Codes, HnswIndex, HnswParams, HnswSearchParams,
    LinkOrder, Quantization,
};
use sagitta_index::Metric;
use sagitta_storage::codec::{frame, u32s, unframe};
use sagitta_storage::fs::{FileSystem, StreamedFile};
use serde_json::Value;

use super::{
    index_path, listing, points_path, tombstones_path, GraphHost, SegmentKind, SegmentRead,
    SegmentShape, SegmentWrite,
};
use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::payload_index::{FieldType, PayloadSchema, SegmentIndexes};
use crate::point::{Distance, Point, PointId};
use crate::query::{hit_distance, Strategy};

const POINTS_MAGIC: &[u8; 8] = b"SAGPNTS1";
const TOMBSTONES_MAGIC: &[u8; 8] = b"SAGTOMB1";
/// HNSW parameters of sealed segments (the defaults: M = 16, ef_construction = 100).
const SEGMENT_M: usize = 16;
const SEGMENT_EF_CONSTRUCTION: usize = 100;
/// A filter passing fewer than this fraction of a segment's points is answered by an exact
/// scan of those points instead of a filtered graph walk.
pub(crate) const EXACT_SCAN_FRACTION: f64 = 0.05;
/// Nodes sampled to estimate a filter's selectivity.
const SELECTIVITY_SAMPLE: usize = 512;

/// Room a segment's graph keeps beyond its points, so a write buffer's points can join it
/// (see [`crate::buffer::BufferGraph`]): as many nodes again as it holds, within these
/// bounds. Link arrays (~150 bytes a node) are allocated up front, vector rows when written.
const SPARE_NODES_MIN: usize = 1_024;
const SPARE_NODES_MAX: usize = 1 << 20;

/// Nodes among the first `count` of `index` marked deleted.
fn deleted_nodes(index: &HnswIndex, count: usize) -> usize {
    (0..u32::try_from(count).expect("segment size"))
        .filter(|node| index.is_deleted(*node))
        .count()
}

/// Nodes a segment graph of `points` points is allocated for.
pub(crate) fn graph_capacity(points: usize) -> usize {
    points + points.clamp(SPARE_NODES_MIN, SPARE_NODES_MAX)
}

pub(crate) struct HnswSegment {
    id: u64,
    index: Arc<HnswIndex>,
    ids: Vec<PointId>,
    nodes: HashMap<PointId, u32>,
    payloads: Vec<Option<Arc<Value>>>,
    /// The segment's nodes in id order, built by the first scroll (ids never change).
    by_id: OnceLock<Vec<u32>>,
    /// Nodes marked deleted (the optimizer's vacuum trigger).
    deleted: AtomicUsize,
    /// Bytes of the index and points files (as built or loaded).
    file_bytes: u64,
    indexes: RwLock<SegmentIndexes>,
}

fn corrupt(path: &Path, reason: &str) -> EngineError {
    EngineError::Corrupt {
        reason: format!("{}: {reason}", path.display()),
    }
}

/// The HNSW parameters of every segment (and of write-buffer graphs, which become segments).
pub(crate) fn segment_params(dim: usize, distance: Distance) -> HnswParams {
    let mut params = HnswParams::new(dim, metric(distance));
    params.m = SEGMENT_M;
    params.ef_construction = SEGMENT_EF_CONSTRUCTION;
    params.quantization = Quantization::Sq8;
    params
}

/// Cosine collections store unit vectors and normalize queries before they reach a shard,
/// so their segments rank by dot product: normalizing twice could move stored bits.
fn metric(distance: Distance) -> Metric {
    match distance {
        Distance::Cosine => Metric::Dot,
        Distance::Dot => Metric::Dot,
        Distance::Euclid => Metric::L2,
    }
}

impl HnswSegment {
    /// A segment from an HNSW graph whose node `i` is `listing[i]` (id and payload; the
    /// vector is the graph's): writes the index and points files durably. Nodes already
    /// deleted in the graph (slots a write buffer retired) stay deleted. Nothing is
    /// rebuilt: this is how a seal saves the graph the indexer grew, and how
    /// [`SegmentKind::build`] saves the one it built.
    pub fn from_graph(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: Arc<HnswIndex>,
        listing: Vec<Point>,
        shape: &SegmentShape<'_>,
    ) -> Result<HnswSegment> {
        // Streamed to the file: a copy of the vectors in memory would double the peak.
        let mut file = StreamedFile::create(fs, &index_path(directory, id))?;
        // SQ8 codes are stored (a quarter more bytes than the vectors alone): recomputing
        // them was a third of the time to reopen a segment (issue 12 §5, restart time).
        let saved = index.save_with(&mut file, Codes::Stored);
        if let Some(failure) = file.take_failure() {
            return Err(failure.into());
        }
        saved?;
        let index_bytes = file.finish()?;
        let listing = Operation::Upsert(listing);
        let encoded = frame(POINTS_MAGIC, &codec::encode(&listing));
        fs.write_synced(&points_path(directory, id), &encoded)?;
        let Operation::Upsert(listing) = listing else {
            unreachable!("built as an upsert above")
        };
        let file_bytes = index_bytes + encoded.len() as u64;
        Ok(HnswSegment::assemble(
            id,
            index,
            listing,
            file_bytes,
            shape.schema,
        ))
    }

    fn assemble(
        id: u64,
        index: Arc<HnswIndex>,
        points: Vec<Point>,
        file_bytes: u64,
        schema: &PayloadSchema,
    ) -> HnswSegment {
        let ids: Vec<PointId> = points.iter().map(|point| point.id).collect();
        let nodes = ids
            .iter()
            .enumerate()
            .map(|(node, id)| (*id, u32::try_from(node).expect("segment size")))
            .collect();
        let payloads = points
            .into_iter()
            .map(|point| {
                point
                    .payload
                    .and_then(|text| serde_json::from_str(&text).ok())
                    .map(Arc::new)
            })
            .collect::<Vec<_>>();
        let indexes = RwLock::new(SegmentIndexes::build(schema, &payloads));
        // Nodes the graph already holds as deleted (slots a write buffer retired before it
        // was saved as this segment) count as deleted from the start: counting only the
        // tombstones marked later overstated live points after every reload (issue 13 §4).
        let deleted = deleted_nodes(&index, ids.len());
        HnswSegment {
            id,
            index,
            ids,
            nodes,
            payloads,
            by_id: OnceLock::new(),
            deleted: AtomicUsize::new(deleted),
            file_bytes,
            indexes,
        }
    }

    fn live_node(&self, id: &PointId) -> Option<u32> {
        self.nodes
            .get(id)
            .copied()
            .filter(|node| !self.index.is_deleted(*node))
    }

    pub fn mark_node_deleted(&self, node: u32) {
        if self.index.mark_deleted(u64::from(node)) {
            self.deleted.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn point(&self, node: u32) -> Point {
        Point {
            id: self.ids[node as usize],
            vector: self
                .index
                .vector(node)
                .map(<[f32]>::to_vec)
                .unwrap_or_default(),
            payload: self.payloads[node as usize]
                .as_deref()
                .map(Value::to_string),
        }
    }

    /// Whether `node` is a live point of this segment passing `filter` (a graph shared with
    /// a write buffer has nodes beyond the segment's).
    fn passes(&self, node: u32, filter: Option<&Filter>) -> bool {
        (node as usize) < self.ids.len()
            && !self.index.is_deleted(node)
            && filter.is_none_or(|f| {
                f.matches(
                    &self.ids[node as usize],
                    self.payloads[node as usize].as_deref(),
                )
            })
    }

    /// `candidates`, or every node.
    fn nodes_to_check(&self, candidates: Option<Vec<u32>>) -> Box<dyn Iterator<Item = u32>> {
        match candidates {
            Some(nodes) => Box::new(nodes.into_iter()),
            None => Box::new(0..u32::try_from(self.ids.len()).expect("segment size")),
        }
    }

    /// Whether `filter` passes fewer than [`EXACT_SCAN_FRACTION`] of the points, judged on
    /// an evenly spaced sample of up to [`SELECTIVITY_SAMPLE`] nodes.
    fn is_selective(&self, filter: &Filter) -> bool {
        let count = self.ids.len();
        if count == 0 {
            return false;
        }
        let step = (count / SELECTIVITY_SAMPLE).max(1);
        let (mut sampled, mut passed) = (0usize, 0usize);
        for node in (0..count).step_by(step) {
            sampled += 1;
            let node = u32::try_from(node).expect("segment size");
            passed += usize::from(self.passes(node, Some(filter)));
        }
        #[allow(clippy::cast_precision_loss)]
        let fraction = passed as f64 / sampled as f64;
        fraction < EXACT_SCAN_FRACTION
    }

    /// Exact top-`k` over the live points passing `filter`, among `candidates` when given
    /// (a superset of the passing nodes, from the payload indexes).
    fn exact_search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        candidates: Option<Vec<u32>>,
        distance: Distance,
    ) -> Vec<(f32, Point)> {
        let kernels = sagitta_kernels::kernels();
        let mut scored: Vec<(f32, u32)> = self
            .nodes_to_check(candidates)
            .filter(|node| self.passes(*node, filter))
            .filter_map(|node| {
                let row = self.index.vector(node)?;
                let value = match distance {
                    Distance::Euclid => (kernels.l2_squared_f32)(query, row),
                    Distance::Cosine | Distance::Dot => -(kernels.dot_f32)(query, row),
                };
                Some((value, node))
            })
            .collect();
        // Ties break by point id, as the collection orders its results.
        scored.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then(self.ids[a.1 as usize].cmp(&self.ids[b.1 as usize]))
        });
        scored.truncate(k);
        scored
            .into_iter()
            .map(|(value, node)| (value, self.point(node)))
            .collect()
    }
}

impl SegmentKind for HnswSegment {
    fn build(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        mut points: Vec<Point>,
        shape: &SegmentShape<'_>,
        progress: Option<&AddProgress>,
    ) -> Result<HnswSegment> {
        let dim = shape.dim;
        let index = HnswIndex::new(
            segment_params(dim, shape.distance),
            graph_capacity(points.len()),
        )?;
        let mut vectors = Vec::with_capacity(points.len() * dim);
        for point in &mut points {
            // The index keeps the vector; the listing needs only the id and payload.
            vectors.extend_from_slice(&std::mem::take(&mut point.vector));
        }
        // Node i is listing entry i, so the rows can be placed in any order: cluster by
        // cluster, each cluster's rows together in memory and linked one after another
        // (sagitta_index::hnsw::locality_order; 768-d 200k: linking ~35% faster).
        if let Some(order) = locality_order(&vectors, dim, 0) {
            permute_rows(&mut vectors, dim, &order);
            let mut slots: Vec<Option<Point>> = points.into_iter().map(Some).collect();
            points = order
                .iter()
                .map(|row| slots[*row as usize].take().expect("a permutation"))
                .collect();
        }
        let labels: Vec<u64> = (0..points.len() as u64).collect();
        index.add_in_order(&vectors, &labels, 0, progress, LinkOrder::AsGiven)?;
        drop(vectors);
        HnswSegment::from_graph(fs, directory, id, Arc::new(index), points, shape)
    }

    /// Loads a segment and applies its tombstones as of `tombstone_generation`.
    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        tombstone_generation: Option<u64>,
        schema: &PayloadSchema,
    ) -> Result<HnswSegment> {
        let path = index_path(directory, id);
        let bytes = fs
            .read(&path)?
            .ok_or_else(|| corrupt(&path, "listed in the shard manifest but missing"))?;
        let mut file_bytes = bytes.len() as u64;
        let index = HnswIndex::load_from_bytes(&bytes, graph_capacity)
            .map_err(|error| corrupt(&path, &error.to_string()))?;
        let path = points_path(directory, id);
        let bytes = fs
            .read(&path)?
            .ok_or_else(|| corrupt(&path, "listed in the shard manifest but missing"))?;
        file_bytes += bytes.len() as u64;
        let body =
            unframe(POINTS_MAGIC, &bytes).map_err(|error| corrupt(&path, &error.to_string()))?;
        let points = match codec::try_decode(body) {
            Ok(Operation::Upsert(points)) => points,
            Ok(_) => return Err(corrupt(&path, "points do not decode: not a point listing")),
            Err(error) => return Err(corrupt(&path, &format!("points do not decode: {error}"))),
        };
        if points.len() != index.len() {
            return Err(corrupt(&path, "point count differs from the index"));
        }
        let segment = HnswSegment::assemble(id, Arc::new(index), points, file_bytes, schema);
        if let Some(generation) = tombstone_generation {
            let path = tombstones_path(directory, id, generation);
            let bytes = fs
                .read(&path)?
                .ok_or_else(|| corrupt(&path, "listed in the shard manifest but missing"))?;
            let body = unframe(TOMBSTONES_MAGIC, &bytes)
                .map_err(|error| corrupt(&path, &error.to_string()))?;
            if body.len() % 4 != 0 {
                return Err(corrupt(&path, "tombstones are not whole u32 positions"));
            }
            for node in u32s(body) {
                if node as usize >= segment.ids.len() {
                    return Err(corrupt(&path, "tombstone beyond the segment"));
                }
                segment.mark_node_deleted(node);
            }
        }
        Ok(segment)
    }
}

impl SegmentRead for HnswSegment {
    fn id(&self) -> u64 {
        self.id
    }

    /// Points the segment was built with, live or not.
    fn len(&self) -> usize {
        self.ids.len()
    }

    fn deleted_count(&self) -> usize {
        self.deleted.load(Ordering::Relaxed)
    }

    fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    fn get(&self, id: &PointId) -> Option<Point> {
        self.live_node(id).map(|node| self.point(node))
    }

    fn live_ids<'a>(
        &'a self,
        filter: Option<&'a Filter>,
    ) -> Box<dyn Iterator<Item = PointId> + 'a> {
        let candidates = filter.and_then(|f| self.indexes.read().candidates(f));
        Box::new(
            self.nodes_to_check(candidates)
                .filter(move |node| self.passes(*node, filter))
                .map(|node| self.ids[node as usize]),
        )
    }

    /// Up to `limit` live ids passing `filter` from `start` on, in id order: a scroll page
    /// evaluates the filter on the nodes up to its last match, not on the whole segment.
    fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Vec<PointId> {
        let from = |node: &u32| start.is_none_or(|start| self.ids[*node as usize] >= start);
        let ordered: Vec<u32>;
        let nodes: &[u32] = match filter.and_then(|f| self.indexes.read().candidates(f)) {
            Some(mut candidates) => {
                candidates.retain(from);
                candidates.sort_unstable_by_key(|node| self.ids[*node as usize]);
                ordered = candidates;
                &ordered
            }
            None => {
                let by_id = self.by_id.get_or_init(|| {
                    let mut nodes: Vec<u32> =
                        (0..u32::try_from(self.ids.len()).expect("segment size")).collect();
                    nodes.sort_unstable_by_key(|node| self.ids[*node as usize]);
                    nodes
                });
                let first = by_id.partition_point(|node| !from(node));
                &by_id[first..]
            }
        };
        nodes
            .iter()
            .filter(|node| self.passes(**node, filter))
            .take(limit)
            .map(|node| self.ids[*node as usize])
            .collect()
    }

    fn live_points(&self) -> Box<dyn Iterator<Item = (u32, Point)> + '_> {
        Box::new(
            (0..u32::try_from(self.ids.len()).expect("segment size"))
                .filter(|node| !self.index.is_deleted(*node))
                .map(|node| (node, self.point(node))),
        )
    }

    fn is_deleted_at(&self, position: u32) -> bool {
        self.index.is_deleted(position)
    }

    /// Top-`k` among live points passing `filter`; distances are "lower is closer"
    /// (negated similarity, squared L2). The planner: a filter estimated (on a sample of
    /// nodes) to pass fewer than [`EXACT_SCAN_FRACTION`] of the points is answered by an
    /// exact scan of the points that pass — a graph walk would have to visit most of the
    /// graph to find them and its recall collapses — otherwise HNSW (SQ8 traversal, exact
    /// re-scoring) with the filter inside the search.
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        distance: Distance,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>> {
        let candidates = filter.and_then(|f| self.indexes.read().candidates(f));
        #[allow(clippy::cast_precision_loss)]
        let selective = match (&candidates, filter) {
            (Some(nodes), _) => (nodes.len() as f64) < EXACT_SCAN_FRACTION * self.len() as f64,
            (None, Some(filter)) => self.is_selective(filter),
            (None, None) => false,
        };
        let Some(ef) = strategy.beam(k).filter(|_| !selective) else {
            return Ok(self.exact_search(query, k, filter, candidates, distance));
        };
        let params = HnswSearchParams::new(k, ef);
        let hits = self
            .index
            .search_filtered(query, params, |node| self.passes(node, filter))?;
        Ok(hits
            .into_iter()
            .map(|hit| (hit_distance(hit.score, distance), self.point(hit.node)))
            .collect())
    }
}

impl SegmentWrite for HnswSegment {
    /// Marks `id` deleted if it is live here.
    fn remove(&self, id: &PointId) {
        if let Some(node) = self.live_node(id) {
            self.mark_node_deleted(node);
        }
    }

    /// Marks `id` deleted if it is live here; returns its point (for copy on write).
    fn take(&self, id: &PointId) -> Option<Point> {
        let node = self.live_node(id)?;
        let point = self.point(node);
        self.mark_node_deleted(node);
        Some(point)
    }

    /// Recounts the deleted nodes from the graph. A segment sharing its graph with another
    /// (a seal of a joined buffer saves the host's graph as the new segment) misses the
    /// deletes made through the other after it was assembled: the seal recounts under the
    /// writer lock, before it publishes.
    fn recount_deleted(&self) {
        self.deleted.store(
            deleted_nodes(&self.index, self.ids.len()),
            Ordering::Relaxed,
        );
    }

    /// Writes the current tombstones as of `generation` (durably; directory sync is the
    /// caller's). Returns whether there were any.
    fn save_tombstones(
        &self,
        fs: &dyn FileSystem,
        directory: &Path,
        generation: u64,
    ) -> Result<bool> {
        let deleted: Vec<u8> = (0..self.ids.len())
            .filter(|node| {
                self.index
                    .is_deleted(u32::try_from(*node).expect("segment size"))
            })
            .flat_map(|node| u32::try_from(node).expect("segment size").to_le_bytes())
            .collect();
        if deleted.is_empty() {
            return Ok(false);
        }
        fs.write_synced(
            &tombstones_path(directory, self.id, generation),
            &frame(TOMBSTONES_MAGIC, &deleted),
        )?;
        Ok(true)
    }

    /// Makes the indexes match `schema`: builds the missing ones, drops the others.
    fn sync_payload_indexes(&self, schema: &PayloadSchema) {
        let mut indexes = self.indexes.write();
        if !indexes.matches(schema) {
            *indexes = SegmentIndexes::build(schema, &self.payloads);
        }
    }

    /// Builds the index of `field` (replacing one of the same name), or drops it.
    fn set_payload_index(&self, field: &str, kind: Option<FieldType>) {
        let mut indexes = self.indexes.write();
        match kind {
            Some(kind) => indexes.add(field, kind, &self.payloads),
            None => indexes.remove(field),
        }
    }

    fn graph_host(&self) -> Option<&dyn GraphHost> {
        Some(self)
    }
}

impl GraphHost for HnswSegment {
    /// The segment's graph (shared with a write buffer whose points join it).
    fn graph(&self) -> &Arc<HnswIndex> {
        &self.index
    }

    /// Whether the graph holds only this segment's points and has room for `slots` more:
    /// then a write buffer can join it.
    fn can_host(&self, slots: usize) -> bool {
        self.index.len() == self.ids.len() && self.index.capacity() - self.ids.len() >= slots
    }

    /// Every node as listed in a segment file: id and payload (the graph holds the vector).
    fn listing(&self) -> Vec<Point> {
        listing(&self.ids, &self.payloads)
    }

    /// The point of node `node` if it is one of this segment's and live.
    fn live_point(&self, node: u32) -> Option<Point> {
        self.passes(node, None).then(|| self.point(node))
    }
}
