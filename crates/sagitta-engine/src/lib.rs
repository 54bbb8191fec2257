//! The SagittaDB engine: databases of collections of points
//! `{id: u64 | UUID, vector, payload JSON}` split over shards by a hash of the id; each shard
//! has its own write-ahead log, a write buffer searchable as soon as a write is
//! acknowledged (its HNSW graph grown behind the writes), and immutable HNSW segments.
//! Recovery replays each shard's log on top of its manifest's segments.
//!
//! Filters (Qdrant's grammar) apply to search, count, scroll, delete and payload updates;
//! payload indexes narrow them. Background threads index write buffers and seal, merge and
//! vacuum segments (`optimizer`); `Database::import_collection` bulk loads a new collection
//! all at once.
//!
//! Architecture invariant: a write is applied in memory only after its WAL record is
//! appended (and, with `wait`, synced), under the shard's log lock, so memory state is
//! always a prefix of the log — exactly what replay rebuilds.
#![deny(unsafe_code)]

pub mod aliases;
mod buffer;
pub mod codec;
pub mod collection;
pub mod database;
pub mod datetime;
mod distance;
pub mod error;
pub mod filter;
pub mod fulltext;
pub mod fusion;
pub mod geo;
pub mod graph;
pub mod machine;
pub mod multi;
mod names;
pub mod optimizer;
pub mod payload_index;
pub mod point;
pub mod policy;
pub mod query;
mod segment;
mod shard;
mod shard_manifest;
mod shard_state;
pub mod spaces;
pub mod sparse;
pub mod topology;

pub use aliases::AliasAction;
pub use collection::{
    Collection, CollectionConfig, CollectionStatus, Datatype, Health, ImportProgress, ImportReport,
    ImportSource, SegmentKindName, StorageConfig, DEFAULT_PARTITION_SIZE,
};
pub use database::Database;
pub use error::EngineError;
pub use filter::Filter;
pub use graph::{GraphConfig, DEFAULT_GRAPH};
pub use machine::{Machine, Placement};
pub use multi::MultiVector;
pub use payload_index::{FieldType, PayloadSchema};
pub use point::{Distance, Point, PointId, SideVector};
pub use policy::OptimizerPolicy;
pub use query::{ScoredPoint, SearchRequest, Strategy};
pub use spaces::{MultiSpace, SideSpace, SparseSpace, VectorSpace, VectorSpaces};
pub use sparse::SparseVector;
