//! The vector a query compares in each point — the one `using` names ([`Slot`]), dense
//! or a side vector ([`Scored`]) — and the raw similarities MMR and the scored
//! recommendations compute between such vectors, summed in f64.

use sagitta_engine::{Distance, SideSpace, SideVector, VectorSpaces};

/// A point's vector in the space searched.
#[derive(Clone, Copy)]
pub(crate) enum Scored<'a> {
    Dense(&'a [f32]),
    Side(&'a SideVector),
}

/// Where the vector searched lies in a point.
#[derive(Clone, Copy)]
pub(crate) enum Slot {
    /// The one unnamed vector: the whole stored vector.
    Whole,
    /// A dense named vector (its number).
    Dense(usize),
    /// A sparse vector or multivector (its side-space number).
    Side(usize),
}

impl Slot {
    /// The vector `using` names among `spaces`, and its distance (Dot for a sparse
    /// vector; `unnamed` for a collection with one unnamed vector); `None` when there is
    /// no such vector.
    pub(crate) fn named(
        spaces: &VectorSpaces,
        unnamed: Distance,
        using: &str,
    ) -> Option<(Slot, Distance)> {
        if !spaces.is_named() {
            return Some((Slot::Whole, unnamed));
        }
        if let Some(index) = spaces.index_of(using) {
            return Some((Slot::Dense(index), spaces.get(index)?.distance));
        }
        let index = spaces.side_index_of(using)?;
        let distance = match &spaces.side()[index] {
            SideSpace::Multi(space) => space.distance,
            SideSpace::Sparse(_) => Distance::Dot,
        };
        Some((Slot::Side(index), distance))
    }

    /// This slot's vector of a point's stored vector and side list; `None` when the
    /// point has none there.
    pub(crate) fn of<'a>(
        self,
        spaces: &VectorSpaces,
        vector: &'a [f32],
        side: &'a [Option<SideVector>],
    ) -> Option<Scored<'a>> {
        match self {
            Slot::Whole => {
                (!sagitta_engine::spaces::is_absent(vector)).then_some(Scored::Dense(vector))
            }
            Slot::Dense(index) => spaces.part(index, vector).map(Scored::Dense),
            Slot::Side(index) => side.get(index)?.as_ref().map(Scored::Side),
        }
    }
}

/// `vector` scaled to unit length (a zero vector as it is), in f64.
pub(crate) fn normalized(vector: &[f32]) -> Vec<f32> {
    let norm = vector
        .iter()
        .map(|v| f64::from(*v) * f64::from(*v))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 {
        return vector.to_vec();
    }
    #[allow(clippy::cast_possible_truncation)]
    vector
        .iter()
        .map(|v| (f64::from(*v) / norm) as f32)
        .collect()
}

/// Two rows' similarity, summed in f64 (near ties between candidates are common, and
/// MMR's picks should not hang on f32 rounding).
pub(crate) fn rows(a: &[f32], b: &[f32], distance: Distance) -> f64 {
    let pairs = a.iter().zip(b).map(|(x, y)| (f64::from(*x), f64::from(*y)));
    match distance {
        Distance::Euclid => -pairs.map(|(x, y)| (x - y) * (x - y)).sum::<f64>(),
        Distance::Cosine | Distance::Dot => pairs.map(|(x, y)| x * y).sum(),
    }
}

/// Two vectors' raw similarity by `distance`, higher is closer; −∞ for vectors of
/// different kinds.
pub(crate) fn similarity(a: Scored<'_>, b: Scored<'_>, distance: Distance) -> f64 {
    match (a, b) {
        (Scored::Dense(a), Scored::Dense(b)) => rows(a, b, distance),
        (Scored::Side(a), Scored::Side(b)) => side_similarity(a, b, distance),
        _ => f64::NEG_INFINITY,
    }
}

/// Two side vectors' raw similarity, higher is closer: the sparse dot product over shared
/// indices (0 when none), or max_sim of `a`'s rows over `b`'s; −∞ for vectors of
/// different kinds or widths. Also the per-example score of a recommendation.
pub(crate) fn side_similarity(a: &SideVector, b: &SideVector, distance: Distance) -> f64 {
    match (a, b) {
        (SideVector::Sparse(a), SideVector::Sparse(b)) => a.dot(b).map_or(0.0, f64::from),
        (SideVector::Multi(a), SideVector::Multi(b)) if a.dim() == b.dim() => a
            .rows()
            .map(|q| {
                b.rows()
                    .map(|row| rows(q, row, distance))
                    .fold(f64::NEG_INFINITY, f64::max)
            })
            .sum(),
        _ => f64::NEG_INFINITY,
    }
}
