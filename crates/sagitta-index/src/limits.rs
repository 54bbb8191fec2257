//! Every limit the indexes enforce, in one place. Checked at the API boundary with
//! [`check_range`], which returns [`IndexError::ParameterOutOfRange`] naming the parameter.

use crate::error::{IndexError, Result};

/// Largest vector dimension (Qdrant allows 65,536; a 16 K-dim f32 vector is 64 KiB).
pub const MAX_DIMENSION: usize = 65_536;
/// Largest `m` (links per node on upper layers; layer 0 holds `2 * m`).
pub const MAX_M: usize = 256;
/// Smallest `m`: with fewer than 2 links a graph degenerates into lists.
pub const MIN_M: usize = 2;
/// Largest `ef_construction`.
pub const MAX_EF_CONSTRUCTION: usize = 4_096;
/// Largest search `ef` (and `k`): the candidate heaps are sized by it.
pub const MAX_EF: usize = 32_768;
/// Largest number of points one index holds: internal ids are `u32`, `u32::MAX` is reserved.
pub const MAX_POINTS: usize = (u32::MAX - 1) as usize;
/// Highest HNSW layer; with m >= 2 the chance of reaching it is below 2^-32.
pub const MAX_LEVEL: usize = 31;
/// Largest thread count accepted by batch entry points.
pub const MAX_THREADS: usize = 4_096;

/// `value` within `min..=max`, or `ParameterOutOfRange` naming it (the engine's limits use
/// this check too).
pub fn check_range(name: &'static str, value: usize, min: usize, max: usize) -> Result<()> {
    if value < min || value > max {
        return Err(IndexError::ParameterOutOfRange {
            name,
            value,
            min,
            max,
        });
    }
    Ok(())
}
