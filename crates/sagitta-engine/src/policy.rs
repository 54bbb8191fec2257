//! The optimizer's policy: when a shard's write buffer is sealed into an HNSW segment and
//! when segments are merged or vacuumed. Plain data and rules, no threads
//! ([`crate::optimizer`] runs the work).
//!
//! Policy (per shard, first match wins):
//! 1. seal the buffer once it holds `seal_points` points, or any points after `seal_idle`
//!    without writes (so a collection becomes fully indexed soon after ingestion stops);
//! 2. vacuum a segment whose deleted points are at least `vacuum_min_deleted` and
//!    `vacuum_fraction` of it (rebuild it from its live points);
//! 3. rebuild a segment whose graph was built with another graph config than the
//!    collection's (after a `hnsw_config` update, or one from before graph configs);
//! 4. merge the smallest segments when there are more than `max_segments` (disk segments
//!    that can take the others' points are appended to first).

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub struct OptimizerPolicy {
    pub seal_points: usize,
    pub seal_idle: Duration,
    pub vacuum_min_deleted: usize,
    pub vacuum_fraction: f64,
    pub max_segments: usize,
    /// After a failed seal or merge, leave the collection alone this long.
    pub retry_after_error: Duration,
    /// The indexer starts a write buffer's graph once the buffer holds this many slots
    /// (SQ8 trains on the first 1,000 rows; a smaller graph traverses in f32).
    pub index_min_rows: usize,
}

impl Default for OptimizerPolicy {
    fn default() -> Self {
        OptimizerPolicy {
            seal_points: 20_000,
            seal_idle: Duration::from_millis(500),
            vacuum_min_deleted: 1_000,
            vacuum_fraction: 0.2,
            max_segments: 8,
            retry_after_error: Duration::from_secs(5),
            index_min_rows: 1_000,
        }
    }
}

/// One unit of optimizer work in a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Work {
    Seal,
    /// Rebuild these segments (by id) into one.
    Merge(Vec<u64>),
    /// Rebuild this segment, whose graph was built with another graph config than the
    /// collection's.
    Rebuild(u64),
}
