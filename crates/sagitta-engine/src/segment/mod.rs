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
//! One kind exists, [`hnsw::HnswSegment`]; a write buffer's points can join its graph
//! ([`SegmentWrite::graph_host`]). The next kinds (disk partitions, sparse vectors)
//! implement the same three traits; the shard holds every segment as `dyn SegmentWrite`.
//!
//! Invariants: a segment's points are numbered 0..len (their *positions*, stable for the
//! segment's life); an id is live at one position at most (a buffer saved as a segment
//! keeps its retired slots as deleted positions, so an id may be listed again before its
//! live one); the deleted count equals the positions marked deleted ([`SegmentWrite::recount_deleted`] restores it when a shared graph took
//! deletes through another segment).
//!
//! Files (docs/format.md, "Shard directory"): `segment-<id>.hnsw` (the HNSW index file),
//! `segment-<id>.points` (ids and payloads), `segment-<id>.tomb-<generation>` (tombstones
//! as of a seal).

pub(crate) mod hnsw;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use sagitta_index::hnsw::{AddProgress, HnswIndex};
use sagitta_storage::fs::FileSystem;
use serde_json::Value;

use crate::error::Result;
use crate::filter::Filter;
use crate::payload_index::{FieldType, PayloadSchema};
use crate::point::{Distance, Point, PointId};
use crate::query::Strategy;

pub(crate) use hnsw::{segment_params, HnswSegment};

/// What every segment of a shard shares: vector shape and the indexed payload fields.
pub(crate) struct SegmentShape<'a> {
    pub dim: usize,
    pub distance: Distance,
    pub schema: &'a PayloadSchema,
}

/// The read side of a sealed segment. Every method sees live points only.
pub(crate) trait SegmentRead: Send + Sync {
    /// The segment's number in its shard (its file names carry it).
    fn id(&self) -> u64;
    /// Points the segment was built with, live or not.
    fn len(&self) -> usize;
    fn deleted_count(&self) -> usize;
    fn live_count(&self) -> usize {
        self.len() - self.deleted_count()
    }
    /// Bytes of the segment's files, as built or loaded.
    fn file_bytes(&self) -> u64;
    fn get(&self, id: &PointId) -> Option<Point>;
    /// Live ids passing `filter`, in no particular order.
    fn live_ids<'a>(&'a self, filter: Option<&'a Filter>)
        -> Box<dyn Iterator<Item = PointId> + 'a>;
    /// Up to `limit` live ids passing `filter` from `start` on, in id order. A page
    /// evaluates the filter up to its last match, not over the whole segment.
    fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Vec<PointId>;
    /// Live points with their positions (a merge's input).
    fn live_points(&self) -> Box<dyn Iterator<Item = (u32, Point)> + '_>;
    /// Whether the point at `position` has been deleted.
    fn is_deleted_at(&self, position: u32) -> bool;
    /// Top-`k` among live points passing `filter`, as `(distance, point)` with "lower is
    /// closer" distances ([`crate::query::hit_distance`]).
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        distance: Distance,
        strategy: Strategy,
    ) -> Result<Vec<(f32, Point)>>;
}

/// The write side of a sealed segment: deletes and payload indexes, and the durable state
/// they leave.
pub(crate) trait SegmentWrite: SegmentRead {
    /// Marks `id` deleted if it is live here.
    fn remove(&self, id: &PointId);
    /// Marks `id` deleted if it is live here; returns its point (for copy on write).
    fn take(&self, id: &PointId) -> Option<Point>;
    /// Recounts the deleted positions (see the module's invariants).
    fn recount_deleted(&self);
    /// Writes the current tombstones as of `generation`, durably (the directory sync is
    /// the caller's). Returns whether there were any.
    fn save_tombstones(
        &self,
        fs: &dyn FileSystem,
        directory: &Path,
        generation: u64,
    ) -> Result<bool>;
    /// Makes the payload indexes match `schema`: builds the missing ones, drops the others.
    fn sync_payload_indexes(&self, schema: &PayloadSchema);
    /// Builds the index of `field` (replacing one of the same name), or drops it.
    fn set_payload_index(&self, field: &str, kind: Option<FieldType>);
    /// The graph a write buffer's points can join, for the kinds that have one.
    fn graph_host(&self) -> Option<&dyn GraphHost> {
        None
    }
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
    /// Loads segment `id` and applies its tombstones as of `tombstone_generation`.
    fn load(
        fs: &dyn FileSystem,
        directory: &Path,
        id: u64,
        tombstone_generation: Option<u64>,
        schema: &PayloadSchema,
    ) -> Result<Self>;
}

/// A segment as the shard holds it.
pub(crate) type SharedSegment = Arc<dyn SegmentWrite>;

/// The `.points` listing of positions with these ids and payloads (no vectors: the
/// segment's index holds them).
pub(crate) fn listing(ids: &[PointId], payloads: &[Option<Arc<Value>>]) -> Vec<Point> {
    ids.iter()
        .zip(payloads)
        .map(|(id, payload)| Point {
            id: *id,
            vector: Vec::new(),
            payload: payload.as_deref().map(Value::to_string),
        })
        .collect()
}

/// The index and points files of segment `id`.
pub(crate) fn file_names(id: u64) -> [String; 2] {
    [format!("segment-{id}.hnsw"), format!("segment-{id}.points")]
}

pub(crate) fn tombstones_name(id: u64, epoch: u64) -> String {
    format!("segment-{id}.tomb-{epoch}")
}

pub(crate) fn index_path(directory: &Path, id: u64) -> PathBuf {
    directory.join(&file_names(id)[0])
}

pub(crate) fn points_path(directory: &Path, id: u64) -> PathBuf {
    directory.join(&file_names(id)[1])
}

pub(crate) fn tombstones_path(directory: &Path, id: u64, epoch: u64) -> PathBuf {
    directory.join(tombstones_name(id, epoch))
}
