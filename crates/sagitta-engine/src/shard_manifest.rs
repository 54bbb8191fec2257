//! The shard manifest (which log is live, which segments and tombstone files are current,
//! which logs an unfinished seal left to replay) and the file names it references; the
//! bytes are in docs/format.md, "Shard manifest".

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use sagitta_storage::codec::{DecodeError, Reader, Writer};
use sagitta_storage::fs::{remove_if_exists, FileSystem};

use crate::error::Result;
use crate::segment::{self, SegmentKindName};

/// What the shard manifest records.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct ShardManifest {
    /// The live log is `wal-<generation>.log`.
    pub generation: u64,
    pub next_segment_id: u64,
    /// The last number given to a set of tombstone files; each publication that writes
    /// tombstones takes the next one, so a referenced file is never overwritten.
    pub tombstone_epoch: u64,
    pub segments: Vec<ListedSegment>,
    /// Logs of a frozen buffer whose seal has not finished: replayed, in order, before the
    /// live log.
    pub replay_logs: Vec<u64>,
}

/// A segment the manifest lists.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ListedSegment {
    pub id: u64,
    /// Epoch of its tombstone file, if it has one.
    pub tombstones: Option<u64>,
    pub kind: SegmentKindName,
    /// A disk segment's records files (`segment-<n>.records`, by `n`), in the order its
    /// index numbers its extents: its own build's, or those of the segments it was
    /// appended to followed by its own. Empty for other kinds.
    pub record_files: Vec<u64>,
}

impl ListedSegment {
    #[cfg(test)]
    pub fn hnsw(id: u64, tombstones: Option<u64>) -> ListedSegment {
        ListedSegment {
            id,
            tombstones,
            kind: SegmentKindName::Hnsw,
            record_files: Vec::new(),
        }
    }

    /// The files of the segment (tombstones aside), each with its stripe (0: the shard's
    /// directory; records files may lie on others, [`segment::striped_file`]).
    fn file_names(&self) -> Vec<(usize, String)> {
        let mut names: Vec<(usize, String)> = segment::file_names(self.kind, self.id)
            .into_iter()
            .map(|name| (0, name))
            .collect();
        names.extend(
            self.record_files
                .iter()
                .map(|file| (segment::split_file(*file).1, segment::records_name(*file))),
        );
        names
    }
}

const SHARD_MANIFEST_VERSION: u8 = 4;
/// The version before disk segments listed their records files (each had its own).
const SHARD_MANIFEST_VERSION_ONE_RECORDS_FILE: u8 = 3;
/// The version before segment kinds were recorded (every segment HNSW).
const SHARD_MANIFEST_VERSION_HNSW_ONLY: u8 = 2;
const NO_TOMBSTONES: u64 = u64::MAX;

/// The fewest bytes a segment entry takes: id, tombstone epoch, and from version 3 kind
/// (version 4 adds the records files' count; counted as the kind is, in the entry's tail).
const SEGMENT_BYTES: usize = 8 + 8;
/// The bytes of a replay log entry: its generation.
const REPLAY_LOG_BYTES: usize = 8;

impl ShardManifest {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Writer::new();
        out.u8(SHARD_MANIFEST_VERSION)
            .u64(self.generation)
            .u64(self.next_segment_id)
            .u64(self.tombstone_epoch)
            .len_u32(self.segments.len(), "segments");
        for segment in &self.segments {
            out.u64(segment.id)
                .u64(segment.tombstones.unwrap_or(NO_TOMBSTONES))
                .u8(segment.kind.code())
                .len_u32(segment.record_files.len(), "records files")
                .u64s(segment.record_files.iter().copied());
        }
        out.len_u32(self.replay_logs.len(), "logs")
            .u64s(self.replay_logs.iter().copied());
        out.into_bytes()
    }

    /// Decodes a manifest payload, which must take every byte; a malformed one is an error
    /// naming the byte offset and the field.
    pub fn try_decode(bytes: &[u8]) -> Result<ShardManifest, DecodeError> {
        let mut reader = Reader::new(bytes);
        let version = reader.version_u8_of(
            "version",
            "shard manifest",
            &[
                SHARD_MANIFEST_VERSION_HNSW_ONLY,
                SHARD_MANIFEST_VERSION_ONE_RECORDS_FILE,
                SHARD_MANIFEST_VERSION,
            ],
        )?;
        let generation = reader.u64("generation")?;
        let next_segment_id = reader.u64("next_segment_id")?;
        let tombstone_epoch = reader.u64("tombstone_epoch")?;
        let segments = (0..reader.count_u32("segment count", SEGMENT_BYTES)?)
            .map(|_| {
                let id = reader.u64("segment id")?;
                let tombstones = reader.u64("segment tombstone_epoch")?;
                let kind = if version >= SHARD_MANIFEST_VERSION_ONE_RECORDS_FILE {
                    reader.code("segment kind", SegmentKindName::from_code)?
                } else {
                    SegmentKindName::Hnsw
                };
                let record_files = if version == SHARD_MANIFEST_VERSION {
                    (0..reader.count_u32("records file count", 8)?)
                        .map(|_| reader.u64("records file"))
                        .collect::<Result<Vec<_>, DecodeError>>()?
                } else if kind == SegmentKindName::Disk {
                    vec![id]
                } else {
                    Vec::new()
                };
                Ok(ListedSegment {
                    id,
                    tombstones: (tombstones != NO_TOMBSTONES).then_some(tombstones),
                    kind,
                    record_files,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let replay_logs = (0..reader.count_u32("replay log count", REPLAY_LOG_BYTES)?)
            .map(|_| reader.u64("replay log generation"))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        reader.expect_end("end of shard manifest")?;
        Ok(ShardManifest {
            generation,
            next_segment_id,
            tombstone_epoch,
            segments,
            replay_logs,
        })
    }

    /// File names (not paths) this manifest references, each with its stripe (0: the
    /// shard's directory).
    pub fn referenced(&self) -> HashSet<(usize, String)> {
        let mut names: HashSet<(usize, String)> = self
            .replay_logs
            .iter()
            .chain([&self.generation])
            .map(|generation| (0, wal_name(*generation)))
            .collect();
        for listed in &self.segments {
            names.extend(listed.file_names());
            if let Some(epoch) = listed.tombstones {
                names.insert((0, segment::tombstones_name(listed.id, epoch)));
            }
        }
        names
    }

    /// The names of the files this manifest references in the shard's own directory.
    pub fn referenced_files(&self) -> HashSet<String> {
        self.referenced()
            .into_iter()
            .filter(|(stripe, _)| *stripe == 0)
            .map(|(_, name)| name)
            .collect()
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

/// Removes the records files on the stripe directories (`stripes[1..]`) that `manifest`
/// does not reference: leftovers of a build that crashed before publishing.
pub(crate) fn remove_unreferenced_records(
    fs: &dyn FileSystem,
    stripes: &[PathBuf],
    manifest: &ShardManifest,
) -> Result<()> {
    let referenced = manifest.referenced();
    for (stripe, directory) in stripes.iter().enumerate().skip(1) {
        let mut removed = false;
        for path in fs.list(directory)? {
            let Some(name) = path.file_name().and_then(|name| name.to_str()) else {
                continue;
            };
            if name.starts_with("segment-") && !referenced.contains(&(stripe, name.to_string())) {
                removed |= remove_if_exists(fs, &path)?;
            }
        }
        if removed {
            fs.sync_dir(directory)?;
        }
    }
    Ok(())
}

pub(crate) fn wal_name(generation: u64) -> String {
    format!("wal-{generation}.log")
}

pub(crate) fn wal_path(directory: &Path, generation: u64) -> PathBuf {
    directory.join(wal_name(generation))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_bytes_are_the_documented_layout_and_round_trip() {
        let manifest = ShardManifest {
            generation: 3,
            next_segment_id: 5,
            tombstone_epoch: 2,
            segments: vec![
                ListedSegment::hnsw(1, None),
                ListedSegment {
                    id: 4,
                    tombstones: Some(2),
                    kind: SegmentKindName::Disk,
                    record_files: vec![3, 4],
                },
            ],
            replay_logs: vec![2],
        };
        let bytes = manifest.encode();
        let header = |version: u8| {
            let mut expected = vec![version];
            for word in [3u64, 5, 2] {
                expected.extend_from_slice(&word.to_le_bytes());
            }
            expected.extend_from_slice(&2u32.to_le_bytes());
            expected
        };
        let mut expected = header(SHARD_MANIFEST_VERSION);
        let entries: [(u64, u64, u8, &[u64]); 2] =
            [(1, NO_TOMBSTONES, 0u8, &[]), (4, 2, 1, &[3, 4])];
        for (id, tombstones, kind, files) in entries {
            expected.extend_from_slice(&u64::to_le_bytes(id));
            expected.extend_from_slice(&u64::to_le_bytes(tombstones));
            expected.push(kind);
            expected.extend_from_slice(&(files.len() as u32).to_le_bytes());
            for file in files {
                expected.extend_from_slice(&file.to_le_bytes());
            }
        }
        expected.extend_from_slice(&1u32.to_le_bytes());
        expected.extend_from_slice(&2u64.to_le_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(
            ShardManifest::try_decode(&bytes).ok(),
            Some(manifest.clone())
        );
        assert!(ShardManifest::try_decode(&[]).is_err());
        // version 2 (before kinds were recorded): every segment is HNSW
        let mut old = header(SHARD_MANIFEST_VERSION_HNSW_ONLY);
        for word in [1, NO_TOMBSTONES, 4, 2] {
            old.extend_from_slice(&u64::to_le_bytes(word));
        }
        old.extend_from_slice(&1u32.to_le_bytes());
        old.extend_from_slice(&2u64.to_le_bytes());
        let mut all_hnsw = manifest.clone();
        all_hnsw.segments[1].kind = SegmentKindName::Hnsw;
        all_hnsw.segments[1].record_files.clear();
        assert_eq!(ShardManifest::try_decode(&old).ok(), Some(all_hnsw));
        // version 3: a disk segment's one records file is its own
        let mut three = header(SHARD_MANIFEST_VERSION_ONE_RECORDS_FILE);
        for (id, tombstones, kind) in [(1, NO_TOMBSTONES, 0u8), (4, 2, 1)] {
            three.extend_from_slice(&u64::to_le_bytes(id));
            three.extend_from_slice(&u64::to_le_bytes(tombstones));
            three.push(kind);
        }
        three.extend_from_slice(&1u32.to_le_bytes());
        three.extend_from_slice(&2u64.to_le_bytes());
        let mut own_file = manifest.clone();
        own_file.segments[1].record_files = vec![4];
        assert_eq!(ShardManifest::try_decode(&three).ok(), Some(own_file));
        let names = manifest.referenced_files();
        for name in ["segment-3.records", "segment-4.records", "segment-4.ivf"] {
            assert!(names.contains(name), "{name}");
        }
        assert!(!names.contains("segment-1.records"));
    }

    #[test]
    fn malformed_manifests_name_the_offset_and_field() {
        let bytes = ShardManifest {
            segments: vec![ListedSegment::hnsw(1, None)],
            ..ShardManifest::default()
        }
        .encode();
        let error = ShardManifest::try_decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(
            error.to_string(),
            "at byte 50: replay log count: truncated (needs 4 bytes, 3 remain)"
        );
        let mut wrong_version = bytes.clone();
        wrong_version[0] = 1;
        assert!(ShardManifest::try_decode(&wrong_version)
            .unwrap_err()
            .to_string()
            .starts_with("at byte 0: version: shard manifest version 1;"));
        let mut wrong_kind = bytes.clone();
        wrong_kind[45] = 9;
        assert_eq!(
            ShardManifest::try_decode(&wrong_kind)
                .unwrap_err()
                .to_string(),
            "at byte 45: segment kind: unknown code 9"
        );
        let mut huge = bytes;
        huge[25..29].copy_from_slice(&u32::MAX.to_le_bytes());
        let error = ShardManifest::try_decode(&huge).unwrap_err();
        assert_eq!((error.offset, error.expected), (25, "segment count"));
    }
}
