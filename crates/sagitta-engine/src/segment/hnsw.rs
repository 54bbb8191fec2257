//! The HNSW segment kind: an immutable HNSW index over the points a shard's write buffer
//! held when it was sealed (SQ8 codes for the walk, f32 rows for exact re-scoring), their
//! ids and payloads, payload indexes, and a tombstone set. A write buffer's points may join
//! its graph (it is then their [`GraphHost`]).
//!
//! With `vectors.on_disk` (issue 15 §3) the f32 rows leave RAM: the segment keeps them in a
//! records file of rows in node order (checksummed pages, read through the collection's
//! page cache and the page reader), its index holds the graph and the SQ8 codes only, and
//! a search re-scores the walk's best candidates (about 40 rows at k = 10) from that file.
//! No write buffer joins such a segment: its graph takes no new rows.
//!
//! Files: `segment-<id>.hnsw` (sagitta-index's HNSW file), `segment-<id>.points` and
//! `segment-<id>.tomb-<generation>` (framed by [`sagitta_storage::codec::frame`]); with
//! vectors on disk also `segment-<id>.records`, listed in the shard manifest.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sagitta_index::disk::{RecordLayout, RowRecords};
use sagitta_index::hnsw::{
    locality_order, permute_rows, AddProgress, Codes, HnswIndex, HnswParams, HnswSearchParams,
    LinkOrder, Quantization,
};
use sagitta_index::metric::is_absent;
use sagitta_index::{IndexError, Metric};
use sagitta_storage::fs::{FileSystem, StreamedFile};
use sagitta_storage::StorageError;

use super::listing::{
    corrupt, exact_distance, read_points, read_tombstones, write_points, BestK, Listing,
};
use super::records::RowsFile;
use super::SegmentKindName;
use super::{index_path, GraphHost, SegmentKind, SegmentRead, SegmentShape, SegmentWrite};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::graph::GraphConfig;
use crate::payload_index::PayloadSchema;
use crate::point::{Distance, Point, PointId};
use crate::query::{hit_distance, Strategy};
use crate::spaces::SpaceSlice;

/// Room a segment's graph keeps beyond its points, so a write buffer's points can join it
/// (see [`crate::buffer::BufferGraph`]): as many nodes again as it holds, within these
/// bounds. Link arrays (~150 bytes a node) are allocated up front, vector rows when written.
const SPARE_NODES_MIN: usize = 1_024;
const SPARE_NODES_MAX: usize = 1 << 20;
/// Rows read from a records file at once (exact scans, merges).
const READ_CHUNK: usize = 1_024;

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
    /// Ids and payloads; node `i` of the graph is position `i`.
    listing: Listing,
    /// Nodes marked deleted (the optimizer's vacuum trigger).
    deleted: AtomicUsize,
    /// Bytes of the index and points files (as built or loaded).
    file_bytes: u64,
    /// The rows, when kept in a records file (`vectors.on_disk`); `None`: in the index.
    rows: Option<RowsFile>,
}

/// The HNSW parameters of every segment (and of write-buffer graphs, which become
/// segments): `graph`'s m and build beam, SQ8 codes for the walk.
pub(crate) fn segment_params(dim: usize, distance: Distance, graph: GraphConfig) -> HnswParams {
    let mut params = HnswParams::new(dim, metric(distance));
    params.m = graph.m;
    params.ef_construction = graph.build_beam();
    params.quantization = Quantization::Sq8;
    params
}

/// Whether a graph of `params` was built with `graph` (else the optimizer rebuilds it).
pub(crate) fn built_with(params: &HnswParams, graph: GraphConfig) -> bool {
    params.m == graph.m && params.ef_construction == graph.build_beam()
}

/// Cosine collections store unit vectors and normalize queries before they reach a shard,
/// so their segments rank by dot product: normalizing twice could move stored bits.
pub(crate) fn metric(distance: Distance) -> Metric {
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
    /// [`SegmentKind::build`] saves the one it built. With `vectors.on_disk` the rows go to
    /// a records file and the segment holds the index loaded back without them.
    pub fn from_graph(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: Arc<HnswIndex>,
        listing: Vec<Point>,
        shape: &SegmentShape<'_>,
    ) -> Result<HnswSegment> {
        let (index, rows, index_bytes) = if shape.vectors_on_disk {
            HnswSegment::save_apart(fs, directory, id, &index, shape)?
        } else {
            let bytes = HnswSegment::save_whole(fs, directory, id, &index)?;
            shape.place_vectors(&index);
            (index, None, bytes)
        };
        let (listing, points_bytes) = write_points(fs, directory, id, listing)?;
        Ok(HnswSegment::assemble(
            id,
            index,
            listing,
            index_bytes + points_bytes,
            shape.schema,
            rows,
        ))
    }

    /// Writes `segment-<id>.hnsw` with the vectors, durably; returns its bytes.
    fn save_whole(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: &HnswIndex,
    ) -> Result<u64> {
        // Streamed to the file: a copy of the vectors in memory would double the peak.
        let mut file = StreamedFile::create(fs, &index_path(directory, id))?;
        // SQ8 codes are stored (a quarter more bytes than the vectors alone): recomputing
        // them was a third of the time to reopen a segment (issue 12 §5, restart time).
        let saved = index.save_with(&mut file, Codes::Stored);
        if let Some(failure) = file.take_failure() {
            return Err(failure.into());
        }
        saved?;
        Ok(file.finish()?)
    }

    /// Writes the rows of `index` to `segment-<id>.records` and the index without them to
    /// `segment-<id>.hnsw`, durably. Returns the index loaded back from those bytes (graph,
    /// codes and tombstones: the rows leave RAM), the rows file, and the bytes written.
    fn save_apart(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        index: &HnswIndex,
        shape: &SegmentShape<'_>,
    ) -> Result<(Arc<HnswIndex>, Option<RowsFile>, u64)> {
        let count = index.len();
        let nodes = 0..u32::try_from(count).expect("segment size");
        if let Some(node) = nodes.clone().find(|node| index.vector(*node).is_none()) {
            return Err(EngineError::Index(IndexError::Format {
                reason: format!("node {node} of the graph has no row to write"),
            }));
        }
        let layout = RecordLayout::new(shape.dim, shape.element);
        let rows = nodes.map(|node| index.vector(node).expect("checked above"));
        let records_bytes = RowsFile::write(fs, shape.stripes, id, layout, count, rows)?;
        let mut bytes = Vec::new();
        index.save_without_vectors(&mut bytes)?;
        let path = index_path(directory, id);
        fs.write_synced(&path, &bytes)?;
        let loaded = HnswIndex::load_from_bytes(&bytes, |count| count)
            .map_err(|error| corrupt(&path, &error.to_string()))?;
        let records = RowRecords {
            layout,
            rows: count,
        };
        let rows = RowsFile::open(fs, shape.stripes, id, records, shape.page_cache)?;
        Ok((
            Arc::new(loaded),
            Some(rows),
            records_bytes + bytes.len() as u64,
        ))
    }

    fn assemble(
        id: u64,
        index: Arc<HnswIndex>,
        points: Vec<Point>,
        file_bytes: u64,
        schema: &PayloadSchema,
        rows: Option<RowsFile>,
    ) -> HnswSegment {
        let listing = Listing::new(points, schema);
        // Nodes the graph already holds as deleted (slots a write buffer retired before it
        // was saved as this segment) count as deleted from the start: counting only the
        // tombstones marked later overstated live points after every reload (issue 13 §4).
        let deleted = deleted_nodes(&index, listing.len());
        HnswSegment {
            id,
            index,
            listing,
            deleted: AtomicUsize::new(deleted),
            file_bytes,
            rows,
        }
    }

    fn is_deleted(&self) -> impl Fn(u32) -> bool + '_ {
        |node| self.index.is_deleted(node)
    }

    fn live_node(&self, id: &PointId) -> Option<u32> {
        self.listing
            .position(id)
            .filter(|node| !self.index.is_deleted(*node))
    }

    pub fn mark_node_deleted(&self, node: u32) {
        if self.index.mark_deleted(u64::from(node)) {
            self.deleted.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The point at `node`, its vector read from the records file when it is there.
    fn point(&self, node: u32) -> Result<Point> {
        let vector = match &self.rows {
            None => self
                .index
                .vector(node)
                .map(<[f32]>::to_vec)
                .unwrap_or_default(),
            Some(rows) => rows.read(&[node])?.remove(0),
        };
        Ok(self.listing.point(node, vector))
    }

    /// Calls `visit` with each of `nodes` and its row: borrowed from the index, or read
    /// from the records file [`READ_CHUNK`] rows at a time.
    fn for_each_row(&self, nodes: &[u32], mut visit: impl FnMut(u32, &[f32])) -> Result<()> {
        match &self.rows {
            None => {
                for node in nodes {
                    if let Some(row) = self.index.vector(*node) {
                        visit(*node, row);
                    }
                }
            }
            Some(rows) => {
                for chunk in nodes.chunks(READ_CHUNK) {
                    for (node, row) in chunk.iter().zip(rows.read(chunk)?) {
                        visit(*node, &row);
                    }
                }
            }
        }
        Ok(())
    }

    fn passes(&self, node: u32, filter: Option<&Filter>) -> bool {
        self.listing.passes(node, filter, &self.is_deleted())
    }

    /// The `k` of `nodes` closest to `query` by their full vectors, closest first, ties by
    /// point id (as the collection orders its results).
    fn rank(
        &self,
        query: &[f32],
        k: usize,
        nodes: &[u32],
        distance: Distance,
    ) -> Result<Vec<(f32, Point)>> {
        let mut best = BestK::new(k);
        self.for_each_row(nodes, |node, row| {
            if is_absent(row) {
                return; // a point without its vector: nothing to rank it by
            }
            let value = exact_distance(distance, query, row);
            best.offer(value, self.listing.id(node), || (node, row.to_vec()));
        })?;
        Ok(best
            .into_sorted()
            .into_iter()
            .map(|(value, _, (node, row))| (value, self.listing.point(node, row)))
            .collect())
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
    ) -> Result<Vec<(f32, Point)>> {
        let passing: Vec<u32> = self
            .listing
            .positions_to_check(candidates)
            .filter(|node| self.passes(*node, filter))
            .collect();
        self.rank(query, k, &passing, distance)
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
            segment_params(dim, shape.distance, shape.graph),
            graph_capacity(points.len()),
        )?;
        let mut vectors = super::take_vectors(&mut points, dim);
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

    /// Loads a segment (its rows from records file `record_files[0]` when its index file
    /// says they are kept outside) and applies its tombstones as of
    /// `tombstone_generation`.
    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        record_files: &[u64],
        tombstone_generation: Option<u64>,
        shape: &SegmentShape<'_>,
    ) -> Result<HnswSegment> {
        let path = index_path(directory, id);
        let mut stream = fs
            .open_read(&path)?
            .ok_or_else(|| corrupt(&path, "listed in the shard manifest but missing"))?;
        // spare nodes only where a buffer may join the graph (not with rows on disk)
        let capacity = |count| {
            if shape.vectors_on_disk {
                count
            } else {
                graph_capacity(count)
            }
        };
        // section by section: the open needs the index's memory, not the file's as well
        let index =
            HnswIndex::load_stream(&mut stream.reader, stream.len, capacity).map_err(|error| {
                match error {
                    // a failed read is the device's error, not damage to the file
                    IndexError::Io { message, .. } => EngineError::Storage(StorageError::Io {
                        operation: "reading",
                        path: path.clone(),
                        kind: std::io::ErrorKind::Other,
                        message,
                    }),
                    error => corrupt(&path, &error.to_string()),
                }
            })?;
        let (points, points_bytes) = read_points(fs, directory, id)?;
        if points.len() != index.len() {
            let path = super::points_path(directory, id);
            return Err(corrupt(&path, "point count differs from the index"));
        }
        let rows = open_rows(fs, directory, id, &index, record_files, shape)?;
        if rows.is_none() {
            shape.place_vectors(&index);
        }
        let records_bytes = rows.as_ref().map_or(0, RowsFile::bytes);
        let file_bytes = stream.len + points_bytes + records_bytes;
        let segment =
            HnswSegment::assemble(id, Arc::new(index), points, file_bytes, shape.schema, rows);
        if let Some(generation) = tombstone_generation {
            let len = segment.listing.len();
            for node in read_tombstones(fs, directory, id, generation, len)? {
                segment.mark_node_deleted(node);
            }
        }
        Ok(segment)
    }
}

/// The records file of segment `id`'s index when it keeps its rows outside (`None` when it
/// holds them): the one file the shard manifest lists for the segment.
fn open_rows(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    index: &HnswIndex,
    record_files: &[u64],
    shape: &SegmentShape<'_>,
) -> Result<Option<RowsFile>> {
    match (index.rows_outside(), record_files) {
        (false, []) => Ok(None),
        (true, [file]) => {
            let records = RowRecords {
                layout: RecordLayout::new(shape.dim, shape.element),
                rows: index.len(),
            };
            RowsFile::open(fs, shape.stripes, *file, records, shape.page_cache).map(Some)
        }
        (outside, files) => {
            let kept = if outside {
                "in a records file"
            } else {
                "in itself"
            };
            let reason = format!(
                "the index keeps its vectors {kept}, the shard manifest lists {} records files",
                files.len()
            );
            Err(corrupt(&index_path(directory, id), &reason))
        }
    }
}

impl SegmentRead for HnswSegment {
    fn id(&self) -> u64 {
        self.id
    }

    fn built_with(&self, graph: GraphConfig) -> bool {
        built_with(self.index.params(), graph)
    }

    fn kind(&self) -> SegmentKindName {
        SegmentKindName::Hnsw
    }

    fn positions(&self) -> &Listing {
        &self.listing
    }

    fn deleted_count(&self) -> usize {
        self.deleted.load(Ordering::Relaxed)
    }

    fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    fn ram_bytes(&self) -> u64 {
        self.index.memory_usage().total_bytes() as u64
    }

    fn record_files(&self) -> Vec<u64> {
        self.rows.iter().map(RowsFile::file).collect()
    }

    fn get(&self, id: &PointId) -> Result<Option<Point>> {
        self.live_node(id).map(|node| self.point(node)).transpose()
    }

    fn live_points(&self) -> Box<dyn Iterator<Item = Result<(u32, Point)>> + '_> {
        let len = u32::try_from(self.listing.len()).expect("segment size");
        Box::new((0..len).step_by(READ_CHUNK).flat_map(move |start| {
            let end = start.saturating_add(READ_CHUNK as u32).min(len);
            let nodes: Vec<u32> = (start..end)
                .filter(|node| !self.index.is_deleted(*node))
                .collect();
            let mut points = Vec::with_capacity(nodes.len());
            let read = self.for_each_row(&nodes, |node, row| {
                points.push(Ok((node, self.listing.point(node, row.to_vec()))));
            });
            match read {
                Ok(()) => points,
                Err(error) => vec![Err(error)],
            }
        }))
    }

    fn is_deleted_at(&self, position: u32) -> bool {
        self.index.is_deleted(position)
    }

    /// Top-`k` among live points passing `filter`; distances are "lower is closer"
    /// (negated similarity, squared L2). The planner: a filter estimated to pass fewer than
    /// [`super::listing::EXACT_SCAN_FRACTION`] of the points is answered by an exact scan
    /// of the points that pass — a graph walk would have to visit most of the graph to find
    /// them and its recall collapses — and so are passing points whose vectors total at most
    /// [`super::listing::FULL_SCAN_BYTES`] (Qdrant's `full_scan_threshold`: exact answers
    /// where a scan is cheap); otherwise HNSW (SQ8 traversal, exact re-scoring) with the
    /// filter inside the search.
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        space: SpaceSlice,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>> {
        let distance = space.distance;
        let candidates = filter.and_then(|f| self.listing.candidates(f));
        let exact_points = super::listing::FULL_SCAN_BYTES / (4 * self.index.dim().max(1));
        let selective = self.listing.is_selective(
            filter,
            candidates.as_ref(),
            &self.is_deleted(),
            exact_points,
        );
        let Some(ef) = strategy.beam(k).filter(|_| !selective) else {
            return self.exact_search(query, k, filter, candidates, distance);
        };
        let params = HnswSearchParams::new(k, ef);
        if self.rows.is_some() {
            // the walk on codes, then its best candidates re-scored from the records file
            let found = self
                .index
                .search_codes(query, params, |node| self.passes(node, filter))?;
            let nodes: Vec<u32> = found.into_iter().map(|(node, _)| node).collect();
            return self.rank(query, k, &nodes, distance);
        }
        let hits = self
            .index
            .search_filtered(query, params, |node| self.passes(node, filter))?;
        hits.into_iter()
            .map(|hit| Ok((hit_distance(hit.score, distance), self.point(hit.node)?)))
            .collect()
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
    fn take(&self, id: &PointId) -> Result<Option<Point>> {
        let Some(node) = self.live_node(id) else {
            return Ok(None);
        };
        let point = self.point(node)?;
        self.mark_node_deleted(node);
        Ok(Some(point))
    }

    /// Recounts the deleted nodes from the graph. A segment sharing its graph with another
    /// (a seal of a joined buffer saves the host's graph as the new segment) misses the
    /// deletes made through the other after it was assembled: the seal recounts under the
    /// writer lock, before it publishes.
    fn recount_deleted(&self) {
        self.deleted.store(
            deleted_nodes(&self.index, self.listing.len()),
            Ordering::Relaxed,
        );
    }

    /// The graph, unless its rows are on disk: a graph without rows takes no new points.
    fn graph_host(&self) -> Option<&dyn GraphHost> {
        if self.rows.is_some() {
            return None;
        }
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
        let len = self.listing.len();
        self.index.len() == len && self.index.capacity() - len >= slots
    }

    /// Every node as listed in a segment file: id and payload (the graph holds the vector).
    fn listing(&self) -> Vec<Point> {
        self.listing.listing()
    }

    /// The point of node `node` if it is one of this segment's and live.
    fn live_point(&self, node: u32) -> Option<Point> {
        // a host keeps its rows in its index (see graph_host), so the read cannot fail
        self.passes(node, None)
            .then(|| self.point(node).ok())
            .flatten()
    }
}
