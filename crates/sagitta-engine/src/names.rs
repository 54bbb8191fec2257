//! Collection (and alias) names: one safe path component each.

use crate::error::{EngineError, Result};

/// Longest collection name.
pub const MAX_COLLECTION_NAME_BYTES: usize = 255;

/// Names are 1..=255 bytes of ASCII letters, digits, `_`, `-` and `.` (not `.` or `..`),
/// so a name is always one safe path component.
pub fn check_collection_name(name: &str) -> Result<()> {
    let valid = !name.is_empty()
        && name.len() <= MAX_COLLECTION_NAME_BYTES
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.');
    if valid {
        Ok(())
    } else {
        Err(EngineError::InvalidCollectionName {
            name: name.to_string(),
        })
    }
}
