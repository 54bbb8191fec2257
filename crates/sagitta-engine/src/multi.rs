//! Multivectors (issue 16 §1): a point's vector in a multivector space is a matrix — one
//! or more rows of the space's dimension (a ColBERT-style token embedding per row) —
//! compared with a query matrix by *max_sim*, Qdrant's only comparator: for each query
//! row, its best similarity to any of the point's rows, summed over the query rows.
//!
//! Inside the engine a hit carries a distance, lower is closer ([`crate::query`]): the
//! negated sum for Cosine and Dot, and for Euclid the sum over query rows of the smallest
//! squared distance to a point row (the user sees its square root, as Qdrant does).
//! Cosine rows are stored unit-length, each on its own. Multivectors are scored exactly,
//! by a scan of the points that have one: no graph is built over them.

use crate::distance::Distance;

/// Most values (rows × dimension) one multivector may hold.
pub const MAX_MULTI_VALUES: usize = 1 << 20;

/// A multivector: `values.len() / dim` rows of `dim` finite values, at least one row.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MultiVector {
    dim: usize,
    values: Vec<f32>,
}

impl MultiVector {
    /// The multivector of `rows`, or why not: no rows, an empty row, rows of different
    /// lengths, a value not finite, too many values. Errors name the row and position.
    pub fn new(rows: &[Vec<f32>]) -> Result<MultiVector, String> {
        let Some(first) = rows.first() else {
            return Err("a multivector needs at least one row".to_string());
        };
        let dim = first.len();
        if dim == 0 {
            return Err("row 0 is empty".to_string());
        }
        let mut values = Vec::with_capacity(rows.len() * dim);
        for (index, row) in rows.iter().enumerate() {
            if row.len() != dim {
                return Err(format!(
                    "row {index} has {} values, row 0 has {dim}: rows must have one length",
                    row.len()
                ));
            }
            values.extend_from_slice(row);
        }
        MultiVector::from_values(dim, values)
    }

    /// The multivector of rows of `dim` values laid end to end in `values`.
    pub fn from_values(dim: usize, values: Vec<f32>) -> Result<MultiVector, String> {
        if dim == 0 || values.is_empty() || !values.len().is_multiple_of(dim) {
            return Err(format!(
                "{} values do not make whole rows of {dim}",
                values.len()
            ));
        }
        if values.len() > MAX_MULTI_VALUES {
            return Err(format!(
                "{} values, more than the limit of {MAX_MULTI_VALUES}",
                values.len()
            ));
        }
        if let Some(position) = values.iter().position(|value| !value.is_finite()) {
            return Err(format!(
                "row {} position {} is not a finite number",
                position / dim,
                position % dim
            ));
        }
        Ok(MultiVector { dim, values })
    }

    /// The width of a row.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.values.len() / self.dim
    }

    /// Never true: a multivector has at least one row.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Every value, row after row.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    pub fn rows(&self) -> impl Iterator<Item = &[f32]> {
        self.values.chunks_exact(self.dim)
    }

    /// Each row scaled to unit length (a zero row stays zero): how Cosine rows are stored.
    pub fn normalized(mut self) -> MultiVector {
        for row in self.values.chunks_exact_mut(self.dim) {
            let norm = row
                .iter()
                .map(|v| f64::from(*v) * f64::from(*v))
                .sum::<f64>()
                .sqrt();
            if norm > f64::EPSILON {
                #[allow(clippy::cast_possible_truncation)]
                let scale = (1.0 / norm) as f32;
                row.iter_mut().for_each(|value| *value *= scale);
            }
        }
        self
    }

    /// The max_sim distance from query `self` to `point` (same row width): lower is
    /// closer (see the module's convention). Cosine rows must be unit-length already.
    pub fn distance_to(&self, point: &MultiVector, distance: Distance) -> f32 {
        debug_assert_eq!(self.dim, point.dim);
        let mut total = 0.0f32;
        for query in self.rows() {
            let best = point.rows().map(|row| similarity(query, row, distance));
            total += best.fold(f32::NEG_INFINITY, f32::max);
        }
        // Euclid: the similarities are negated squared distances, so this is their sum
        -total
    }

    /// Heap bytes of the values.
    pub fn bytes(&self) -> usize {
        4 * self.values.len()
    }
}

/// One row pair's similarity, higher is closer: the dot product for Cosine (unit rows)
/// and Dot, the negated squared distance for Euclid.
fn similarity(a: &[f32], b: &[f32], distance: Distance) -> f32 {
    match distance {
        Distance::Cosine | Distance::Dot => a.iter().zip(b).map(|(x, y)| x * y).sum(),
        Distance::Euclid => -a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_sim_sums_each_query_rows_best_match() {
        let point = MultiVector::new(&[vec![1.0, 0.0], vec![0.0, 2.0]]).unwrap();
        let query = MultiVector::new(&[vec![1.0, 1.0], vec![3.0, 0.0]]).unwrap();
        assert_eq!(point.len(), 2);
        // Dot: row 0 best is 2 (with [0,2]), row 1 best is 3 (with [1,0])
        assert_eq!(query.distance_to(&point, Distance::Dot), -5.0);
        // Euclid: row 0 best squared distance 1, row 1 best 4
        assert_eq!(query.distance_to(&point, Distance::Euclid), 5.0);
        let unit = MultiVector::new(&[vec![3.0, 4.0], vec![0.0, 0.0]])
            .unwrap()
            .normalized();
        assert_eq!(unit.values(), &[0.6, 0.8, 0.0, 0.0]);
    }

    #[test]
    fn bad_matrices_are_refused_naming_the_fault() {
        assert!(MultiVector::new(&[])
            .unwrap_err()
            .contains("at least one row"));
        assert!(MultiVector::new(&[vec![]])
            .unwrap_err()
            .contains("row 0 is empty"));
        let ragged = MultiVector::new(&[vec![1.0, 2.0], vec![1.0]]).unwrap_err();
        assert!(ragged.contains("row 1 has 1 values"), "{ragged}");
        let nan = MultiVector::new(&[vec![1.0, 2.0], vec![1.0, f32::NAN]]).unwrap_err();
        assert!(nan.contains("row 1 position 1"), "{nan}");
        assert!(MultiVector::from_values(3, vec![1.0; 4]).is_err());
    }
}
