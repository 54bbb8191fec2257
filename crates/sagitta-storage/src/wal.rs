//! Write-ahead log: one file of CRC32C-checked records with consecutive sequence numbers.
//!
//! File layout (see docs/format.md, "Write-ahead log"): a 24-byte header
//! `magic "SAGWAL01" | first_sequence u64 | version u32 | crc32c u32 (of bytes 0..20)`,
//! then records `length u32 | crc32c u32 (of sequence ‖ payload) | sequence u64 | payload`.
//!
//! Group commit: [`Wal::append`] writes a whole batch of records with one write, and
//! [`Wal::sync`] makes everything appended durable with one fdatasync, so a batch of 1,000
//! points costs one fsync. On open, records are read until the first one that is torn
//! (short), fails its checksum, or breaks the sequence; the file is truncated there.

use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::error::{Result, StorageError};
use crate::fs::{AppendFile, FileSystem};

const MAGIC: &[u8; 8] = b"SAGWAL01";
const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 24;
const RECORD_HEADER_BYTES: usize = 16;
// The layouts in the module docs: magic, first sequence, version, checksum; length,
// checksum, sequence.
const _: () = assert!(HEADER_BYTES == 8 + 8 + 4 + 4);
const _: () = assert!(RECORD_HEADER_BYTES == 4 + 4 + 8);
/// Largest record payload: 64 MiB (a 1,000-point batch of 1,536-d f32 vectors is 6 MB).
pub const RECORD_BYTES_MAX: usize = 64 << 20;

/// A record recovered from the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub sequence: u64,
    pub payload: Vec<u8>,
}

/// What opening found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The sequence of the log's first record (from its header; the one given to
    /// [`Wal::open`] for a new log).
    pub first_sequence: u64,
    pub records: Vec<Record>,
    /// Bytes cut from the end (a torn or corrupt tail); 0 for a clean log.
    pub truncated_bytes: u64,
}

pub struct Wal {
    path: PathBuf,
    file: Box<dyn AppendFile>,
    next_sequence: u64,
    /// Set after an I/O error: the file's tail is unknown, so nothing more is written.
    poisoned: Option<String>,
}

fn header(first_sequence: u64) -> [u8; HEADER_BYTES] {
    let mut bytes = [0u8; HEADER_BYTES];
    bytes[0..8].copy_from_slice(MAGIC);
    bytes[8..16].copy_from_slice(&first_sequence.to_le_bytes());
    bytes[16..20].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..20]);
    bytes[20..24].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn record_crc(sequence: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&sequence.to_le_bytes()), payload)
}

impl Wal {
    /// Opens (or creates) the log at `path`, returning the intact records. A new log starts
    /// at sequence `first_sequence`; the file's directory entry is made durable.
    pub fn open(fs: &dyn FileSystem, path: &Path, first_sequence: u64) -> Result<(Wal, Recovery)> {
        let bytes = fs.read(path)?.unwrap_or_default();
        if bytes.len() < HEADER_BYTES {
            // Missing, or torn while the header itself was being written: start fresh.
            fs.write_synced(path, &header(first_sequence))?;
            if let Some(directory) = path.parent() {
                fs.sync_dir(directory)?;
            }
            let file = fs.open_append(path)?;
            let wal = Wal {
                path: path.to_path_buf(),
                file,
                next_sequence: first_sequence,
                poisoned: None,
            };
            return Ok((
                wal,
                Recovery {
                    first_sequence,
                    records: Vec::new(),
                    truncated_bytes: bytes.len() as u64,
                },
            ));
        }
        let stored_crc = u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes"));
        if &bytes[0..8] != MAGIC || crc32c::crc32c(&bytes[..20]) != stored_crc {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                reason: "bad write-ahead log header (magic or checksum)".to_string(),
            });
        }
        let version = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
        if version != FORMAT_VERSION {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                offset: 16,
                reason: format!("write-ahead log version {version} is not supported"),
            });
        }
        let stored_first = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
        let mut next_sequence = stored_first;
        let mut records = Vec::new();
        let mut offset = HEADER_BYTES;
        while let Some(record) = parse_record(&bytes[offset..], next_sequence) {
            offset += RECORD_HEADER_BYTES + record.payload.len();
            next_sequence += 1;
            records.push(record);
        }
        let truncated_bytes = (bytes.len() - offset) as u64;
        if truncated_bytes > 0 {
            fs.truncate(path, offset as u64)?;
        }
        let file = fs.open_append(path)?;
        Ok((
            Wal {
                path: path.to_path_buf(),
                file,
                next_sequence,
                poisoned: None,
            },
            Recovery {
                first_sequence: stored_first,
                records,
                truncated_bytes,
            },
        ))
    }

    /// The sequence number the next record will get.
    pub fn next_sequence(&self) -> u64 {
        self.next_sequence
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes in the file (durable or not).
    pub fn len_bytes(&self) -> u64 {
        self.file.len()
    }

    /// Why the log refuses writes (the I/O error that poisoned it), if it does.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(cause) => Err(StorageError::Poisoned {
                path: self.path.clone(),
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    fn poison(&mut self, error: StorageError) -> StorageError {
        self.poisoned = Some(error.to_string());
        error
    }

    /// Appends `payloads` as consecutive records with one write; returns their sequence
    /// numbers. Not durable until [`Wal::sync`]. All or nothing in memory: an oversized
    /// payload is rejected before anything is written.
    pub fn append(&mut self, payloads: &[&[u8]]) -> Result<Range<u64>> {
        self.check_poisoned()?;
        if let Some(payload) = payloads.iter().find(|p| p.len() > RECORD_BYTES_MAX) {
            return Err(StorageError::RecordTooLarge {
                size: payload.len(),
                limit: RECORD_BYTES_MAX,
            });
        }
        let total: usize = payloads.iter().map(|p| RECORD_HEADER_BYTES + p.len()).sum();
        let mut buffer = Vec::with_capacity(total);
        let first = self.next_sequence;
        for (offset, payload) in payloads.iter().enumerate() {
            let sequence = first + offset as u64;
            let length = u32::try_from(payload.len()).expect("<= RECORD_BYTES_MAX");
            buffer.extend_from_slice(&length.to_le_bytes());
            buffer.extend_from_slice(&record_crc(sequence, payload).to_le_bytes());
            buffer.extend_from_slice(&sequence.to_le_bytes());
            buffer.extend_from_slice(payload);
        }
        if let Err(error) = self.file.append(&buffer) {
            return Err(self.poison(error));
        }
        self.next_sequence += payloads.len() as u64;
        Ok(first..self.next_sequence)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check_poisoned()?;
        self.file.sync().map_err(|error| self.poison(error))
    }
}

/// Parses one record expected to carry `sequence`; `None` at a torn, corrupt or
/// out-of-sequence record (the end of the usable log).
fn parse_record(bytes: &[u8], sequence: u64) -> Option<Record> {
    if bytes.len() < RECORD_HEADER_BYTES {
        return None;
    }
    let length = u32::from_le_bytes(bytes[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let found_sequence = u64::from_le_bytes(bytes[8..16].try_into().ok()?);
    if length > RECORD_BYTES_MAX || bytes.len() < RECORD_HEADER_BYTES + length {
        return None;
    }
    let payload = &bytes[RECORD_HEADER_BYTES..RECORD_HEADER_BYTES + length];
    if found_sequence != sequence || record_crc(sequence, payload) != crc {
        return None;
    }
    Some(Record {
        sequence,
        payload: payload.to_vec(),
    })
}
