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
//!
//! Sparse vectors and multivectors are recommended too. An example's score is then their
//! raw similarity ([`crate::similarity::side_similarity`]: the sparse dot product, 0 without a
//! shared index; max_sim of the example's rows). The average-vector strategy searches
//! with the average of the positive sparse examples (2 × average − the negatives'
//! average, index by index, with negatives), or with the positive multivectors' rows
//! followed by the negatives' rows negated ([`side_average`]), as qdrant-client's local
//! mode does.

use std::collections::BTreeMap;

use sagitta_engine::{
    Collection, Distance, Filter, MultiVector, PointId, ScoredPoint, SideVector, SparseVector,
};

use crate::error::{ApiError, ApiResult};
use crate::similarity::{normalized, Scored, Slot};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ScoreStrategy {
    BestScore,
    SumScores,
}

/// One example of a recommendation: a dense vector, or a sparse vector or multivector.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ExampleVector {
    Dense(Vec<f32>),
    Side(SideVector),
}

/// The examples of a scored recommendation, as vectors of the space searched.
pub(crate) struct ExampleScoring {
    pub strategy: ScoreStrategy,
    pub positive: Vec<ExampleVector>,
    pub negative: Vec<ExampleVector>,
}

/// What the scan returns: the page asked for.
pub(crate) struct Page<'a> {
    pub filter: Option<&'a Filter>,
    pub using: Option<&'a str>,
    pub limit: usize,
    pub offset: usize,
    pub score_threshold: Option<f32>,
}

/// An example's score for `vector`, higher is closer (−∞ for vectors of other kinds).
fn core_score(distance: Distance, example: &ExampleVector, vector: Scored<'_>) -> f32 {
    let kernels = sagitta_kernels::kernels();
    match (example, vector) {
        (ExampleVector::Dense(example), Scored::Dense(vector)) => match distance {
            Distance::Euclid => -(kernels.l2_squared_f32)(example, vector),
            Distance::Cosine | Distance::Dot => (kernels.dot_f32)(example, vector),
        },
        #[allow(clippy::cast_possible_truncation)]
        (ExampleVector::Side(example), Scored::Side(vector)) => {
            crate::similarity::side_similarity(example, vector, distance) as f32
        }
        _ => f32::NEG_INFINITY,
    }
}

fn scaled_sigmoid(x: f32) -> f32 {
    if !x.is_finite() {
        return x;
    }
    0.5 * (x / (1.0 + x.abs()) + 1.0)
}

impl ExampleScoring {
    fn score(&self, distance: Distance, vector: Scored<'_>) -> f32 {
        let scores = |examples: &[ExampleVector]| -> Vec<f32> {
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
        let prepare = |examples: &[ExampleVector]| -> Vec<ExampleVector> {
            examples
                .iter()
                .map(|example| match (distance, example) {
                    (Distance::Cosine, ExampleVector::Dense(example)) => {
                        ExampleVector::Dense(normalized(example))
                    }
                    (Distance::Cosine, ExampleVector::Side(SideVector::Multi(multi))) => {
                        ExampleVector::Side(SideVector::Multi(multi.clone().normalized()))
                    }
                    (_, example) => example.clone(),
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

/// The vector `using` names and its distance ([`Slot::named`]). An IDF sparse vector is
/// refused: the scan scores raw weights.
fn searched_space(collection: &Collection, using: Option<&str>) -> ApiResult<(Slot, Distance)> {
    let spaces = collection.spaces();
    let wanted = using.unwrap_or("");
    let (slot, distance) = Slot::named(spaces, collection.config().distance, wanted)
        .ok_or_else(|| crate::wire::unknown_vector_name("using", wanted))?;
    if let Slot::Side(index) = slot {
        if spaces.side()[index]
            .as_sparse()
            .is_some_and(|space| space.idf)
        {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `query.recommend.strategy`: `best_score` and `sum_scores` are \
                 not supported for the IDF sparse vector {wanted:?}; use the average-vector \
                 strategy"
            )));
        }
    }
    Ok((slot, distance))
}

/// The average-vector strategy's query for sparse or multi examples (see the module).
pub(crate) fn side_average(
    positive: &[SideVector],
    negative: &[SideVector],
    field: &str,
) -> ApiResult<SideVector> {
    let refused = |reason: &str| {
        ApiError::bad_request(format!("Wrong input: `{field}query.recommend`: {reason}"))
    };
    let mut sparse: Vec<&SparseVector> = Vec::new();
    let mut rows: Vec<Vec<f32>> = Vec::new();
    for (example, sign) in positive
        .iter()
        .map(|e| (e, 1.0))
        .chain(negative.iter().map(|e| (e, -1.0)))
    {
        match example {
            SideVector::Sparse(vector) if sign > 0.0 => sparse.push(vector),
            SideVector::Sparse(_) => {}
            SideVector::Multi(multi) => rows.extend(
                multi
                    .rows()
                    .map(|row| row.iter().map(|v| v * sign).collect()),
            ),
        }
    }
    if positive.is_empty() {
        return Err(refused(
            "the average-vector strategy needs a positive example",
        ));
    }
    if !rows.is_empty() {
        return MultiVector::new(&rows)
            .map(SideVector::Multi)
            .map_err(|reason| refused(&reason));
    }
    let average = |vectors: &[&SparseVector]| {
        let mut sums: BTreeMap<u32, f64> = BTreeMap::new();
        for vector in vectors {
            for (index, value) in vector.indices().iter().zip(vector.values()) {
                *sums.entry(*index).or_default() += f64::from(*value);
            }
        }
        #[allow(clippy::cast_precision_loss)]
        let count = vectors.len().max(1) as f64;
        sums.into_iter()
            .map(|(index, sum)| (index, sum / count))
            .collect::<BTreeMap<u32, f64>>()
    };
    let mut query = average(&sparse);
    let negative: Vec<&SparseVector> = negative.iter().filter_map(SideVector::as_sparse).collect();
    if !negative.is_empty() {
        query.values_mut().for_each(|value| *value *= 2.0);
        for (index, value) in average(&negative) {
            *query.entry(index).or_default() -= value;
        }
    }
    #[allow(clippy::cast_possible_truncation)]
    let (indices, values) = query.into_iter().map(|(i, v)| (i, v as f32)).unzip();
    SparseVector::new(indices, values)
        .map(SideVector::Sparse)
        .map_err(|reason| refused(&reason))
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
        let Some(vector) = slice.of(spaces, &point.vector, &point.side) else {
            continue;
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
        let dense = |values: &[f32]| ExampleVector::Dense(values.to_vec());
        let scoring = ExampleScoring {
            strategy: ScoreStrategy::BestScore,
            positive: vec![dense(&[1.0, 0.0])],
            negative: vec![dense(&[0.0, 1.0])],
        };
        // closer to the positive: s(1) = 0.75
        let score = |scoring: &ExampleScoring, distance, vector: &[f32]| {
            scoring.score(distance, Scored::Dense(vector))
        };
        assert!((score(&scoring, Distance::Dot, &[1.0, 0.0]) - 0.75).abs() < 1e-6);
        // closer to the negative: −s(2) = −5/6
        assert!((score(&scoring, Distance::Dot, &[0.0, 2.0]) + 5.0 / 6.0).abs() < 1e-6);
        let sum = ExampleScoring {
            strategy: ScoreStrategy::SumScores,
            ..scoring
        };
        assert!((score(&sum, Distance::Dot, &[3.0, 1.0]) - 2.0).abs() < 1e-6);
        // Euclid: minus the squared distance
        assert!((score(&sum, Distance::Euclid, &[1.0, 0.0]) - 2.0).abs() < 1e-6);
        let only_negative = ExampleScoring {
            strategy: ScoreStrategy::BestScore,
            positive: vec![],
            negative: vec![dense(&[1.0, 0.0])],
        };
        assert!(score(&only_negative, Distance::Dot, &[1.0, 0.0]) < 0.0);
    }

    #[test]
    fn side_examples_average_as_local_mode_does() {
        let sparse = |indices: Vec<u32>, values: Vec<f32>| {
            SideVector::Sparse(SparseVector::new(indices, values).unwrap())
        };
        let positive = vec![
            sparse(vec![1, 2], vec![1.0, 2.0]),
            sparse(vec![2], vec![4.0]),
        ];
        let negative = vec![sparse(vec![2, 5], vec![1.0, 6.0])];
        // average of the positives: {1: 0.5, 2: 3}; then 2·p − n: {1: 1, 2: 5, 5: −6}
        let query = side_average(&positive, &negative, "").unwrap();
        assert_eq!(query, sparse(vec![1, 2, 5], vec![1.0, 5.0, -6.0]));
        let multi = |rows: &[Vec<f32>]| SideVector::Multi(MultiVector::new(rows).unwrap());
        let query = side_average(
            &[multi(&[vec![1.0, 2.0]])],
            &[multi(&[vec![3.0, -1.0]])],
            "",
        );
        assert_eq!(query.unwrap(), multi(&[vec![1.0, 2.0], vec![-3.0, 1.0]]));
        assert!(side_average(&[], &[multi(&[vec![1.0, 0.0]])], "").is_err());
        // raw sparse similarity: no shared index scores 0, not −∞
        let scoring = ExampleScoring {
            strategy: ScoreStrategy::SumScores,
            positive: vec![ExampleVector::Side(sparse(vec![1], vec![2.0]))],
            negative: vec![],
        };
        let point = sparse(vec![9], vec![1.0]);
        assert_eq!(scoring.score(Distance::Dot, Scored::Side(&point)), 0.0);
    }
}
