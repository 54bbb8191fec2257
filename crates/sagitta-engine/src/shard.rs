//! One shard: a directory holding a manifest, a write-ahead log, sealed segments, and in
//! memory the write buffer the log feeds.
//!
//! The buffer keeps vectors in one contiguous array (slot-major) so an exact scan streams
//! memory: at 768-d a 10,000-point buffer is 31 MB and scans in ~2 ms per query on one core.
//! Sealing turns the buffer into an immutable HNSW segment (see [`Shard::seal`]).
//!
//! Invariant: every live point is in exactly one place, the buffer or one segment; a write
//! to a point that lives in a segment marks it deleted there first.

use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sagitta_storage::fs::{remove_if_exists, FileSystem};
use sagitta_storage::manifest;
use sagitta_storage::wal::{Wal, RECORD_BYTES_MAX};
use serde_json::Value;

use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::point::{Distance, Point, PointId};
use crate::segment::{self, Segment};

#[derive(Default)]
struct Buffer {
    slots: HashMap<PointId, usize>,
    ids: Vec<Option<PointId>>,
    vectors: Vec<f32>,
    /// Parsed once at apply time so filters never re-parse JSON.
    payloads: Vec<Option<Arc<Value>>>,
    free: Vec<usize>,
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

    fn apply(&mut self, operation: Operation, dim: usize) {
        match operation {
            Operation::Upsert(points) => {
                for point in points {
                    let slot = match self.slots.get(&point.id) {
                        Some(slot) => *slot,
                        None => {
                            let slot = self.free.pop().unwrap_or_else(|| {
                                self.ids.push(None);
                                self.payloads.push(None);
                                self.vectors.resize(self.vectors.len() + dim, 0.0);
                                self.ids.len() - 1
                            });
                            self.slots.insert(point.id, slot);
                            slot
                        }
                    };
                    self.ids[slot] = Some(point.id);
                    self.vectors[slot * dim..(slot + 1) * dim].copy_from_slice(&point.vector);
                    // Payloads were validated as JSON objects before they were logged.
                    self.payloads[slot] = point
                        .payload
                        .and_then(|text| serde_json::from_str(&text).ok())
                        .map(Arc::new);
                }
            }
            Operation::Delete(ids) => {
                for id in ids {
                    if let Some(slot) = self.slots.remove(&id) {
                        self.ids[slot] = None;
                        self.payloads[slot] = None;
                        self.free.push(slot);
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

/// A scored candidate; ordered so the heap's root is the worst kept.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct Candidate {
    /// Lower is closer.
    pub distance: f32,
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
            .then(self.slot.cmp(&other.slot))
    }
}

/// What the shard manifest records.
#[derive(Clone, Debug, Default, PartialEq)]
struct ShardManifest {
    /// The live log is `wal-<generation>.log`.
    generation: u64,
    next_segment_id: u64,
    /// (segment id, generation of its tombstone file if it has one).
    segments: Vec<(u64, Option<u64>)>,
}

const SHARD_MANIFEST_VERSION: u8 = 1;
const NO_TOMBSTONES: u64 = u64::MAX;

impl ShardManifest {
    fn encode(&self) -> Vec<u8> {
        let mut out = vec![SHARD_MANIFEST_VERSION];
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.next_segment_id.to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(self.segments.len())
                .expect("segments")
                .to_le_bytes(),
        );
        for (id, tombstones) in &self.segments {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&tombstones.unwrap_or(NO_TOMBSTONES).to_le_bytes());
        }
        out
    }

    fn decode(bytes: &[u8]) -> Option<ShardManifest> {
        let word = |at: usize| -> Option<u64> {
            Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
        };
        if bytes.first() != Some(&SHARD_MANIFEST_VERSION) {
            return None;
        }
        let count = u32::from_le_bytes(bytes.get(17..21)?.try_into().ok()?) as usize;
        if bytes.len() != 21 + count * 16 {
            return None;
        }
        let segments = (0..count)
            .map(|index| {
                let at = 21 + index * 16;
                let tombstones = word(at + 8)?;
                Some((
                    word(at)?,
                    (tombstones != NO_TOMBSTONES).then_some(tombstones),
                ))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(ShardManifest {
            generation: word(1)?,
            next_segment_id: word(9)?,
            segments,
        })
    }
}

fn wal_path(directory: &Path, generation: u64) -> PathBuf {
    directory.join(format!("wal-{generation}.log"))
}

/// The writer's side: the live log and the manifest it belongs to.
struct Writer {
    wal: Wal,
    manifest: ShardManifest,
    /// Set when publishing a seal's manifest failed midway: which manifest the disk holds
    /// is unknown, so the shard refuses writes until it is reopened.
    poisoned: Option<String>,
}

impl Writer {
    fn check_poisoned(&self, directory: &Path) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(sagitta_storage::StorageError::Poisoned {
                path: directory.to_path_buf(),
                cause: cause.clone(),
            }
            .into()),
            None => Ok(()),
        }
    }
}

pub(crate) struct Shard {
    dim: usize,
    distance: Distance,
    directory: PathBuf,
    writer: Mutex<Writer>,
    buffer: RwLock<Buffer>,
    segments: RwLock<Vec<Arc<Segment>>>,
}

/// A search hit inside one shard: id, score, stored payload and vector.
pub(crate) struct ShardHit {
    pub distance: f32,
    pub point: Point,
}

impl Shard {
    /// Opens the shard directory: loads the manifest's segments and tombstones, then
    /// replays the live log on top.
    pub fn open(
        fs: &dyn FileSystem,
        directory: &Path,
        dim: usize,
        distance: Distance,
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
            .map(|(id, tombstones)| Segment::load(fs, directory, *id, *tombstones).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let path = wal_path(directory, manifest.generation);
        let (wal, recovery) = Wal::open(fs, &path, 1)?;
        let shard = Shard {
            dim,
            distance,
            directory: directory.to_path_buf(),
            writer: Mutex::new(Writer {
                wal,
                manifest,
                poisoned: None,
            }),
            buffer: RwLock::new(Buffer::default()),
            segments: RwLock::new(segments),
        };
        for record in recovery.records {
            let operation = codec::decode(&record.payload).ok_or_else(|| EngineError::Corrupt {
                reason: format!(
                    "{}: record {} passed its checksum but does not decode",
                    path.display(),
                    record.sequence
                ),
            })?;
            shard.apply(operation);
        }
        Ok(shard)
    }

    /// Applies a logged operation: points it touches that live in a segment leave it
    /// (marked deleted; payload updates carry the point into the buffer first).
    fn apply(&self, operation: Operation) {
        let segments = self.segments.read();
        let mut buffer = self.buffer.write();
        if !segments.is_empty() {
            match &operation {
                Operation::Upsert(points) => {
                    for point in points {
                        segments
                            .iter()
                            .for_each(|segment| segment.remove(&point.id));
                    }
                }
                Operation::Delete(ids) => {
                    for id in ids {
                        segments.iter().for_each(|segment| segment.remove(id));
                    }
                }
                Operation::SetPayload { ids, .. }
                | Operation::OverwritePayload { ids, .. }
                | Operation::DeletePayloadKeys { ids, .. } => {
                    let moved: Vec<Point> = ids
                        .iter()
                        .filter_map(|id| segments.iter().find_map(|segment| segment.take(id)))
                        .collect();
                    if !moved.is_empty() {
                        buffer.apply(Operation::Upsert(moved), self.dim);
                    }
                }
            }
        }
        buffer.apply(operation, self.dim);
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
        writer.wal.append(&[&record])?;
        if wait {
            writer.wal.sync()?;
        }
        self.apply(operation);
        Ok(())
    }

    /// Seals the write buffer into a new HNSW segment. Writers wait meanwhile; readers do
    /// not (they keep searching the buffer until the swap). Crash-safe order: segment and
    /// tombstone files and the new empty log are written and synced, then the shard
    /// manifest naming them is published atomically, then memory swaps and the old log is
    /// removed. A crash before the publish leaves the old manifest, log and segments.
    /// Afterwards every acknowledged write of this shard is durable. Returns the number of
    /// points sealed.
    pub fn seal(&self, fs: &dyn FileSystem) -> Result<usize> {
        let mut writer = self.writer.lock();
        writer.check_poisoned(&self.directory)?;
        let points = self.buffer.read().points(self.dim);
        if points.is_empty() {
            // Nothing to seal, but the log may hold acknowledged, unsynced deletes of sealed
            // points: after a seal every acknowledged write is durable, here too.
            writer.wal.sync()?;
            return Ok(0);
        }
        let sealed = points.len();
        let mut next = writer.manifest.clone();
        let generation = next.generation + 1;
        let id = next.next_segment_id;
        let segment = Segment::build(fs, &self.directory, id, points, self.dim, self.distance)?;
        let segments = self.segments.read().clone();
        next.segments = segments
            .iter()
            .map(|old| {
                let saved = old.save_tombstones(fs, &self.directory, generation)?;
                Ok((old.id, saved.then_some(generation)))
            })
            .collect::<Result<Vec<_>>>()?;
        next.segments.push((id, None));
        next.generation = generation;
        next.next_segment_id = id + 1;
        let first_sequence = writer.wal.next_sequence();
        // A seal that crashed before publishing may have left this log behind: start clean.
        let new_log = wal_path(&self.directory, generation);
        remove_if_exists(fs, &new_log)?;
        let (wal, _) = Wal::open(fs, &new_log, first_sequence)?;
        fs.sync_dir(&self.directory)?;
        if let Err(error) = manifest::publish(fs, &self.directory, &next.encode()) {
            // The rename may have happened without being made durable: the disk holds the
            // old manifest or the new one. Writing on to the old log could be lost either way.
            writer.poisoned = Some(error.to_string());
            return Err(error.into());
        }

        let previous = std::mem::replace(&mut writer.manifest, next);
        writer.wal = wal;
        {
            let mut live = self.segments.write();
            let mut buffer = self.buffer.write();
            live.push(Arc::new(segment));
            *buffer = Buffer::default();
        }
        drop(writer);
        // Best effort: the old log and tombstone files are no longer referenced.
        let _ = remove_if_exists(fs, &wal_path(&self.directory, previous.generation));
        for (old, tombstones) in previous.segments {
            if let Some(generation) = tombstones {
                let _ = remove_if_exists(
                    fs,
                    &segment::tombstones_path(&self.directory, old, generation),
                );
            }
        }
        Ok(sealed)
    }

    /// Points in sealed segments and in the write buffer.
    pub fn point_counts(&self) -> (usize, usize) {
        let segments = self.segments.read();
        let sealed = segments.iter().map(|s| s.live_ids(None).count()).sum();
        (sealed, self.buffer.read().slots.len())
    }

    /// Points passing `filter` (all points without one).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        self.matching_ids(filter).len()
    }

    /// Ids of the points passing `filter`, unordered.
    pub fn matching_ids(&self, filter: Option<&Filter>) -> Vec<PointId> {
        let segments = self.segments.read();
        let buffer = self.buffer.read();
        let mut ids: Vec<PointId> = buffer
            .slots
            .iter()
            .filter(|(id, slot)| {
                filter.is_none_or(|f| f.matches(id, buffer.payloads[**slot].as_deref()))
            })
            .map(|(id, _)| *id)
            .collect();
        for segment in segments.iter() {
            ids.extend(segment.live_ids(filter));
        }
        ids
    }

    pub fn get(&self, id: &PointId) -> Option<Point> {
        let segments = self.segments.read();
        let buffer = self.buffer.read();
        match buffer.slots.get(id) {
            Some(slot) => Some(buffer.point(*slot, self.dim)),
            None => segments.iter().find_map(|segment| segment.get(id)),
        }
    }

    /// Every live point: sealed ones, then the buffer's.
    pub fn points(&self) -> Vec<Point> {
        let segments = self.segments.read();
        let buffer = self.buffer.read();
        let mut points: Vec<Point> = segments.iter().flat_map(|s| s.points()).collect();
        points.extend(buffer.points(self.dim));
        points
    }

    /// Top-`k` among points passing `filter`: exact over the buffer, HNSW over each
    /// segment. `query` is already normalized for Cosine.
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<ShardHit>> {
        let segments = self.segments.read();
        let buffer = self.buffer.read();
        let mut hits = buffer.search(query, k, filter, self.dim, self.distance);
        for segment in segments.iter() {
            for (distance, point) in segment.search(query, k, filter, self.distance)? {
                hits.push(ShardHit { distance, point });
            }
        }
        Ok(hits)
    }
}

impl Buffer {
    fn point(&self, slot: usize, dim: usize) -> Point {
        Point {
            id: self.ids[slot].expect("live slot"),
            vector: self.vectors[slot * dim..(slot + 1) * dim].to_vec(),
            payload: self.payloads[slot].as_deref().map(Value::to_string),
        }
    }

    fn points(&self, dim: usize) -> Vec<Point> {
        self.ids
            .iter()
            .enumerate()
            .filter(|(_, id)| id.is_some())
            .map(|(slot, _)| self.point(slot, dim))
            .collect()
    }

    /// Exact top-`k` by scanning the buffer.
    fn search(
        &self,
        query: &[f32],
        k: usize,
        filter: Option<&Filter>,
        dim: usize,
        distance: Distance,
    ) -> Vec<ShardHit> {
        let kernels = sagitta_kernels::kernels();
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::with_capacity(k + 1);
        for (slot, id) in self.ids.iter().enumerate() {
            let Some(id) = id else {
                continue;
            };
            if filter.is_some_and(|f| !f.matches(id, self.payloads[slot].as_deref())) {
                continue;
            }
            let row = &self.vectors[slot * dim..(slot + 1) * dim];
            let candidate = match distance {
                Distance::Euclid => (kernels.l2_squared_f32)(query, row),
                Distance::Cosine | Distance::Dot => -(kernels.dot_f32)(query, row),
            };
            if heap.len() < k {
                heap.push(Candidate {
                    distance: candidate,
                    slot,
                });
            } else if let Some(mut worst) = heap.peek_mut() {
                if candidate < worst.distance {
                    *worst = Candidate {
                        distance: candidate,
                        slot,
                    };
                }
            }
        }
        heap.into_sorted_vec()
            .into_iter()
            .map(|candidate| ShardHit {
                distance: candidate.distance,
                point: self.point(candidate.slot, dim),
            })
            .collect()
    }
}
