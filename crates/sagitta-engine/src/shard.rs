//! One shard: a directory holding a manifest, a write-ahead log, sealed segments, and in
//! memory the write buffer the log feeds.
//!
//! The buffer keeps vectors in one contiguous array (slot-major) so an exact scan streams
//! memory: at 768-d a 10,000-point buffer is 31 MB and scans in ~2 ms per query on one core.
//! Sealing turns the buffer into an immutable HNSW segment (see [`Shard::seal`]).
//!
//! Invariant: every live point is in exactly one place, the buffer or one segment; a write
//! to a point that lives in a segment marks it deleted there first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Mutex, RwLock};
use sagitta_index::hnsw::{HnswIndex, HnswSearchParams};
use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;
use sagitta_storage::wal::{Wal, RECORD_BYTES_MAX};

use crate::buffer::{Buffer, BufferGraph, BufferPlan};
use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::payload_index::{FieldType, PayloadSchema};
use crate::point::{Distance, Point, PointId};
use crate::policy::{OptimizerPolicy, Work};
use crate::query::{auto_beam, hit_distance, ShardHit, Strategy};
use crate::segment::{self, Segment, SegmentShape};
use crate::shard_manifest::{remove_unreferenced, wal_path, ShardManifest};
use crate::shard_state::{carried_records, Frozen, Writer};

/// Most slots a write-buffer graph is sized for up front (~170 bytes of link and label
/// arrays per slot are allocated at creation; vector rows only when written), unless the
/// buffer already holds more.
const BUFFER_GRAPH_CAPACITY_MAX: usize = 1 << 18;
/// Unindexed slots from which the indexer, far behind the writes (a bulk upload), takes a
/// large step: a batch of at least `ORDERED_BATCH_MIN_ROWS` is linked cluster by cluster,
/// finding its neighborhood in cache (synthetic 768-d: linking ~25% faster). Steady writes
/// never fall this far behind, so their steps stay small and the tail a search scans
/// exactly stays short.
const CATCH_UP_ROWS: usize = sagitta_index::hnsw::ORDERED_BATCH_MIN_ROWS;

/// The segment among `segments` whose graph `graph` extends (its host), if any.
fn host_among(segments: &[Arc<Segment>], graph: &BufferGraph) -> Option<Arc<Segment>> {
    let host = graph.host?;
    segments
        .iter()
        .find(|segment| segment.id == host && Arc::ptr_eq(segment.index(), &graph.index))
        .cloned()
}

/// A replayed log shorter than this is never checkpointed at open: reading it costs less
/// than rewriting it.
const CHECKPOINT_LOG_BYTES_MIN: usize = 16 << 20;

pub(crate) struct Shard {
    dim: usize,
    distance: Distance,
    /// Indexed payload fields; changed under the writer lock.
    schema: RwLock<PayloadSchema>,
    directory: PathBuf,
    writer: Mutex<Writer>,
    /// Serializes seals and merges (they release the writer lock while they build); holds
    /// whether the shard is closed (its collection dropped): then no seal or merge starts.
    maintenance: Mutex<bool>,
    buffer: RwLock<Buffer>,
    frozen: RwLock<Option<Arc<Frozen>>>,
    segments: RwLock<Vec<Arc<Segment>>>,
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
    ) -> Result<Shard> {
        fs.create_dir_all(directory)?;
        let manifest = match manifest::load(fs, directory)? {
            Some(bytes) => ShardManifest::decode(&bytes).ok_or_else(|| EngineError::Corrupt {
                reason: format!("{}: shard manifest does not decode", directory.display()),
            })?,
            None => ShardManifest::default(),
        };
        let segments = manifest
            .segments
            .iter()
            .map(|(id, tombstones)| {
                Segment::load(fs, directory, *id, *tombstones, schema).map(Arc::new)
            })
            .collect::<Result<Vec<_>>>()?;
        // Logs of an unfinished seal first (their points simply return to the buffer and are
        // sealed again next time), then the live log.
        let had_replay_logs = !manifest.replay_logs.is_empty();
        let mut recovered = Vec::new();
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
            let (_, recovery) = Wal::open(fs, &path, 1)?;
            recovered.push((path, recovery.records));
        }
        remove_unreferenced(fs, directory, &manifest, &existing)?;
        let path = wal_path(directory, manifest.generation);
        let (wal, recovery) = Wal::open(fs, &path, 1)?;
        recovered.push((path, recovery.records));
        let shard = Shard::assemble(
            &SegmentShape {
                dim,
                distance,
                schema,
            },
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
                    codec::decode(&record.payload).ok_or_else(|| EngineError::Corrupt {
                        reason: format!(
                            "{}: record {} passed its checksum but does not decode",
                            path.display(),
                            record.sequence
                        ),
                    })?;
                shard.apply(operation);
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
        directory: &Path,
        writer: Writer,
        segments: Vec<Arc<Segment>>,
    ) -> Shard {
        Shard {
            dim: shape.dim,
            distance: shape.distance,
            schema: RwLock::new(shape.schema.clone()),
            directory: directory.to_path_buf(),
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
        progress: &sagitta_index::hnsw::AddProgress,
    ) -> Result<(Shard, u64)> {
        let schema = PayloadSchema::new();
        let shape = SegmentShape {
            dim,
            distance,
            schema: &schema,
        };
        fs.create_dir_all(directory)?;
        let mut manifest = ShardManifest {
            next_segment_id: 1,
            ..ShardManifest::default()
        };
        let mut written = 0;
        let mut segments = Vec::new();
        if !points.is_empty() {
            let segment =
                Segment::build_with_progress(fs, directory, 0, points, &shape, Some(progress))?;
            written += segment.file_bytes;
            manifest.segments.push((0, None));
            segments.push(Arc::new(segment));
        }
        fs.sync_dir(directory)?;
        let encoded = manifest.encode();
        manifest::publish(fs, directory, &encoded)?;
        let (wal, _) = Wal::open(fs, &wal_path(directory, manifest.generation), 1)?;
        let writer = Writer::new(wal, manifest);
        let shard = Shard::assemble(&shape, directory, writer, segments);
        Ok((shard, written + encoded.len() as u64))
    }

    /// Applies a logged operation: points it touches that live in a segment leave it
    /// (marked deleted; payload updates carry the point into the buffer first).
    fn apply(&self, operation: Operation) {
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
                    let moved: Vec<Point> = ids
                        .iter()
                        .filter(|id| !buffer.slots.contains_key(id))
                        .filter_map(|id| {
                            frozen
                                .as_ref()
                                .and_then(|frozen| frozen.take(id, self.dim))
                                .or_else(|| segments.iter().find_map(|segment| segment.take(id)))
                        })
                        .collect();
                    if !moved.is_empty() {
                        buffer.apply(Operation::Upsert(moved), self.dim);
                    }
                }
            }
        }
        buffer.apply(operation, self.dim);
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
        let carried = carried_records(self.carried_points(&operation));
        let mut records: Vec<&[u8]> = carried.iter().map(|(record, _)| &record[..]).collect();
        records.push(&record);
        writer.wal.append(&records)?;
        if wait {
            writer.wal.sync()?;
        }
        for (_, points) in carried {
            self.apply(Operation::Upsert(points));
        }
        debug_assert!(
            self.carried_points(&operation).is_empty(),
            "a payload update copies nothing the log does not hold"
        );
        self.apply(operation);
        writer.last_write = Instant::now();
        Ok(())
    }

    /// The points a payload update must carry into the buffer: those it names that are
    /// not in the buffer but live in a frozen buffer or a segment (each once).
    fn carried_points(&self, operation: &Operation) -> Vec<Point> {
        let ids = match operation {
            Operation::SetPayload { ids, .. }
            | Operation::OverwritePayload { ids, .. }
            | Operation::DeletePayloadKeys { ids, .. } => ids,
            Operation::Upsert(_) | Operation::Delete(_) => return Vec::new(),
        };
        let mut seen = HashSet::new();
        let outside: Vec<PointId> = {
            let buffer = self.buffer.read();
            ids.iter()
                .filter(|id| !buffer.slots.contains_key(id) && seen.insert(**id))
                .copied()
                .collect()
        };
        outside.iter().filter_map(|id| self.get(id)).collect()
    }

    /// Seals the write buffer into a new HNSW segment without stopping writers for the
    /// build. Crash-safe protocol (docs/format.md, "Seal protocol"):
    /// 1. under the writer lock: sync the log, start the next log, publish a manifest that
    ///    lists the old log as a replay log, and freeze the buffer (still searchable);
    /// 2. without it: build and write the segment from the frozen buffer, while new writes
    ///    go to the new log and buffer (superseded frozen points are noted);
    /// 3. under the writer lock: tombstone the superseded points, write every segment's
    ///    tombstones, publish the manifest with the new segment and no replay logs, swap
    ///    memory, remove the replayed logs.
    ///
    /// A crash anywhere replays to the same state: before step 3's publish, the frozen
    /// points come back from the replay logs. An I/O error after step 1 poisons the shard
    /// until it is reopened (the frozen buffer cannot be merged back safely). Afterwards
    /// every write acknowledged before the seal began is durable. Returns the number of
    /// points sealed.
    pub fn seal(&self, fs: &dyn FileSystem) -> Result<usize> {
        let one_at_a_time = self.maintenance.lock();
        if *one_at_a_time {
            return Ok(0);
        }
        let frozen = {
            let mut writer = self.writer.lock();
            writer.check_poisoned(&self.directory)?;
            if self.buffer.read().slots.is_empty() {
                // Nothing to seal, but the log may hold acknowledged, unsynced deletes of
                // sealed points: after a seal every acknowledged write is durable, here too.
                writer.wal.sync()?;
                return Ok(0);
            }
            writer.wal.sync()?;
            let mut next = writer.manifest.clone();
            next.replay_logs.push(next.generation);
            next.generation += 1;
            // A seal that crashed before publishing may have left this log behind.
            let new_log = wal_path(&self.directory, next.generation);
            remove_if_exists(fs, &new_log)?;
            let (wal, _) = Wal::open(fs, &new_log, writer.wal.next_sequence())?;
            self.publish_or_poison(fs, &mut writer, next)?;
            writer.wal = wal;
            let mut frozen = self.frozen.write();
            let buffer = std::mem::take(&mut *self.buffer.write());
            let sealed = Arc::new(Frozen {
                buffer,
                removed: Mutex::new(HashSet::new()),
            });
            *frozen = Some(Arc::clone(&sealed));
            sealed
        };
        match self.finish_seal(fs, &frozen) {
            Ok(sealed) => Ok(sealed),
            Err(error) => {
                self.writer.lock().poisoned = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// Publishes `next` and makes it the writer's manifest. A failed publication may have
    /// left the rename visible but not durable: which manifest the disk keeps is unknown,
    /// so the shard is poisoned until it is reopened.
    fn publish_or_poison(
        &self,
        fs: &dyn FileSystem,
        writer: &mut Writer,
        next: ShardManifest,
    ) -> Result<ShardManifest> {
        if let Err(error) = manifest::publish(fs, &self.directory, &next.encode()) {
            writer.poisoned = Some(error.to_string());
            return Err(error.into());
        }
        Ok(std::mem::replace(&mut writer.manifest, next))
    }

    /// Steps 2 and 3 of [`Shard::seal`]. A buffer whose points joined a segment's graph
    /// (its host) is saved with the host's points as one segment that replaces the host.
    fn finish_seal(&self, fs: &dyn FileSystem, frozen: &Frozen) -> Result<usize> {
        let id = self.writer.lock().manifest.next_segment_id;
        let schema = self.schema.read().clone();
        let shape = self.shape(&schema);
        let mut retired = Vec::new();
        let segment = match self.finish_graph(&frozen.buffer)? {
            Some((graph, None)) => Segment::from_graph(
                fs,
                &self.directory,
                id,
                graph,
                frozen.buffer.listing(),
                &shape,
            )?,
            Some((graph, Some(host))) => {
                let mut listing = host.listing();
                listing.extend(frozen.buffer.listing());
                retired.push(host.id);
                Segment::from_graph(fs, &self.directory, id, graph, listing, &shape)?
            }
            None => Segment::build(
                fs,
                &self.directory,
                id,
                frozen.buffer.points(self.dim),
                &shape,
            )?,
        };

        let mut writer = self.writer.lock();
        for superseded in frozen.removed.lock().iter() {
            segment.remove(superseded);
        }
        let sealed = segment.live_count();
        let mut next = writer.manifest.clone();
        // The frozen points are in the segment now: their logs need no replay.
        next.replay_logs.clear();
        self.replace_segments(fs, &mut writer, next, Some(segment), &retired)?;
        Ok(sealed)
    }

    /// The live segment whose graph `graph` extends, if any (a merge may have retired it).
    fn host_of(&self, graph: &BufferGraph) -> Option<Arc<Segment>> {
        host_among(&self.segments.read(), graph)
    }

    /// The commit shared by seals and merges, under the writer lock: writes every kept
    /// segment's tombstones under a fresh epoch, publishes `next` with `added` in place of
    /// `retired`, swaps memory (a frozen buffer being sealed is dropped with it), then
    /// removes the files nothing references any more (best effort; open removes leftovers).
    fn replace_segments(
        &self,
        fs: &dyn FileSystem,
        writer: &mut Writer,
        mut next: ShardManifest,
        added: Option<Segment>,
        retired: &[u64],
    ) -> Result<()> {
        // Tombstones written here may stand for writes still unsynced in the live log (a
        // point superseded while the build ran): those writes must be durable first, or a
        // crash keeps the tombstone and loses the newer version — the point is then gone,
        // which no prefix of the log explains.
        writer.wal.sync()?;
        let epoch = next.tombstone_epoch + 1;
        let current = self.segments.read().clone();
        let kept: Vec<&Segment> = current
            .iter()
            .map(Arc::as_ref)
            .filter(|segment| !retired.contains(&segment.id))
            .chain(added.as_ref())
            .collect();
        next.segments = kept
            .iter()
            .map(|segment| {
                let saved = segment.save_tombstones(fs, &self.directory, epoch)?;
                Ok((segment.id, saved.then_some(epoch)))
            })
            .collect::<Result<Vec<_>>>()?;
        next.tombstone_epoch = epoch;
        if let Some(added) = &added {
            next.next_segment_id = added.id + 1;
        }
        if let Some(added) = &added {
            // the schema may have changed while it was being built
            added.sync_payload_indexes(&self.schema.read());
        }
        fs.sync_dir(&self.directory)?;
        let previous = self.publish_or_poison(fs, writer, next)?;
        {
            let mut live = self.segments.write();
            let mut frozen = self.frozen.write();
            live.retain(|segment| !retired.contains(&segment.id));
            live.extend(added.map(Arc::new));
            *frozen = None;
        }
        let referenced = writer.manifest.referenced_files();
        for name in previous.referenced_files() {
            if !referenced.contains(&name) {
                let _ = remove_if_exists(fs, &self.directory.join(name));
            }
        }
        Ok(())
    }

    /// Rebuilds the segments `ids` into one new segment of their live points (a merge of
    /// several small segments, or the vacuum of one with many deleted points), without
    /// stopping readers or writers during the build. Points deleted while it builds are
    /// deleted in the new segment before it is published. Returns the points kept.
    pub fn merge(&self, fs: &dyn FileSystem, ids: &[u64]) -> Result<usize> {
        let one_at_a_time = self.maintenance.lock();
        if *one_at_a_time {
            return Ok(0);
        }
        let (id, sources) = {
            let writer = self.writer.lock();
            writer.check_poisoned(&self.directory)?;
            let sources: Vec<Arc<Segment>> = self
                .segments
                .read()
                .iter()
                .filter(|segment| ids.contains(&segment.id))
                .cloned()
                .collect();
            (writer.manifest.next_segment_id, sources)
        };
        if sources.is_empty() {
            return Ok(0);
        }
        // Where each point came from: the build places points in its own order (by
        // cluster), so a point deleted meanwhile is found in the new segment by id.
        let mut origins = Vec::new();
        let mut points = Vec::new();
        for (source, segment) in sources.iter().enumerate() {
            for (node, point) in segment.live_points() {
                origins.push((source, node, point.id));
                points.push(point);
            }
        }
        let merged = if points.is_empty() {
            None
        } else {
            let schema = self.schema.read().clone();
            Some(Segment::build(
                fs,
                &self.directory,
                id,
                points,
                &self.shape(&schema),
            )?)
        };
        let mut writer = self.writer.lock();
        writer.check_poisoned(&self.directory)?;
        if let Some(merged) = &merged {
            for (source, source_node, id) in &origins {
                if sources[*source].is_node_deleted(*source_node) {
                    merged.remove(id);
                }
            }
        }
        let kept = merged.as_ref().map_or(0, Segment::live_count);
        let retired: Vec<u64> = sources.iter().map(|segment| segment.id).collect();
        let next = writer.manifest.clone();
        self.replace_segments(fs, &mut writer, next, merged, &retired)?;
        Ok(kept)
    }

    /// The graph of a frozen buffer, completed (the slots the indexer had not reached are
    /// added now), with its host segment if the buffer's points joined one's graph. `None`
    /// when the buffer has no graph, outgrew its capacity, or its host was merged away
    /// (then the seal builds a fresh index from the live points).
    #[allow(clippy::type_complexity)]
    fn finish_graph(
        &self,
        buffer: &Buffer,
    ) -> Result<Option<(Arc<HnswIndex>, Option<Arc<Segment>>)>> {
        let Some(graph) = &buffer.graph else {
            return Ok(None);
        };
        let host = self.host_of(graph);
        if graph.host.is_some() && host.is_none() {
            return Ok(None);
        }
        // A frozen buffer's slot count is final: a graph too small for it is dropped at
        // once, without waiting for an indexer step still growing it.
        if buffer.slot_count() > graph.slot_capacity() {
            return Ok(None);
        }
        let _growing = graph.growing.lock();
        let (from, to) = (graph.indexed(), buffer.slot_count());
        if from < to {
            graph.extend(&buffer.vectors_of(from, to, self.dim), self.dim)?;
        }
        // Slots retired before the indexer reached them have no deleted mark yet.
        buffer.mark_retired(graph, 0, to);
        Ok(Some((Arc::clone(&graph.index), host)))
    }

    /// One step of the indexer: adds up to `max_rows` slots of the write buffer to its
    /// graph (creating the graph, sized for `policy.seal_points` slots, once the buffer
    /// holds enough rows to train SQ8) — or, when at least [`CATCH_UP_ROWS`] wait, up to
    /// four times that many at once. Nothing once the buffer has outgrown its graph (the
    /// seal rebuilds it). Returns whether it added any.
    pub fn index_buffer(&self, policy: &OptimizerPolicy, max_rows: usize) -> Result<bool> {
        let (graph, from, to, vectors) = {
            let (slots, has_graph) = {
                let buffer = self.buffer.read();
                (buffer.slot_count(), buffer.graph.is_some())
            };
            if !has_graph && !self.start_graph(policy, slots)? {
                return Ok(false);
            }
            let buffer = self.buffer.read();
            let Some(graph) = buffer.graph.as_ref().map(Arc::clone) else {
                return Ok(false);
            };
            let slots = buffer.slot_count();
            if slots > graph.slot_capacity() {
                // Slots only grow: the seal will build this buffer's points afresh, and
                // linking more into this graph would be thrown away.
                return Ok(false);
            }
            let from = graph.indexed();
            let step = if slots - from >= CATCH_UP_ROWS {
                4 * CATCH_UP_ROWS
            } else {
                max_rows
            };
            let to = slots.min(from + step).min(graph.slot_capacity());
            if from >= to {
                return Ok(false);
            }
            (graph, from, to, buffer.vectors_of(from, to, self.dim))
        };
        {
            let _growing = graph.growing.lock();
            if graph.indexed() != from {
                return Ok(false); // a seal completed this graph meanwhile
            }
            graph.extend(&vectors, self.dim)?;
        }
        let buffer = self.buffer.read();
        if buffer
            .graph
            .as_ref()
            .is_some_and(|live| Arc::ptr_eq(live, &graph))
        {
            buffer.mark_retired(&graph, from, to);
        }
        Ok(true)
    }

    /// Gives the write buffer (holding `slots` slots) a graph: the graph of the largest
    /// segment with room for it, so the buffer's points join that graph and a search walks
    /// one graph instead of two; otherwise a graph of its own once the buffer holds enough
    /// rows to train SQ8. None while a seal runs: the segment it is writing may be the
    /// host, and a graph must not grow while it is saved. Returns whether there is a graph.
    fn start_graph(&self, policy: &OptimizerPolicy, slots: usize) -> Result<bool> {
        if self.frozen.read().is_some() || slots == 0 {
            return Ok(false);
        }
        let room = slots.max(policy.seal_points);
        let host = self
            .segments
            .read()
            .iter()
            .filter(|segment| segment.can_host(room))
            .max_by_key(|segment| segment.len())
            .cloned();
        let graph = match host {
            Some(host) => BufferGraph::hosted(Arc::clone(host.index()), host.id, host.len()),
            None => {
                if slots < policy.index_min_rows.max(1) {
                    return Ok(false);
                }
                // Room for the buffer to run well past the seal threshold while an earlier
                // seal finishes: slots beyond the capacity would cost a rebuild at seal.
                // Allocated before taking the write lock, so writers never wait for it.
                let capacity = policy
                    .seal_points
                    .saturating_mul(8)
                    .min(BUFFER_GRAPH_CAPACITY_MAX)
                    .max(slots * 2);
                BufferGraph::new(HnswIndex::new(
                    segment::segment_params(self.dim, self.distance),
                    capacity,
                )?)
            }
        };
        let frozen = self.frozen.read();
        let mut buffer = self.buffer.write();
        // A seal may have swapped the buffer meanwhile; the new one gets a graph later.
        if frozen.is_none() && buffer.graph.is_none() && buffer.slot_count() >= slots {
            buffer.graph = Some(Arc::new(graph));
        }
        Ok(buffer.graph.is_some())
    }

    fn shape<'a>(&self, schema: &'a PayloadSchema) -> SegmentShape<'a> {
        SegmentShape {
            dim: self.dim,
            distance: self.distance,
            schema,
        }
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
            let deleted = segment.deleted_count();
            #[allow(clippy::cast_precision_loss)]
            let fraction = deleted as f64 / segment.len() as f64;
            deleted >= policy.vacuum_min_deleted && fraction >= policy.vacuum_fraction
        }) {
            return Some(Work::Merge(vec![wasted.id]));
        }
        if segments.len() > policy.max_segments {
            let mut by_size: Vec<(usize, u64)> = segments
                .iter()
                .map(|segment| (segment.live_count(), segment.id))
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

    /// Points passing `filter` (all points without one).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        self.matching_ids(filter).len()
    }

    /// Ids of the points passing `filter`, unordered.
    pub fn matching_ids(&self, filter: Option<&Filter>) -> Vec<PointId> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut ids = buffer.matching_ids(filter, None);
        if let Some(frozen) = frozen.as_ref() {
            ids.extend(
                frozen
                    .buffer
                    .matching_ids(filter, Some(&frozen.removed.lock())),
            );
        }
        for segment in segments.iter() {
            ids.extend(segment.live_ids(filter));
        }
        ids
    }

    /// The first `limit` ids passing `filter` from `start` on, in id order (each part of the
    /// shard stops at its `limit`-th match).
    pub fn scroll_ids(
        &self,
        start: Option<PointId>,
        filter: Option<&Filter>,
        limit: usize,
    ) -> Vec<PointId> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut ids = buffer.scroll_ids(start, filter, None, limit);
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            ids.extend(
                frozen
                    .buffer
                    .scroll_ids(start, filter, Some(&removed), limit),
            );
        }
        for segment in segments.iter() {
            ids.extend(segment.scroll_ids(start, filter, limit));
        }
        ids.sort_unstable();
        ids.truncate(limit);
        ids
    }

    pub fn get(&self, id: &PointId) -> Option<Point> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        if let Some(slot) = buffer.slots.get(id) {
            return Some(buffer.point(*slot, self.dim));
        }
        if let Some(frozen) = frozen.as_ref().filter(|frozen| frozen.is_live(id)) {
            return Some(frozen.buffer.point(frozen.buffer.slots[id], self.dim));
        }
        segments.iter().find_map(|segment| segment.get(id))
    }

    /// Every live point: sealed ones, then a frozen buffer's, then the buffer's.
    pub fn points(&self) -> Vec<Point> {
        let segments = self.segments.read();
        let frozen = self.frozen.read();
        let buffer = self.buffer.read();
        let mut points: Vec<Point> = segments.iter().flat_map(|s| s.points()).collect();
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            points.extend(
                frozen
                    .buffer
                    .points(self.dim)
                    .into_iter()
                    .filter(|point| !removed.contains(&point.id)),
            );
        }
        points.extend(buffer.points(self.dim));
        points
    }

    /// Top-`k` among points passing `filter`: HNSW over each segment and over the indexed
    /// part of the buffer (and of a frozen one), exact over the rest. A buffer whose points
    /// joined a segment's graph is searched with that segment in one walk. `query` is
    /// already normalized for Cosine.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        strategy: Strategy,
    ) -> Result<Vec<ShardHit>> {
        // The three locks are held together only to take a consistent view and to search
        // the write buffer (with the graph it shares, if any); the frozen buffer and the
        // other segments are searched from that view after they are released, so a writer
        // waits for at most the buffer part of a query, not all of it. The view can only
        // lose points meanwhile (a concurrent write marks them deleted in place), never gain
        // a second copy of one.
        let segments_lock = self.segments.read();
        let frozen_lock = self.frozen.read();
        let buffer = self.buffer.read();
        let segments: Vec<Arc<Segment>> = segments_lock.clone();
        let frozen: Option<Arc<Frozen>> = frozen_lock.clone();
        // With the default beam, a part smaller than the largest gets a narrower one: its
        // share of the true top k is smaller, and a write buffer searched at the full beam
        // would double a query's cost during ingestion.
        let largest = segments
            .iter()
            .map(|segment| segment.len())
            .chain([buffer.slot_count()])
            .chain(frozen.as_ref().map(|frozen| frozen.buffer.slot_count()))
            .max()
            .unwrap_or(0);
        let part_strategy = |size: usize| match strategy {
            Strategy::Auto => Strategy::Beam(auto_beam(k, size, largest)),
            other => other,
        };
        let beam = |size: usize| part_strategy(size).beam(k);
        // The segment whose graph the buffer's (or the frozen buffer's) points joined.
        let host = match beam(largest) {
            Some(ef) if filter.is_none() => self
                .shared_host(&segments, frozen.as_deref(), &buffer)
                .map(|host| (host, ef)),
            _ => None,
        };
        let mut hits = match &host {
            Some((host, ef)) => {
                self.walk_shared(query, k, *ef, host, frozen.as_deref(), &buffer)?
            }
            None => Vec::new(),
        };
        let shares_host = |graph: Option<&Arc<BufferGraph>>| {
            host.as_ref()
                .zip(graph)
                .is_some_and(|((host, _), graph)| Arc::ptr_eq(host.index(), &graph.index))
        };
        let plan = |graph: Option<&Arc<BufferGraph>>, size: usize| {
            if shares_host(graph) {
                BufferPlan::Tail
            } else {
                beam(size).map_or(BufferPlan::Exact, BufferPlan::Graph)
            }
        };
        hits.extend(buffer.search(
            query,
            k,
            filter,
            None,
            self.dim,
            self.distance,
            plan(buffer.graph.as_ref(), buffer.slot_count()),
        ));
        drop((buffer, frozen_lock, segments_lock));
        if let Some(frozen) = frozen.as_ref() {
            let removed = frozen.removed.lock();
            hits.extend(frozen.buffer.search(
                query,
                k,
                filter,
                Some(&removed),
                self.dim,
                self.distance,
                plan(frozen.buffer.graph.as_ref(), frozen.buffer.slot_count()),
            ));
        }
        let host_id = host.as_ref().map(|(host, _)| host.id);
        for segment in segments
            .iter()
            .filter(|segment| Some(segment.id) != host_id)
        {
            let strategy = part_strategy(segment.len());
            for (distance, point) in segment.search(query, k, filter, self.distance, strategy)? {
                hits.push(ShardHit { distance, point });
            }
        }
        Ok(hits)
    }

    /// The segment among `segments` whose graph the write buffer's points (or a frozen
    /// buffer's) joined.
    fn shared_host(
        &self,
        segments: &[Arc<Segment>],
        frozen: Option<&Frozen>,
        buffer: &Buffer,
    ) -> Option<Arc<Segment>> {
        [
            buffer.graph.as_ref(),
            frozen.and_then(|frozen| frozen.buffer.graph.as_ref()),
        ]
        .into_iter()
        .flatten()
        .find_map(|graph| host_among(segments, graph))
    }

    /// One walk of the graph `host` shares with the buffer (or the frozen buffer) whose
    /// points joined it: top-`k` among the host's live points and both buffers' live,
    /// indexed slots.
    fn walk_shared(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        host: &Segment,
        frozen: Option<&Frozen>,
        buffer: &Buffer,
    ) -> Result<Vec<ShardHit>> {
        let joined = |graph: Option<&Arc<BufferGraph>>| {
            graph
                .filter(|graph| Arc::ptr_eq(host.index(), &graph.index))
                .map(Arc::clone)
        };
        let frozen_graph = frozen.and_then(|frozen| joined(frozen.buffer.graph.as_ref()));
        let buffer_graph = joined(buffer.graph.as_ref());
        let host_nodes = host.len();
        let accept = |node: u32| {
            (node as usize) < host_nodes
                || buffer_graph
                    .as_ref()
                    .and_then(|graph| graph.slot_of(node))
                    .is_some_and(|slot| buffer.is_live(slot, None))
                || frozen
                    .zip(frozen_graph.as_ref())
                    .is_some_and(|(frozen, graph)| {
                        graph
                            .slot_of(node)
                            .is_some_and(|slot| frozen.buffer.is_live(slot, None))
                    })
        };
        let params = HnswSearchParams::new(k, ef.max(k));
        let found = host.index().search_filtered(query, params, accept)?;
        let mut hits = Vec::with_capacity(found.len());
        for hit in found {
            let distance = hit_distance(hit.score, self.distance);
            let point = if (hit.node as usize) < host_nodes {
                host.live_point(hit.node)
            } else if let Some(slot) = buffer_graph
                .as_ref()
                .and_then(|graph| graph.slot_of(hit.node))
            {
                buffer
                    .is_live(slot, None)
                    .then(|| buffer.point(slot, self.dim))
            } else {
                frozen
                    .zip(frozen_graph.as_ref())
                    .and_then(|(frozen, graph)| {
                        let slot = graph.slot_of(hit.node)?;
                        let id = frozen.buffer.ids[slot]?;
                        frozen
                            .is_live(&id)
                            .then(|| frozen.buffer.point(slot, self.dim))
                    })
            };
            hits.extend(point.map(|point| ShardHit { distance, point }));
        }
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::auto_beam;

    #[test]
    fn the_default_beam_narrows_with_the_square_root_of_a_part_size() {
        assert_eq!(auto_beam(10, 80_000, 80_000), 128);
        assert_eq!(auto_beam(10, 20_000, 80_000), 64);
        assert_eq!(auto_beam(10, 100, 80_000), 20); // never below 2k
        assert_eq!(auto_beam(100, 80_000, 80_000), 200);
        assert_eq!(auto_beam(10, 5, 0), 128);
    }
}
