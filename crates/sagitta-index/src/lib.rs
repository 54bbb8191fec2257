//! In-memory vector indexes for SagittaDB.
//!
//! * [`flat::FlatIndex`] — exact, batched, multi-threaded scan.
//! * [`hnsw::HnswIndex`] — HNSW graph in flat arrays, parallel build, concurrent insert and
//!   search, SQ8 traversal with exact re-scoring, a predicate hook for filters and deletes.
//!
//! Architecture invariant: this crate does no file I/O. Indexes serialize to any
//! `std::io::Write` and load from any `std::io::Read`; opening files is the caller's job.
//! Architecture invariant: no `unsafe` here; concurrent row stores come from `sagitta-kernels`.
#![deny(unsafe_code)]

pub mod disk;
pub mod error;
pub mod flat;
pub mod hnsw;
pub mod limits;
pub mod metric;
pub mod partition;
pub mod quantizer;
pub mod rabitq;
mod random;
mod serial;
mod threads;
mod top_k;
mod visited;

pub use error::IndexError;
pub use metric::Metric;

/// The label a missing result slot carries (fewer than k points matched).
pub const MISSING_ID: u64 = u64::MAX;
