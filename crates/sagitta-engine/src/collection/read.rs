//! The read side of a collection: lookups, counts, scroll pages and searches merged
//! across shards.

use crate::error::{EngineError, Result};
use crate::filter::Filter;
use crate::multi::MultiVector;
use crate::payload_index::{bind_text, FieldType};
use crate::point::{Distance, Point, PointId};
use crate::query::{
    user_score, within_threshold, ScoredPoint, SearchRequest, ShardHit, SideQuery, Strategy,
};
use crate::sparse::{idf, SparseVector};

use super::config::{check_range, normalize, CollectionConfig, MAX_LIMIT};
use super::{Collection, SegmentKindName};
use crate::shard::Shard;
use crate::spaces::SpaceSlice;
use parking_lot::Mutex;

impl Collection {
    /// `filter` as this collection evaluates it: its text matches on fields with a text
    /// index in token form ([`crate::payload_index::bind_text`]), and its `has_vector`
    /// conditions resolved ([`Filter::bind_vectors`]): a named vector's into the ids of
    /// the live points that have it, found by reading every point (so a `has_vector`
    /// filter costs a scan; the unnamed vector of a collection with one vector too, since
    /// a point may be without it). `None` when nothing needed binding; a name the
    /// collection does not have, or a phrase on a text index without phrase matching, is
    /// an error.
    pub fn bind_filter(&self, filter: &Filter) -> Result<Option<Filter>> {
        let vectors = self.bind_vectors(filter)?;
        let schema = self.schema.lock();
        if !schema
            .values()
            .any(|kind| matches!(kind, FieldType::Text(_)))
        {
            return Ok(vectors);
        }
        let mut bound = vectors.clone().unwrap_or_else(|| filter.clone());
        if bind_text(&mut bound, &schema)? {
            Ok(Some(bound))
        } else {
            Ok(vectors)
        }
    }

    fn bind_vectors(&self, filter: &Filter) -> Result<Option<Filter>> {
        let unknown = |name: &str| EngineError::InvalidVectors {
            reason: format!("Wrong input: Not existing vector name error: {name}"),
        };
        let mut points: Option<Vec<Point>> = None;
        filter.bind_vectors(&mut |name| {
            let unnamed = !self.spaces.is_named();
            if unnamed && !name.is_empty() {
                return Err(unknown(name));
            }
            if unnamed {
                // disk segments refuse points without their vector: every point has it
                let every = self.config.storage.segment_kind == SegmentKindName::Disk;
                return if every {
                    Ok(None)
                } else {
                    self.ids_with_vectors().map(Some)
                };
            }
            let number = self.spaces.number_of(name).ok_or_else(|| unknown(name))?;
            if points.is_none() {
                points = Some(self.points()?);
            }
            let dense = self.spaces.len();
            let having = points.iter().flatten().filter(|point| {
                if number < dense {
                    self.spaces.part(number, &point.vector).is_some()
                } else {
                    point.side.get(number - dense).is_some_and(Option::is_some)
                }
            });
            Ok(Some(having.map(|point| point.id).collect()))
        })
    }

    /// Ids of the live points that have the one unnamed vector, read point by point (one
    /// point in memory at a time, not the collection).
    fn ids_with_vectors(&self) -> Result<std::collections::HashSet<PointId>> {
        let mut having = std::collections::HashSet::new();
        for shard in &self.shards {
            for id in shard.matching_ids(None) {
                let point = self.get(&id)?;
                if point.is_some_and(|point| !crate::spaces::is_absent(&point.vector)) {
                    having.insert(id);
                }
            }
        }
        Ok(having)
    }

    /// Ids of every point passing `filter` (for payload updates addressed by filter).
    pub fn matching_ids(&self, filter: &Filter) -> Vec<PointId> {
        self.shards
            .iter()
            .flat_map(|shard| shard.matching_ids(Some(filter)))
            .collect()
    }

    /// The live point `id`; an error only when a disk segment's read fails (I/O, or a
    /// damaged page).
    pub fn get(&self, id: &PointId) -> Result<Option<Point>> {
        self.shards[self.shard_of(id)].get(id)
    }

    /// The first of `ids` that names no live point (`None` when every one exists): the
    /// check before a payload change addressed by id, which Qdrant refuses whole when a
    /// point is missing.
    pub fn first_missing(&self, ids: &[PointId]) -> Result<Option<PointId>> {
        for id in ids {
            if self.get(id)?.is_none() {
                return Ok(Some(*id));
            }
        }
        Ok(None)
    }

    /// Checks every shard's ownership invariants (see `Shard::check_invariants`: each
    /// live point in exactly one place, counts that match). O(points): for tests, which
    /// call it after every step of the crash simulation.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        for (index, shard) in self.shards.iter().enumerate() {
            shard
                .check_invariants()
                .map_err(|error| format!("shard {index}: {error}"))?;
        }
        Ok(())
    }

    /// Exact count of live points (passing `filter` when given).
    pub fn count(&self, filter: Option<&Filter>) -> usize {
        self.shards.iter().map(|shard| shard.count(filter)).sum()
    }

    /// One page of points passing `filter`, in id order, starting at `offset` (inclusive);
    /// returns the page and the id to continue from (`None` at the end).
    pub fn scroll(
        &self,
        offset: Option<PointId>,
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<(Vec<Point>, Option<PointId>)> {
        check_range("limit", limit, 1, MAX_LIMIT)?;
        self.scroll_shards(&self.shards, offset, limit, filter)
    }

    /// [`Collection::scroll`] over `shards` alone (all of the collection's, or one).
    pub(super) fn scroll_shards(
        &self,
        shards: &[Shard],
        offset: Option<PointId>,
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<(Vec<Point>, Option<PointId>)> {
        // Each shard stops at its (limit + 1)-th match from `offset`: a page costs the
        // points up to its end, so paging through a collection is linear, not quadratic.
        let mut ids: Vec<PointId> = shards
            .iter()
            .flat_map(|shard| shard.scroll_ids(offset, filter, limit + 1))
            .collect();
        ids.sort_unstable();
        let next = ids.get(limit).copied();
        let mut page = Vec::with_capacity(limit.min(ids.len()));
        for id in ids.iter().take(limit) {
            page.extend(self.get(id)?);
        }
        Ok((page, next))
    }

    /// Every live point (shard by shard).
    pub fn points(&self) -> Result<Vec<Point>> {
        let mut points = Vec::new();
        for shard in &self.shards {
            points.extend(shard.points()?);
        }
        Ok(points)
    }

    /// Exact top-`limit` over every shard, among points passing `filter`.
    pub fn search(
        &self,
        query: &[f32],
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<Vec<ScoredPoint>> {
        self.query(&SearchRequest {
            filter,
            ..SearchRequest::new(query, limit)
        })
    }

    /// Runs several searches; results in request order. Dense searches go shard by shard:
    /// each shard's node pool answers every dense request against that shard, in chunks
    /// spread over its threads, so a shard's memory is read by its own node's cores; the
    /// shards' hits are then merged per request. Sparse and multivector requests run one
    /// after another, each over every shard at once.
    pub fn query_batch(&self, requests: &[SearchRequest<'_>]) -> Result<Vec<Vec<ScoredPoint>>> {
        let prepared = requests
            .iter()
            .map(|request| self.prepare_dense(request))
            .collect::<Result<Vec<_>>>()?;
        let mut hits = self.search_prepared(&prepared)?;
        requests
            .iter()
            .zip(&prepared)
            .zip(hits.iter_mut())
            .map(|((request, prepared), hits)| match prepared {
                Some(dense) => Ok(ranked(std::mem::take(hits), request, dense.space.distance)),
                None => self.query(request),
            })
            .collect()
    }

    /// The hits of every prepared dense request in every shard (empty for the others).
    fn search_prepared(&self, prepared: &[Option<Dense<'_>>]) -> Result<Vec<Vec<ShardHit>>> {
        let dense: Vec<usize> = (0..prepared.len())
            .filter(|&at| prepared[at].is_some())
            .collect();
        // (shard, the requests of one chunk) per job, each filling its own slot
        let mut parts: Vec<(usize, &[usize])> = Vec::new();
        for (shard, &pool) in self.placement.pools.iter().enumerate() {
            let chunks = 4 * self.machine.pool_threads(pool);
            let chunk = dense.len().div_ceil(chunks).max(1);
            parts.extend(dense.chunks(chunk).map(|requests| (shard, requests)));
        }
        let slots: Vec<Mutex<Option<PartHits>>> = parts.iter().map(|_| Mutex::new(None)).collect();
        let jobs = parts
            .iter()
            .zip(&slots)
            .map(|(&(shard, requests), slot)| {
                let job: crate::machine::Job<'_> = Box::new(move || {
                    let found = requests
                        .iter()
                        .map(|&at| {
                            let dense = prepared[at].as_ref().expect("a dense request");
                            self.shards[shard].search(
                                &dense.query,
                                dense.wanted,
                                dense.request.filter,
                                dense.request.strategy,
                                dense.space,
                            )
                        })
                        .collect();
                    *slot.lock() = Some(found);
                });
                (self.placement.pools[shard], job)
            })
            .collect();
        self.machine.run(jobs);
        let mut hits: Vec<Vec<ShardHit>> = prepared.iter().map(|_| Vec::new()).collect();
        for ((_, requests), slot) in parts.iter().zip(slots) {
            let found = slot.into_inner().expect("every chunk's job ran")?;
            for (&at, shard_hits) in requests.iter().zip(found) {
                hits[at].extend(shard_hits);
            }
        }
        Ok(hits)
    }

    /// One search: exact top `offset + limit` among points passing `filter`, the first
    /// `offset` skipped, and (with `score_threshold`) only scores at least as good as it —
    /// similarity ≥ threshold for Cosine/Dot, distance ≤ threshold for Euclid. The shards
    /// are searched at once, each on its node's pool.
    pub fn query(&self, request: &SearchRequest<'_>) -> Result<Vec<ScoredPoint>> {
        if let Some(sparse) = request.sparse {
            return self.query_sparse(request, sparse);
        }
        if let Some(multi) = request.multi {
            return self.query_multi(request, multi);
        }
        let dense = self.prepare_dense(request)?.expect("a dense request");
        let hits = self.fan_out(|shard| {
            shard.search(
                &dense.query,
                dense.wanted,
                request.filter,
                request.strategy,
                dense.space,
            )
        })?;
        Ok(ranked(
            hits.into_iter().flatten().collect(),
            request,
            dense.space.distance,
        ))
    }

    /// A dense request checked and its query made ready for the shards (unit length for
    /// Cosine); `None` for a sparse or multivector request.
    fn prepare_dense<'r>(&self, request: &'r SearchRequest<'r>) -> Result<Option<Dense<'r>>> {
        if request.sparse.is_some() || request.multi.is_some() {
            return Ok(None);
        }
        check_range("limit", request.limit, 1, MAX_LIMIT)?;
        check_range("offset", request.offset, 0, MAX_LIMIT)?;
        if let Strategy::Beam(ef) = request.strategy {
            check_range("hnsw_ef", ef, 1, sagitta_index::limits::MAX_EF)?;
        }
        let space = self.space_for(request.using)?;
        let check = CollectionConfig {
            dim: space.dim,
            ..self.config
        };
        check.check_vector(request.vector, || "query".to_string())?;
        let mut query = request.vector.to_vec();
        if space.distance == Distance::Cosine {
            normalize(&mut query);
        }
        Ok(Some(Dense {
            request,
            query,
            space,
            wanted: request.offset + request.limit,
        }))
    }

    /// [`Collection::query`] of a sparse query: the top hits by sparse dot product in the
    /// sparse vector `request.using` names (its query weights multiplied by each index's
    /// IDF over the collection's live points, if the space asks for it).
    fn query_sparse(
        &self,
        request: &SearchRequest<'_>,
        query: &SparseVector,
    ) -> Result<Vec<ScoredPoint>> {
        let name = request.using.unwrap_or("");
        let (space, idf) = self
            .spaces
            .sparse_index_of(name)
            .and_then(|index| Some((index, self.spaces.side()[index].as_sparse()?.idf)))
            .ok_or_else(|| EngineError::InvalidVectors {
                reason: format!("Wrong input: Not existing sparse vector name error: {name}"),
            })?;
        let weighted;
        let query = if idf {
            weighted = self.idf_weighted(space, query);
            &weighted
        } else {
            query
        };
        self.query_side(request, (SideQuery::Sparse(query), space), Distance::Dot)
    }

    /// [`Collection::query`] of a multivector query: the top hits by max_sim in the
    /// multivector `request.using` names (Cosine query rows made unit-length first).
    fn query_multi(
        &self,
        request: &SearchRequest<'_>,
        query: &MultiVector,
    ) -> Result<Vec<ScoredPoint>> {
        let name = request.using.unwrap_or("");
        let (space, multi) = self
            .spaces
            .multi_index_of(name)
            .and_then(|index| Some((index, self.spaces.side()[index].as_multi()?)))
            .ok_or_else(|| EngineError::InvalidVectors {
                reason: format!("Wrong input: Not existing multivector name error: {name}"),
            })?;
        if query.dim() != multi.dim {
            return Err(EngineError::WrongVectorDimension {
                point: "query".to_string(),
                expected: multi.dim,
                received: query.dim(),
            });
        }
        let normalized;
        let query = if multi.distance == Distance::Cosine {
            normalized = query.clone().normalized();
            &normalized
        } else {
            query
        };
        let side = (SideQuery::Multi(query, multi.distance), space);
        self.query_side(request, side, multi.distance)
    }

    /// The top hits of a side-space query, merged over the shards.
    fn query_side(
        &self,
        request: &SearchRequest<'_>,
        (query, space): (SideQuery<'_>, usize),
        distance: Distance,
    ) -> Result<Vec<ScoredPoint>> {
        check_range("limit", request.limit, 1, MAX_LIMIT)?;
        check_range("offset", request.offset, 0, MAX_LIMIT)?;
        let wanted = request.offset + request.limit;
        let hits = self.fan_out(|shard| shard.search_side(query, space, wanted, request.filter))?;
        Ok(ranked(
            hits.into_iter().flatten().collect(),
            request,
            distance,
        ))
    }

    /// `query` with each weight multiplied by its index's inverse document frequency in
    /// sparse space `space`, over the collection's live points.
    fn idf_weighted(&self, space: usize, query: &SparseVector) -> SparseVector {
        let mut counts = vec![0usize; query.len()];
        for shard in &self.shards {
            shard.sparse_frequencies(space, query.indices(), &mut counts);
        }
        // every live point, counted per part (exact: the crash model checks it against
        // a full count), not by listing them
        let (indexed, buffered) = self.point_counts();
        let total = indexed + buffered;
        query.reweighted(|index| {
            let at = query.indices().binary_search(&index).expect("own index");
            idf(counts[at], total)
        })
    }
}

/// A dense request ready for the shards.
struct Dense<'r> {
    request: &'r SearchRequest<'r>,
    /// The query vector, unit length for Cosine.
    query: Vec<f32>,
    space: SpaceSlice,
    /// `offset + limit`.
    wanted: usize,
}

/// One chunk's hits in one shard, a list per request of the chunk.
type PartHits = Result<Vec<Vec<ShardHit>>>;

/// The shards' candidates merged: ordered by distance then id, `offset` skipped,
/// `limit` kept, scores as the user sees them, and only those within the threshold.
fn ranked(
    mut hits: Vec<ShardHit>,
    request: &SearchRequest<'_>,
    distance: Distance,
) -> Vec<ScoredPoint> {
    let wanted = request.offset + request.limit;
    hits.sort_by(|a, b| {
        a.distance
            .total_cmp(&b.distance)
            .then(a.point.id.cmp(&b.point.id))
    });
    hits.truncate(wanted);
    hits.into_iter()
        .skip(request.offset)
        .map(|hit| ScoredPoint {
            id: hit.point.id,
            score: user_score(hit.distance, distance),
            payload: hit.point.payload,
            vector: hit.point.vector,
            side: hit.point.side,
        })
        .filter(|hit| {
            request
                .score_threshold
                .is_none_or(|threshold| within_threshold(hit.score, threshold, distance))
        })
        .collect()
}
