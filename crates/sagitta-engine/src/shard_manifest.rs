//! The shard manifest (which log is live, which segments and tombstone files are current,
//! which logs an unfinished seal left to replay) and the file names it references; the
//! bytes are in docs/format.md, "Shard manifest".

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use sagitta_storage::fs::{remove_if_exists, FileSystem};

use crate::error::Result;
use crate::segment;

/// What the shard manifest records.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ShardManifest {
    /// The live log is `wal-<generation>.log`.
    pub generation: u64,
    pub next_segment_id: u64,
    /// The last number given to a set of tombstone files; each publication that writes
    /// tombstones takes the next one, so a referenced file is never overwritten.
    pub tombstone_epoch: u64,
    /// (segment id, epoch of its tombstone file if it has one).
    pub segments: Vec<(u64, Option<u64>)>,
    /// Logs of a frozen buffer whose seal has not finished: replayed, in order, before the
    /// live log.
    pub replay_logs: Vec<u64>,
}

const SHARD_MANIFEST_VERSION: u8 = 2;
const NO_TOMBSTONES: u64 = u64::MAX;

/// Reads little-endian fields front to back.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
    fn u32(&mut self) -> Option<usize> {
        self.take().map(|bytes| u32::from_le_bytes(bytes) as usize)
    }
}

impl ShardManifest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![SHARD_MANIFEST_VERSION];
        out.extend_from_slice(&self.generation.to_le_bytes());
        out.extend_from_slice(&self.next_segment_id.to_le_bytes());
        out.extend_from_slice(&self.tombstone_epoch.to_le_bytes());
        out.extend_from_slice(
            &u32::try_from(self.segments.len())
                .expect("segments")
                .to_le_bytes(),
        );
        for (id, tombstones) in &self.segments {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&tombstones.unwrap_or(NO_TOMBSTONES).to_le_bytes());
        }
        out.extend_from_slice(
            &u32::try_from(self.replay_logs.len())
                .expect("logs")
                .to_le_bytes(),
        );
        for log in &self.replay_logs {
            out.extend_from_slice(&log.to_le_bytes());
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<ShardManifest> {
        let mut cursor = Cursor(bytes);
        if cursor.take::<1>()? != [SHARD_MANIFEST_VERSION] {
            return None;
        }
        let generation = cursor.u64()?;
        let next_segment_id = cursor.u64()?;
        let tombstone_epoch = cursor.u64()?;
        let segments = (0..cursor.u32()?)
            .map(|_| {
                let id = cursor.u64()?;
                let tombstones = cursor.u64()?;
                Some((id, (tombstones != NO_TOMBSTONES).then_some(tombstones)))
            })
            .collect::<Option<Vec<_>>>()?;
        let replay_logs = (0..cursor.u32()?)
            .map(|_| cursor.u64())
            .collect::<Option<Vec<_>>>()?;
        cursor.0.is_empty().then_some(ShardManifest {
            generation,
            next_segment_id,
            tombstone_epoch,
            segments,
            replay_logs,
        })
    }

    /// File names (not paths) this manifest references.
    pub fn referenced_files(&self) -> HashSet<String> {
        let mut names: HashSet<String> = self
            .replay_logs
            .iter()
            .chain([&self.generation])
            .map(|generation| wal_name(*generation))
            .collect();
        for (id, tombstones) in &self.segments {
            names.extend(segment::file_names(*id));
            if let Some(epoch) = tombstones {
                names.insert(segment::tombstones_name(*id, *epoch));
            }
        }
        names
    }
}

/// Removes the logs, segments and tombstone files `manifest` does not reference: leftovers
/// of a seal or merge that crashed before publishing, or of a cleanup cut short.
pub(crate) fn remove_unreferenced(
    fs: &dyn FileSystem,
    directory: &Path,
    manifest: &ShardManifest,
    existing: &[PathBuf],
) -> Result<()> {
    let referenced = manifest.referenced_files();
    let mut removed = false;
    for path in existing {
        let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
            continue;
        };
        let ours = name.starts_with("wal-") || name.starts_with("segment-");
        if ours && !referenced.contains(name) {
            removed |= remove_if_exists(fs, path)?;
        }
    }
    if removed {
        fs.sync_dir(directory)?;
    }
    Ok(())
}

pub(crate) fn wal_name(generation: u64) -> String {
    format!("wal-{generation}.log")
}

pub(crate) fn wal_path(directory: &Path, generation: u64) -> PathBuf {
    directory.join(wal_name(generation))
}
