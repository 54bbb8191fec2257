//! The Query API's prefetches (issue 16 §2): a query whose `prefetch` lists searches
//! (nested to any depth) takes their hits as candidates, then either fuses them
//! (`{"fusion": "rrf" | "dbsf"}`, `{"rrf": {"k"}}`) or re-scores them with its own query
//! — a search restricted to the candidates' ids. Hybrid search (a dense and a sparse
//! prefetch, fused by RRF) is the common case.

use std::collections::{BTreeSet, HashMap};

use sagitta_engine::filter::Condition;
use sagitta_engine::{Filter, PointId, ScoredPoint};

use crate::error::{ApiError, ApiResult};
use crate::points::{search_hits, QueryTarget, Search, SearchVector};
use crate::wire::Fusion;

impl QueryTarget<'_> {
    /// `search`'s filter, and those of `vector`'s prefetches, with their `has_vector`
    /// conditions resolved against this collection.
    pub fn bind(&self, vector: &mut SearchVector, search: &mut Search) -> ApiResult<()> {
        let filter = search.filter.take();
        search.filter = crate::wire::bound_filter(self.collection, filter, self.name)?;
        self.bind_sources(vector)
    }

    /// The filters of `vector`'s prefetches (a nested `then` shares its parent's search;
    /// its own prefetches have theirs).
    fn bind_sources(&self, vector: &mut SearchVector) -> ApiResult<()> {
        if let SearchVector::Prefetch { sources, then } = vector {
            for (vector, search) in sources {
                self.bind(vector, search)?;
            }
            self.bind_sources(then)?;
        }
        Ok(())
    }

    /// The hits of `vector` with `search` (returned with them: its output settings shape
    /// them): a plain search, or a prefetch tree evaluated sources first.
    pub fn evaluate(
        &self,
        vector: SearchVector,
        mut search: Search,
    ) -> ApiResult<(Vec<ScoredPoint>, Search)> {
        match vector {
            SearchVector::Prefetch { sources, then } => {
                let sources = sources
                    .into_iter()
                    .map(|(vector, search)| self.evaluate(vector, search).map(|(hits, _)| hits))
                    .collect::<ApiResult<Vec<_>>>()?;
                if let SearchVector::Fusion(fusion) = *then {
                    return Ok((fused(sources, fusion, &search), search));
                }
                let candidates: BTreeSet<PointId> =
                    sources.iter().flatten().map(|hit| hit.id).collect();
                if candidates.is_empty() {
                    return Ok((Vec::new(), search));
                }
                search.filter = Some(among(search.filter.take(), candidates));
                self.evaluate(*then, search)
            }
            SearchVector::Fusion(_) => Err(ApiError::bad_request(
                "Wrong input: `query`: a fusion needs `prefetch`",
            )),
            vector => {
                let (vector, search) = self.resolve(vector, search)?;
                let searches = [(vector, search)];
                let hits = search_hits(self.collection, &searches, self.name)?;
                let [(_, search)] = searches;
                Ok((hits.into_iter().next().unwrap_or_default(), search))
            }
        }
    }
}

/// `filter` narrowed to the points `ids`.
fn among(filter: Option<Filter>, ids: BTreeSet<PointId>) -> Filter {
    let mut must = vec![Condition::HasId(ids.into_iter().collect())];
    if let Some(filter) = filter {
        must.push(Condition::Nested(Box::new(filter)));
    }
    Filter {
        must,
        ..Filter::default()
    }
}

/// The sources' hits fused, best first (ties by id), the threshold applied, `offset`
/// skipped and `limit` kept. A point found by several sources keeps the stored data of
/// its first appearance.
fn fused(sources: Vec<Vec<ScoredPoint>>, fusion: Fusion, search: &Search) -> Vec<ScoredPoint> {
    let mut scores: HashMap<PointId, f64> = HashMap::new();
    let mut points: HashMap<PointId, ScoredPoint> = HashMap::new();
    for source in sources {
        let contributions = contributions(&source, fusion);
        for (hit, contribution) in source.into_iter().zip(contributions) {
            *scores.entry(hit.id).or_insert(0.0) += contribution;
            points.entry(hit.id).or_insert(hit);
        }
    }
    let mut ranked: Vec<(PointId, f64)> = scores.into_iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(search.offset + search.limit)
        .filter_map(|(id, score)| {
            let mut point = points.remove(&id)?;
            #[allow(clippy::cast_possible_truncation)]
            let score = score as f32;
            point.score = score;
            Some(point)
        })
        .filter(|point| {
            search
                .score_threshold
                .is_none_or(|threshold| point.score >= threshold)
        })
        .skip(search.offset)
        .collect()
}

/// What each hit of one source adds to its point's fused score: `1 / (k + rank)` (ranks
/// from 0, as qdrant-client's local mode counts them) for RRF; for DBSF its score mapped from mean ± 3 standard deviations (sample
/// deviation) onto 0..1 — 0.5 for every hit when there is one or their scores are equal.
fn contributions(source: &[ScoredPoint], fusion: Fusion) -> Vec<f64> {
    match fusion {
        #[allow(clippy::cast_precision_loss)]
        Fusion::Rrf { k } => (0..source.len())
            .map(|rank| 1.0 / (k + rank as f64))
            .collect(),
        Fusion::Dbsf => {
            let scores: Vec<f64> = source.iter().map(|hit| f64::from(hit.score)).collect();
            if scores.len() < 2 {
                return vec![0.5; scores.len()];
            }
            #[allow(clippy::cast_precision_loss)]
            let count = scores.len() as f64;
            let mean = scores.iter().sum::<f64>() / count;
            let variance = scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (count - 1.0);
            if variance == 0.0 {
                return vec![0.5; scores.len()];
            }
            let deviation = variance.sqrt();
            let low = mean - 3.0 * deviation;
            scores
                .iter()
                .map(|score| (score - low) / (6.0 * deviation))
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(id: u64, score: f32) -> ScoredPoint {
        ScoredPoint {
            id: PointId::Number(id),
            score,
            payload: None,
            vector: Vec::new(),
            side: Vec::new(),
        }
    }

    #[test]
    fn rrf_adds_reciprocal_ranks() {
        let rrf = contributions(
            &[hit(1, 9.0), hit(2, 8.0), hit(3, 7.0)],
            Fusion::Rrf { k: 2.0 },
        );
        // ranks from 0 with k = 2: 1/2, 1/3, 1/4
        assert_eq!(rrf, vec![0.5, 1.0 / 3.0, 0.25]);
    }

    #[test]
    fn dbsf_maps_three_deviations_onto_the_unit_interval() {
        let dbsf = contributions(&[hit(1, 3.0), hit(2, 2.0), hit(3, 1.0)], Fusion::Dbsf);
        // mean 2, sample deviation 1: (s - (2 - 3)) / 6
        assert_eq!(dbsf, vec![4.0 / 6.0, 0.5, 2.0 / 6.0]);
        assert_eq!(contributions(&[hit(1, 3.0)], Fusion::Dbsf), vec![0.5]);
        assert_eq!(
            contributions(&[hit(1, 3.0), hit(2, 3.0)], Fusion::Dbsf),
            vec![0.5, 0.5]
        );
    }
}
