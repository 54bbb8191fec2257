//! Sealed segments: immutable sets of points a shard's write buffer once held, and the
//! interface every segment kind offers the shard.
//!
//! The interface is split the way queries and writes use it (the split Qdrant draws
//! between its read-only and its full segment entry):
//! - [`SegmentRead`]: what a query asks of a segment: get, count, filter, scroll, search,
//!   the live points. Only live points are ever seen.
//! - [`SegmentWrite`]: the only mutations a sealed segment takes: a point superseded by a
//!   newer write is marked deleted (its tombstone made durable by the shard's commit), and
//!   payload indexes follow the shard's schema. Points are never added: a payload update on
//!   a sealed point copies it into the write buffer (copy on write), so every mutation is
//!   in the log.
//! - [`SegmentKind`]: how segments come to be: built from points (a seal of a buffer with
//!   no graph, a merge, a vacuum) and loaded at open. A seal of an indexed buffer saves the
//!   graph the indexer grew instead ([`hnsw::HnswSegment::from_graph`]).
//!
//! Two kinds exist: [`hnsw::HnswSegment`] (graph, codes and vectors in RAM; a write
//! buffer's points can join its graph, [`SegmentWrite::graph_host`]) and
//! [`disk::DiskSegment`] (codes in RAM, vectors read from disk). The shard holds every
//! segment as `dyn SegmentWrite`, names a kind only to build or load one ([`build`],
//! [`load`]), and the shard manifest records each segment's kind. What every kind keeps
//! per position (ids, payloads, their indexes) and the files every kind shares are in
//! [`listing`].
//!
//! Invariants: a segment's points are numbered 0..len (their *positions*, stable for the
//! segment's life); an id is live at one position at most (a buffer saved as a segment
//! keeps its retired slots as deleted positions, so an id may be listed again before its
//! live one); the deleted count equals the positions marked deleted ([`SegmentWrite::recount_deleted`] restores it when a shared graph took
//! deletes through another segment).
//!
//! Files (docs/format.md, "Shard directory"): `segment-<id>.points` (ids and payloads) and
//! `segment-<id>.tomb-<generation>` (tombstones as of a seal) for every kind;
//! `segment-<id>.hnsw` (the HNSW index file) for HNSW segments; `segment-<id>.ivf` and
//! `segment-<id>.records` for disk segments.

pub(crate) mod disk;
pub(crate) mod hnsw;
mod listing;
mod records;
pub(crate) mod spaces;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sagitta_index::disk::Element;
use sagitta_index::hnsw::{AddProgress, HnswIndex};
use sagitta_storage::fs::FileSystem;
use sagitta_storage::pageio::PageCache;

use crate::error::Result;
use crate::filter::Filter;
use crate::graph::GraphConfig;
use crate::payload_index::{FieldType, PayloadSchema};
use crate::point::{Distance, Point, PointId};
use crate::query::{SideQuery, Strategy};
use crate::spaces::{SpaceSlice, VectorSpaces};

pub(crate) use disk::DiskSegment;
pub(crate) use hnsw::{segment_params, HnswSegment};
use listing::Listing;

/// The kind of the segments a collection seals its points into.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SegmentKindName {
    /// An HNSW graph with SQ8 codes and full vectors, all in RAM.
    #[default]
    Hnsw,
    /// Balanced partitions with RaBitQ codes in RAM and full vectors on disk, read
    /// through the page reader (issue 15).
    Disk,
    /// One HNSW graph per named vector, over the points that have one, all in RAM
    /// (collections with named vectors, [`crate::spaces`]).
    Spaces,
}

impl SegmentKindName {
    pub fn name(self) -> &'static str {
        match self {
            SegmentKindName::Hnsw => "hnsw",
            SegmentKindName::Disk => "disk",
            SegmentKindName::Spaces => "spaces",
        }
    }

    /// The kinds a collection may ask for by name (`spaces` follows from named vectors).
    pub fn parse(name: &str) -> Option<SegmentKindName> {
        match name {
            "hnsw" => Some(SegmentKindName::Hnsw),
            "disk" => Some(SegmentKindName::Disk),
            _ => None,
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            SegmentKindName::Hnsw => 0,
            SegmentKindName::Disk => 1,
            SegmentKindName::Spaces => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<SegmentKindName> {
        match code {
            0 => Some(SegmentKindName::Hnsw),
            1 => Some(SegmentKindName::Disk),
            2 => Some(SegmentKindName::Spaces),
            _ => None,
        }
    }
}

/// What every segment of a shard shares: vector shape, the indexed payload fields, and
/// the collection's page cache (disk segments read through it).
pub(crate) struct SegmentShape<'a> {
    pub dim: usize,
    pub distance: Distance,
    pub schema: &'a PayloadSchema,
    /// The value type of disk segments' records (HNSW segments keep f32 rows of values
    /// the collection has already rounded).
    pub element: Element,
    /// Vectors a disk segment's partition aims at (builds and appends).
    pub partition_size: usize,
    /// HNSW segments keep their vectors in a records file, read through the page cache
    /// (`vectors.on_disk`).
    pub vectors_on_disk: bool,
    /// The directories records files go to: the shard's own first, then its directory
    /// under each stripe root (a disk segment's build spreads its partitions over all).
    pub stripes: &'a [PathBuf],
    pub page_cache: &'a Arc<PageCache>,
    /// The collection's named vectors (none: one unnamed vector of `dim`).
    pub spaces: &'a VectorSpaces,
    /// The HNSW graph config a build uses.
    pub graph: GraphConfig,
    /// The NUMA node HNSW segments keep their full vectors on (a far memory tier).
    pub vectors_node: Option<usize>,
    /// Where a refusal to move them there is reported.
    pub tier_error: &'a parking_lot::Mutex<Option<String>>,
}

impl SegmentShape<'_> {
    /// Moves `index`'s full vectors to the shape's far node, if it has one; a refusal is
    /// logged and kept for collection info, and the vectors stay where they are.
    pub(crate) fn place_vectors(&self, index: &HnswIndex) {
        place_vectors(index, self.vectors_node, self.tier_error);
    }
}

/// Moves `index`'s full vectors to `node` (none: leaves them); a refusal is logged and
/// kept in `tier_error`, and the vectors stay where they are.
pub(crate) fn place_vectors(
    index: &HnswIndex,
    node: Option<usize>,
    tier_error: &parking_lot::Mutex<Option<String>>,
) {
    let Some(node) = node else {
        return;
    };
    if let Err(reason) = index.prefer_vectors_node(node) {
        log::warn!("vectors stay in local memory: {reason}");
        *tier_error.lock() = Some(reason);
    }
}

/// The read side of a sealed segment. Every method sees live points only.
pub(crate) trait SegmentRead: Send + Sync {
    /// The segment's number in its shard (its file names carry it).
    fn id(&self) -> u64;
    /// The kind (recorded in the shard manifest, which names the files by it).
    fn kind(&self) -> SegmentKindName;
    /// Ids and payloads by position, and their indexes.
    fn positions(&self) -> &Listing;
    /// Points the segment was built with, live or not.
    fn len(&self) -> usize {
        self.positions().len()
    }
    fn deleted_count(&self) -> usize;
    fn live_count(&self) -> usize {
        self.len() - self.deleted_count()
    }
    /// Bytes of the segment's files, as built or loaded.
    fn file_bytes(&self) -> u64;
    /// Bytes of RAM the segment's index holds (ids and payloads not counted).
    fn ram_bytes(&self) -> u64;
    /// The records files the segment reads (a disk segment's, in its extents' order; the
    /// shard manifest lists them), by the id of the segment that wrote each.
    fn record_files(&self) -> Vec<u64> {
        Vec::new()
    }
    /// Whether the segment's graphs were built with `graph` (the optimizer rebuilds a
    /// segment whose graphs were not). Segments without an HNSW graph always were.
    fn built_with(&self, _graph: GraphConfig) -> bool {
        true
    }
    /// Points' worth of space a rebuild would give back, and the points' worth the
    /// segment's files hold: deleted positions, and for a disk segment the records no
    /// position holds since an append. The vacuum policy compares the two.
    fn reclaimable(&self) -> (usize, usize) {
        (self.deleted_count(), self.len())
    }
    /// The live point `id`, if it is here (a disk segment reads its vector).
    fn get(&self, id: &PointId) -> Result<Option<Point>>;
    /// Live ids passing `filter`, in no particular order.
    fn live_ids<'a>(
        &'a self,
        filter: Option<&'a Filter>,
    ) -> Box<dyn Iterator<Item = PointId> + 'a> {
        self.positions()
            .live_ids(filter, |position| self.is_deleted_at(position))
    }
    /// Up to `limit` live ids passing `filter` from `start` on, in id order. A page
    /// evaluates the filter up to its last match, not over the whole segment.
    fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Vec<PointId> {
        self.positions()
            .scroll_ids(start, filter, limit, &|position| {
                self.is_deleted_at(position)
            })
    }
    /// Live points with their positions (a merge's input); a read that fails ends it.
    fn live_points(&self) -> Box<dyn Iterator<Item = Result<(u32, Point)>> + '_>;
    /// Whether the point at `position` has been deleted.
    fn is_deleted_at(&self, position: u32) -> bool;
    /// Top-`k` among live points passing `filter`, as `(distance, point)` with "lower is
    /// closer" distances ([`crate::query::hit_distance`]).
    /// `query` is a vector of `space` (one named vector's, or the whole vector).
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        space: SpaceSlice,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>>;
    /// Top-`k` by `query` in side space `space` (a sparse vector's or a multivector's,
    /// [`SideQuery`]). Only the named-vector kind holds side vectors; the others have no
    /// point to return.
    fn search_side(
        &self,
        _query: (SideQuery<'_>, usize),
        _k: usize,
        _filter: Option<&Filter>,
    ) -> Result<Vec<(f32, Point)>> {
        Ok(Vec::new())
    }
    /// Adds to `counts[i]` the live points whose vector in sparse space `space` has
    /// `indices[i]` (an IDF's document frequency); nothing in kinds without sparse vectors.
    fn sparse_frequencies(&self, _space: usize, _indices: &[u32], _counts: &mut [usize]) {}
}

/// The write side of a sealed segment: deletes and payload indexes, and the durable state
/// they leave.
pub(crate) trait SegmentWrite: SegmentRead {
    /// Marks `id` deleted if it is live here.
    fn remove(&self, id: &PointId);
    /// Marks `id` deleted if it is live here; returns its point (for copy on write). A
    /// point whose vector cannot be read is left live and the error returned.
    fn take(&self, id: &PointId) -> Result<Option<Point>>;
    /// Recounts the deleted positions (see the module's invariants).
    fn recount_deleted(&self);
    /// Writes the current tombstones as of `generation`, durably (the directory sync is
    /// the caller's). Returns whether there were any.
    fn save_tombstones(
        &self,
        fs: &dyn FileSystem,
        directory: &Path,
        generation: u64,
    ) -> Result<bool> {
        let len = u32::try_from(self.len()).expect("segment size");
        let deleted = (0..len).filter(|position| self.is_deleted_at(*position));
        listing::write_tombstones(fs, directory, self.id(), generation, deleted)
    }
    /// Makes the payload indexes match `schema`: builds the missing ones, drops the others.
    fn sync_payload_indexes(&self, schema: &PayloadSchema) {
        self.positions().sync_payload_indexes(schema);
    }
    /// Builds the index of `field` (replacing one of the same name), or drops it.
    fn set_payload_index(&self, field: &str, kind: Option<FieldType>) {
        self.positions().set_payload_index(field, kind);
    }
    /// The graph a write buffer's points can join, for the kinds that have one.
    fn graph_host(&self) -> Option<&dyn GraphHost> {
        None
    }
    /// The segment a seal can append a buffer's points to, for the kinds that can.
    fn append_host(&self) -> Option<&dyn AppendHost> {
        None
    }
}

/// A segment a seal appends a frozen buffer's points to, making a new segment out of place
/// (a disk segment: [`sagitta_index::disk::DiskIndex::append`]) that replaces it.
pub(crate) trait AppendHost {
    /// Whether appending `points` is better than building them into a segment of their
    /// own: the host is large enough, and its records span few enough files.
    fn can_append(&self, points: usize) -> bool;
    /// Segment `id`: this one's live points and `points`, its files written durably (the
    /// directory sync is the caller's). Points deleted here meanwhile must then be deleted
    /// in the new segment too: [`Appended::carried`] says where they went.
    fn append(
        &self,
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        points: Vec<Point>,
        shape: &SegmentShape<'_>,
    ) -> Result<Appended>;
}

/// The result of [`AppendHost::append`].
pub(crate) struct Appended {
    pub segment: SharedSegment,
    /// Each host position carried over, with its id.
    pub carried: Vec<(u32, PointId)>,
}

/// A segment whose HNSW graph a write buffer's points can join (see
/// [`crate::buffer::BufferGraph`]): nodes `0..len` are the segment's positions, the nodes
/// after them the buffer's slots.
pub(crate) trait GraphHost {
    fn graph(&self) -> &Arc<HnswIndex>;
    /// Whether the graph holds only this segment's points and has room for `slots` more.
    fn can_host(&self, slots: usize) -> bool;
    /// Every position as listed in a segment file: id and payload (the graph holds the
    /// vector). A seal of a joined buffer lists these first.
    fn listing(&self) -> Vec<Point>;
    /// The point at node `node` if it is one of this segment's and live.
    fn live_point(&self, node: u32) -> Option<Point>;
}

/// How segments of a kind are made: built from points (a seal without a graph, a merge, a
/// vacuum), written durably, and loaded back at open.
pub(crate) trait SegmentKind: SegmentWrite + Sized {
    /// Builds a segment from `points` (vectors already normalized for Cosine) and writes
    /// its files durably (the directory sync is the caller's). `progress` follows the
    /// build and can cancel it.
    fn build(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        points: Vec<Point>,
        shape: &SegmentShape<'_>,
        progress: Option<&AddProgress>,
    ) -> Result<Self>;
    /// Loads segment `id` (reading `record_files`, where the kind has them) and applies
    /// its tombstones as of `tombstone_generation`.
    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        record_files: &[u64],
        tombstone_generation: Option<u64>,
        shape: &SegmentShape<'_>,
    ) -> Result<Self>;
}

/// Builds segment `id` of `kind` from `points` ([`SegmentKind::build`]).
pub(crate) fn build(
    kind: SegmentKindName,
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    points: Vec<Point>,
    shape: &SegmentShape<'_>,
    progress: Option<&AddProgress>,
) -> Result<SharedSegment> {
    let build = match kind {
        SegmentKindName::Hnsw => build_as::<HnswSegment>,
        SegmentKindName::Disk => build_as::<DiskSegment>,
        SegmentKindName::Spaces => build_as::<spaces::SpacesSegment>,
    };
    build(fs, directory, id, points, shape, progress)
}

fn build_as<K: SegmentKind + 'static>(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    points: Vec<Point>,
    shape: &SegmentShape<'_>,
    progress: Option<&AddProgress>,
) -> Result<SharedSegment> {
    Ok(Arc::new(K::build(
        fs, directory, id, points, shape, progress,
    )?))
}

/// Loads segment `id` of `kind` ([`SegmentKind::load`]).
pub(crate) fn load(
    kind: SegmentKindName,
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    record_files: &[u64],
    tombstone_generation: Option<u64>,
    shape: &SegmentShape<'_>,
) -> Result<SharedSegment> {
    let load = match kind {
        SegmentKindName::Hnsw => load_as::<HnswSegment>,
        SegmentKindName::Disk => load_as::<DiskSegment>,
        SegmentKindName::Spaces => load_as::<spaces::SpacesSegment>,
    };
    load(fs, directory, id, record_files, tombstone_generation, shape)
}

fn load_as<K: SegmentKind + 'static>(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    record_files: &[u64],
    tombstone_generation: Option<u64>,
    shape: &SegmentShape<'_>,
) -> Result<SharedSegment> {
    Ok(Arc::new(K::load(
        fs,
        directory,
        id,
        record_files,
        tombstone_generation,
        shape,
    )?))
}

/// A segment as the shard holds it.
pub(crate) type SharedSegment = Arc<dyn SegmentWrite>;

/// The `.points` listing of positions with these ids and payloads (no vectors: the
/// segment's index holds them).
pub(crate) fn listing(ids: &[PointId], payloads: &[Option<Arc<serde_json::Value>>]) -> Vec<Point> {
    ids.iter()
        .zip(payloads)
        .map(|(id, payload)| Point {
            id: *id,
            vector: Vec::new(),
            payload: payload.as_deref().map(serde_json::Value::to_string),
            side: Vec::new(),
        })
        .collect()
}

/// The vectors of `points`, row-major, moved out: the index keeps the vectors, the
/// listing only ids and payloads.
pub(crate) fn take_vectors(points: &mut [Point], dim: usize) -> Vec<f32> {
    let mut vectors = Vec::with_capacity(points.len() * dim);
    for point in points {
        vectors.extend_from_slice(&std::mem::take(&mut point.vector));
    }
    vectors
}

/// The files of segment `id` of `kind` (tombstones aside).
pub(crate) fn file_names(kind: SegmentKindName, id: u64) -> Vec<String> {
    let points = format!("segment-{id}.points");
    match kind {
        SegmentKindName::Hnsw => vec![format!("segment-{id}.hnsw"), points],
        // its records files are listed in the shard manifest (an append shares them)
        SegmentKindName::Disk => vec![format!("segment-{id}.ivf"), points],
        SegmentKindName::Spaces => vec![format!("segment-{id}.spaces"), points],
    }
}

/// Bits of a records file's number below its stripe: the id of the segment that wrote it.
const STRIPE_SHIFT: u32 = 56;
/// Most stripe directories a shard's records files spread over (its own one included).
pub(crate) const MAX_STRIPES: usize = 64;

/// The number of the records file segment `segment` writes on stripe `stripe` (0: the
/// shard's directory; `s`: the shard's directory under the `s`-th stripe root). The shard
/// manifest lists these numbers; stripe 0 keeps the plain segment id.
pub(crate) fn striped_file(segment: u64, stripe: usize) -> u64 {
    debug_assert!(segment < 1 << STRIPE_SHIFT && stripe < MAX_STRIPES);
    segment | (stripe as u64) << STRIPE_SHIFT
}

/// The segment id and the stripe of records file `file` ([`striped_file`]).
pub(crate) fn split_file(file: u64) -> (u64, usize) {
    let stripe = usize::try_from(file >> STRIPE_SHIFT).expect("8 bits");
    (file & ((1 << STRIPE_SHIFT) - 1), stripe)
}

/// The name of records file `file` in its stripe's directory (the segment that wrote it
/// has that id).
pub(crate) fn records_name(file: u64) -> String {
    format!("segment-{}.records", split_file(file).0)
}

pub(crate) fn tombstones_name(id: u64, epoch: u64) -> String {
    format!("segment-{id}.tomb-{epoch}")
}

pub(crate) fn index_path(directory: &Path, id: u64) -> PathBuf {
    directory.join(format!("segment-{id}.hnsw"))
}

pub(crate) fn points_path(directory: &Path, id: u64) -> PathBuf {
    directory.join(format!("segment-{id}.points"))
}

pub(crate) fn disk_index_path(directory: &Path, id: u64) -> PathBuf {
    directory.join(format!("segment-{id}.ivf"))
}

/// The path of records file `file` among the shard's stripe directories (`stripes[0]` the
/// shard's own); a stripe the shard was not given is an error naming it.
pub(crate) fn records_path(stripes: &[PathBuf], file: u64) -> Result<PathBuf> {
    let stripe = split_file(file).1;
    match stripes.get(stripe) {
        Some(directory) => Ok(directory.join(records_name(file))),
        None => Err(crate::error::EngineError::Corrupt {
            reason: format!(
                "{}: records file {} is on stripe {stripe}, and the database was opened with \
                 {} stripe directories (give every --stripe-dir it was created with, in order)",
                stripes[0].display(),
                records_name(file),
                stripes.len() - 1
            ),
        }),
    }
}

pub(crate) fn tombstones_path(directory: &Path, id: u64, epoch: u64) -> PathBuf {
    directory.join(tombstones_name(id, epoch))
}
