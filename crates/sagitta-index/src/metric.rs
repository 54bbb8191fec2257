//! Distance metrics. Internally every index ranks by a *distance* (lower is closer):
//! `-dot` for Dot and Cosine (vectors normalized on the way in), squared L2 for L2.
//! Scores returned to callers are similarities for Dot/Cosine and squared distances for L2.

use crate::error::{IndexError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Cosine,
    Dot,
    L2,
}

impl Metric {
    pub fn parse(name: &str) -> Result<Metric> {
        match name.to_ascii_lowercase().as_str() {
            "cosine" | "cos" | "angular" => Ok(Metric::Cosine),
            "dot" | "ip" | "inner_product" => Ok(Metric::Dot),
            "l2" | "euclid" | "euclidean" => Ok(Metric::L2),
            _ => Err(IndexError::UnknownMetric {
                name: name.to_string(),
            }),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Cosine => "cosine",
            Metric::Dot => "dot",
            Metric::L2 => "l2",
        }
    }

    pub(crate) fn code(self) -> u8 {
        match self {
            Metric::Cosine => 0,
            Metric::Dot => 1,
            Metric::L2 => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Result<Metric> {
        match code {
            0 => Ok(Metric::Cosine),
            1 => Ok(Metric::Dot),
            2 => Ok(Metric::L2),
            _ => Err(IndexError::format(format!("unknown metric code {code}"))),
        }
    }

    /// Converts an internal distance to the score callers see.
    #[inline]
    pub fn score_from_distance(self, distance: f32) -> f32 {
        match self {
            Metric::Cosine | Metric::Dot => -distance,
            Metric::L2 => distance,
        }
    }
}

/// Validates a row-major batch: dimension, finiteness. Returns the row count.
pub(crate) fn check_batch(vectors: &[f32], dim: usize) -> Result<usize> {
    check_width(vectors, dim)?;
    if let Some(position) = vectors.iter().position(|value| !value.is_finite()) {
        return Err(IndexError::NonFiniteValue {
            row: position / dim,
            position: position % dim,
        });
    }
    Ok(vectors.len() / dim)
}

/// Whether `row` is an *absent* row: a point without this vector, written as NaNs. Rows
/// are validated when they enter an index ([`check_batch_with_absent`]), so a NaN first
/// value means every value is NaN.
#[inline]
pub fn is_absent(row: &[f32]) -> bool {
    row.first().is_some_and(|value| value.is_nan())
}

/// [`check_batch`], admitting absent rows (every value NaN): an HNSW index stores them as
/// nodes it never links, so no search reaches them. A row with some NaNs is refused.
pub(crate) fn check_batch_with_absent(vectors: &[f32], dim: usize) -> Result<usize> {
    check_width(vectors, dim)?;
    for (row, values) in vectors.chunks_exact(dim).enumerate() {
        if is_absent(values) && values.iter().all(|value| value.is_nan()) {
            continue;
        }
        if let Some(position) = values.iter().position(|value| !value.is_finite()) {
            return Err(IndexError::NonFiniteValue { row, position });
        }
    }
    Ok(vectors.len() / dim)
}

fn check_width(vectors: &[f32], dim: usize) -> Result<()> {
    if dim == 0 || !vectors.len().is_multiple_of(dim) {
        return Err(IndexError::WrongVectorDimension {
            expected: dim,
            received: if dim == 0 { 0 } else { vectors.len() % dim },
        });
    }
    Ok(())
}

/// Writes `vector` normalized to unit length into `out` (a zero vector stays zero).
pub(crate) fn normalize_into(vector: &[f32], out: &mut [f32]) {
    let norm_squared = sagitta_kernels::kernels().norm_squared_f32;
    let mut norm = norm_squared(vector).sqrt();
    if !norm.is_finite() {
        // |x|² overflowed f32 (components above ~1e19): recompute in f64.
        #[allow(clippy::cast_possible_truncation)]
        let wide = vector
            .iter()
            .map(|v| f64::from(*v) * f64::from(*v))
            .sum::<f64>()
            .sqrt() as f32;
        norm = wide;
    }
    let inverse = if norm > 0.0 { 1.0 / norm } else { 0.0 };
    for (target, value) in out.iter_mut().zip(vector) {
        *target = value * inverse;
    }
}
