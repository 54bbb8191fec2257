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
use super::peers::{unexpected, PeerAnswer, PeerCall, PeerLink, Probe, ProbeKind};
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

    /// Ids of the live points that have the one unnamed vector, read a page of points at a
    /// time (not the collection).
    fn ids_with_vectors(&self) -> Result<std::collections::HashSet<PointId>> {
        let mut having = std::collections::HashSet::new();
        self.for_each_point(&self.ids(None, None)?, |point| {
            if !crate::spaces::is_absent(&point.vector) {
                having.insert(point.id);
            }
        })?;
        Ok(having)
    }

    /// `visit` of each live point among `ids`, in order, read a page at a time: never the
    /// whole list in memory, and one question per rank and page when linked.
    pub(super) fn for_each_point(
        &self,
        ids: &[PointId],
        mut visit: impl FnMut(Point),
    ) -> Result<()> {
        for page in ids.chunks(super::snapshot::PAGE) {
            let mut points = self.get_many(page)?;
            for id in page {
                if let Some(point) = points.remove(id) {
                    visit(point);
                }
            }
        }
        Ok(())
    }

    /// Ids of every point passing `filter` (for payload updates addressed by filter); an
    /// error only when the other ranks of a linked collection fail.
    pub fn matching_ids(&self, filter: &Filter) -> Result<Vec<PointId>> {
        self.ids(Some(filter), None)
    }

    /// Ids of every live point passing `filter` (every one without), of shard `shard`
    /// alone when given, over every rank when linked.
    pub(super) fn ids(
        &self,
        filter: Option<&Filter>,
        shard: Option<usize>,
    ) -> Result<Vec<PointId>> {
        let mut ids = self.ids_here(self.some_shards(shard)?, filter);
        let Some(link) = &self.link else {
            return Ok(ids);
        };
        for answer in link.ask_all(|| PeerCall::Ids {
            collection: link.name.clone(),
            filter: filter.cloned(),
            shard,
        })? {
            let PeerAnswer::Ids(more) = answer else {
                return Err(unexpected(&answer));
            };
            ids.extend(more);
        }
        Ok(ids)
    }

    /// [`Collection::ids`] among `shards` of this rank alone.
    pub(super) fn ids_here(&self, shards: &[Shard], filter: Option<&Filter>) -> Vec<PointId> {
        shards
            .iter()
            .flat_map(|shard| shard.matching_ids(filter))
            .collect()
    }

    /// Shard `shard` of this rank (checked), or every one.
    pub(super) fn some_shards(&self, shard: Option<usize>) -> Result<&[Shard]> {
        match shard {
            Some(shard) => {
                self.check_shard(shard)?;
                Ok(std::slice::from_ref(&self.shards[shard]))
            }
            None => Ok(&self.shards),
        }
    }

    /// The live point `id`; an error only when a disk segment's read fails (I/O, or a
    /// damaged page), or the rank owning it fails.
    pub fn get(&self, id: &PointId) -> Result<Option<Point>> {
        match &self.link {
            Some(link) if link.peers.owner(id) != 0 => {
                Ok(self.get_many(std::slice::from_ref(id))?.remove(id))
            }
            _ => self.get_here(id),
        }
    }

    /// [`Collection::get`] among this rank's points alone.
    pub(super) fn get_here(&self, id: &PointId) -> Result<Option<Point>> {
        self.shards[self.shard_of(id)].get(id)
    }

    /// The first of `ids` that names no live point (`None` when every one exists): the
    /// check before a payload change addressed by id, which Qdrant refuses whole when a
    /// point is missing.
    pub fn first_missing(&self, ids: &[PointId]) -> Result<Option<PointId>> {
        if self.link.is_some() {
            // one question per rank, not one per id
            let found = self.get_many(ids)?;
            return Ok(ids.iter().find(|id| !found.contains_key(id)).copied());
        }
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

    /// Exact count of live points (passing `filter` when given), over every rank when
    /// linked (an error only when they fail).
    pub fn count(&self, filter: Option<&Filter>) -> Result<usize> {
        let here = self.count_here(filter);
        match &self.link {
            Some(link) => Ok(here + self.count_others(link, filter)?),
            None => Ok(here),
        }
    }

    /// [`Collection::count`] over the other ranks' points.
    pub(super) fn count_others(&self, link: &PeerLink, filter: Option<&Filter>) -> Result<usize> {
        let mut count = 0;
        for answer in link.ask_all(|| PeerCall::Count {
            collection: link.name.clone(),
            filter: filter.cloned(),
        })? {
            let PeerAnswer::Count(more) = answer else {
                return Err(unexpected(&answer));
            };
            count += more;
        }
        Ok(count)
    }

    /// [`Collection::count`] among this rank's points alone.
    pub(super) fn count_here(&self, filter: Option<&Filter>) -> usize {
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
        self.scroll_in(None, offset, limit, filter)
    }

    /// [`Collection::scroll`] of shard `shard` alone when given (shard i of every rank
    /// when linked).
    pub(super) fn scroll_in(
        &self,
        shard: Option<usize>,
        offset: Option<PointId>,
        limit: usize,
        filter: Option<&Filter>,
    ) -> Result<(Vec<Point>, Option<PointId>)> {
        let shards = self.some_shards(shard)?;
        let Some(link) = &self.link else {
            return self.scroll_shards(shards, offset, limit, filter);
        };
        // every rank's first limit + 1 from `offset`: the page, and where the next starts
        let (mut points, _) = self.scroll_shards(shards, offset, limit + 1, filter)?;
        for answer in link.ask_all(|| PeerCall::Scroll {
            collection: link.name.clone(),
            offset,
            limit: limit + 1,
            filter: filter.cloned(),
            shard,
        })? {
            let PeerAnswer::Points(more) = answer else {
                return Err(unexpected(&answer));
            };
            points.extend(more);
        }
        points.sort_unstable_by_key(|point| point.id);
        let next = points.get(limit).map(|point| point.id);
        points.truncate(limit);
        Ok((points, next))
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

    /// Every live point (shard by shard, then rank by rank when linked).
    pub fn points(&self) -> Result<Vec<Point>> {
        let mut points = self.points_here()?;
        let Some(link) = &self.link else {
            return Ok(points);
        };
        for answer in link.ask_all(|| PeerCall::Points {
            collection: link.name.clone(),
        })? {
            let PeerAnswer::Points(more) = answer else {
                return Err(unexpected(&answer));
            };
            points.extend(more);
        }
        Ok(points)
    }

    /// [`Collection::points`] of this rank alone.
    pub(super) fn points_here(&self) -> Result<Vec<Point>> {
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
        if let Some(link) = &self.link {
            return self.query_linked(link, requests);
        }
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
        self.in_every_shard(prepared.len(), &dense, |shard, at| {
            let dense = prepared[at].as_ref().expect("a dense request");
            shard.search(
                &dense.query,
                dense.wanted,
                dense.request.filter,
                dense.request.strategy,
                dense.space,
            )
        })
    }

    /// `search(shard, at)` for each request `at` of `requests` in every shard, each
    /// shard's on its node's pool, in chunks spread over the pool's threads; per request
    /// (`count` of them, the others left empty), every shard's hits.
    pub(super) fn in_every_shard(
        &self,
        count: usize,
        requests: &[usize],
        search: impl Fn(&Shard, usize) -> Result<Vec<ShardHit>> + Sync,
    ) -> Result<Vec<Vec<ShardHit>>> {
        // (shard, the requests of one chunk) per job, each filling its own slot
        let mut parts: Vec<(usize, &[usize])> = Vec::new();
        for (shard, &pool) in self.placement.pools.iter().enumerate() {
            let chunks = 4 * self.machine.pool_threads(pool);
            let chunk = requests.len().div_ceil(chunks).max(1);
            parts.extend(requests.chunks(chunk).map(|chunk| (shard, chunk)));
        }
        let slots: Vec<Mutex<Option<PartHits>>> = parts.iter().map(|_| Mutex::new(None)).collect();
        let search = &search;
        let jobs = parts
            .iter()
            .zip(&slots)
            .map(|(&(shard, chunk), slot)| {
                let job: crate::machine::Job<'_> = Box::new(move || {
                    let found = chunk
                        .iter()
                        .map(|&at| search(&self.shards[shard], at))
                        .collect();
                    *slot.lock() = Some(found);
                });
                (self.placement.pools[shard], job)
            })
            .collect();
        self.machine.run(jobs);
        let mut hits: Vec<Vec<ShardHit>> = (0..count).map(|_| Vec::new()).collect();
        for ((_, chunk), slot) in parts.iter().zip(slots) {
            let found = slot.into_inner().expect("every chunk's job ran")?;
            for (&at, shard_hits) in chunk.iter().zip(found) {
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
        if let Some(link) = &self.link {
            let mut found = self.query_linked(link, std::slice::from_ref(request))?;
            return Ok(found.pop().unwrap_or_default());
        }
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
        let (query, space) = self.sparse_query(request, query)?;
        self.query_side(request, (SideQuery::Sparse(&query), space), Distance::Dot)
    }

    /// A sparse query made ready for the shards: its side space, and its weights
    /// multiplied by each index's IDF when the space asks for it.
    fn sparse_query<'q>(
        &self,
        request: &SearchRequest<'_>,
        query: &'q SparseVector,
    ) -> Result<(std::borrow::Cow<'q, SparseVector>, usize)> {
        let name = request.using.unwrap_or("");
        let (space, idf) = self
            .spaces
            .sparse_index_of(name)
            .and_then(|index| Some((index, self.spaces.side()[index].as_sparse()?.idf)))
            .ok_or_else(|| EngineError::InvalidVectors {
                reason: format!("Wrong input: Not existing sparse vector name error: {name}"),
            })?;
        let query = if idf {
            std::borrow::Cow::Owned(self.idf_weighted(space, query)?)
        } else {
            std::borrow::Cow::Borrowed(query)
        };
        Ok((query, space))
    }

    /// [`Collection::query`] of a multivector query: the top hits by max_sim in the
    /// multivector `request.using` names (Cosine query rows made unit-length first).
    fn query_multi(
        &self,
        request: &SearchRequest<'_>,
        query: &MultiVector,
    ) -> Result<Vec<ScoredPoint>> {
        let (query, space, distance) = self.multi_query(request, query)?;
        let side = (SideQuery::Multi(&query, distance), space);
        self.query_side(request, side, distance)
    }

    /// A multivector query made ready for the shards: its side space and distance, its
    /// rows unit length for Cosine.
    fn multi_query<'q>(
        &self,
        request: &SearchRequest<'_>,
        query: &'q MultiVector,
    ) -> Result<(std::borrow::Cow<'q, MultiVector>, usize, Distance)> {
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
        let query = if multi.distance == Distance::Cosine {
            std::borrow::Cow::Owned(query.clone().normalized())
        } else {
            std::borrow::Cow::Borrowed(query)
        };
        Ok((query, space, multi.distance))
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
    fn idf_weighted(&self, space: usize, query: &SparseVector) -> Result<SparseVector> {
        let mut counts = vec![0usize; query.len()];
        for shard in &self.shards {
            shard.sparse_frequencies(space, query.indices(), &mut counts);
        }
        // every live point, counted per part (exact: the crash model checks it against
        // a full count), not by listing them
        let (indexed, buffered) = self.point_counts();
        let mut total = indexed + buffered;
        if let Some(link) = &self.link {
            for answer in link.ask_all(|| PeerCall::Frequencies {
                collection: link.name.clone(),
                space,
                indices: query.indices().to_vec(),
            })? {
                let PeerAnswer::Frequencies {
                    counts: more,
                    total: points,
                } = answer
                else {
                    return Err(unexpected(&answer));
                };
                counts
                    .iter_mut()
                    .zip(more)
                    .for_each(|(count, more)| *count += more);
                total += points;
            }
        }
        Ok(query.reweighted(|index| {
            let at = query.indices().binary_search(&index).expect("own index");
            idf(counts[at], total)
        }))
    }

    /// [`Collection::query_batch`] of a linked collection: every request prepared here,
    /// searched on every rank at once, and the points of the hits kept fetched from their
    /// owners.
    fn query_linked(
        &self,
        link: &PeerLink,
        requests: &[SearchRequest<'_>],
    ) -> Result<Vec<Vec<ScoredPoint>>> {
        let (probes, distances): (Vec<Probe>, Vec<Distance>) = requests
            .iter()
            .map(|request| self.probe_of(request))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let found = link
            .peers
            .probe(&link.name, probes)
            .map_err(super::peers::unavailable)?;
        requests
            .iter()
            .zip(distances)
            .zip(found)
            .map(|((request, distance), hits)| self.scored(hits, request, distance))
            .collect()
    }

    /// `request` as every rank searches it, and the distance its scores are in.
    fn probe_of(&self, request: &SearchRequest<'_>) -> Result<(Probe, Distance)> {
        check_range("limit", request.limit, 1, MAX_LIMIT)?;
        check_range("offset", request.offset, 0, MAX_LIMIT)?;
        let (kind, distance) = if let Some(sparse) = request.sparse {
            let (query, space) = self.sparse_query(request, sparse)?;
            let query = query.into_owned();
            (ProbeKind::Sparse { query, space }, Distance::Dot)
        } else if let Some(multi) = request.multi {
            let (query, space, distance) = self.multi_query(request, multi)?;
            let query = query.into_owned();
            let kind = ProbeKind::Multi {
                query,
                space,
                distance,
            };
            (kind, distance)
        } else {
            let dense = self.prepare_dense(request)?.expect("a dense request");
            let kind = ProbeKind::Dense {
                query: dense.query,
                using: request.using.map(str::to_string),
                strategy: request.strategy,
            };
            (kind, dense.space.distance)
        };
        let probe = Probe {
            kind,
            wanted: request.offset + request.limit,
            filter: request.filter.cloned(),
        };
        Ok((probe, distance))
    }

    /// The job's best `(id, distance)` hits for `request` as it returns them: `offset`
    /// skipped, scores as the user sees them, within the threshold, each with its point
    /// (a point deleted since it was found is left out).
    fn scored(
        &self,
        hits: Vec<(PointId, f32)>,
        request: &SearchRequest<'_>,
        distance: Distance,
    ) -> Result<Vec<ScoredPoint>> {
        let kept: Vec<(PointId, f32)> = hits
            .into_iter()
            .skip(request.offset)
            .map(|(id, hit)| (id, user_score(hit, distance)))
            .filter(|(_, score)| {
                request
                    .score_threshold
                    .is_none_or(|threshold| within_threshold(*score, threshold, distance))
            })
            .collect();
        let ids: Vec<PointId> = kept.iter().map(|(id, _)| *id).collect();
        let mut points = self.get_many(&ids)?;
        Ok(kept
            .into_iter()
            .filter_map(|(id, score)| {
                let point = points.remove(&id)?;
                Some(ScoredPoint {
                    id,
                    score,
                    payload: point.payload,
                    vector: point.vector,
                    side: point.side,
                })
            })
            .collect())
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
