//! What a search asks and what it returns, shared by every layer that answers one
//! (collection, shard, write buffer, segment): the request, the strategy, the hit, the
//! score convention and the default beam. Depends only on the value types of `point` and
//! `filter`, so every search path can use it without importing another.
//!
//! Score convention: inside the engine a hit carries a *distance*, lower is closer —
//! squared L2 for Euclid, the negated similarity for Cosine and Dot ([`hit_distance`]).
//! A user sees Qdrant's *score* ([`user_score`]): the similarity for Cosine and Dot
//! (higher is closer), the Euclidean distance for Euclid (lower is closer).

use crate::filter::Filter;
use crate::multi::MultiVector;
use crate::point::{Distance, Point, PointId, SideVector};
use crate::sparse::SparseVector;
use sagitta_index::limits::MAX_EF;

/// Search beam of the default strategy: at least this, and at least twice the top-k.
pub(crate) const SEGMENT_EF_MIN: usize = 128;

/// One search: the query vector and what to return.
#[derive(Clone, Copy, Debug)]
pub struct SearchRequest<'a> {
    pub vector: &'a [f32],
    pub limit: usize,
    /// Results to skip before the `limit` returned (paging).
    pub offset: usize,
    pub filter: Option<&'a Filter>,
    pub score_threshold: Option<f32>,
    pub strategy: Strategy,
    /// The named vector searched (Qdrant's `using`); `None` for the unnamed one.
    pub using: Option<&'a str>,
    /// A sparse query for the sparse vector `using` names; `vector` is then unused.
    pub sparse: Option<&'a SparseVector>,
    /// A multivector query for the multivector `using` names; `vector` is then unused.
    pub multi: Option<&'a MultiVector>,
}

/// How segments are searched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Strategy {
    /// HNSW with the default beam (at least 128 and twice the results wanted), or an
    /// exact scan when the filter is selective.
    #[default]
    Auto,
    /// HNSW with this beam width (`hnsw_ef`), raised to the results wanted if smaller.
    Beam(usize),
    /// Brute force over every point: exact results.
    Exact,
}

impl<'a> SearchRequest<'a> {
    /// Top-`limit` for `vector`, no filter, offset or threshold, default strategy.
    pub fn new(vector: &'a [f32], limit: usize) -> SearchRequest<'a> {
        SearchRequest {
            vector,
            limit,
            offset: 0,
            filter: None,
            score_threshold: None,
            strategy: Strategy::Auto,
            using: None,
            sparse: None,
            multi: None,
        }
    }
}

/// A search result.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoredPoint {
    pub id: PointId,
    /// Similarity for Cosine/Dot, Euclidean distance for Euclid.
    pub score: f32,
    pub payload: Option<String>,
    pub vector: Vec<f32>,
    /// The point's side vectors, as [`Point::side`].
    pub side: Vec<Option<SideVector>>,
}

/// A query against one side space ([`crate::spaces::SideSpace`]): a sparse vector
/// (scored by dot product over shared indices) or a multivector (max_sim by the space's
/// distance; Cosine queries already unit-length row by row).
#[derive(Clone, Copy, Debug)]
pub(crate) enum SideQuery<'a> {
    Sparse(&'a SparseVector),
    Multi(&'a MultiVector, Distance),
}

impl SideQuery<'_> {
    /// The engine distance (lower is closer) from the query to `vector`; `None` when it
    /// is no hit: a vector of another kind, or a sparse one sharing no index.
    pub fn distance_to(&self, vector: &SideVector) -> Option<f32> {
        match self {
            SideQuery::Sparse(query) => vector.as_sparse()?.dot(query).map(|score| -score),
            SideQuery::Multi(query, distance) => {
                let multi = vector.as_multi()?;
                (multi.dim() == query.dim()).then(|| query.distance_to(multi, *distance))
            }
        }
    }
}

impl Strategy {
    /// The beam a graph walk for the top `k` uses, or `None` for an exact scan: the
    /// default beam is `max(2k, 128)`; a chosen beam is raised to `k` if smaller.
    pub(crate) fn beam(self, k: usize) -> Option<usize> {
        match self {
            Strategy::Auto => Some((2 * k).max(SEGMENT_EF_MIN)),
            Strategy::Beam(ef) => Some(ef.max(k)),
            Strategy::Exact => None,
        }
    }
}

/// Segments a Qdrant shard keeps at the least: its `default_segment_number` is the
/// machine's core count, never below 2.
pub(crate) const QDRANT_MIN_SEGMENTS: usize = 2;

/// The beam a part of `size` points (of `total` in its shard) walks for a chosen `hnsw_ef`.
/// Qdrant's `hnsw_ef` is a per-segment beam, and a Qdrant shard splits its points over at
/// least [`QDRANT_MIN_SEGMENTS`] segments, each searched with that beam; SagittaDB merges
/// into fewer, larger segments. A part holding more than `1/QDRANT_MIN_SEGMENTS` of the
/// shard stands for that many of Qdrant's segments and walks with `hnsw_ef` times as many,
/// so a config ported from Qdrant does not lose recall (VectorDBBench on debian-minilm,
/// BENCHMARKS.md). Capped at `MAX_EF`.
pub(crate) fn segment_beam(ef: usize, size: usize, total: usize) -> usize {
    if total == 0 {
        return ef;
    }
    let segments = (QDRANT_MIN_SEGMENTS * size)
        .div_ceil(total)
        .clamp(1, QDRANT_MIN_SEGMENTS);
    ef.saturating_mul(segments).min(MAX_EF)
}

/// The default beam for a part of `size` points when the largest part of the shard has
/// `largest`: at least twice `k` and [`SEGMENT_EF_MIN`] for the largest, shrinking
/// with the square root of the size ratio for the others (never below `2k`).
pub(crate) fn auto_beam(k: usize, size: usize, largest: usize) -> usize {
    let full = (2 * k).max(SEGMENT_EF_MIN);
    if largest == 0 || size >= largest {
        return full;
    }
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let scaled = (full as f64 * (size as f64 / largest as f64).sqrt()).ceil() as usize;
    scaled.max(2 * k)
}

/// A search hit inside one shard: id, score, stored payload and vector.
pub(crate) struct ShardHit {
    pub distance: f32,
    pub point: Point,
}

/// A graph score as a shard distance: lower is closer (squared L2 as is, similarity
/// negated).
pub(crate) fn hit_distance(score: f32, distance: Distance) -> f32 {
    match distance {
        Distance::Euclid => score,
        Distance::Cosine | Distance::Dot => -score,
    }
}

/// A shard distance as the score a user sees (see the module's score convention). A NaN
/// stays NaN — the server refuses to send one — never a 0.
pub(crate) fn user_score(distance_value: f32, distance: Distance) -> f32 {
    match distance {
        Distance::Euclid => (if distance_value < 0.0 {
            0.0
        } else {
            distance_value
        })
        .sqrt(),
        Distance::Cosine | Distance::Dot => -distance_value,
    }
}

/// Whether a user `score` is at least as good as `threshold`: similarity ≥ threshold for
/// Cosine and Dot, distance ≤ threshold for Euclid.
pub(crate) fn within_threshold(score: f32, threshold: f32, distance: Distance) -> bool {
    match distance {
        Distance::Euclid => score <= threshold,
        Distance::Cosine | Distance::Dot => score >= threshold,
    }
}

#[cfg(test)]
mod tests {
    use super::{auto_beam, segment_beam, QDRANT_MIN_SEGMENTS};
    use sagitta_index::limits::MAX_EF;

    #[test]
    fn the_default_beam_narrows_with_the_square_root_of_a_part_size() {
        assert_eq!(auto_beam(10, 80_000, 80_000), 128);
        assert_eq!(auto_beam(10, 20_000, 80_000), 64);
        assert_eq!(auto_beam(10, 100, 80_000), 20); // never below 2k
        assert_eq!(auto_beam(100, 80_000, 80_000), 200);
        assert_eq!(auto_beam(10, 5, 0), 128);
    }

    #[test]
    fn a_chosen_beam_widens_for_a_part_holding_several_qdrant_segments() {
        assert_eq!(QDRANT_MIN_SEGMENTS, 2);
        // One segment holding the whole shard stands for Qdrant's two.
        assert_eq!(segment_beam(64, 100_000, 100_000), 128);
        // More than half of the shard: still two.
        assert_eq!(segment_beam(64, 50_001, 100_000), 128);
        // Half or less: Qdrant's own size, its own beam.
        assert_eq!(segment_beam(64, 50_000, 100_000), 64);
        assert_eq!(segment_beam(64, 10, 100_000), 64);
        // An empty shard or an empty part keeps the beam; the cap holds.
        assert_eq!(segment_beam(64, 0, 0), 64);
        assert_eq!(segment_beam(64, 0, 100), 64);
        assert_eq!(segment_beam(MAX_EF, 100, 100), MAX_EF);
    }
}
