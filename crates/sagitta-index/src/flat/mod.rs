//! Exact search: a SIMD scan over every stored vector, batched and multi-threaded.
//!
//! Estimate (100k × 384-d f32): one query alone reads 154 MB, 8 ms at ~19 GB/s;
//! batching 16 queries per pass over a 1,024-row tile (1.5 MB, L2-resident) divides the
//! memory traffic by 16 and leaves the scan compute-bound (~2 FMAs per byte read).

mod format;
mod search;

pub use search::SearchResults;

use crate::error::{IndexError, Result};
use crate::limits::{check_range, MAX_DIMENSION, MAX_POINTS};
use crate::metric::{check_batch, normalize_into, Metric};

/// An exact index. Vectors are stored row-major (normalized for cosine).
#[derive(Clone, Debug)]
pub struct FlatIndex {
    dim: usize,
    metric: Metric,
    vectors: Vec<f32>,
    labels: Vec<u64>,
}

impl FlatIndex {
    pub fn new(dim: usize, metric: Metric) -> Result<FlatIndex> {
        check_range("dim", dim, 1, MAX_DIMENSION)?;
        Ok(FlatIndex {
            dim,
            metric,
            vectors: Vec::new(),
            labels: Vec::new(),
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }
    pub fn metric(&self) -> Metric {
        self.metric
    }
    pub fn len(&self) -> usize {
        self.labels.len()
    }
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }
    pub fn labels(&self) -> &[u64] {
        &self.labels
    }
    /// Bytes held by vectors and labels.
    pub fn memory_bytes(&self) -> usize {
        self.vectors.capacity() * 4 + self.labels.capacity() * 8
    }

    /// Adds row-major `vectors` with `labels` (one per row). All-or-nothing: a bad row
    /// leaves the index unchanged.
    pub fn add(&mut self, vectors: &[f32], labels: &[u64]) -> Result<()> {
        let rows = check_batch(vectors, self.dim)?;
        if labels.len() != rows {
            return Err(IndexError::WrongIdCount {
                expected: rows,
                received: labels.len(),
            });
        }
        if self.labels.len() + rows > MAX_POINTS {
            return Err(IndexError::CapacityExceeded {
                capacity: MAX_POINTS,
            });
        }
        let start = self.vectors.len();
        self.vectors.extend_from_slice(vectors);
        if self.metric == Metric::Cosine {
            for row in self.vectors[start..].chunks_exact_mut(self.dim) {
                let copy = row.to_vec();
                normalize_into(&copy, row);
            }
        }
        self.labels.extend_from_slice(labels);
        Ok(())
    }

    /// The stored (normalized for cosine) vector of row `row`.
    pub fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dim..(row + 1) * self.dim]
    }
}
