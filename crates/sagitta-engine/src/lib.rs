//! The SagittaDB engine (first slice of issue 3): collections of points
//! `{id: u64 | UUID, vector, payload JSON}` split over shards by a hash of the id; each shard
//! has its own write-ahead log and an in-memory mutable buffer that is searchable as soon as
//! a write is acknowledged. Recovery replays each shard's log.
//!
//! Filters (Qdrant's grammar) apply to search, count, scroll and delete. `optimize` seals
//! write buffers into immutable HNSW segments.
//!
//! Not yet here (next slices of issue 3): a background optimizer with status, segment
//! merging and vacuum, payload indexes, bulk import.
//!
//! Architecture invariant: a write is applied in memory only after its WAL record is
//! appended (and, with `wait`, synced), under the shard's log lock, so memory state is
//! always a prefix of the log — exactly what replay rebuilds.
#![deny(unsafe_code)]

mod buffer;
pub mod codec;
pub mod collection;
pub mod database;
pub mod error;
pub mod filter;
pub mod optimizer;
pub mod payload_index;
pub mod point;
mod segment;
mod shard;

pub use collection::{
    Collection, CollectionConfig, CollectionStatus, Health, ImportReport, ScoredPoint,
    SearchRequest, Strategy,
};
pub use database::Database;
pub use error::EngineError;
pub use filter::Filter;
pub use optimizer::OptimizerPolicy;
pub use payload_index::{FieldType, PayloadSchema};
pub use point::{Distance, Point, PointId};
