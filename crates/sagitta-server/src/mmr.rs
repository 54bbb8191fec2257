//! Maximal marginal relevance (Qdrant's `{"nearest": .., "mmr": {..}}`): the nearest
//! `candidates_limit` hits re-ranked so each next pick balances its relevance to the
//! query against its similarity to the hits already picked — λ · sim(query, c) −
//! (1 − λ) · max over picked p of sim(c, p), λ = 1 − diversity — starting from the
//! nearest hit. Hits keep their search scores; only their order and number change.
//!
//! Similarities are the raw ones of the vector searched: the dot product for Cosine (unit
//! vectors) and Dot, the negated squared distance for Euclid, the dot product over shared
//! indices for sparse vectors (0 when none are shared), and max_sim for multivectors.

use sagitta_engine::collection::MAX_LIMIT;
use sagitta_engine::{Distance, ScoredPoint, SideVector, VectorSpaces};

use crate::error::{ApiError, ApiResult};
use crate::similarity::{normalized, similarity, Scored, Slot};
use crate::wire::{MmrInput, QueryInput};

/// A checked `mmr`: λ and how many nearest hits are re-ranked.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Mmr {
    pub lambda: f32,
    pub candidates: usize,
}

impl Mmr {
    /// `input` checked (diversity 0 to 1, default 0.5; candidates at least 1 and at most
    /// `max`, default `limit`); errors name `field`.
    pub fn checked(input: &MmrInput, limit: usize, max: usize, field: &str) -> ApiResult<Mmr> {
        let diversity = input.diversity.unwrap_or(0.5);
        if !(0.0..=1.0).contains(&diversity) {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `{field}query.mmr.diversity` = {diversity}: must be 0 to 1"
            )));
        }
        let candidates = input.candidates_limit.unwrap_or(limit);
        if candidates == 0 || candidates > max {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `{field}query.mmr.candidates_limit` = {candidates}: must be 1 \
                 to {max}"
            )));
        }
        Ok(Mmr {
            lambda: 1.0 - diversity,
            candidates,
        })
    }
}

/// MMR re-ranking and the number of hits to answer, if a query asks for it.
pub(crate) type Reranking = Option<(Mmr, usize)>;

/// A query's `query` (required) with its `mmr` taken off: the query, and the checked MMR
/// with the number of hits to answer; `limit` becomes the number of candidates searched.
pub(crate) fn split_mmr(
    query: Option<QueryInput>,
    limit: &mut usize,
    field: &str,
) -> ApiResult<(QueryInput, Reranking)> {
    match query {
        None => Err(ApiError::bad_request(format!(
            "Wrong input: `{field}query` is required (a vector, a point id or \
             {{\"nearest\": ..}})"
        ))),
        Some(QueryInput::Mmr(nearest, input)) => {
            let mmr = Mmr::checked(&input, *limit, MAX_LIMIT, field)?;
            let answered = std::mem::replace(limit, mmr.candidates);
            Ok((*nearest, Some((mmr, answered))))
        }
        Some(query) => Ok((query, None)),
    }
}

/// `hits` (nearest first) re-ranked by MMR for the query `(dense, side)` in the vector
/// `using` names; at most `limit` returned. `unnamed` is the distance of a collection
/// with one unnamed vector.
pub(crate) fn rerank(
    hits: Vec<ScoredPoint>,
    (dense, side): (&[f32], Option<&SideVector>),
    (mmr, limit): (Mmr, usize),
    (using, spaces, unnamed): (&str, &VectorSpaces, Distance),
) -> Vec<ScoredPoint> {
    let Some((slot, distance)) = Slot::named(spaces, unnamed, using) else {
        // the name was checked when the query was prepared
        return hits.into_iter().take(limit).collect();
    };
    // the query as the stored vectors are: unit-length (row by row) for Cosine
    let (unit, unit_rows);
    let query = match side {
        Some(SideVector::Multi(multi)) if distance == Distance::Cosine => {
            unit_rows = SideVector::Multi(multi.clone().normalized());
            Scored::Side(&unit_rows)
        }
        Some(side) => Scored::Side(side),
        None if distance == Distance::Cosine => {
            unit = normalized(dense);
            Scored::Dense(&unit)
        }
        None => Scored::Dense(dense),
    };
    let vectors: Vec<Option<Scored<'_>>> = hits
        .iter()
        .map(|hit| slot.of(spaces, &hit.vector, &hit.side))
        .collect();
    let relevance: Vec<f64> = vectors
        .iter()
        .map(|v| v.map_or(f64::NEG_INFINITY, |v| similarity(query, v, distance)))
        .collect();
    let similar = |a: usize, b: usize| match (vectors[a], vectors[b]) {
        (Some(a), Some(b)) => similarity(a, b, distance),
        _ => f64::NEG_INFINITY,
    };
    let order = pick_order(hits.len(), limit, mmr.lambda, &relevance, similar);
    let mut hits: Vec<Option<ScoredPoint>> = hits.into_iter().map(Some).collect();
    order.into_iter().filter_map(|at| hits[at].take()).collect()
}

/// The greedy MMR order over `count` candidates: the first, then repeatedly the pending
/// one with the best λ · relevance − (1 − λ) · (its highest similarity to a picked one),
/// the earliest on ties, until `limit` are picked or every score is −∞.
fn pick_order(
    count: usize,
    limit: usize,
    lambda: f32,
    relevance: &[f64],
    similar: impl Fn(usize, usize) -> f64,
) -> Vec<usize> {
    let lambda = f64::from(lambda);
    if count == 0 {
        return Vec::new();
    }
    let mut picked = vec![0];
    let mut pending: Vec<usize> = (1..count).collect();
    while picked.len() < limit && !pending.is_empty() {
        let scores: Vec<f64> = pending
            .iter()
            .map(|candidate| {
                let nearest = picked
                    .iter()
                    .map(|chosen| similar(*candidate, *chosen))
                    .fold(f64::NEG_INFINITY, f64::max);
                lambda * relevance[*candidate] - (1.0 - lambda) * nearest
            })
            .collect();
        if scores.iter().all(|score| *score == f64::NEG_INFINITY) {
            break;
        }
        let best = (0..scores.len())
            .reduce(|best, at| if scores[at] > scores[best] { at } else { best })
            .expect("pending is not empty");
        picked.push(pending.remove(best));
    }
    picked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diversity_trades_relevance_for_distance_from_the_picked() {
        // candidates 1 and 2 are near copies of 0; 3 is less relevant but apart
        let relevance = [1.0, 0.95, 0.9, 0.5];
        let similarity = [
            [1.0, 0.99, 0.98, 0.0],
            [0.99, 1.0, 0.97, 0.0],
            [0.98, 0.97, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
        ];
        let similar = |a: usize, b: usize| similarity[a][b];
        assert_eq!(pick_order(4, 3, 1.0, &relevance, similar), vec![0, 1, 2]);
        assert_eq!(pick_order(4, 3, 0.5, &relevance, similar), vec![0, 3, 1]);
        assert_eq!(pick_order(4, 2, 0.0, &relevance, similar), vec![0, 3]);
        assert!(pick_order(0, 3, 0.5, &[], similar).is_empty());
    }

    #[test]
    fn bad_settings_are_refused_naming_the_field() {
        let input = |diversity, candidates_limit| MmrInput {
            diversity,
            candidates_limit,
        };
        let ok = Mmr::checked(&input(Some(0.25), None), 10, 100, "").unwrap();
        assert_eq!((ok.lambda, ok.candidates), (0.75, 10));
        let error = Mmr::checked(&input(Some(1.5), None), 10, 100, "").unwrap_err();
        assert!(
            error.message.contains("query.mmr.diversity"),
            "{}",
            error.message
        );
        let error = Mmr::checked(&input(None, Some(0)), 10, 100, "").unwrap_err();
        assert!(
            error.message.contains("candidates_limit"),
            "{}",
            error.message
        );
    }
}
