//! The parts of a shard that hold its state between locks: the writer's side (live log,
//! manifest, poison) and a frozen buffer being sealed; and the encoding of points a payload
//! update carries into the log.

use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;

use parking_lot::Mutex;
use sagitta_storage::wal::{Wal, RECORD_BYTES_MAX};

use crate::buffer::Buffer;
use crate::codec::{self, Operation};
use crate::error::{EngineError, Result};
use crate::point::{Point, PointId};
use crate::shard_manifest::ShardManifest;

/// `points` as upsert records of at most a quarter of the log's record limit each (a
/// point is at most a 256 KiB vector plus a 1 MiB payload), encoded, with their points.
pub(crate) fn carried_records(points: Vec<Point>) -> Vec<(Vec<u8>, Vec<Point>)> {
    const CHUNK_BYTES: usize = RECORD_BYTES_MAX / 4;
    let mut chunks: Vec<Vec<Point>> = Vec::new();
    let mut bytes = CHUNK_BYTES;
    for point in points {
        let size = 64 + point.vector.len() * 4 + point.payload.as_ref().map_or(0, String::len);
        if bytes + size > CHUNK_BYTES {
            chunks.push(Vec::new());
            bytes = 0;
        }
        bytes += size;
        chunks.last_mut().expect("a chunk was started").push(point);
    }
    chunks
        .into_iter()
        .map(|points| {
            let operation = Operation::Upsert(points);
            let record = codec::encode(&operation);
            assert!(
                record.len() <= RECORD_BYTES_MAX,
                "a carried chunk fits a record"
            );
            let Operation::Upsert(points) = operation else {
                unreachable!()
            };
            (record, points)
        })
        .collect()
}

/// The writer's side: the live log and the manifest it belongs to.
pub(crate) struct Writer {
    pub(crate) wal: Wal,
    pub(crate) manifest: ShardManifest,
    /// Set when publishing a seal's manifest failed midway: which manifest the disk holds
    /// is unknown, so the shard refuses writes until it is reopened.
    pub(crate) poisoned: Option<String>,
    /// When the last write was applied (the optimizer seals idle buffers).
    pub(crate) last_write: Instant,
    /// The collection was dropped: writes are refused.
    pub(crate) dropped: bool,
}

impl Writer {
    pub(crate) fn new(wal: Wal, manifest: ShardManifest) -> Writer {
        Writer {
            wal,
            manifest,
            poisoned: None,
            last_write: Instant::now(),
            dropped: false,
        }
    }

    pub(crate) fn check_poisoned(&self, directory: &Path) -> Result<()> {
        if self.dropped {
            return Err(EngineError::CollectionNotFound {
                path: directory
                    .parent()
                    .unwrap_or(directory)
                    .display()
                    .to_string(),
            });
        }
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

/// A write buffer being sealed: read-only, searchable, minus the points later writes
/// superseded while the segment was being built.
pub(crate) struct Frozen {
    pub(crate) buffer: Buffer,
    pub(crate) removed: Mutex<HashSet<PointId>>,
}

impl Frozen {
    pub(crate) fn is_live(&self, id: &PointId) -> bool {
        self.buffer.slots.contains_key(id) && !self.removed.lock().contains(id)
    }

    /// Marks `id` superseded (in its graph too, so a graph walk skips it).
    pub(crate) fn remove(&self, id: &PointId) {
        self.take_slot(id);
    }

    /// Marks `id` superseded; returns its point if it was live here (for copy on write).
    pub(crate) fn take(&self, id: &PointId, dim: usize) -> Option<Point> {
        self.take_slot(id).map(|slot| self.buffer.point(slot, dim))
    }

    /// Marks `id` superseded; returns its slot if it was live here.
    pub(crate) fn take_slot(&self, id: &PointId) -> Option<usize> {
        let slot = *self.buffer.slots.get(id)?;
        if !self.removed.lock().insert(*id) {
            return None;
        }
        if let Some(graph) = &self.buffer.graph {
            graph.mark_slot_deleted(slot);
        }
        Some(slot)
    }
}
