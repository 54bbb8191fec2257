//! The `best_score` and `sum_scores` strategies of `{"recommend": ..}`: every point is
//! scored against all the examples, as Qdrant defines the two (and qdrant-client's local
//! mode computes them), by an exact scan of the collection's points. Each example's score
//! is the distance's "higher is closer" form (the similarity for Cosine and Dot, minus the
//! squared distance for Euclid);
//! - `best_score`: with `p` the best score to a positive example and `n` to a negative
//!   one (`−∞` without any), `s(p)` when `p > n`, else `−s(n)`, where
//!   `s(x) = (x / (1 + |x|) + 1) / 2`;
//! - `sum_scores`: the sum of the scores to the positive examples minus the sum to the
//!   negative ones.
//!
//! Points are ranked by that score (ties by id); `offset`, `limit` and `score_threshold`
//! (at least) apply. The scan reads every live point, so these strategies cost O(points)
//! per query; the average-vector strategy uses the index.

use sagitta_engine::{Collection, Distance, Filter, PointId, ScoredPoint};

use crate::error::{ApiError, ApiResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScoreStrategy {
    BestScore,
    SumScores,
}

/// The examples of a scored recommendation, as vectors of the space searched.
pub(crate) struct ExampleScoring {
    pub strategy: ScoreStrategy,
    pub positive: Vec<Vec<f32>>,
    pub negative: Vec<Vec<f32>>,
}

/// What the scan returns: the page asked for.
pub(crate) struct Page<'a> {
    pub filter: Option<&'a Filter>,
    pub using: Option<&'a str>,
    pub limit: usize,
    pub offset: usize,
    pub score_threshold: Option<f32>,
}

fn normalized(vector: &[f32]) -> Vec<f32> {
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

/// An example's score for `vector`, higher is closer.
fn core_score(distance: Distance, example: &[f32], vector: &[f32]) -> f32 {
    let kernels = sagitta_kernels::kernels();
    match distance {
        Distance::Euclid => -(kernels.l2_squared_f32)(example, vector),
        Distance::Cosine | Distance::Dot => (kernels.dot_f32)(example, vector),
    }
}

fn scaled_sigmoid(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    0.5 * (x / (1.0 + x.abs()) + 1.0)
}

impl ExampleScoring {
    fn score(&self, distance: Distance, vector: &[f32]) -> f32 {
        let scores = |examples: &[Vec<f32>]| -> Vec<f32> {
            examples
                .iter()
                .map(|example| core_score(distance, example, vector))
                .collect()
        };
        let (positive, negative) = (scores(&self.positive), scores(&self.negative));
        match self.strategy {
            ScoreStrategy::BestScore => {
                let best =
                    |scores: &[f32]| scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let (positive, negative) = (best(&positive), best(&negative));
                if positive > negative {
                    scaled_sigmoid(positive)
                } else {
                    -scaled_sigmoid(negative)
                }
            }
            ScoreStrategy::SumScores => positive.iter().sum::<f32>() - negative.iter().sum::<f32>(),
        }
    }
}

impl ExampleScoring {
    /// The examples as the stored vectors they are scored against are: unit-length for
    /// Cosine.
    fn for_distance(&self, distance: Distance) -> ExampleScoring {
        let prepare = |examples: &[Vec<f32>]| -> Vec<Vec<f32>> {
            examples
                .iter()
                .map(|example| match distance {
                    Distance::Cosine => normalized(example),
                    Distance::Dot | Distance::Euclid => example.clone(),
                })
                .collect()
        };
        ExampleScoring {
            strategy: self.strategy,
            positive: prepare(&self.positive),
            negative: prepare(&self.negative),
        }
    }
}

/// The named vector `using` names (its number; `None` for a collection with one unnamed
/// vector) and its distance.
fn searched_space(
    collection: &Collection,
    using: Option<&str>,
) -> ApiResult<(Option<usize>, Distance)> {
    let spaces = collection.spaces();
    if !spaces.is_named() {
        return Ok((None, collection.config().distance));
    }
    let wanted = using.unwrap_or("");
    let index = spaces
        .index_of(wanted)
        .ok_or_else(|| crate::wire::unknown_vector_name("using", wanted))?;
    let distance = spaces
        .get(index)
        .map_or(Distance::Dot, |space| space.distance);
    Ok((Some(index), distance))
}

/// The page of points ranked by `scoring` (see the module).
pub(crate) fn scan(
    collection: &Collection,
    scoring: &ExampleScoring,
    page: &Page<'_>,
    name: &str,
) -> ApiResult<Vec<ScoredPoint>> {
    let spaces = collection.spaces();
    let (slice, distance) = searched_space(collection, page.using)?;
    let scoring = scoring.for_distance(distance);
    let points = collection
        .points()
        .map_err(|error| ApiError::from_engine(error, name))?;
    let mut scored: Vec<(f32, PointId, usize)> = Vec::new();
    for (at, point) in points.iter().enumerate() {
        let vector = match slice {
            Some(index) => match spaces.part(index, &point.vector) {
                Some(part) => part,
                None => continue,
            },
            None => point.vector.as_slice(),
        };
        if let Some(filter) = page.filter {
            let payload = point
                .payload
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok());
            if !filter.matches(&point.id, payload.as_ref()) {
                continue;
            }
        }
        let score = scoring.score(distance, vector);
        if page
            .score_threshold
            .is_none_or(|threshold| score >= threshold)
        {
            scored.push((score, point.id, at));
        }
    }
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut points: Vec<Option<sagitta_engine::Point>> = points.into_iter().map(Some).collect();
    Ok(scored
        .into_iter()
        .skip(page.offset)
        .take(page.limit)
        .filter_map(|(score, _, at)| {
            let point = points[at].take()?;
            Some(ScoredPoint {
                id: point.id,
                score,
                payload: point.payload,
                vector: point.vector,
                side: point.side,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_score_prefers_the_closer_side_and_sum_scores_subtracts() {
        let scoring = ExampleScoring {
            strategy: ScoreStrategy::BestScore,
            positive: vec![vec![1.0, 0.0]],
            negative: vec![vec![0.0, 1.0]],
        };
        // closer to the positive: s(1) = 0.75
        assert!((scoring.score(Distance::Dot, &[1.0, 0.0]) - 0.75).abs() < 1e-6);
        // closer to the negative: −s(2) = −5/6
        assert!((scoring.score(Distance::Dot, &[0.0, 2.0]) + 5.0 / 6.0).abs() < 1e-6);
        let sum = ExampleScoring {
            strategy: ScoreStrategy::SumScores,
            ..scoring
        };
        assert!((sum.score(Distance::Dot, &[3.0, 1.0]) - 2.0).abs() < 1e-6);
        // Euclid: minus the squared distance
        assert!((sum.score(Distance::Euclid, &[1.0, 0.0]) - 2.0).abs() < 1e-6);
        let only_negative = ExampleScoring {
            strategy: ScoreStrategy::BestScore,
            positive: vec![],
            negative: vec![vec![1.0, 0.0]],
        };
        assert!(only_negative.score(Distance::Dot, &[1.0, 0.0]) < 0.0);
    }
}
