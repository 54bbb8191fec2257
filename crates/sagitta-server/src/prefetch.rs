//! The Query API's prefetches (issue 16 §2): a query whose `prefetch` lists searches
//! (nested to any depth) takes their hits as candidates, then either fuses them
//! (`{"fusion": "rrf" | "dbsf"}`, `{"rrf": {"k"}}`) or re-scores them with its own query
//! — a search restricted to the candidates' ids. Hybrid search (a dense and a sparse
//! prefetch, fused by RRF) is the common case.

use std::collections::BTreeSet;

use sagitta_engine::filter::Condition;
use sagitta_engine::fusion::{fuse, FusedPage};
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

/// The sources' hits fused (`sagitta_engine::fusion`) into `search`'s page.
fn fused(sources: Vec<Vec<ScoredPoint>>, fusion: Fusion, search: &Search) -> Vec<ScoredPoint> {
    let page = FusedPage {
        limit: search.limit,
        offset: search.offset,
        score_threshold: search.score_threshold,
    };
    fuse(sources, fusion, page)
}
