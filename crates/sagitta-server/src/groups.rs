//! Grouped search: `POST /collections/{c}/points/query/groups` and `.../search/groups`.
//! The hits of the search, best first, are grouped by the values of the payload field
//! `group_by` (strings and integers; a point whose field holds several values joins each
//! value's group; points without one are skipped); the first `limit` groups to appear,
//! each with up to `group_size` hits, are answered, as Qdrant answers them
//! (`{"groups": [{"id", "hits", "lookup"?}]}`), with `with_lookup`'s point of each group
//! (the point whose id is the group's value) from another collection.
//!
//! The search is widened until the groups are full or the hits run out: it first asks for
//! `4 · limit · group_size` hits (at least 64), and doubles up to the engine's limit
//! (10,000 hits), as a group-by over the best hits of a large collection.

use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use sagitta_engine::collection::MAX_LIMIT;
use sagitta_engine::{Collection, Database, PointId, ScoredPoint};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::body::JsonBody;
use crate::collections::{collection, read, Path};
use crate::error::{ApiError, ApiResult};
use crate::points::{search_hits, QueryTarget, Search, SearchBody};
use crate::response::ok;
use crate::wire::{
    record_output, scored_output, LookupLocation, NoPrefetch, NoShardKeys, NullOnly, QueryInput,
    QueryRequest, RecordOutput, ScoredPointOutput, SearchParamsInput, SearchRequestInput,
    SearchVectorInput, VectorPick, WithPayload, WithVector,
};
use crate::SharedState;

/// Groups answered when the request gives no `limit`, and hits per group without
/// `group_size` (Qdrant's defaults).
const DEFAULT_GROUPS: usize = 10;
const DEFAULT_GROUP_SIZE: usize = 3;
/// Hits asked for at first, at least.
const FIRST_WINDOW_MIN: usize = 64;

/// `with_lookup`: a collection name, or `{collection, with_payload, with_vectors}`.
pub struct WithLookup {
    collection: String,
    with_payload: Option<WithPayload>,
    with_vectors: Option<WithVector>,
}

impl<'de> Deserialize<'de> for WithLookup {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<WithLookup, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Full {
            collection: String,
            #[serde(default)]
            with_payload: Option<WithPayload>,
            #[serde(default)]
            with_vectors: Option<WithVector>,
        }
        struct LookupVisitor;
        impl<'de> Visitor<'de> for LookupVisitor {
            type Value = WithLookup;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a collection name, or {\"collection\", \"with_payload\", ..}")
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<WithLookup, E> {
                Ok(WithLookup {
                    collection: name.to_string(),
                    with_payload: None,
                    with_vectors: None,
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<WithLookup, A::Error> {
                let full = Full::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(WithLookup {
                    collection: full.collection,
                    with_payload: full.with_payload,
                    with_vectors: full.with_vectors,
                })
            }
        }
        deserializer.deserialize_any(LookupVisitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct QueryGroupsRequest {
    shard_key: Option<NullOnly<NoShardKeys>>,
    prefetch: Option<NullOnly<NoPrefetch>>,
    query: Option<QueryInput>,
    using: Option<String>,
    filter: Option<Value>,
    params: Option<SearchParamsInput>,
    score_threshold: Option<f32>,
    with_payload: Option<WithPayload>,
    with_vector: Option<WithVector>,
    lookup_from: Option<LookupLocation>,
    group_by: String,
    group_size: Option<usize>,
    limit: Option<usize>,
    with_lookup: Option<WithLookup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchGroupsRequest {
    #[serde(default)]
    shard_key: Option<NullOnly<NoShardKeys>>,
    vector: SearchVectorInput,
    #[serde(default)]
    filter: Option<Value>,
    #[serde(default)]
    params: Option<SearchParamsInput>,
    #[serde(default)]
    score_threshold: Option<f32>,
    #[serde(default)]
    with_payload: Option<WithPayload>,
    #[serde(default)]
    with_vector: Option<WithVector>,
    group_by: String,
    #[serde(default)]
    group_size: Option<usize>,
    limit: usize,
    #[serde(default)]
    with_lookup: Option<WithLookup>,
}

/// What a grouped search asks besides its search.
struct Grouping {
    group_by: String,
    groups: usize,
    group_size: usize,
    with_lookup: Option<WithLookup>,
}

impl Grouping {
    fn checked(self) -> ApiResult<Grouping> {
        if self.group_by.is_empty() {
            return Err(ApiError::bad_request(
                "Wrong input: `group_by` must name a payload field",
            ));
        }
        for (field, value) in [("limit", self.groups), ("group_size", self.group_size)] {
            if value == 0 || value > MAX_LIMIT {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `{field}` = {value}: must be 1..={MAX_LIMIT}"
                )));
            }
        }
        Ok(self)
    }
}

/// One group as answered.
#[derive(Serialize)]
struct GroupOutput {
    id: Value,
    hits: Vec<ScoredPointOutput>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lookup: Option<RecordOutput>,
}

pub async fn query_groups(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<QueryGroupsRequest>,
) -> ApiResult<Response> {
    let grouping = Grouping {
        group_by: request.group_by,
        groups: request.limit.unwrap_or(DEFAULT_GROUPS),
        group_size: request.group_size.unwrap_or(DEFAULT_GROUP_SIZE),
        with_lookup: request.with_lookup,
    };
    let query = QueryRequest {
        shard_key: request.shard_key,
        // refused as it is read (`NoPrefetch`): groups of fused hits are not served
        prefetch: request.prefetch.and(None),
        query: request.query,
        using: request.using,
        filter: request.filter,
        params: request.params,
        limit: Some(1),
        offset: None,
        score_threshold: request.score_threshold,
        with_payload: request.with_payload,
        with_vector: request.with_vector,
        lookup_from: request.lookup_from,
    };
    answer_groups(&state, name, query, grouping).await
}

pub async fn search_groups(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<SearchGroupsRequest>,
) -> ApiResult<Response> {
    let grouping = Grouping {
        group_by: request.group_by,
        groups: request.limit,
        group_size: request.group_size.unwrap_or(1),
        with_lookup: request.with_lookup,
    };
    let search = SearchRequestInput {
        shard_key: request.shard_key,
        vector: request.vector,
        filter: request.filter,
        params: request.params,
        limit: 1,
        offset: None,
        score_threshold: request.score_threshold,
        with_payload: request.with_payload,
        with_vector: request.with_vector,
    };
    answer_groups(&state, name, search, grouping).await
}

async fn answer_groups<R: SearchBody>(
    state: &SharedState,
    name: String,
    request: R,
    grouping: Grouping,
) -> ApiResult<Response> {
    let started = Instant::now();
    let grouping = grouping.checked()?;
    let target = collection(state, &name)?;
    let (vector, search) = request.prepare("", target.spaces())?;
    let database = std::sync::Arc::clone(&state.database);
    let groups = read(state, move || {
        let on = QueryTarget {
            collection: &target,
            name: &name,
            database: &database,
        };
        let resolved = on.resolve(vector, search)?;
        grouped(&target, &database, resolved, &grouping, &name)
    })
    .await?;
    Ok(ok(serde_json::json!({ "groups": groups }), started))
}

/// The group values of a hit: the strings and integers at `key`, each once.
fn group_values(hit: &ScoredPoint, key: &str) -> Vec<Value> {
    let Some(payload) = hit
        .payload
        .as_deref()
        .and_then(|text| serde_json::from_str::<Value>(text).ok())
    else {
        return Vec::new();
    };
    let mut values: Vec<Value> = sagitta_engine::filter::payload_values(&payload, key)
        .unwrap_or_default()
        .into_iter()
        .filter(|value| value.is_string() || value.is_i64() || value.is_u64())
        .collect();
    let mut seen = Vec::with_capacity(values.len());
    values.retain(|value| {
        let fresh = !seen.contains(value);
        if fresh {
            seen.push(value.clone());
        }
        fresh
    });
    values
}

/// The hits of `search`, widened until `grouping` is satisfied, grouped.
fn grouped(
    collection: &Collection,
    database: &Database,
    (vector, mut search): (Vec<f32>, Search),
    grouping: &Grouping,
    name: &str,
) -> ApiResult<Vec<GroupOutput>> {
    let wanted = grouping.groups.saturating_mul(grouping.group_size);
    let mut window = wanted.saturating_mul(4).clamp(FIRST_WINDOW_MIN, MAX_LIMIT);
    let with_payload = std::mem::replace(&mut search.with_payload, WithPayload::Flag(true));
    let with_vector = search.with_vector.clone();
    loop {
        search.limit = window;
        let searches = [(vector.clone(), search)];
        let hits = search_hits(collection, &searches, name)?
            .pop()
            .unwrap_or_default();
        let [(_, back)] = searches;
        search = back;
        let exhausted = hits.len() < window || window >= MAX_LIMIT;
        let groups = group(hits, grouping);
        let full = groups.len() >= grouping.groups
            && groups
                .iter()
                .all(|(_, hits)| hits.len() >= grouping.group_size);
        if full || exhausted {
            return groups
                .into_iter()
                .take(grouping.groups)
                .map(|(id, hits)| {
                    let lookup = lookup(database, grouping.with_lookup.as_ref(), &id)?;
                    let hits = hits
                        .into_iter()
                        .map(|hit| {
                            scored_output(hit, &with_payload, &with_vector, collection.spaces())
                        })
                        .collect();
                    Ok(GroupOutput { id, hits, lookup })
                })
                .collect();
        }
        window = window.saturating_mul(2).min(MAX_LIMIT);
    }
}

/// Hits grouped by value, groups in the order they first appear, each capped.
fn group(hits: Vec<ScoredPoint>, grouping: &Grouping) -> Vec<(Value, Vec<ScoredPoint>)> {
    let mut groups: Vec<(Value, Vec<ScoredPoint>)> = Vec::new();
    for hit in hits {
        for value in group_values(&hit, &grouping.group_by) {
            let at = match groups.iter().position(|(id, _)| *id == value) {
                Some(at) => at,
                None => {
                    groups.push((value, Vec::new()));
                    groups.len() - 1
                }
            };
            if groups[at].1.len() < grouping.group_size {
                groups[at].1.push(hit.clone());
            }
        }
    }
    groups
}

/// `with_lookup`'s point for group `id` (a point id: an integer or UUID text).
fn lookup(
    database: &Database,
    with_lookup: Option<&WithLookup>,
    id: &Value,
) -> ApiResult<Option<RecordOutput>> {
    let Some(with_lookup) = with_lookup else {
        return Ok(None);
    };
    let source = database
        .collection(&with_lookup.collection)
        .map_err(|_| ApiError::collection_not_found(&with_lookup.collection))?;
    let point_id = match id {
        Value::Number(number) => number.as_u64().map(PointId::Number),
        Value::String(text) => sagitta_engine::point::parse_uuid(text).map(PointId::Uuid),
        _ => None,
    };
    let Some(point_id) = point_id else {
        return Ok(None);
    };
    let Some(point) = source
        .get(&point_id)
        .map_err(|error| ApiError::from_engine(error, &with_lookup.collection))?
    else {
        return Ok(None);
    };
    let with_payload = with_lookup
        .with_payload
        .clone()
        .unwrap_or(WithPayload::Flag(true));
    let with_vectors = match &with_lookup.with_vectors {
        None => VectorPick::None,
        some => WithVector::pick(some.as_ref(), source.spaces())?,
    };
    Ok(Some(record_output(
        point,
        &with_payload,
        &with_vectors,
        source.spaces(),
    )))
}
