//! What every segment kind keeps per position besides its vectors: ids, the id → position
//! map, payloads and their indexes, the id order scrolls walk, and the deleted positions;
//! and the two files every kind shares, `segment-<id>.points` (ids and payloads) and
//! `segment-<id>.tomb-<generation>` (deleted positions), framed by
//! [`sagitta_storage::codec::frame`].
//!
//! Kinds differ in where deletes are marked (an HNSW segment marks them in its graph, which
//! a write buffer may share); the queries here take that as `deleted`.

use std::hash::{BuildHasher, RandomState};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::RwLock;
use sagitta_storage::codec::{frame, u32s, unframe};
use sagitta_storage::fs::FileSystem;
use serde_json::Value;

use super::{points_path, tombstones_path};
use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::payload_index::{FieldType, PayloadSchema, SegmentIndexes};
use crate::point::{Point, PointId};

const POINTS_MAGIC: &[u8; 8] = b"SAGPNTS1";
const TOMBSTONES_MAGIC: &[u8; 8] = b"SAGTOMB1";
/// A filter passing fewer than this fraction of a segment's points is answered by an exact
/// scan of those points instead of a search of the index.
pub(crate) const EXACT_SCAN_FRACTION: f64 = 0.05;
/// Bytes of vectors below which a search scans them exactly instead of walking the index:
/// Qdrant's default `full_scan_threshold` (10,000 KiB), so a small collection, or a filter
/// passing few points, gets exact answers as it does in Qdrant.
pub(crate) const FULL_SCAN_BYTES: usize = 10_000 * 1024;
/// Positions sampled to estimate a filter's selectivity.
const SELECTIVITY_SAMPLE: usize = 512;

/// Whether the position is deleted (the kind's own marks).
pub(crate) type Deleted<'a> = &'a dyn Fn(u32) -> bool;

pub(crate) fn corrupt(path: &Path, reason: &str) -> EngineError {
    EngineError::Corrupt {
        reason: format!("{}: {reason}", path.display()),
    }
}

/// Each id's position, the ids themselves left in the listing's `ids`: the table holds
/// only 4-byte positions (≈10 bytes a point with its control bytes and spare buckets, where
/// a map keyed by the 32-byte ids took ≈100 at a million points).
struct IdTable {
    table: hashbrown::HashTable<u32>,
    hasher: RandomState,
}

impl IdTable {
    /// The table of `ids`; an id listed twice maps to its last position.
    fn new(ids: &[PointId]) -> IdTable {
        let hasher = RandomState::new();
        let mut table = hashbrown::HashTable::with_capacity(ids.len());
        for (position, id) in ids.iter().enumerate() {
            let position = u32::try_from(position).expect("segment size");
            let rehash = |other: &u32| hasher.hash_one(ids[*other as usize]);
            match table.entry(
                hasher.hash_one(id),
                |other: &u32| ids[*other as usize] == *id,
                rehash,
            ) {
                hashbrown::hash_table::Entry::Occupied(mut entry) => *entry.get_mut() = position,
                hashbrown::hash_table::Entry::Vacant(entry) => {
                    entry.insert(position);
                }
            }
        }
        IdTable { table, hasher }
    }

    fn find(&self, ids: &[PointId], id: &PointId) -> Option<u32> {
        self.table
            .find(self.hasher.hash_one(id), |other| {
                ids[*other as usize] == *id
            })
            .copied()
    }
}

pub(crate) struct Listing {
    ids: Vec<PointId>,
    positions: IdTable,
    payloads: Vec<Option<Arc<Value>>>,
    /// Positions in id order, built by the first scroll (ids never change).
    by_id: OnceLock<Vec<u32>>,
    indexes: RwLock<SegmentIndexes>,
}

impl Listing {
    /// Position `i` is `points[i]` (its vector is not kept).
    pub fn new(points: Vec<Point>, schema: &PayloadSchema) -> Listing {
        let ids: Vec<PointId> = points.iter().map(|point| point.id).collect();
        let positions = IdTable::new(&ids);
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
        Listing {
            ids,
            positions,
            payloads,
            by_id: OnceLock::new(),
            indexes,
        }
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn id(&self, position: u32) -> PointId {
        self.ids[position as usize]
    }

    /// The position listed for `id` (live or not).
    pub fn position(&self, id: &PointId) -> Option<u32> {
        self.positions.find(&self.ids, id)
    }

    pub fn payload_text(&self, position: u32) -> Option<String> {
        self.payloads[position as usize]
            .as_deref()
            .map(Value::to_string)
    }

    /// The point at `position` with `vector`.
    pub fn point(&self, position: u32, vector: Vec<f32>) -> Point {
        Point {
            id: self.id(position),
            vector,
            payload: self.payload_text(position),
            side: Vec::new(),
        }
    }

    /// Every position as listed in a segment file: id and payload, no vector.
    pub fn listing(&self) -> Vec<Point> {
        super::listing(&self.ids, &self.payloads)
    }

    fn positions_u32(&self) -> u32 {
        u32::try_from(self.ids.len()).expect("segment size")
    }

    /// Whether `position` is a live point of this segment passing `filter` (an HNSW graph
    /// shared with a write buffer has nodes beyond the segment's).
    pub fn passes(&self, position: u32, filter: Option<&Filter>, deleted: Deleted<'_>) -> bool {
        (position as usize) < self.ids.len()
            && !deleted(position)
            && filter.is_none_or(|f| {
                f.matches(
                    &self.ids[position as usize],
                    self.payloads[position as usize].as_deref(),
                )
            })
    }

    /// Positions the payload indexes allow for `filter` (a superset of those passing it),
    /// or `None` when no index applies.
    pub fn candidates(&self, filter: &Filter) -> Option<Vec<u32>> {
        self.indexes.read().candidates(filter)
    }

    /// `candidates`, or every position.
    pub fn positions_to_check(
        &self,
        candidates: Option<Vec<u32>>,
    ) -> Box<dyn Iterator<Item = u32>> {
        match candidates {
            Some(positions) => Box::new(positions.into_iter()),
            None => Box::new(0..self.positions_u32()),
        }
    }

    /// Whether a search with `filter` should scan the passing points exactly: the points
    /// passing — the payload indexes' candidates, or estimated from an evenly spaced sample
    /// of up to [`SELECTIVITY_SAMPLE`] positions, or every position without a filter — are
    /// fewer than [`EXACT_SCAN_FRACTION`] of the points, or at most `exact_points` (Qdrant's
    /// `full_scan_threshold`: so few that a scan costs little and is exact).
    pub fn is_selective(
        &self,
        filter: Option<&Filter>,
        candidates: Option<&Vec<u32>>,
        deleted: Deleted<'_>,
        exact_points: usize,
    ) -> bool {
        let count = self.ids.len();
        #[allow(clippy::cast_precision_loss)]
        let passing = match (candidates, filter) {
            (Some(positions), _) => positions.len() as f64,
            (None, Some(filter)) if count > 0 => {
                let step = (count / SELECTIVITY_SAMPLE).max(1);
                let (mut sampled, mut passed) = (0usize, 0usize);
                for position in (0..self.positions_u32()).step_by(step) {
                    sampled += 1;
                    passed += usize::from(self.passes(position, Some(filter), deleted));
                }
                count as f64 * passed as f64 / sampled as f64
            }
            _ => count as f64,
        };
        #[allow(clippy::cast_precision_loss)]
        let few = passing < EXACT_SCAN_FRACTION * count as f64 && filter.is_some();
        #[allow(clippy::cast_precision_loss)]
        let small = passing <= exact_points as f64;
        few || small
    }

    /// Live ids passing `filter`, in no particular order.
    pub fn live_ids<'a>(
        &'a self,
        filter: Option<&'a Filter>,
        deleted: impl Fn(u32) -> bool + 'a,
    ) -> Box<dyn Iterator<Item = PointId> + 'a> {
        let candidates = filter.and_then(|f| self.candidates(f));
        Box::new(
            self.positions_to_check(candidates)
                .filter(move |position| self.passes(*position, filter, &deleted))
                .map(|position| self.ids[position as usize]),
        )
    }

    /// Up to `limit` live ids passing `filter` from `start` on, in id order: a scroll page
    /// evaluates the filter on the positions up to its last match, not on the whole segment.
    pub fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
        deleted: Deleted<'_>,
    ) -> Vec<PointId> {
        let from = |position: &u32| start.is_none_or(|start| self.ids[*position as usize] >= start);
        let ordered: Vec<u32>;
        let positions: &[u32] = match filter.and_then(|f| self.candidates(f)) {
            Some(mut candidates) => {
                candidates.retain(from);
                candidates.sort_unstable_by_key(|position| self.ids[*position as usize]);
                ordered = candidates;
                &ordered
            }
            None => {
                let by_id = self.by_id.get_or_init(|| {
                    let mut positions: Vec<u32> = (0..self.positions_u32()).collect();
                    positions.sort_unstable_by_key(|position| self.ids[*position as usize]);
                    positions
                });
                let first = by_id.partition_point(|position| !from(position));
                &by_id[first..]
            }
        };
        positions
            .iter()
            .filter(|position| self.passes(**position, filter, deleted))
            .take(limit)
            .map(|position| self.ids[*position as usize])
            .collect()
    }

    /// Makes the indexes match `schema`: builds the missing ones, drops the others.
    pub fn sync_payload_indexes(&self, schema: &PayloadSchema) {
        let mut indexes = self.indexes.write();
        if !indexes.matches(schema) {
            *indexes = SegmentIndexes::build(schema, &self.payloads);
        }
    }

    /// Builds the index of `field` (replacing one of the same name), or drops it.
    pub fn set_payload_index(&self, field: &str, kind: Option<FieldType>) {
        let mut indexes = self.indexes.write();
        match kind {
            Some(kind) => indexes.add(field, kind, &self.payloads),
            None => indexes.remove(field),
        }
    }
}

/// The best `k` of the candidates an exact scan offers, closest first, ties by point id
/// (as the collection orders its results); `data` is taken only for a candidate that
/// enters (a row is copied only then).
pub(crate) struct BestK<T> {
    k: usize,
    kept: Vec<(f32, PointId, T)>,
}

impl<T> BestK<T> {
    pub fn new(k: usize) -> BestK<T> {
        BestK {
            k,
            kept: Vec::with_capacity(k + 1),
        }
    }

    /// Whether a candidate at `distance` can be kept (one equal to the worst kept may
    /// still lose on id): a check that needs no id.
    pub fn admits(&self, distance: f32) -> bool {
        self.kept.len() < self.k
            || self
                .kept
                .last()
                .is_some_and(|(worst, _, _)| distance.total_cmp(worst).is_le())
    }

    pub fn offer(&mut self, distance: f32, id: PointId, data: impl FnOnce() -> T) {
        if !self.admits(distance) {
            return;
        }
        let place = self.kept.partition_point(|(other, other_id, _)| {
            other.total_cmp(&distance).then(other_id.cmp(&id)).is_lt()
        });
        if place < self.k {
            self.kept.insert(place, (distance, id, data()));
            self.kept.truncate(self.k);
        }
    }

    /// The kept candidates, closest first.
    pub fn into_sorted(self) -> Vec<(f32, PointId, T)> {
        self.kept
    }
}

/// An exact scan's distance from `query` to `row` ("lower is closer": squared L2, or the
/// negated dot product of Cosine's unit vectors and of Dot).
pub(crate) fn exact_distance(distance: crate::point::Distance, query: &[f32], row: &[f32]) -> f32 {
    let kernels = sagitta_kernels::kernels();
    match distance {
        crate::point::Distance::Euclid => (kernels.l2_squared_f32)(query, row),
        crate::point::Distance::Cosine | crate::point::Distance::Dot => {
            -(kernels.dot_f32)(query, row)
        }
    }
}

/// Positions marked deleted, for kinds that keep no marks of their own.
pub(crate) struct DeletedSet {
    words: Vec<AtomicU64>,
    count: AtomicUsize,
}

impl DeletedSet {
    pub fn new(len: usize) -> DeletedSet {
        DeletedSet {
            words: (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicUsize::new(0),
        }
    }

    pub fn contains(&self, position: u32) -> bool {
        let word = self.words[position as usize / 64].load(Ordering::Acquire);
        word >> (position % 64) & 1 == 1
    }

    /// Marks `position`; returns whether it was live.
    pub fn insert(&self, position: u32) -> bool {
        let bit = 1u64 << (position % 64);
        let before = self.words[position as usize / 64].fetch_or(bit, Ordering::AcqRel);
        let newly = before & bit == 0;
        if newly {
            self.count.fetch_add(1, Ordering::Relaxed);
        }
        newly
    }

    pub fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }
}

/// Writes the `.points` file of segment `id` durably; returns its bytes.
pub(crate) fn write_points(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    listing: Vec<Point>,
) -> Result<(Vec<Point>, u64)> {
    let listing = Operation::Upsert(listing);
    let encoded = frame(POINTS_MAGIC, &codec::encode(&listing));
    fs.write_synced(&points_path(directory, id), &encoded)?;
    let Operation::Upsert(listing) = listing else {
        unreachable!("built as an upsert above")
    };
    Ok((listing, encoded.len() as u64))
}

/// Reads the `.points` file of segment `id`; returns the listing and the file's bytes.
pub(crate) fn read_points(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
) -> Result<(Vec<Point>, u64)> {
    let path = points_path(directory, id);
    let bytes = read_listed(fs, &path)?;
    let body = unframe(POINTS_MAGIC, &bytes).map_err(|error| corrupt(&path, &error.to_string()))?;
    match codec::try_decode(body) {
        Ok(Operation::Upsert(points)) => Ok((points, bytes.len() as u64)),
        Ok(_) => Err(corrupt(&path, "points do not decode: not a point listing")),
        Err(error) => Err(corrupt(&path, &format!("points do not decode: {error}"))),
    }
}

/// The bytes of a file the shard manifest lists; a missing one is corruption.
pub(crate) fn read_listed(fs: &dyn FileSystem, path: &Path) -> Result<Vec<u8>> {
    fs.read(path)?
        .ok_or_else(|| corrupt(path, "listed in the shard manifest but missing"))
}

/// The deleted positions of segment `id` (of `len` positions) as of `generation`.
pub(crate) fn read_tombstones(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    generation: u64,
    len: usize,
) -> Result<Vec<u32>> {
    let path = tombstones_path(directory, id, generation);
    let bytes = read_listed(fs, &path)?;
    let body =
        unframe(TOMBSTONES_MAGIC, &bytes).map_err(|error| corrupt(&path, &error.to_string()))?;
    if body.len() % 4 != 0 {
        return Err(corrupt(&path, "tombstones are not whole u32 positions"));
    }
    let positions: Vec<u32> = u32s(body).collect();
    if positions.iter().any(|position| *position as usize >= len) {
        return Err(corrupt(&path, "tombstone beyond the segment"));
    }
    Ok(positions)
}

/// Writes the deleted positions of segment `id` as of `generation`, durably, if there are
/// any; returns whether there were.
pub(crate) fn write_tombstones(
    fs: &dyn FileSystem,
    directory: &Path,
    id: u64,
    generation: u64,
    deleted: impl Iterator<Item = u32>,
) -> Result<bool> {
    let bytes: Vec<u8> = deleted.flat_map(u32::to_le_bytes).collect();
    if bytes.is_empty() {
        return Ok(false);
    }
    fs.write_synced(
        &tombstones_path(directory, id, generation),
        &frame(TOMBSTONES_MAGIC, &bytes),
    )?;
    Ok(true)
}
