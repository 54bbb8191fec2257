//! The manifest: the small file naming what is live. Published atomically: written to
//! `MANIFEST.tmp` and fsynced, renamed over `MANIFEST`, then the directory is fsynced. A
//! reader sees the old manifest or the new one, never a mix; a torn temporary file is
//! ignored. Layout: `magic "SAGMANI1" | version u32 | length u32 | crc32c u32 | reserved u32
//! | payload` (see docs/format.md).

use std::path::{Path, PathBuf};

use crate::error::{Result, StorageError};
use crate::fs::FileSystem;

const MAGIC: &[u8; 8] = b"SAGMANI1";
const FORMAT_VERSION: u32 = 1;
const HEADER_BYTES: usize = 24;
pub const MANIFEST_FILE: &str = "MANIFEST";
const TEMPORARY_FILE: &str = "MANIFEST.tmp";

fn paths(directory: &Path) -> (PathBuf, PathBuf) {
    (
        directory.join(MANIFEST_FILE),
        directory.join(TEMPORARY_FILE),
    )
}

/// Atomically replaces the manifest in `directory` with `payload`.
pub fn publish(fs: &dyn FileSystem, directory: &Path, payload: &[u8]) -> Result<()> {
    let (path, temporary) = paths(directory);
    let length = u32::try_from(payload.len()).map_err(|_| StorageError::RecordTooLarge {
        size: payload.len(),
        limit: u32::MAX as usize,
    })?;
    let mut bytes = Vec::with_capacity(HEADER_BYTES + payload.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&length.to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    bytes.extend_from_slice(&[0; 4]);
    bytes.extend_from_slice(payload);
    fs.write_synced(&temporary, &bytes)?;
    fs.rename(&temporary, &path)?;
    fs.sync_dir(directory)
}

/// The current manifest payload, `None` when none was ever published.
pub fn load(fs: &dyn FileSystem, directory: &Path) -> Result<Option<Vec<u8>>> {
    let (path, _) = paths(directory);
    let Some(bytes) = fs.read(&path)? else {
        return Ok(None);
    };
    let corrupt = |offset: u64, reason: &str| StorageError::Corrupt {
        path: path.clone(),
        offset,
        reason: reason.to_string(),
    };
    if bytes.len() < HEADER_BYTES || &bytes[0..8] != MAGIC {
        return Err(corrupt(0, "bad manifest magic"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(corrupt(
            8,
            &format!("manifest version {version} is not supported"),
        ));
    }
    if bytes[20..24] != [0; 4] {
        // outside the payload checksum: a flipped bit here went unnoticed before
        return Err(corrupt(20, "manifest reserved bytes are not zero"));
    }
    let length = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    if bytes.len() != HEADER_BYTES + length {
        return Err(corrupt(12, "manifest length does not match the file"));
    }
    let payload = &bytes[HEADER_BYTES..];
    if crc32c::crc32c(payload) != crc {
        return Err(corrupt(16, "manifest checksum mismatch"));
    }
    Ok(Some(payload.to_vec()))
}
