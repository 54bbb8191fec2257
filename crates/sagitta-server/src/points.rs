//! Point endpoints: upsert, query (and the pre-1.16 search), scroll, count, retrieve,
//! delete and payload updates.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Instant;

use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use sagitta_engine::collection::MAX_LIMIT;
use sagitta_engine::filter::{Condition, KeyPath};
use sagitta_engine::point::parse_uuid;
use sagitta_engine::{
    Collection, Database, Filter, Point, PointId, ScoredPoint, SearchRequest, SideVector, Strategy,
    VectorSpaces,
};
use serde_json::{json, Value};
use tokio::sync::OwnedSemaphorePermit;

use crate::body::{wait_flag, JsonBody};
use crate::collections::{blocking, collection, read, update_result, Path};
use crate::error::{ApiError, ApiResult};
use crate::mmr::Reranking;
use crate::payload_key::{parse_key, set_payload_at};
use crate::recommend::{ExampleScoring, ExampleVector, Page, ScoreStrategy};
use crate::response::ok;
use crate::wire::{
    check_count, multi_vector, parse_filter, record_output, scored_output, unknown_vector_name,
    ExampleInput, Fusion, IdInput, IdOutput, NamedVector, PointSelector, Prefetches,
    QueryBatchRequest, QueryInput, QueryRequest, RecommendInput, RecordOutput, RetrieveRequest,
    ScoredPointOutput, ScrollRequest, SearchBatchRequest, SearchHits, SearchParamsInput,
    SearchRequestInput, SearchVectorInput, SetPayloadRequest, UpdateMode, UpsertRequest,
    VectorInput, VectorPick, WithPayload, WithVector, DEFAULT_VECTOR_NAME,
};
use crate::SharedState;

/// Results returned when a request gives no `limit`.
const DEFAULT_LIMIT: usize = 10;

/// `limit` as the client sent it (or the default), checked before anything is derived
/// from it: 0 is refused as Qdrant refuses it, and so is anything over [`MAX_LIMIT`].
fn checked_limit(limit: Option<usize>, field: &str) -> ApiResult<usize> {
    match limit.unwrap_or(DEFAULT_LIMIT) {
        0 => Err(ApiError::bad_request(format!(
            "Wrong input: `{field}limit`: value 0 invalid, must be 1 or larger"
        ))),
        limit if limit > MAX_LIMIT => Err(ApiError::bad_request(format!(
            "Wrong input: `{field}limit` = {limit}: must be at most {MAX_LIMIT}"
        ))),
        limit => Ok(limit),
    }
}

/// `filter` with the point a query by id starts from left out (as Qdrant does, before
/// `offset` and `limit` apply).
pub(crate) fn without_point(filter: Option<Filter>, id: PointId) -> Filter {
    without_points(filter, [id])
}

/// `filter` with the points `ids` left out (a recommendation's examples), one
/// condition for all of them.
pub(crate) fn without_points(
    filter: Option<Filter>,
    ids: impl IntoIterator<Item = PointId>,
) -> Filter {
    Filter {
        must: filter
            .map(|filter| vec![Condition::Nested(Box::new(filter))])
            .unwrap_or_default(),
        must_not: vec![Condition::HasId(ids.into_iter().collect())],
        ..Filter::default()
    }
}

/// A write slot, or 429 with `Retry-After` when every slot is taken.
pub(crate) fn write_slot(state: &SharedState) -> ApiResult<OwnedSemaphorePermit> {
    Arc::clone(&state.write_slots)
        .try_acquire_owned()
        .map_err(|_| {
            state.metrics.count_rejected_write();
            ApiError::too_many_requests(
                format!(
                    "write queue is full ({} writes in flight); retry later",
                    state.config.max_pending_writes
                ),
                1,
            )
        })
}

pub async fn upsert(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(mut request): JsonBody<UpsertRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let mode = request.update_mode.unwrap_or_default();
    let update_filter = parse_filter(request.update_filter.take().as_ref(), "update_filter")?;
    let points = request.into_points(state.config.max_batch_points, target.spaces())?;
    crate::settings::admit_upsert(&state, &target, &name, points.len())?;
    let slot = write_slot(&state)?;
    let count = blocking(move || {
        let _slot = slot;
        let order = write_order(&name);
        let (_guard, points) = if mode == UpdateMode::Upsert && update_filter.is_none() {
            (WriteGuard::Shared(shared(order)), points)
        } else {
            // A point's existence and payload are read and acted on with no other write
            // to this collection in between.
            let guard = WriteGuard::Exclusive(exclusive(order));
            (
                guard,
                admitted(&target, points, mode, update_filter.as_ref())
                    .map_err(|error| ApiError::from_engine(error, &name))?,
            )
        };
        let count = points.len() as u64;
        if !points.is_empty() {
            target
                .upsert(points, wait)
                .map_err(|error| ApiError::from_engine(error, &name))?;
        }
        Ok(count)
    })
    .await?;
    state.metrics.count_points_upserted(count);
    Ok(ok(update_result(&state, wait), started))
}

/// Orders the writes to one collection around conditional upserts (`update_mode`,
/// `update_filter`), which read points and then write: those take their collection's
/// stripe exclusively, every other write takes it shared (so plain writes still run
/// side by side). Striped by name hash, so the table stays small whatever the number of
/// collections; two collections sharing a stripe only wait for each other's conditional
/// upserts.
static WRITE_ORDER: [RwLock<()>; 64] = [const { RwLock::new(()) }; 64];

pub(crate) fn write_order(collection: &str) -> &'static RwLock<()> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    collection.hash(&mut hasher);
    #[allow(clippy::cast_possible_truncation)] // the remainder is below 64
    let stripe = (hasher.finish() % WRITE_ORDER.len() as u64) as usize;
    &WRITE_ORDER[stripe]
}

/// A held stripe of [`WRITE_ORDER`]; held, never read.
#[allow(dead_code)]
enum WriteGuard {
    Shared(RwLockReadGuard<'static, ()>),
    Exclusive(RwLockWriteGuard<'static, ()>),
}

/// A poisoned stripe guards no data, so it is taken anyway.
fn shared(lock: &'static RwLock<()>) -> RwLockReadGuard<'static, ()> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn exclusive(lock: &'static RwLock<()>) -> RwLockWriteGuard<'static, ()> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}

/// The points of a conditional upsert that are applied, in order, as Qdrant applies them
/// one by one: a point that exists is replaced unless `mode` is `insert_only` or its
/// current state fails `update_filter`; a new point is inserted unless `mode` is
/// `update_only`. An earlier point of the same batch counts as existing.
pub(crate) fn admitted(
    collection: &Collection,
    points: Vec<Point>,
    mode: UpdateMode,
    update_filter: Option<&Filter>,
) -> sagitta_engine::error::Result<Vec<Point>> {
    // Each id's state as the batch goes: None = absent, Some(payload) = present.
    let mut states: HashMap<PointId, Option<Option<Value>>> = HashMap::new();
    let mut kept = Vec::with_capacity(points.len());
    for point in points {
        let state = match states.entry(point.id) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let stored = collection.get(&point.id)?;
                entry.insert(stored.map(|stored| parsed(&stored)))
            }
        };
        let admit = match state {
            None => mode != UpdateMode::UpdateOnly,
            Some(payload) => {
                mode != UpdateMode::InsertOnly
                    && update_filter
                        .is_none_or(|filter| filter.matches(&point.id, payload.as_ref()))
            }
        };
        if admit {
            *state = Some(parsed(&point));
            kept.push(point);
        }
    }
    Ok(kept)
}

/// A point's payload as JSON (`None` when it has none).
fn parsed(point: &Point) -> Option<Value> {
    point
        .payload
        .as_deref()
        .and_then(|text| serde_json::from_str(text).ok())
}

// ---------------------------------------------------------------------------------------
// The four search endpoints: `query` and `query/batch` (Qdrant 1.10+), `search` and
// `search/batch` (the pre-1.16 API). What Qdrant's API makes them differ in is their
// request shape ([`SearchBody::prepare`]), the shape of their hits
// ([`SearchBody::answer`]) and one search or a batch ([`Searches`]); everything else is
// the one path of [`answer_searches`].

/// One search, checked and owned, ready for the blocking pool: everything but its vector.
pub(crate) struct Search {
    pub limit: usize,
    pub offset: usize,
    pub filter: Option<Filter>,
    pub score_threshold: Option<f32>,
    strategy: Strategy,
    pub with_payload: WithPayload,
    pub with_vector: VectorPick,
    /// The named vector searched (`None`: the unnamed one).
    using: Option<String>,
    /// The vector of `lookup_from`'s collection that examples by id are read from (`None`:
    /// the one searched).
    lookup_vector: Option<String>,
    /// A recommendation scored against its examples instead of a vector search.
    pub scoring: Option<ExampleScoring>,
    /// A sparse or multivector query, for the side vector `using` names, instead of a
    /// dense vector.
    pub side: Option<SideVector>,
    /// Hits re-ranked by maximal marginal relevance ([`crate::mmr`]); `limit` then counts
    /// the candidates searched, `mmr_limit` the hits answered.
    pub mmr: Reranking,
}

impl Search {
    /// The vector a stored point's is read from — `lookup_from.vector` when given (it
    /// applies to `lookup_from`'s collection), else the one searched — and the field that
    /// names it, for errors.
    pub fn source_vector(&self) -> (Option<&str>, &'static str) {
        match self.lookup_vector.as_deref() {
            Some(name) => (Some(name), "lookup_from.vector"),
            None => (self.using.as_deref(), "using"),
        }
    }
}

/// Where a search's vector comes from.
pub(crate) enum SearchVector {
    /// Sent in the request.
    Given(Vec<f32>),
    /// A sparse vector or a multivector sent in the request.
    Side(SideVector),
    /// Hits of `sources` (prefetches), fused or re-scored by `then`
    /// ([`crate::prefetch`]).
    Prefetch {
        sources: Vec<(SearchVector, Search)>,
        then: Box<SearchVector>,
    },
    /// A fusion of the prefetches' hits (only as a [`SearchVector::Prefetch`]'s `then`).
    Fusion(Fusion),
    /// A stored point's (a query by id), read on the blocking pool from the collection
    /// `lookup_from` names, else the one queried; `field` prefixes its errors.
    Point {
        id: PointId,
        lookup_from: Option<String>,
        field: String,
    },
    /// `recommend`: with the average-vector strategy (`None`) a search for the mean of
    /// the positive examples moved away from the mean of the negative ones
    /// (`2·mean(pos) − mean(neg)`, as Qdrant); with `best_score` or `sum_scores` a scan
    /// scoring every point against the examples ([`crate::recommend`]). Examples by id
    /// are read as [`SearchVector::Point`] is.
    Recommend {
        positive: Vec<Example>,
        negative: Vec<Example>,
        strategy: Option<ScoreStrategy>,
        lookup_from: Option<String>,
        field: String,
    },
}

/// A recommendation example.
pub(crate) enum Example {
    Vector(ExampleVector),
    Point(PointId),
}

/// The examples of `recommend`, checked: vectors (the unnamed form, or the one named
/// vector searched) or point ids.
fn examples(inputs: Vec<ExampleInput>, field: &str) -> ApiResult<Vec<Example>> {
    inputs
        .into_iter()
        .enumerate()
        .map(|(index, ExampleInput(input))| match input {
            QueryInput::Vector(vector) => Ok(Example::Vector(ExampleVector::Dense(vector))),
            QueryInput::Point(id) => Ok(Example::Point(id)),
            QueryInput::Sparse(vector) => Ok(Example::Vector(ExampleVector::Side(
                SideVector::Sparse(vector),
            ))),
            QueryInput::Multi(rows) => Ok(Example::Vector(ExampleVector::Side(SideVector::Multi(
                multi_vector(&rows, &format!("{field}[{index}]"))?,
            )))),
            QueryInput::Named(named) => {
                let values = named.into_iter().map(|(_, vector)| vector).next();
                match values {
                    Some(crate::wire::NamedVector::Dense(vector)) => {
                        Ok(Example::Vector(ExampleVector::Dense(vector)))
                    }
                    _ => Err(ApiError::bad_request(format!(
                        "Wrong input: `{field}[{index}]`: a vector or a point id"
                    ))),
                }
            }
            _ => Err(ApiError::bad_request(format!(
                "Wrong input: `{field}[{index}]`: a vector or a point id"
            ))),
        })
        .collect()
}

/// `query.recommend` as a search vector, its strategy checked: `average_vector` (the
/// default) needs a positive example, the others an example of either kind.
fn recommend(
    input: RecommendInput,
    lookup_from: Option<String>,
    field: &str,
) -> ApiResult<SearchVector> {
    let strategy = match input.strategy.as_deref() {
        None | Some("average_vector") => None,
        Some("best_score") => Some(ScoreStrategy::BestScore),
        Some("sum_scores") => Some(ScoreStrategy::SumScores),
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `{field}query.recommend.strategy` = {other:?}: one of \
                 \"average_vector\", \"best_score\", \"sum_scores\""
            )))
        }
    };
    if input.positive.is_empty() && (strategy.is_none() || input.negative.is_empty()) {
        return Err(ApiError::bad_request(format!(
            "Wrong input: `{field}query.recommend`: no examples: the average_vector strategy \
             needs a positive example, the others any example"
        )));
    }
    Ok(SearchVector::Recommend {
        positive: examples(input.positive, &format!("{field}query.recommend.positive"))?,
        negative: examples(input.negative, &format!("{field}query.recommend.negative"))?,
        strategy,
        lookup_from,
        field: field.to_string(),
    })
}

/// The mean of `vectors` (all of one dimension, at least one).
pub(crate) fn mean(vectors: &[Vec<f32>]) -> Vec<f64> {
    let mut sum = vec![0.0f64; vectors.first().map_or(0, Vec::len)];
    for vector in vectors {
        sum.iter_mut()
            .zip(vector)
            .for_each(|(s, v)| *s += f64::from(*v));
    }
    #[allow(clippy::cast_precision_loss)]
    let count = vectors.len().max(1) as f64;
    sum.into_iter().map(|s| s / count).collect()
}

/// A search endpoint's request shape.
pub(crate) trait SearchBody: Send + 'static {
    /// Checks and converts everything that needs no stored data (against the
    /// collection's named vectors `spaces`); `field` prefixes the names in errors
    /// (`searches[2].`).
    fn prepare(self, field: &str, spaces: &VectorSpaces) -> ApiResult<(SearchVector, Search)>;

    /// One search's hits as the endpoint answers them.
    fn answer(hits: Vec<ScoredPointOutput>) -> SearchHits;
}

/// A vector name a request gives (`using`, `vector.name`): one the collection has.
fn known_name(spaces: &VectorSpaces, name: Option<&str>, field: &str) -> ApiResult<Option<String>> {
    match name {
        None => Ok(None),
        Some(name) if spaces.is_named() && spaces.number_of(name).is_none() => {
            Err(unknown_vector_name(field, name))
        }
        Some(name) if !spaces.is_named() && name != DEFAULT_VECTOR_NAME => {
            Err(unknown_vector_name(field, name))
        }
        Some(name) => Ok(Some(name.to_string())),
    }
}

/// The prefetches of a query, each prepared as a query of its own.
fn prepared_prefetches(
    prefetch: Option<Prefetches>,
    field: &str,
    spaces: &VectorSpaces,
) -> ApiResult<Vec<(SearchVector, Search)>> {
    let Some(prefetches) = prefetch else {
        return Ok(Vec::new());
    };
    prefetches
        .into_vec()
        .into_iter()
        .enumerate()
        .map(|(index, prefetch)| prefetch.prepare(&format!("{field}prefetch[{index}]."), spaces))
        .collect()
}

/// `{"nearest": {"name": vector}}`: the one named vector given, and its name.
fn nearest_named(
    named: Vec<(String, NamedVector)>,
    field: &str,
) -> ApiResult<(String, SearchVector)> {
    let [(name, vector)] = <[_; 1]>::try_from(named).map_err(|_| {
        ApiError::bad_request(format!(
            "Wrong input: `{field}query.nearest`: give one named vector"
        ))
    })?;
    let vector = match vector {
        NamedVector::Sparse(vector) => SearchVector::Side(SideVector::Sparse(vector)),
        NamedVector::Multi(rows) => SearchVector::Side(SideVector::Multi(multi_vector(
            &rows,
            &format!("{field}query.nearest.{name}"),
        )?)),
        vector => SearchVector::Given(
            VectorInput::Named(vec![(DEFAULT_VECTOR_NAME.to_string(), vector)])
                .into_default(&format!("{field}query.nearest.{name}"))?,
        ),
    };
    Ok((name, vector))
}

impl SearchBody for QueryRequest {
    fn prepare(self, field: &str, spaces: &VectorSpaces) -> ApiResult<(SearchVector, Search)> {
        // checked against the collection it names when the examples are read
        let lookup_vector = self.lookup_from.as_ref().and_then(|l| l.vector.clone());
        let mut using = known_name(spaces, self.using.as_deref(), &format!("{field}using"))?;
        let mut limit = checked_limit(self.limit, field)?;
        let sources = prepared_prefetches(self.prefetch, field, spaces)?;
        let (query, mmr) = crate::mmr::split_mmr(self.query, &mut limit, field)?;
        let vector = match query {
            QueryInput::Fusion(_) if sources.is_empty() => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}query`: a fusion needs `prefetch` (the searches \
                     whose hits it fuses)"
                )))
            }
            QueryInput::Fusion(fusion) => SearchVector::Fusion(fusion),
            QueryInput::Vector(vector) => SearchVector::Given(vector),
            QueryInput::Sparse(vector) => SearchVector::Side(SideVector::Sparse(vector)),
            QueryInput::Multi(rows) => SearchVector::Side(SideVector::Multi(multi_vector(
                &rows,
                &format!("{field}query"),
            )?)),
            QueryInput::Named(named) if spaces.is_named() => {
                let (name, vector) = nearest_named(named, field)?;
                using = known_name(spaces, Some(&name), &format!("{field}query.nearest"))?;
                vector
            }
            QueryInput::Named(named) => SearchVector::Given(
                VectorInput::Named(named).into_default(&format!("{field}query.nearest"))?,
            ),
            QueryInput::Point(id) => SearchVector::Point {
                id,
                lookup_from: self.lookup_from.map(|lookup| lookup.collection),
                field: field.to_string(),
            },
            QueryInput::Recommend(input) => recommend(
                input,
                self.lookup_from.map(|lookup| lookup.collection),
                field,
            )?,
            QueryInput::Mmr(..) => unreachable!("unwrapped above"),
            QueryInput::Unsupported(kind) => {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}query`: {kind:?} queries are not supported; use \
                     {{\"nearest\": ..}}"
                )))
            }
        };
        let search = Search {
            limit,
            offset: self.offset.unwrap_or(0),
            filter: parse_filter(self.filter.as_ref(), &format!("{field}filter"))?,
            score_threshold: self.score_threshold,
            strategy: strategy(self.params.as_ref()),
            with_payload: self.with_payload.unwrap_or(WithPayload::Flag(false)),
            with_vector: WithVector::pick(self.with_vector.as_ref(), spaces)?,
            using,
            lookup_vector,
            scoring: None,
            side: None,
            mmr,
        };
        if sources.is_empty() {
            return Ok((vector, search));
        }
        let then = Box::new(vector);
        Ok((SearchVector::Prefetch { sources, then }, search))
    }

    fn answer(points: Vec<ScoredPointOutput>) -> SearchHits {
        SearchHits::Points { points }
    }
}

impl SearchBody for SearchRequestInput {
    fn prepare(self, field: &str, spaces: &VectorSpaces) -> ApiResult<(SearchVector, Search)> {
        let (vector, using) = match self.vector {
            SearchVectorInput::Dense(vector) => (SearchVector::Given(vector), None),
            SearchVectorInput::Named { name, vector } => {
                let using = known_name(spaces, Some(&name), &format!("{field}vector.name"))?;
                (SearchVector::Given(vector), using)
            }
            SearchVectorInput::NamedSparse { name, vector } => {
                let using = known_name(spaces, Some(&name), &format!("{field}vector.name"))?;
                (SearchVector::Side(SideVector::Sparse(vector)), using)
            }
        };
        let search = Search {
            limit: checked_limit(Some(self.limit), field)?,
            offset: self.offset.unwrap_or(0),
            filter: parse_filter(self.filter.as_ref(), &format!("{field}filter"))?,
            score_threshold: self.score_threshold,
            strategy: strategy(self.params.as_ref()),
            with_payload: self.with_payload.unwrap_or(WithPayload::Flag(false)),
            with_vector: WithVector::pick(self.with_vector.as_ref(), spaces)?,
            using,
            lookup_vector: None,
            scoring: None,
            side: None,
            mmr: None,
        };
        Ok((vector, search))
    }

    fn answer(hits: Vec<ScoredPointOutput>) -> SearchHits {
        SearchHits::List(hits)
    }
}

fn strategy(params: Option<&SearchParamsInput>) -> Strategy {
    match params {
        Some(SearchParamsInput {
            exact: Some(true), ..
        }) => Strategy::Exact,
        Some(SearchParamsInput {
            hnsw_ef: Some(ef), ..
        }) => Strategy::Beam(*ef),
        _ => Strategy::Auto,
    }
}

/// One search (answered with its hits) or a batch (`{"searches": [..]}`, answered with a
/// list of hits, one per search).
enum Searches<R> {
    One(R),
    Batch(Vec<R>),
}

/// The one path of the four search endpoints: every search is checked before the request
/// waits for a read slot; then, on the blocking pool, the vectors of queries by point id
/// are read, the searches run (as one engine batch when several), and their hits are
/// shaped as the endpoint answers them.
/// What strict mode checks of each search: its limit, beam and whether it is exact.
fn asks(prepared: &[(SearchVector, Search)]) -> Vec<(usize, Option<usize>, bool)> {
    let ask = |search: &Search| match search.strategy {
        Strategy::Beam(ef) => (search.limit, Some(ef), false),
        Strategy::Exact => (search.limit, None, true),
        Strategy::Auto => (search.limit, None, false),
    };
    prepared.iter().map(|(_, search)| ask(search)).collect()
}

async fn answer_searches<R: SearchBody>(
    state: &SharedState,
    name: String,
    searches: Searches<R>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(state, &name)?;
    let (requests, batch) = match searches {
        Searches::One(request) => (vec![request], false),
        Searches::Batch(requests) => {
            check_count("searches", requests.len(), state.config.max_batch_points)?;
            (requests, true)
        }
    };
    let prepared = requests
        .into_iter()
        .enumerate()
        .map(|(index, request)| {
            let field = if batch {
                format!("searches[{index}].")
            } else {
                String::new()
            };
            request.prepare(&field, target.spaces())
        })
        .collect::<ApiResult<Vec<_>>>()?;
    crate::settings::admit_reads(state, &target, &name, &asks(&prepared))?;
    let database = Arc::clone(&state.database);
    let mut results = read(state, move || {
        let on = QueryTarget {
            collection: &target,
            name: &name,
            database: &database,
        };
        let mut prepared = prepared;
        for (vector, search) in &mut prepared {
            on.bind(vector, search)?;
        }
        if prepared
            .iter()
            .any(|(vector, _)| matches!(vector, SearchVector::Prefetch { .. }))
        {
            // one at a time: each prefetch tree is several searches in turn
            return prepared
                .into_iter()
                .map(|(vector, search)| {
                    let (hits, search) = on.evaluate(vector, search)?;
                    Ok(shaped(hits, &search, target.spaces()))
                })
                .collect();
        }
        let searches = prepared
            .into_iter()
            .map(|(vector, search)| on.resolve(vector, search))
            .collect::<ApiResult<Vec<_>>>()?;
        run_searches(&target, &searches, &name)
    })
    .await?;
    if batch {
        let answers: Vec<SearchHits> = results.into_iter().map(R::answer).collect();
        return Ok(ok(answers, started));
    }
    Ok(ok(R::answer(results.pop().unwrap_or_default()), started))
}

/// The collection a search runs on, and the database its `lookup_from` may name.
pub(crate) struct QueryTarget<'a> {
    pub collection: &'a Collection,
    pub name: &'a str,
    pub database: &'a Database,
}

/// Runs searches (in parallel when several) and shapes their hits.
fn run_searches(
    collection: &Collection,
    searches: &[(Vec<f32>, Search)],
    name: &str,
) -> ApiResult<Vec<Vec<ScoredPointOutput>>> {
    let results = search_hits(collection, searches, name)?;
    Ok(results
        .into_iter()
        .zip(searches)
        .map(|(hits, (_, search))| shaped(hits, search, collection.spaces()))
        .collect())
}

/// One search's hits with what it asked for of each.
fn shaped(
    hits: Vec<ScoredPoint>,
    search: &Search,
    spaces: &VectorSpaces,
) -> Vec<ScoredPointOutput> {
    hits.into_iter()
        .map(|hit| scored_output(hit, &search.with_payload, &search.with_vector, spaces))
        .collect()
}

/// Runs searches (in parallel when several): their hits as the engine gives them, every
/// score checked finite.
pub(crate) fn search_hits(
    collection: &Collection,
    searches: &[(Vec<f32>, Search)],
    name: &str,
) -> ApiResult<Vec<Vec<ScoredPoint>>> {
    let requests: Vec<SearchRequest<'_>> = searches
        .iter()
        .filter(|(_, search)| search.scoring.is_none())
        .map(|(vector, search)| SearchRequest {
            vector,
            limit: search.limit,
            offset: search.offset,
            filter: search.filter.as_ref(),
            score_threshold: search.score_threshold,
            strategy: search.strategy,
            using: search.using.as_deref(),
            sparse: search.side.as_ref().and_then(SideVector::as_sparse),
            multi: search.side.as_ref().and_then(SideVector::as_multi),
        })
        .collect();
    let found = match requests.len() {
        0 => Ok(Vec::new()),
        1 => collection.query(&requests[0]).map(|hits| vec![hits]),
        _ => collection.query_batch(&requests),
    }
    .map_err(|error| ApiError::from_engine(error, name))?;
    // recommendations by score are scans, answered in their places among the searches
    let mut found = found.into_iter();
    let results = searches
        .iter()
        .map(|(_, search)| match &search.scoring {
            None => Ok(found.next().unwrap_or_default()),
            Some(scoring) => {
                let page = Page {
                    filter: search.filter.as_ref(),
                    using: search.using.as_deref(),
                    limit: search.limit,
                    offset: search.offset,
                    score_threshold: search.score_threshold,
                };
                crate::recommend::scan(collection, scoring, &page, name)
            }
        })
        .collect::<ApiResult<Vec<_>>>()?;
    results.iter().try_for_each(|hits| check_scores(hits))?;
    let spaces = collection.spaces();
    let unnamed = collection.config().distance;
    Ok(results
        .into_iter()
        .zip(searches)
        .map(|(hits, (vector, search))| match search.mmr {
            None => hits,
            Some(mmr) => {
                let using = search.using.as_deref().unwrap_or(DEFAULT_VECTOR_NAME);
                let query = (vector.as_slice(), search.side.as_ref());
                crate::mmr::rerank(hits, query, mmr, (using, spaces, unnamed))
            }
        })
        .collect())
}

/// Every score must be a finite number: JSON has no NaN or infinity, and serde would
/// answer `null` in a 200. The engine refuses vectors and queries whose scores could
/// overflow; should one slip through anyway, the request fails loudly instead.
fn check_scores(hits: &[ScoredPoint]) -> ApiResult<()> {
    match hits.iter().find(|hit| !hit.score.is_finite()) {
        None => Ok(()),
        Some(hit) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "Service internal error: point {} scored {} (not a finite number); \
                 scores are never answered as null",
                hit.id, hit.score
            ),
        )),
    }
}

pub async fn query(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<QueryRequest>,
) -> ApiResult<Response> {
    answer_searches(&state, name, Searches::One(request)).await
}

pub async fn query_batch(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<QueryBatchRequest>,
) -> ApiResult<Response> {
    answer_searches(&state, name, Searches::Batch(request.searches)).await
}

pub async fn search(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<SearchRequestInput>,
) -> ApiResult<Response> {
    answer_searches(&state, name, Searches::One(request)).await
}

pub async fn search_batch(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<SearchBatchRequest>,
) -> ApiResult<Response> {
    answer_searches(&state, name, Searches::Batch(request.searches)).await
}

pub async fn scroll(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<ScrollRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let filter = parse_filter(request.filter.as_ref(), "filter")?;
    let limit = checked_limit(request.limit, "")?;
    crate::settings::admit_reads(&state, &target, &name, &[(limit, None, false)])?;
    let with_payload = request.with_payload.unwrap_or(WithPayload::Flag(true));
    let with_vector = WithVector::pick(request.with_vector.as_ref(), target.spaces())?;
    let offset = request.offset.map(|id| id.0);
    let (points, next) = read(&state, move || {
        let filter = crate::wire::bound_filter(&target, filter, &name)?;
        let (page, next) = target
            .scroll(offset, limit, filter.as_ref())
            .map_err(|error| ApiError::from_engine(error, &name))?;
        let page: Vec<RecordOutput> = page
            .into_iter()
            .map(|point| record_output(point, &with_payload, &with_vector, target.spaces()))
            .collect();
        Ok((page, next))
    })
    .await?;
    Ok(ok(
        json!({ "points": points, "next_page_offset": next.map(IdOutput) }),
        started,
    ))
}

pub async fn count(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<crate::wire::CountRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let filter = parse_filter(request.filter.as_ref(), "filter")?;
    let count = read(&state, move || {
        let filter = crate::wire::bound_filter(&target, filter, &name)?;
        target
            .count(filter.as_ref())
            .map_err(|error| ApiError::from_engine(error, &name))
    })
    .await?;
    Ok(ok(json!({ "count": count }), started))
}

pub async fn retrieve(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<RetrieveRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    check_count("ids", request.ids.len(), state.config.max_batch_points)?;
    let with_payload = request.with_payload.unwrap_or(WithPayload::Flag(true));
    let with_vector = WithVector::pick(request.with_vector.as_ref(), target.spaces())?;
    let records =
        read(&state, move || {
            let mut records = Vec::with_capacity(request.ids.len());
            for id in &request.ids {
                let point = target
                    .get(&id.0)
                    .map_err(|error| ApiError::from_engine(error, &name))?;
                records.extend(point.map(|point| {
                    record_output(point, &with_payload, &with_vector, target.spaces())
                }));
            }
            Ok(records)
        })
        .await?;
    Ok(ok(records, started))
}

/// An id in a URL path: decimal digits (no sign: `u64::from_str` would take `+1`), or
/// UUID text.
fn parse_path_id(text: &str) -> ApiResult<PointId> {
    let digits = !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    digits
        .then(|| text.parse::<u64>().ok().map(PointId::Number))
        .flatten()
        .or_else(|| parse_uuid(text).map(PointId::Uuid))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Wrong input: point id {text:?} is neither an unsigned integer nor a UUID"
            ))
        })
}

pub async fn retrieve_one(
    State(state): State<SharedState>,
    Path((name, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let id = parse_path_id(&id)?;
    let failed = name.clone();
    let record = read(&state, move || {
        let point = target
            .get(&id)
            .map_err(|error| ApiError::from_engine(error, &failed))?;
        Ok(point.map(|point| {
            record_output(
                point,
                &WithPayload::Flag(true),
                &VectorPick::All,
                target.spaces(),
            )
        }))
    })
    .await?
    .ok_or_else(|| ApiError::not_found(format!("Not found: No point with id {id} found")))?;
    Ok(ok(record, started))
}

/// The ids a selector names: the listed ones, or those its filter matches now.
pub(crate) fn selected_ids(
    collection: &Collection,
    points: Option<Vec<IdInput>>,
    filter: Option<&Value>,
    max_points: usize,
) -> ApiResult<Vec<PointId>> {
    match (points, filter) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "Wrong input: give either `points` or `filter`, not both",
        )),
        (None, None) => Err(ApiError::bad_request(
            "Wrong input: the body needs `points` (a list of ids) or `filter`",
        )),
        (Some(points), None) => {
            check_count("points", points.len(), max_points)?;
            Ok(points.into_iter().map(|id| id.0).collect())
        }
        (None, Some(filter)) => {
            let filter = parse_filter(Some(filter), "filter")?;
            let filter = crate::wire::bound_filter(collection, filter, "")?;
            filter.map_or_else(
                || Ok(Vec::new()),
                |filter| {
                    collection
                        .matching_ids(&filter)
                        .map_err(|error| ApiError::from_engine(error, ""))
                },
            )
        }
    }
}

pub async fn delete(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<PointSelector>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let slot = write_slot(&state)?;
    let max_points = state.config.max_batch_points;
    blocking(move || {
        let _slot = slot;
        let _order = shared(write_order(&name));
        let ids = selected_ids(&target, request.points, request.filter.as_ref(), max_points)?;
        target
            .delete(&ids, wait)
            .map_err(|error| ApiError::from_engine(error, &name))
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

/// How a payload update changes the selected points.
pub(crate) enum PayloadChange {
    Set(String),
    /// `set_payload` with `key`: merged at that path ([`crate::payload_key`]).
    SetAt(KeyPath, String),
    Overwrite(String),
    DeleteKeys(Vec<String>),
}

impl PayloadChange {
    /// Applies the change to collection `name` (`target`): to the points `selector`'s ids
    /// name — every one must exist, else 404 "No point with id .. found" and nothing is
    /// changed, as Qdrant refuses it — or to those its filter matches now.
    pub(crate) fn apply(
        &self,
        (target, name): (&Collection, &str),
        selector: (Option<Vec<IdInput>>, Option<Value>),
        wait: bool,
        max_points: usize,
    ) -> ApiResult<()> {
        let engine = |error| ApiError::from_engine(error, name);
        let named = selector.0.is_some();
        let ids = selected_ids(target, selector.0, selector.1.as_ref(), max_points)?;
        if named {
            if let Some(id) = target.first_missing(&ids).map_err(engine)? {
                return Err(ApiError::not_found(format!(
                    "Not found: No point with id {id} found"
                )));
            }
        }
        match self {
            PayloadChange::Set(payload) => target.set_payload(&ids, payload, wait),
            PayloadChange::SetAt(key, payload) => {
                return set_payload_at((target, name), &ids, key, payload, wait);
            }
            PayloadChange::Overwrite(payload) => target.overwrite_payload(&ids, payload, wait),
            PayloadChange::DeleteKeys(keys) => target.delete_payload_keys(&ids, keys, wait),
        }
        .map_err(engine)
    }
}

async fn change_payload(
    state: SharedState,
    name: String,
    uri: &Uri,
    selector: (Option<Vec<IdInput>>, Option<Value>),
    change: PayloadChange,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let slot = write_slot(&state)?;
    let max_points = state.config.max_batch_points;
    blocking(move || {
        let _slot = slot;
        // a change at a key reads the payloads it rewrites: nothing else writes in between
        let _order = match change {
            PayloadChange::SetAt(..) => WriteGuard::Exclusive(exclusive(write_order(&name))),
            _ => WriteGuard::Shared(shared(write_order(&name))),
        };
        change.apply((&target, &name), selector, wait, max_points)
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

/// The change a `set_payload` request asks for: a merge of top-level keys, or at `key`.
pub(crate) fn set_change(request: &SetPayloadRequest) -> ApiResult<PayloadChange> {
    let payload = request.payload_text()?;
    Ok(match &request.key {
        None => PayloadChange::Set(payload),
        Some(key) => PayloadChange::SetAt(parse_key(key)?, payload),
    })
}

pub(crate) fn refuse_nested_key(request: &SetPayloadRequest) -> ApiResult<()> {
    match &request.key {
        Some(key) => Err(ApiError::bad_request(format!(
            "Wrong input: `key` = {key:?}: setting a payload under a nested key is not \
             supported; send the whole top-level value"
        ))),
        None => Ok(()),
    }
}

pub async fn set_payload(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<SetPayloadRequest>,
) -> ApiResult<Response> {
    let change = set_change(&request)?;
    let selector = (request.points, request.filter);
    change_payload(state, name, &uri, selector, change).await
}

pub async fn overwrite_payload(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<SetPayloadRequest>,
) -> ApiResult<Response> {
    refuse_nested_key(&request)?;
    let payload = request.payload_text()?;
    let selector = (request.points, request.filter);
    change_payload(
        state,
        name,
        &uri,
        selector,
        PayloadChange::Overwrite(payload),
    )
    .await
}

pub async fn delete_payload(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<crate::wire::DeletePayloadRequest>,
) -> ApiResult<Response> {
    let selector = (request.points, request.filter);
    change_payload(
        state,
        name,
        &uri,
        selector,
        PayloadChange::DeleteKeys(request.keys),
    )
    .await
}

pub async fn clear_payload(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<PointSelector>,
) -> ApiResult<Response> {
    let selector = (request.points, request.filter);
    change_payload(
        state,
        name,
        &uri,
        selector,
        PayloadChange::Overwrite("{}".to_string()),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_that_is_not_finite_is_never_answered() {
        let hit = |id, score| ScoredPoint {
            id: PointId::Number(id),
            score,
            payload: None,
            vector: Vec::new(),
            side: Vec::new(),
        };
        assert!(check_scores(&[hit(1, 0.5), hit(2, -3.0e38)]).is_ok());
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let error = check_scores(&[hit(1, 0.5), hit(7, bad)]).unwrap_err();
            assert_eq!(error.status, StatusCode::INTERNAL_SERVER_ERROR);
            assert!(error.message.contains("point 7"), "{}", error.message);
        }
    }
}
