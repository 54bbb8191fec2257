//! The seal and merge protocols of a shard (docs/format.md): freeze the buffer, build a
//! segment without holding the writer lock, publish it through the manifest; rebuild
//! segments from their live points. `replace_segments` is the commit both share.

use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;
use sagitta_storage::wal::Wal;

use crate::buffer::BufferGraph;
use crate::error::Result;
use crate::payload_index::PayloadSchema;
use crate::point::{Point, PointId};
use crate::segment::{self, HnswSegment, SegmentKind, SegmentKindName, SharedSegment};
use crate::shard_manifest::{wal_path, ListedSegment, ShardManifest};
use crate::shard_state::{Frozen, Writer};

use super::{host_among, Shard};

/// An append's host and each of its positions carried into the new segment, with its id.
type Carried = (SharedSegment, Vec<(u32, PointId)>);

impl Shard {
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

    /// Steps 2 and 3 of [`Shard::seal`].
    fn finish_seal(&self, fs: &dyn FileSystem, frozen: &Frozen) -> Result<usize> {
        let id = self.writer.lock().manifest.next_segment_id;
        let (segment, retired, carried) = self.build_sealed(fs, frozen, id)?;
        let mut writer = self.writer.lock();
        let removed = frozen.removed.lock();
        for superseded in removed.iter() {
            segment.remove(superseded);
        }
        // An append host's points deleted since the build read it: deleted here too.
        if let Some((host, carried)) = &carried {
            for (position, id) in carried {
                if host.is_deleted_at(*position) {
                    segment.remove(id);
                }
            }
        }
        // Deletes of the host's points since the segment was assembled went through the
        // host, whose graph the segment shares: its count missed them (status overstated
        // the live points until the next reload).
        segment.recount_deleted();
        let sealed = segment.live_count();
        // Postcondition: the segment holds exactly the frozen buffer's live points and,
        // for a joined buffer, the host's.
        let frozen_live = frozen
            .buffer
            .slots
            .keys()
            .filter(|id| !removed.contains(id))
            .count();
        let host_live: usize = retired
            .iter()
            .filter_map(|host| {
                self.segments
                    .read()
                    .iter()
                    .find(|s| s.id() == *host)
                    .cloned()
            })
            .map(|host| host.live_count())
            .sum();
        assert_eq!(
            sealed,
            frozen_live + host_live,
            "seal of segment {id}: live points of the frozen buffer and host"
        );
        drop(removed);
        let mut next = writer.manifest.clone();
        // The frozen points are in the segment now: their logs need no replay.
        next.replay_logs.clear();
        self.replace_segments(fs, &mut writer, next, Some(segment), &retired)?;
        Ok(sealed)
    }

    /// Step 2 of [`Shard::seal`]: segment `id` from the frozen buffer, the segments it
    /// replaces, and for an append the host with where its points went. A buffer whose
    /// points joined a segment's graph (its host) is saved with the host's points as one
    /// segment that replaces the host; a disk shard's buffer is appended to its largest
    /// segment ([`crate::segment::AppendHost`]) when that one can take it.
    fn build_sealed(
        &self,
        fs: &dyn FileSystem,
        frozen: &Frozen,
        id: u64,
    ) -> Result<(SharedSegment, Vec<u64>, Option<Carried>)> {
        let schema = self.schema.read().clone();
        let shape = self.shape(&schema);
        let mut retired = Vec::new();
        if self.storage.kind != SegmentKindName::Hnsw {
            let points = frozen.buffer.points(self.dim);
            let host = self
                .segments
                .read()
                .iter()
                .filter(|segment| {
                    segment
                        .append_host()
                        .is_some_and(|host| host.can_append(points.len()))
                })
                .max_by_key(|segment| (segment.live_count(), segment.id()))
                .cloned();
            if let Some(host) = host {
                let appended = host.append_host().expect("an append host").append(
                    fs,
                    &self.directory,
                    id,
                    points,
                    &shape,
                )?;
                retired.push(host.id());
                return Ok((appended.segment, retired, Some((host, appended.carried))));
            }
            let segment = self.build_segment(fs, id, points, &schema)?;
            return Ok((segment, retired, None));
        }
        let segment = match self.finish_graph(&frozen.buffer)? {
            Some((graph, None)) => HnswSegment::from_graph(
                fs,
                &self.directory,
                id,
                graph,
                frozen.buffer.listing(),
                &shape,
            )?,
            Some((graph, Some(host))) => {
                let mut listing = host.graph_host().expect("a host has a graph").listing();
                listing.extend(frozen.buffer.listing());
                retired.push(host.id());
                HnswSegment::from_graph(fs, &self.directory, id, graph, listing, &shape)?
            }
            None => HnswSegment::build(
                fs,
                &self.directory,
                id,
                frozen.buffer.points(self.dim),
                &shape,
                None,
            )?,
        };
        Ok((Arc::new(segment), retired, None))
    }

    /// A new segment `id` of the shard's kind holding `points`.
    fn build_segment(
        &self,
        fs: &dyn FileSystem,
        id: u64,
        points: Vec<Point>,
        schema: &PayloadSchema,
    ) -> Result<SharedSegment> {
        let shape = self.shape(schema);
        segment::build(
            self.storage.kind,
            fs,
            &self.directory,
            id,
            points,
            &shape,
            None,
        )
    }

    /// The live segment whose graph `graph` extends, if any (a merge may have retired it).
    pub(super) fn host_of(&self, graph: &BufferGraph) -> Option<SharedSegment> {
        host_among(&self.segments.read(), graph)
    }

    /// The commit shared by seals and merges, under the writer lock: writes every kept
    /// segment's tombstones under a fresh epoch, publishes `next` with `added` in place of
    /// `retired`, swaps memory (a frozen buffer being sealed is dropped with it), then
    /// removes the files nothing references any more (best effort; open removes leftovers).
    pub(super) fn replace_segments(
        &self,
        fs: &dyn FileSystem,
        writer: &mut Writer,
        mut next: ShardManifest,
        added: Option<SharedSegment>,
        retired: &[u64],
    ) -> Result<()> {
        // Tombstones written here may stand for writes still unsynced in the live log (a
        // point superseded while the build ran): those writes must be durable first, or a
        // crash keeps the tombstone and loses the newer version — the point is then gone,
        // which no prefix of the log explains.
        writer.wal.sync()?;
        let epoch = next.tombstone_epoch + 1;
        let current = self.segments.read().clone();
        let kept: Vec<&SharedSegment> = current
            .iter()
            .filter(|segment| !retired.contains(&segment.id()))
            .chain(added.as_ref())
            .collect();
        next.segments = kept
            .iter()
            .map(|segment| {
                let saved = segment.save_tombstones(fs, &self.directory, epoch)?;
                Ok(ListedSegment {
                    id: segment.id(),
                    tombstones: saved.then_some(epoch),
                    kind: segment.kind(),
                    record_files: segment.record_files(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        next.tombstone_epoch = epoch;
        if let Some(added) = &added {
            next.next_segment_id = added.id() + 1;
        }
        if let Some(added) = &added {
            // the schema may have changed while it was being built
            added.sync_payload_indexes(&self.schema.read());
        }
        super::sync_dirs(fs, &self.stripes)?;
        let previous = self.publish_or_poison(fs, writer, next)?;
        {
            let mut live = self.segments.write();
            let mut frozen = self.frozen.write();
            live.retain(|segment| !retired.contains(&segment.id()));
            live.extend(added);
            *frozen = None;
        }
        let referenced = writer.manifest.referenced();
        for (stripe, name) in previous.referenced() {
            if !referenced.contains(&(stripe, name.clone())) {
                if let Some(directory) = self.stripes.get(stripe) {
                    let _ = remove_if_exists(fs, &directory.join(name));
                }
            }
        }
        Ok(())
    }

    /// Rebuilds the segments `ids` into one new segment of their live points (a merge of
    /// several small segments, or the vacuum of one with many deleted points), without
    /// stopping readers or writers during the build. Points deleted while it builds are
    /// deleted in the new segment before it is published. Returns the points kept.
    ///
    /// Several disk segments whose largest can take the others' points
    /// ([`crate::segment::AppendHost::can_append`]) are merged by appending those points
    /// to it, as a seal appends a buffer: the host's records stay where they are.
    pub fn merge(&self, fs: &dyn FileSystem, ids: &[u64]) -> Result<usize> {
        let one_at_a_time = self.maintenance.lock();
        if *one_at_a_time {
            return Ok(0);
        }
        let (id, sources) = {
            let writer = self.writer.lock();
            writer.check_poisoned(&self.directory)?;
            let sources: Vec<SharedSegment> = self
                .segments
                .read()
                .iter()
                .filter(|segment| ids.contains(&segment.id()))
                .cloned()
                .collect();
            (writer.manifest.next_segment_id, sources)
        };
        if sources.is_empty() {
            return Ok(0);
        }
        let (merged, origins) = self.build_merged(fs, id, &sources)?;
        let mut writer = self.writer.lock();
        writer.check_poisoned(&self.directory)?;
        if let Some(merged) = &merged {
            for (source, source_node, id) in &origins {
                if sources[*source].is_deleted_at(*source_node) {
                    merged.remove(id);
                }
            }
        }
        let kept = merged.as_ref().map_or(0, |merged| merged.live_count());
        let retired: Vec<u64> = sources.iter().map(|segment| segment.id()).collect();
        let next = writer.manifest.clone();
        self.replace_segments(fs, &mut writer, next, merged, &retired)?;
        Ok(kept)
    }

    /// The merge's new segment `id` (none when no point is live), and where each of its
    /// points came from: `(source, position there, id)`. The build places points in its
    /// own order, so a point deleted meanwhile is found in the new segment by id.
    #[allow(clippy::type_complexity)]
    fn build_merged(
        &self,
        fs: &dyn FileSystem,
        id: u64,
        sources: &[SharedSegment],
    ) -> Result<(Option<SharedSegment>, Vec<(usize, u32, PointId)>)> {
        let host = (sources.len() >= 2)
            .then(|| {
                (0..sources.len()).max_by_key(|s| (sources[*s].live_count(), sources[*s].id()))
            })
            .flatten()
            .filter(|host| sources[*host].append_host().is_some());
        let mut origins = Vec::new();
        let mut points = Vec::new();
        for (source, segment) in sources.iter().enumerate() {
            if Some(source) == host {
                continue;
            }
            for item in segment.live_points() {
                let (node, point) = item?;
                origins.push((source, node, point.id));
                points.push(point);
            }
        }
        let schema = self.schema.read().clone();
        if let Some(host) = host {
            let appender = sources[host].append_host().expect("an append host");
            if appender.can_append(points.len()) {
                let shape = self.shape(&schema);
                let appended = appender.append(fs, &self.directory, id, points, &shape)?;
                let carried = appended.carried.into_iter();
                origins.extend(carried.map(|(position, id)| (host, position, id)));
                return Ok((Some(appended.segment), origins));
            }
            // not worth an append: the host's points join the rebuild
            for item in sources[host].live_points() {
                let (node, point) = item?;
                origins.push((host, node, point.id));
                points.push(point);
            }
        }
        if points.is_empty() {
            return Ok((None, origins));
        }
        Ok((Some(self.build_segment(fs, id, points, &schema)?), origins))
    }
}
