//! Exact search: a SIMD scan over every stored vector, batched and multi-threaded.
//!
//! Estimate (100k × 384-d f32): one query alone reads 154 MB, 8 ms at ~19 GB/s;
//! batching 16 queries per pass over a 1,024-row tile (1.5 MB, L2-resident) divides the
//! memory traffic by 16 and leaves the scan compute-bound (~2 FMAs per byte read).

mod format;
mod search;

pub use search::SearchResults;

use std::collections::HashSet;

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
    /// The same labels as a set, for the uniqueness check.
    label_set: HashSet<u64>,
}

impl FlatIndex {
    pub fn new(dim: usize, metric: Metric) -> Result<FlatIndex> {
        check_range("dim", dim, 1, MAX_DIMENSION)?;
        Ok(FlatIndex {
            dim,
            metric,
            vectors: Vec::new(),
            labels: Vec::new(),
            label_set: HashSet::new(),
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
        self.vectors.capacity() * 4 + self.labels.capacity() * 8 + self.label_set.capacity() * 16
    }

    /// Labels must be new, distinct, and not [`crate::MISSING_ID`].
    fn check_labels(&self, labels: &[u64]) -> Result<()> {
        let mut seen = HashSet::with_capacity(labels.len());
        for label in labels {
            if *label == crate::MISSING_ID {
                return Err(IndexError::ReservedId { id: *label });
            }
            if self.label_set.contains(label) || !seen.insert(*label) {
                return Err(IndexError::DuplicateId { id: *label });
            }
        }
        Ok(())
    }

    /// Adds row-major `vectors` with `labels` (one per row). All-or-nothing: a bad row or a
    /// repeated label leaves the index unchanged.
    pub fn add(&mut self, vectors: &[f32], labels: &[u64]) -> Result<()> {
        let rows = check_batch(vectors, self.dim)?;
        if labels.len() != rows {
            return Err(IndexError::WrongIdCount {
                expected: rows,
                received: labels.len(),
            });
        }
        self.check_labels(labels)?;
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
        self.label_set.extend(labels.iter().copied());
        Ok(())
    }

    /// The stored (normalized for cosine) vector of row `row`.
    pub fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dim..(row + 1) * self.dim]
    }
}
