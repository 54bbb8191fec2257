//! One shard: a directory holding a manifest, a write-ahead log, sealed segments, and in
//! memory the write buffer the log feeds.
//!
//! The buffer keeps vectors in one contiguous array (slot-major) so an exact scan streams
//! memory: at 768-d a 10,000-point buffer is 31 MB and scans in ~2 ms per query on one core.
//! Sealing turns the buffer into an immutable HNSW segment (see [`Shard::seal`]).
//!
//! Invariant: every live point is in exactly one place, the buffer or one segment; a write
//! to a point that lives in a segment marks it deleted there first.

mod indexer;
mod invariants;
mod read;
mod seal;
mod sparse;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use sagitta_index::disk::Element;
use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;
use sagitta_storage::pageio::PageCache;
use sagitta_storage::wal::{Record, Wal, RECORD_BYTES_MAX};

use crate::buffer::{Buffer, BufferGraph};
use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::graph::GraphConfig;
use crate::payload_index::{FieldType, PayloadSchema};
use crate::point::{Distance, Point, PointId};
use crate::policy::{OptimizerPolicy, Work};
use crate::segment::{self, SegmentKindName, SegmentShape, SharedSegment};
use crate::shard_manifest::{
    remove_unreferenced, remove_unreferenced_records, wal_path, ListedSegment, ShardManifest,
};
use crate::shard_state::{carried_records, Frozen, Writer};
use crate::spaces::VectorSpaces;

/// Each log's path and intact records, in replay order.
type RecoveredLogs = Vec<(PathBuf, Vec<Record>)>;

/// Opens a shard's logs: those of an unfinished seal first (their points simply return to
/// the buffer and are sealed again next time), then the live log, removing files the
/// manifest does not reference. Returns the live log and every log's intact records. Each
/// log continues the sequence of the one before it (a seal starts the next log at the
/// synced end of the last; so does a checkpoint).
fn open_logs(
    fs: &dyn FileSystem,
    directory: &Path,
    manifest: &ShardManifest,
) -> Result<(Wal, RecoveredLogs)> {
    let mut recovered = Vec::new();
    let mut next_sequence: Option<u64> = None;
    let existing = fs.list(directory)?;
    for log in &manifest.replay_logs {
        let path = wal_path(directory, *log);
        if !existing.contains(&path) {
            return Err(EngineError::Corrupt {
                reason: format!(
                    "{}: listed in the shard manifest but missing",
                    path.display()
                ),
            });
        }
        let (wal, recovery) = Wal::open(fs, &path, next_sequence.unwrap_or(1))?;
        check_continuity(&path, next_sequence, recovery.first_sequence)?;
        next_sequence = Some(wal.next_sequence());
        recovered.push((path, recovery.records));
    }
    remove_unreferenced(fs, directory, manifest, &existing)?;
    let path = wal_path(directory, manifest.generation);
    let (wal, recovery) = Wal::open(fs, &path, next_sequence.unwrap_or(1))?;
    check_continuity(&path, next_sequence, recovery.first_sequence)?;
    recovered.push((path, recovery.records));
    Ok((wal, recovered))
}

/// A shard's logs, replayed in order, continue one another's sequence numbers: a gap or an
/// overlap means a log is missing, stale or from elsewhere, and replaying it would apply
/// writes out of order.
fn check_continuity(path: &Path, expected: Option<u64>, first: u64) -> Result<()> {
    match expected {
        Some(expected) if expected != first => Err(EngineError::Corrupt {
            reason: format!(
                "{}: log starts at sequence {first}, the log before it ended at {expected}",
                path.display()
            ),
        }),
        _ => Ok(()),
    }
}

/// A replayed log shorter than this is never checkpointed at open: reading it costs less
/// than rewriting it.
const CHECKPOINT_LOG_BYTES_MIN: usize = 16 << 20;

/// The segment among `segments` whose graph `graph` extends (its host), if any.
pub(super) fn host_among(segments: &[SharedSegment], graph: &BufferGraph) -> Option<SharedSegment> {
    let host = graph.host?;
    segments
        .iter()
        .find(|segment| {
            segment.id() == host
                && segment
                    .graph_host()
                    .is_some_and(|hosting| Arc::ptr_eq(hosting.graph(), &graph.index))
        })
        .cloned()
}

/// How a shard's sealed segments are stored: its collection's choice, fixed at creation.
#[derive(Clone)]
pub(crate) struct ShardStorage {
    /// The kind of every segment a seal, merge or import builds.
    pub kind: SegmentKindName,
    /// The value type of disk segments' records (the collection's datatype).
    pub element: Element,
    /// Vectors a disk segment's partition aims at.
    pub partition_size: usize,
    /// HNSW segments keep their vectors in a records file (`vectors.on_disk`).
    pub vectors_on_disk: bool,
    /// The collection's page cache (records files).
    pub page_cache: Arc<PageCache>,
    /// The collection's named vectors (none: one unnamed vector).
    pub spaces: Arc<VectorSpaces>,
    /// The collection's directory under each stripe root, in the database's order: a
    /// shard's records files spread over its own directory and its directory under each.
    pub stripe_roots: Arc<[PathBuf]>,
    /// The graph config new segments and write-buffer graphs are built with (the
    /// collection's; it may change while the shard is open).
    pub graph: Arc<RwLock<GraphConfig>>,
    /// The NUMA node this shard's HNSW segments keep their full vectors on (the
    /// collection's far tier; `None`: where the building thread first touches them).
    pub vectors_node: Option<usize>,
    /// The last refusal to move vectors to `vectors_node` (shared by the collection's
    /// shards): collection info reports it.
    pub tier_error: Arc<parking_lot::Mutex<Option<String>>>,
}

impl ShardStorage {
    /// What the segments of a shard of `dim`, `distance` and `schema` share; `stripes`
    /// its directories ([`ShardStorage::create_stripes`]).
    pub(crate) fn shape<'a>(
        &'a self,
        dim: usize,
        distance: Distance,
        schema: &'a PayloadSchema,
        stripes: &'a [PathBuf],
    ) -> SegmentShape<'a> {
        SegmentShape {
            dim,
            distance,
            schema,
            element: self.element,
            partition_size: self.partition_size,
            vectors_on_disk: self.vectors_on_disk,
            stripes,
            page_cache: &self.page_cache,
            spaces: &self.spaces,
            graph: *self.graph.read(),
            vectors_node: self.vectors_node,
            tier_error: &self.tier_error,
        }
    }

    /// This storage for shard `index` of a collection placed as `placement`: its vectors
    /// on the shard's far node when `far` (and the machine has one).
    pub(crate) fn for_shard(
        &self,
        placement: &crate::machine::ShardPlacement,
        index: usize,
        far: bool,
    ) -> ShardStorage {
        ShardStorage {
            vectors_node: placement
                .far_nodes
                .get(index)
                .copied()
                .flatten()
                .filter(|_| far),
            ..self.clone()
        }
    }

    /// The directories of the shard in `directory` that records files go to, created if
    /// missing: its own, then the same shard directory under each stripe root.
    fn create_stripes(&self, fs: &dyn FileSystem, directory: &Path) -> Result<Vec<PathBuf>> {
        let name = directory.file_name().unwrap_or_default();
        let stripes: Vec<PathBuf> = std::iter::once(directory.to_path_buf())
            .chain(self.stripe_roots.iter().map(|root| root.join(name)))
            .collect();
        for stripe in &stripes {
            fs.create_dir_all(stripe)?;
        }
        Ok(stripes)
    }
}

/// Makes the entries of every directory in `directories` durable (a shard's stripes,
/// before a manifest naming files in them is published).
fn sync_dirs(fs: &dyn FileSystem, directories: &[PathBuf]) -> Result<()> {
    for directory in directories {
        fs.sync_dir(directory)?;
    }
    Ok(())
}

/// The shard manifest of `directory`, or the empty one of a new shard.
fn read_manifest(fs: &dyn FileSystem, directory: &Path) -> Result<ShardManifest> {
    match manifest::load(fs, directory)? {
        Some(bytes) => ShardManifest::try_decode(&bytes).map_err(|error| EngineError::Corrupt {
            reason: format!(
                "{}: shard manifest does not decode: {error}",
                directory.display()
            ),
        }),
        None => Ok(ShardManifest::default()),
    }
}

pub(crate) struct Shard {
    dim: usize,
    distance: Distance,
    storage: ShardStorage,
    /// Indexed payload fields; changed under the writer lock.
    schema: RwLock<PayloadSchema>,
    directory: PathBuf,
    /// Where records files go: `directory`, then its counterpart under each stripe root.
    stripes: Vec<PathBuf>,
    writer: Mutex<Writer>,
    /// Serializes seals and merges (they release the writer lock while they build); holds
    /// whether the shard is closed (its collection dropped): then no seal or merge starts.
    maintenance: Mutex<bool>,
    buffer: RwLock<Buffer>,
    frozen: RwLock<Option<Arc<Frozen>>>,
    segments: RwLock<Vec<SharedSegment>>,
}

impl Shard {
    /// Opens the shard directory: loads the manifest's segments and tombstones, then
    /// replays the live log on top.
    pub fn open(
        fs: &dyn FileSystem,
        directory: &Path,
        dim: usize,
        distance: Distance,
        schema: &PayloadSchema,
        storage: &ShardStorage,
    ) -> Result<Shard> {
        let stripes = storage.create_stripes(fs, directory)?;
        let manifest = read_manifest(fs, directory)?;
        let shape = storage.shape(dim, distance, schema, &stripes);
        let segments = manifest
            .segments
            .iter()
            .map(|listed| {
                segment::load(
                    listed.kind,
                    fs,
                    directory,
                    listed.id,
                    &listed.record_files,
                    listed.tombstones,
                    &shape,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let had_replay_logs = !manifest.replay_logs.is_empty();
        let (wal, recovered) = open_logs(fs, directory, &manifest)?;
        remove_unreferenced_records(fs, &stripes, &manifest)?;
        let shard = Shard::assemble(
            &shape,
            storage,
            directory,
            Writer::new(wal, manifest),
            segments,
        );
        let replayed_bytes: usize = recovered
            .iter()
            .flat_map(|(_, records)| records.iter().map(|record| record.payload.len()))
            .sum();
        for (path, records) in recovered {
            for record in records {
                let operation =
                    codec::try_decode(&record.payload).map_err(|error| EngineError::Corrupt {
                        reason: format!(
                            "{}: record {} passed its checksum but does not decode: {error}",
                            path.display(),
                            record.sequence
                        ),
                    })?;
                shard.apply(operation)?;
            }
        }
        if had_replay_logs || shard.log_outgrew_buffer(replayed_bytes) {
            shard.checkpoint(fs)?;
        }
        Ok(shard)
    }

    /// Whether `log_bytes` of replayed log are well over what the buffer they built holds
    /// (overwritten and deleted points), so that the next restart should not read them.
    fn log_outgrew_buffer(&self, log_bytes: usize) -> bool {
        let buffer = self.buffer.read();
        let live_bytes = buffer.slots.len() * (self.dim * 4 + 64);
        log_bytes > CHECKPOINT_LOG_BYTES_MIN && log_bytes > 2 * live_bytes
    }

    /// Recovery's checkpoint, before the shard serves: the buffer just replayed is written
    /// to a fresh log as upserts of its live points, every segment's tombstones (deletes
    /// and updates of sealed points that only the old logs held) are saved, and a manifest
    /// that names only the fresh log is published; then the old logs are removed. Without
    /// it a server that crashes during every seal adds a log per restart, and restart time
    /// grows with the number of crashes instead of with the live data (issue 13: 66 logs,
    /// 600 MB, for 23k live points). A crash before the publication leaves the old
    /// manifest and logs in place (the fresh log is an unreferenced leftover).
    fn checkpoint(&self, fs: &dyn FileSystem) -> Result<()> {
        let mut writer = self.writer.lock();
        let mut next = writer.manifest.clone();
        next.replay_logs.clear();
        next.generation += 1;
        let path = wal_path(&self.directory, next.generation);
        remove_if_exists(fs, &path)?;
        let (mut wal, _) = Wal::open(fs, &path, writer.wal.next_sequence())?;
        let points = self.buffer.read().points(self.dim);
        for (record, _) in carried_records(points) {
            wal.append(&[&record])?;
        }
        wal.sync()?;
        self.replace_segments(fs, &mut writer, next, None, &[])?;
        writer.wal = wal;
        assert!(writer.manifest.replay_logs.is_empty());
        Ok(())
    }

    fn assemble(
        shape: &SegmentShape<'_>,
        storage: &ShardStorage,
        directory: &Path,
        writer: Writer,
        segments: Vec<SharedSegment>,
    ) -> Shard {
        Shard {
            dim: shape.dim,
            distance: shape.distance,
            storage: storage.clone(),
            schema: RwLock::new(shape.schema.clone()),
            directory: directory.to_path_buf(),
            stripes: shape.stripes.to_vec(),
            writer: Mutex::new(writer),
            maintenance: Mutex::new(false),
            buffer: RwLock::new(Buffer::default()),
            frozen: RwLock::new(None),
            segments: RwLock::new(segments),
        }
    }

    /// Writes a new shard directory holding `points` as one sealed segment (no log
    /// records): the segment files, then the shard manifest that lists them, then an empty
    /// log. Returns the shard (already holding the segment, so nothing is read back) and
    /// the bytes written. The directory must hold no shard yet; until the collection's
    /// manifest is published nothing here is visible. `progress` counts the rows linked
    /// into the graph; cancelling it fails the build.
    pub fn write_imported(
        fs: &dyn FileSystem,
        directory: &Path,
        points: Vec<Point>,
        dim: usize,
        distance: Distance,
        storage: &ShardStorage,
        progress: &sagitta_index::hnsw::AddProgress,
    ) -> Result<(Shard, u64)> {
        let build = |shape: &SegmentShape<'_>| {
            if points.is_empty() {
                return Ok(None);
            }
            segment::build(
                storage.kind,
                fs,
                directory,
                0,
                points,
                shape,
                Some(progress),
            )
            .map(Some)
        };
        Shard::write_imported_with(fs, directory, dim, distance, storage, build)
    }

    /// [`Shard::write_imported`] of a disk shard from ids (`points`, no vectors) and their
    /// vectors row-major, borrowed: the records are written from `vectors` in place.
    #[allow(clippy::too_many_arguments)]
    pub fn write_imported_rows(
        fs: &dyn FileSystem,
        directory: &Path,
        points: Vec<Point>,
        vectors: &[f32],
        dim: usize,
        distance: Distance,
        storage: &ShardStorage,
        progress: &sagitta_index::hnsw::AddProgress,
    ) -> Result<(Shard, u64)> {
        debug_assert_eq!(storage.kind, SegmentKindName::Disk);
        let build = |shape: &SegmentShape<'_>| {
            if points.is_empty() {
                return Ok(None);
            }
            let built = segment::DiskSegment::build_rows(
                fs,
                directory,
                0,
                points,
                vectors,
                shape,
                Some(progress),
            )?;
            Ok(Some(Arc::new(built) as SharedSegment))
        };
        Shard::write_imported_with(fs, directory, dim, distance, storage, build)
    }

    /// The shard directory around segment 0 as `build` makes it (`None`: no points).
    fn write_imported_with(
        fs: &dyn FileSystem,
        directory: &Path,
        dim: usize,
        distance: Distance,
        storage: &ShardStorage,
        build: impl FnOnce(&SegmentShape<'_>) -> Result<Option<SharedSegment>>,
    ) -> Result<(Shard, u64)> {
        let schema = PayloadSchema::new();
        let stripes = storage.create_stripes(fs, directory)?;
        let shape = storage.shape(dim, distance, &schema, &stripes);
        let mut manifest = ShardManifest {
            next_segment_id: 1,
            ..ShardManifest::default()
        };
        let mut written = 0;
        let mut segments: Vec<SharedSegment> = Vec::new();
        if let Some(segment) = build(&shape)? {
            written += segment.file_bytes();
            manifest.segments.push(ListedSegment {
                id: 0,
                tombstones: None,
                kind: storage.kind,
                record_files: segment.record_files(),
            });
            segments.push(segment);
        }
        sync_dirs(fs, &stripes)?;
        let encoded = manifest.encode();
        manifest::publish(fs, directory, &encoded)?;
        let (wal, _) = Wal::open(fs, &wal_path(directory, manifest.generation), 1)?;
        let writer = Writer::new(wal, manifest);
        let shard = Shard::assemble(&shape, storage, directory, writer, segments);
        Ok((shard, written + encoded.len() as u64))
    }

    /// Applies a logged operation: points it touches that live in a segment leave it
    /// (marked deleted; payload updates carry the point into the buffer first). Fails only
    /// where a payload update must read a point from a disk segment and the read fails
    /// (replay of a log written before copy on write was logged; writes carry the point
    /// themselves, see [`Shard::write`]).
    fn apply(&self, operation: Operation) -> Result<()> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let mut buffer = self.buffer.write();
        if !segments.is_empty() || frozen.is_some() {
            let remove = |id: &PointId| {
                segments.iter().for_each(|segment| segment.remove(id));
                if let Some(frozen) = frozen.as_ref() {
                    frozen.remove(id);
                }
            };
            match &operation {
                Operation::Upsert(points) => points.iter().for_each(|point| remove(&point.id)),
                Operation::Delete(ids) => ids.iter().for_each(remove),
                Operation::SetPayload { ids, .. }
                | Operation::OverwritePayload { ids, .. }
                | Operation::DeletePayloadKeys { ids, .. } => {
                    let mut moved: Vec<Point> = Vec::new();
                    for id in ids.iter().filter(|id| !buffer.slots.contains_key(id)) {
                        if let Some(point) =
                            frozen.as_ref().and_then(|frozen| frozen.take(id, self.dim))
                        {
                            moved.push(point);
                            continue;
                        }
                        for segment in segments.iter() {
                            if let Some(point) = segment.take(id)? {
                                moved.push(point);
                                break;
                            }
                        }
                    }
                    if !moved.is_empty() {
                        buffer.apply(Operation::Upsert(moved), self.dim);
                    }
                }
            }
        }
        buffer.apply(operation, self.dim);
        Ok(())
    }

    /// Makes every acknowledged write durable: syncs the log (a no-op for an untouched
    /// log beyond the fsync itself).
    pub fn flush(&self) -> Result<()> {
        let mut writer = self.writer.lock();
        writer.check_poisoned(&self.directory)?;
        writer.wal.sync()?;
        Ok(())
    }

    /// Logs `operation` (synced when `wait`), then applies it. The log lock is held across
    /// both, so memory always equals a replay of the log.
    pub fn write(&self, operation: Operation, wait: bool) -> Result<()> {
        let record = codec::encode(&operation);
        if record.len() > RECORD_BYTES_MAX {
            return Err(EngineError::BatchTooLarge {
                size: record.len(),
                limit: RECORD_BYTES_MAX,
            });
        }
        let mut writer = self.writer.lock();
        writer.check_poisoned(&self.directory)?;
        // Copy on write, logged: a payload update of a point that lives in a segment or in
        // a frozen buffer is preceded by an upsert of the point as it is, in the same
        // append. The update then finds the point in the log alone: the segment's copy is
        // tombstoned by it, and the frozen buffer's is gone once its seal commits, so a
        // replay that had to copy the point from there again would find nothing (points
        // updated during a seal were lost at the next restart — issue 12).
        let carried = carried_records(self.carried_points(&operation)?);
        let mut records: Vec<&[u8]> = carried.iter().map(|(record, _)| &record[..]).collect();
        records.push(&record);
        writer.wal.append(&records)?;
        if wait {
            writer.wal.sync()?;
        }
        for (_, points) in carried {
            self.apply(Operation::Upsert(points))?;
        }
        debug_assert!(
            self.carried_points(&operation)
                .is_ok_and(|points| points.is_empty()),
            "a payload update copies nothing the log does not hold"
        );
        self.apply(operation)?;
        writer.last_write = Instant::now();
        Ok(())
    }

    /// The points a payload update must carry into the buffer: those it names that are
    /// not in the buffer but live in a frozen buffer or a segment (each once).
    fn carried_points(&self, operation: &Operation) -> Result<Vec<Point>> {
        let ids = match operation {
            Operation::SetPayload { ids, .. }
            | Operation::OverwritePayload { ids, .. }
            | Operation::DeletePayloadKeys { ids, .. } => ids,
            Operation::Upsert(_) | Operation::Delete(_) => return Ok(Vec::new()),
        };
        let mut seen = HashSet::new();
        let outside: Vec<PointId> = {
            let buffer = self.buffer.read();
            ids.iter()
                .filter(|id| !buffer.slots.contains_key(id) && seen.insert(**id))
                .copied()
                .collect()
        };
        let mut carried = Vec::with_capacity(outside.len());
        for id in &outside {
            carried.extend(self.get(id)?);
        }
        Ok(carried)
    }

    fn shape<'a>(&'a self, schema: &'a PayloadSchema) -> SegmentShape<'a> {
        self.storage
            .shape(self.dim, self.distance, schema, &self.stripes)
    }

    /// The graph config new segments and write-buffer graphs are built with.
    pub fn graph(&self) -> GraphConfig {
        *self.storage.graph.read()
    }

    /// Keeps this shard's HNSW vectors on NUMA node `node` from now on (its far tier),
    /// moving those of its segments now; `None` leaves them where they are.
    pub(crate) fn move_vectors_to(&mut self, node: Option<usize>) {
        if self.storage.vectors_node == node {
            return;
        }
        self.storage.vectors_node = node;
        for segment in self.segments.read().iter() {
            if let Some(host) = segment.graph_host() {
                segment::place_vectors(host.graph(), node, &self.storage.tier_error);
            }
        }
    }

    /// Where the resident pages of this shard's segments' full vectors lie: pages per
    /// NUMA node, added into `pages`.
    pub(crate) fn count_vector_pages(
        &self,
        pages: &mut std::collections::BTreeMap<usize, usize>,
    ) -> std::result::Result<(), String> {
        for segment in self.segments.read().iter() {
            if let Some(host) = segment.graph_host() {
                for (node, count) in host.graph().vectors_resident_pages()? {
                    *pages.entry(node).or_insert(0) += count;
                }
            }
        }
        Ok(())
    }

    /// The last refusal to move this shard's vectors to its far node, if any.
    pub(crate) fn tier_error(&self) -> Option<String> {
        self.storage.tier_error.lock().clone()
    }

    /// Sets the graph config: new graphs are built with it, and [`Shard::planned_work`]
    /// rebuilds the segments built otherwise.
    pub fn set_graph(&self, graph: GraphConfig) {
        *self.storage.graph.write() = graph;
    }

    /// Adds (`Some`) or drops (`None`) the payload index of `field` in every segment; new
    /// segments build it from then on.
    pub fn set_payload_index(&self, field: &str, kind: Option<FieldType>) {
        let _writer = self.writer.lock();
        {
            let mut schema = self.schema.write();
            match kind {
                Some(kind) => schema.insert(field.to_string(), kind),
                None => schema.remove(field),
            };
        }
        for segment in self.segments.read().iter() {
            segment.set_payload_index(field, kind);
        }
    }

    /// A disk shard's segments, when those beside the largest add up to what it takes in
    /// an append (see [`crate::segment::disk::APPEND_AMORTIZATION`]): merged, they are
    /// appended to it.
    fn ready_to_append(&self, segments: &[SharedSegment]) -> Option<Vec<u64>> {
        if self.storage.kind != SegmentKindName::Disk || segments.len() < 2 {
            return None;
        }
        let host = segments.iter().max_by_key(|s| (s.live_count(), s.id()))?;
        let others: usize = segments
            .iter()
            .filter(|s| s.id() != host.id())
            .map(|s| s.live_count())
            .sum();
        let takes = host.append_host()?.can_append(others);
        takes.then(|| segments.iter().map(|s| s.id()).collect())
    }

    /// What the optimizer should do here next under `policy`, if anything.
    pub fn planned_work(&self, policy: &OptimizerPolicy) -> Option<Work> {
        let idle = {
            let writer = self.writer.lock();
            if writer.poisoned.is_some() {
                return None;
            }
            writer.last_write.elapsed()
        };
        let (live, slots, hosted) = {
            let buffer = self.buffer.read();
            let hosted = buffer
                .graph
                .as_ref()
                .filter(|graph| graph.host.is_some())
                .map(|graph| (graph.offset, graph.slot_capacity()));
            (buffer.slots.len(), buffer.slot_count(), hosted)
        };
        let seal = match hosted {
            // A seal rewrites the host's graph with the buffer's points: waiting until the
            // buffer is half the host's size keeps that at ~3 bytes written per new byte.
            // Idle, a buffer an eighth of the host's size is sealed (~9×); a smaller one
            // stays in the log and, indexed, in the host's graph until more writes come.
            Some((host_size, capacity)) => {
                slots >= policy.seal_points.max(host_size / 2)
                    || slots >= capacity
                    || (live > 0 && idle >= policy.seal_idle && slots >= host_size / 8)
            }
            None => slots >= policy.seal_points || (live > 0 && idle >= policy.seal_idle),
        };
        if seal {
            return Some(Work::Seal);
        }
        let segments = self.segments.read();
        if let Some(wasted) = segments.iter().find(|segment| {
            let (reclaimable, held) = segment.reclaimable();
            #[allow(clippy::cast_precision_loss)]
            let fraction = reclaimable as f64 / held as f64;
            reclaimable >= policy.vacuum_min_deleted && fraction >= policy.vacuum_fraction
        }) {
            return Some(Work::Merge(vec![wasted.id()]));
        }
        let graph = self.graph();
        if let Some(stale) = segments.iter().find(|segment| !segment.built_with(graph)) {
            return Some(Work::Rebuild(stale.id()));
        }
        if let Some(all) = self.ready_to_append(&segments) {
            return Some(Work::Merge(all));
        }
        if segments.len() > policy.max_segments {
            let mut by_size: Vec<(usize, u64)> = segments
                .iter()
                .map(|segment| (segment.live_count(), segment.id()))
                .collect();
            by_size.sort_unstable();
            let count = (segments.len() - policy.max_segments + 1).max(2);
            return Some(Work::Merge(
                by_size.into_iter().take(count).map(|(_, id)| id).collect(),
            ));
        }
        None
    }

    /// Whether a buffered point or planned work waits for the optimizer or the indexer. A
    /// buffer whose points all joined a segment's graph waits for nothing: its points are
    /// durable in the log and indexed (see [`Shard::planned_work`] for when it is sealed).
    pub fn has_pending_work(&self, policy: &OptimizerPolicy) -> bool {
        let waiting = {
            let buffer = self.buffer.read();
            !buffer.slots.is_empty()
                && !buffer.graph.as_ref().is_some_and(|graph| {
                    graph.host.is_some() && graph.indexed() == buffer.slot_count()
                })
        };
        waiting || self.planned_work(policy).is_some()
    }

    /// Why the shard refuses writes, if it does: a seal or merge whose publication failed,
    /// or an I/O error on its log (EFBIG, EIO, ENOSPC...). Either lasts until the shard is
    /// reopened.
    pub fn write_failure(&self) -> Option<String> {
        let writer = self.writer.lock();
        writer
            .poisoned
            .clone()
            .or_else(|| writer.wal.poisoned().map(str::to_string))
    }

    /// Waits for a running seal or merge, then refuses new ones and new writes (the
    /// collection is being dropped).
    pub fn close(&self) {
        let mut closed = self.maintenance.lock();
        *closed = true;
        self.writer.lock().dropped = true;
    }

    /// Whether a seal or merge is running now.
    pub fn is_busy(&self) -> bool {
        self.maintenance.is_locked()
    }

    /// Number of sealed segments.
    pub fn segment_count(&self) -> usize {
        self.segments.read().len()
    }

    /// Segments whose graphs were not built with the shard's graph config.
    pub fn stale_segment_count(&self) -> usize {
        let graph = self.graph();
        let segments = self.segments.read();
        segments.iter().filter(|s| !s.built_with(graph)).count()
    }

    /// RAM the segments' indexes hold.
    pub fn index_ram_bytes(&self) -> u64 {
        self.segments.read().iter().map(|s| s.ram_bytes()).sum()
    }

    /// Bytes of the segments' files.
    pub fn segment_file_bytes(&self) -> u64 {
        self.segments.read().iter().map(|s| s.file_bytes()).sum()
    }

    /// Points indexed (in sealed segments, or buffered points that joined a segment's
    /// graph) and the other points (in the write buffer, including a frozen buffer being
    /// sealed).
    pub fn point_counts(&self) -> (usize, usize) {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let sealed: usize = segments.iter().map(|s| s.live_count()).sum();
        let frozen_live = frozen.as_ref().map_or(0, |frozen| {
            frozen.buffer.slots.len() - frozen.removed.lock().len()
        });
        let joined = match buffer.graph.as_ref().filter(|graph| graph.host.is_some()) {
            Some(graph) if graph.indexed() == buffer.slot_count() => buffer.slots.len(),
            Some(graph) => buffer.ids[..graph.indexed()]
                .iter()
                .filter(|id| id.is_some())
                .count(),
            None => 0,
        };
        (sealed + joined, buffer.slots.len() - joined + frozen_live)
    }
}
