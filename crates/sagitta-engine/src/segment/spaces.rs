//! The segment kind of collections with named vectors ([`crate::spaces`]): per space an
//! HNSW graph (SQ8 walk, exact re-scoring, as [`super::hnsw`]) over the positions that have
//! a vector there, its labels the positions; ids, payloads and their indexes in the shared
//! [`Listing`]; deletes as positions in a [`DeletedSet`] (no graph is shared with a write
//! buffer, so the marks need not live in one).
//!
//! Files: `segment-<id>.spaces` — framed ([`sagitta_storage::codec::frame`], magic
//! `SAGSPCS1`): a u32 space count, then per space a u64 byte length and that many bytes of
//! sagitta-index's HNSW file (length 0: no point of the segment has a vector there) —
//! `segment-<id>.points` and `segment-<id>.tomb-<generation>` as every kind.

use std::path::Path;

use sagitta_index::hnsw::{AddProgress, Codes, HnswIndex, HnswSearchParams, LinkOrder};
use sagitta_storage::codec::{frame, unframe};
use sagitta_storage::fs::FileSystem;

use super::hnsw::{built_with, segment_params};
use super::listing::{
    corrupt, exact_distance, read_listed, read_points, read_tombstones, write_points, BestK,
    DeletedSet, Listing, FULL_SCAN_BYTES,
};
use super::{SegmentKind, SegmentKindName, SegmentRead, SegmentShape, SegmentWrite};
use crate::error::Result;
use crate::filter::Filter;
use crate::graph::GraphConfig;
use crate::point::SideVector;
use crate::point::{Point, PointId};
use crate::query::{hit_distance, SideQuery, Strategy};
use crate::spaces::SpaceSlice;
use crate::sparse::SparseIndex;

const SPACES_MAGIC: &[u8; 8] = b"SAGSPCS1";

pub(crate) fn spaces_path(directory: &Path, id: u64) -> std::path::PathBuf {
    directory.join(format!("segment-{id}.spaces"))
}

pub(crate) struct SpacesSegment {
    id: u64,
    /// Per space, its graph (labels: positions), or `None` when no point has a vector there.
    graphs: Vec<Option<HnswIndex>>,
    slices: Vec<SpaceSlice>,
    /// Each position's side vectors, and per side space an inverted index over its
    /// sparse vectors (empty for a multivector space).
    side: Vec<Vec<Option<SideVector>>>,
    sparse_indexes: Vec<SparseIndex>,
    listing: Listing,
    deleted: DeletedSet,
    file_bytes: u64,
}

/// One space's graph over the vectors `points` have there, labelled by position.
fn build_graph(
    points: &[Point],
    slice: SpaceSlice,
    graph: GraphConfig,
) -> Result<Option<HnswIndex>> {
    let mut vectors = Vec::new();
    let mut labels = Vec::new();
    for (position, point) in points.iter().enumerate() {
        if let Some(part) = slice.of(&point.vector) {
            vectors.extend_from_slice(part);
            labels.push(position as u64);
        }
    }
    if labels.is_empty() {
        return Ok(None);
    }
    let index = HnswIndex::new(
        segment_params(slice.dim, slice.distance, graph),
        labels.len(),
    )?;
    index.add_in_order(&vectors, &labels, 0, None, LinkOrder::AsGiven)?;
    Ok(Some(index))
}

impl SpacesSegment {
    fn is_deleted(&self) -> impl Fn(u32) -> bool + '_ {
        |position| self.deleted.contains(position)
    }

    fn live_position(&self, id: &PointId) -> Option<u32> {
        self.listing
            .position(id)
            .filter(|position| !self.deleted.contains(*position))
    }

    /// Space `space`'s vector of the point at `position`, if it has one.
    fn part(&self, space: usize, position: u32) -> Option<&[f32]> {
        let graph = self.graphs[space].as_ref()?;
        graph.vector(graph.node_of(u64::from(position))?)
    }

    /// The point at `position`, its stored vector joined from every space (NaNs where it
    /// has none).
    fn point(&self, position: u32) -> Point {
        let mut vector = Vec::with_capacity(self.slices.iter().map(|slice| slice.dim).sum());
        for slice in &self.slices {
            match self.part(slice.index, position) {
                Some(part) => vector.extend_from_slice(part),
                None => vector.extend(std::iter::repeat_n(f32::NAN, slice.dim)),
            }
        }
        let mut point = self.listing.point(position, vector);
        point.side.clone_from(&self.side[position as usize]);
        point
    }

    fn passes(&self, position: u32, filter: Option<&Filter>) -> bool {
        self.listing.passes(position, filter, &self.is_deleted())
    }

    /// Exact top-`k` among `positions` having a vector in `slice`'s space.
    fn rank(
        &self,
        query: &[f32],
        k: usize,
        positions: &[u32],
        slice: SpaceSlice,
    ) -> Vec<(f32, Point)> {
        let mut best = BestK::new(k);
        for position in positions {
            if let Some(row) = self.part(slice.index, *position) {
                let value = exact_distance(slice.distance, query, row);
                best.offer(value, self.listing.id(*position), || *position);
            }
        }
        best.into_sorted()
            .into_iter()
            .map(|(value, _, position)| (value, self.point(position)))
            .collect()
    }

    fn assemble(
        id: u64,
        graphs: Vec<Option<HnswIndex>>,
        mut points: Vec<Point>,
        file_bytes: u64,
        shape: &SegmentShape<'_>,
    ) -> SpacesSegment {
        let side: Vec<Vec<Option<SideVector>>> = points
            .iter_mut()
            .map(|point| std::mem::take(&mut point.side))
            .collect();
        let sparse_indexes = (0..shape.spaces.side().len())
            .map(|space| {
                SparseIndex::build(side.iter().map(|vectors| {
                    vectors
                        .get(space)
                        .and_then(Option::as_ref)
                        .and_then(SideVector::as_sparse)
                }))
            })
            .collect();
        let listing = Listing::new(points, shape.schema);
        let deleted = DeletedSet::new(listing.len());
        SpacesSegment {
            id,
            graphs,
            slices: shape.spaces.slices(),
            side,
            sparse_indexes,
            listing,
            deleted,
            file_bytes,
        }
    }
}

/// The `.spaces` file's body: the space count, then each graph's length and bytes.
fn encode_graphs(graphs: &[Option<HnswIndex>]) -> Result<Vec<u8>> {
    let mut body = (graphs.len() as u32).to_le_bytes().to_vec();
    for graph in graphs {
        let mut bytes = Vec::new();
        if let Some(graph) = graph {
            graph.save_with(&mut bytes, Codes::Stored)?;
        }
        body.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        body.extend_from_slice(&bytes);
    }
    Ok(body)
}

/// The graphs of a `.spaces` body, checked against the collection's `slices`.
fn decode_graphs(
    path: &Path,
    body: &[u8],
    slices: &[SpaceSlice],
) -> Result<Vec<Option<HnswIndex>>> {
    let take = |at: usize, len: usize| {
        body.get(at..at + len)
            .ok_or_else(|| corrupt(path, &format!("truncated at byte {at}")))
    };
    let count = u32::from_le_bytes(take(0, 4)?.try_into().expect("4 bytes")) as usize;
    if count != slices.len() {
        let reason = format!(
            "{count} graphs, the collection has {} named vectors",
            slices.len()
        );
        return Err(corrupt(path, &reason));
    }
    let mut at = 4;
    let mut graphs = Vec::with_capacity(count);
    for slice in slices {
        let len = u64::from_le_bytes(take(at, 8)?.try_into().expect("8 bytes"));
        let len = usize::try_from(len).map_err(|_| corrupt(path, "graph length overflows"))?;
        at += 8;
        if len == 0 {
            graphs.push(None);
            continue;
        }
        let graph = HnswIndex::load_from_bytes(take(at, len)?, |count| count)
            .map_err(|error| corrupt(path, &format!("space {}: {error}", slice.index)))?;
        if graph.dim() != slice.dim {
            let reason = format!(
                "space {}: graph of dim {}, not {}",
                slice.index,
                graph.dim(),
                slice.dim
            );
            return Err(corrupt(path, &reason));
        }
        at += len;
        graphs.push(Some(graph));
    }
    if at != body.len() {
        return Err(corrupt(path, "bytes after the last graph"));
    }
    Ok(graphs)
}

impl SegmentKind for SpacesSegment {
    fn build(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        mut points: Vec<Point>,
        shape: &SegmentShape<'_>,
        progress: Option<&AddProgress>,
    ) -> Result<SpacesSegment> {
        let graphs = shape
            .spaces
            .slices()
            .into_iter()
            .map(|slice| build_graph(&points, slice, shape.graph))
            .collect::<Result<Vec<_>>>()?;
        if let Some(progress) = progress {
            progress.advance(points.len());
        }
        let encoded = frame(SPACES_MAGIC, &encode_graphs(&graphs)?);
        fs.write_synced(&spaces_path(directory, id), &encoded)?;
        for point in &mut points {
            point.vector = Vec::new();
        }
        let (points, points_bytes) = write_points(fs, directory, id, points)?;
        Ok(SpacesSegment::assemble(
            id,
            graphs,
            points,
            encoded.len() as u64 + points_bytes,
            shape,
        ))
    }

    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        _record_files: &[u64],
        tombstone_generation: Option<u64>,
        shape: &SegmentShape<'_>,
    ) -> Result<SpacesSegment> {
        let path = spaces_path(directory, id);
        let bytes = read_listed(fs, &path)?;
        let body =
            unframe(SPACES_MAGIC, &bytes).map_err(|error| corrupt(&path, &error.to_string()))?;
        let slices = shape.spaces.slices();
        let graphs = decode_graphs(&path, body, &slices)?;
        let (points, points_bytes) = read_points(fs, directory, id)?;
        for graph in graphs.iter().flatten() {
            if (0..graph.len()).any(|node| graph.label(node as u32) >= points.len() as u64) {
                return Err(corrupt(
                    &path,
                    "a graph labels a position beyond the points",
                ));
            }
        }
        let segment =
            SpacesSegment::assemble(id, graphs, points, bytes.len() as u64 + points_bytes, shape);
        if let Some(generation) = tombstone_generation {
            let len = segment.listing.len();
            for position in read_tombstones(fs, directory, id, generation, len)? {
                segment.deleted.insert(position);
            }
        }
        Ok(segment)
    }
}

impl SegmentRead for SpacesSegment {
    fn id(&self) -> u64 {
        self.id
    }

    fn built_with(&self, graph: GraphConfig) -> bool {
        self.graphs
            .iter()
            .flatten()
            .all(|index| built_with(index.params(), graph))
    }

    fn kind(&self) -> SegmentKindName {
        SegmentKindName::Spaces
    }

    fn positions(&self) -> &Listing {
        &self.listing
    }

    fn deleted_count(&self) -> usize {
        self.deleted.count()
    }

    fn file_bytes(&self) -> u64 {
        self.file_bytes
    }

    fn ram_bytes(&self) -> u64 {
        let graphs: usize = self
            .graphs
            .iter()
            .flatten()
            .map(|graph| graph.memory_usage().total_bytes())
            .sum();
        let vectors: usize = self
            .side
            .iter()
            .flatten()
            .flatten()
            .map(SideVector::bytes)
            .sum();
        let postings: usize = self.sparse_indexes.iter().map(SparseIndex::bytes).sum();
        (graphs + vectors + postings) as u64
    }

    /// Top-`k` by `query` among live points passing `filter` that it scores in side
    /// space `space`: a sparse query from the space's inverted index (only points sharing
    /// an index with it), a multivector query by a scan of the points that have one.
    fn search_side(
        &self,
        (query, space): (SideQuery<'_>, usize),
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<(f32, Point)>> {
        let mut best = BestK::new(k);
        match query {
            SideQuery::Sparse(sparse) => {
                let Some(index) = self.sparse_indexes.get(space) else {
                    return Ok(Vec::new());
                };
                index.for_each_score(sparse, |position, score| {
                    if best.admits(-score) && self.passes(position, filter) {
                        best.offer(-score, self.listing.id(position), || position);
                    }
                });
            }
            SideQuery::Multi(..) => {
                for (position, vectors) in (0u32..).zip(&self.side) {
                    let Some(vector) = vectors.get(space).and_then(Option::as_ref) else {
                        continue;
                    };
                    if let Some(distance) = query.distance_to(vector) {
                        if self.passes(position, filter) {
                            best.offer(distance, self.listing.id(position), || position);
                        }
                    }
                }
            }
        }
        Ok(best
            .into_sorted()
            .into_iter()
            .map(|(distance, _, position)| (distance, self.point(position)))
            .collect())
    }

    fn sparse_frequencies(&self, space: usize, indices: &[u32], counts: &mut [usize]) {
        if let Some(index) = self.sparse_indexes.get(space) {
            let none_deleted = self.deleted.count() == 0;
            for (at, term) in indices.iter().enumerate() {
                counts[at] += if none_deleted {
                    index.posting_len(*term)
                } else {
                    index.document_frequency(*term, |position| !self.deleted.contains(position))
                };
            }
        }
    }

    fn get(&self, id: &PointId) -> Result<Option<Point>> {
        Ok(self.live_position(id).map(|position| self.point(position)))
    }

    fn live_points(&self) -> Box<dyn Iterator<Item = Result<(u32, Point)>> + '_> {
        let len = u32::try_from(self.listing.len()).expect("segment size");
        Box::new(
            (0..len)
                .filter(|position| !self.deleted.contains(*position))
                .map(|position| Ok((position, self.point(position)))),
        )
    }

    fn is_deleted_at(&self, position: u32) -> bool {
        self.deleted.contains(position)
    }

    /// Top-`k` among live points passing `filter` that have a vector in `space`, planned
    /// as an HNSW segment plans (exact when the filter is selective or the space's
    /// vectors are few, else a walk of the space's graph with the filter inside it).
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        space: SpaceSlice,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>> {
        let Some(graph) = self.graphs.get(space.index).and_then(Option::as_ref) else {
            return Ok(Vec::new());
        };
        let candidates = filter.and_then(|f| self.listing.candidates(f));
        let exact_points = FULL_SCAN_BYTES / (4 * space.dim.max(1));
        let selective = graph.len() <= exact_points
            || self.listing.is_selective(
                filter,
                candidates.as_ref(),
                &self.is_deleted(),
                exact_points,
            );
        let Some(ef) = strategy.beam(k).filter(|_| !selective) else {
            let passing: Vec<u32> = self
                .listing
                .positions_to_check(candidates)
                .filter(|position| self.passes(*position, filter))
                .collect();
            return Ok(self.rank(query, k, &passing, space));
        };
        let params = HnswSearchParams::new(k, ef);
        let hits = graph.search_filtered(query, params, |node| {
            u32::try_from(graph.label(node)).is_ok_and(|position| self.passes(position, filter))
        })?;
        Ok(hits
            .into_iter()
            .map(|hit| {
                let position = u32::try_from(hit.label).expect("checked at load");
                (
                    hit_distance(hit.score, space.distance),
                    self.point(position),
                )
            })
            .collect())
    }
}

impl SegmentWrite for SpacesSegment {
    fn remove(&self, id: &PointId) {
        if let Some(position) = self.live_position(id) {
            self.deleted.insert(position);
        }
    }

    fn take(&self, id: &PointId) -> Result<Option<Point>> {
        let Some(position) = self.live_position(id) else {
            return Ok(None);
        };
        let point = self.point(position);
        self.deleted.insert(position);
        Ok(Some(point))
    }

    /// The marks are the segment's own: nothing to recount.
    fn recount_deleted(&self) {}
}
