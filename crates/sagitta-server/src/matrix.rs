//! Distance matrices: `POST /collections/{c}/points/search/matrix/pairs` and `/offsets`.
//!
//! As Qdrant: up to `sample` points (default 10) are drawn at random from those passing
//! `filter` that have the vector `using`; fewer than two give an empty matrix. The sample is
//! sorted by id; for each sampled point, its `limit` (default 3) nearest among the other
//! sampled points are found by an exact search with the point's own vector (scores as a
//! search gives them). `pairs` lists `{a, b, score}` row by row; `offsets` gives the same
//! cells as row and column numbers into `ids`.
//!
//! Cost: `sample` point reads and `sample` exact scans of `sample − 1` candidates each —
//! O(sample² · dim); `sample` and `limit` are bounded by [`MAX_SAMPLE`].

use std::collections::HashSet;
use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use rand::seq::SliceRandom;
use sagitta_engine::filter::Condition;
use sagitta_engine::{
    Collection, Filter, PointId, ScoredPoint, SearchRequest, SideVector, Strategy,
};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::body::JsonBody;
use crate::collections::{collection, read, Path};
use crate::error::{ApiError, ApiResult};
use crate::response::ok;
use crate::similarity::{Scored, Slot};
use crate::wire::{parse_filter, IdOutput, NoShardKeys, NullOnly, DEFAULT_VECTOR_NAME};
use crate::SharedState;

/// Most points a matrix samples, and most neighbours per row.
pub const MAX_SAMPLE: usize = 1_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixRequest {
    #[serde(default)]
    sample: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    filter: Option<Value>,
    #[serde(default)]
    using: Option<String>,
    #[serde(default)]
    #[allow(dead_code)]
    shard_key: Option<NullOnly<NoShardKeys>>,
}

/// The sampled ids (sorted) and each one's nearest other sampled points.
struct Matrix {
    ids: Vec<PointId>,
    rows: Vec<Vec<ScoredPoint>>,
}

fn bounded(value: Option<usize>, default: usize, field: &str) -> ApiResult<usize> {
    let value = value.unwrap_or(default);
    if value == 0 || value > MAX_SAMPLE {
        return Err(ApiError::bad_request(format!(
            "Wrong input: `{field}` = {value}: must be 1 to {MAX_SAMPLE}"
        )));
    }
    Ok(value)
}

async fn matrix(state: &SharedState, name: String, request: MatrixRequest) -> ApiResult<Matrix> {
    let target = collection(state, &name)?;
    let filter = parse_filter(request.filter.as_ref(), "filter")?;
    let sample = bounded(request.sample, 10, "sample")?;
    let limit = bounded(request.limit, 3, "limit")?;
    let using = request
        .using
        .unwrap_or_else(|| DEFAULT_VECTOR_NAME.to_string());
    read(state, move || {
        let filter = crate::wire::bound_filter(&target, filter, &name)?;
        let engine = |error| ApiError::from_engine(error, &name);
        let unknown = || crate::wire::unknown_vector_name("using", &using);
        if !target.spaces().is_named() && using != DEFAULT_VECTOR_NAME {
            return Err(unknown());
        }
        let (slot, _) =
            Slot::named(target.spaces(), target.config().distance, &using).ok_or_else(unknown)?;
        let mut candidates = match &filter {
            Some(filter) => target.matching_ids(filter),
            None => target.matching_ids(&Filter::default()),
        }
        .map_err(engine)?;
        candidates.shuffle(&mut rand::thread_rng());
        let mut sampled = Vec::with_capacity(sample);
        for id in candidates {
            if sampled.len() == sample {
                break;
            }
            if let Some(point) = target.get(&id).map_err(engine)? {
                let has = slot
                    .of(target.spaces(), &point.vector, &point.side)
                    .is_some();
                if has {
                    sampled.push(point);
                }
            }
        }
        if sampled.len() < 2 {
            return Ok(Matrix {
                ids: Vec::new(),
                rows: Vec::new(),
            });
        }
        sampled.sort_by_key(|point| point.id);
        let ids: Vec<PointId> = sampled.iter().map(|point| point.id).collect();
        let spaces = target.spaces();
        let rows = sampled
            .iter()
            .map(|point| {
                let others: HashSet<PointId> =
                    ids.iter().copied().filter(|id| *id != point.id).collect();
                let within = Filter {
                    must: filter
                        .iter()
                        .map(|filter| Condition::Nested(Box::new(filter.clone())))
                        .chain([Condition::HasId(others)])
                        .collect(),
                    ..Filter::default()
                };
                let vector = slot.of(spaces, &point.vector, &point.side);
                nearest(&target, vector, &using, &within, limit).map_err(engine)
            })
            .collect::<ApiResult<Vec<_>>>()?;
        Ok(Matrix { ids, rows })
    })
    .await
}

/// An exact search among the points `within` passes, by one sampled point's vector.
fn nearest(
    target: &Collection,
    vector: Option<Scored<'_>>,
    using: &str,
    within: &Filter,
    limit: usize,
) -> sagitta_engine::error::Result<Vec<ScoredPoint>> {
    let (dense, side): (&[f32], Option<&SideVector>) = match vector {
        Some(Scored::Dense(values)) => (values, None),
        Some(Scored::Side(side)) => (&[], Some(side)),
        None => return Ok(Vec::new()),
    };
    target.query(&SearchRequest {
        vector: dense,
        limit,
        offset: 0,
        filter: Some(within),
        score_threshold: None,
        strategy: Strategy::Exact,
        using: target.spaces().is_named().then_some(using),
        sparse: side.and_then(SideVector::as_sparse),
        multi: side.and_then(SideVector::as_multi),
    })
}

pub async fn pairs(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<MatrixRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let Matrix { ids, rows } = matrix(&state, name, request).await?;
    let pairs: Vec<Value> = ids
        .iter()
        .zip(&rows)
        .flat_map(|(a, row)| {
            row.iter().map(
                move |hit| json!({"a": IdOutput(*a), "b": IdOutput(hit.id), "score": hit.score}),
            )
        })
        .collect();
    Ok(ok(json!({ "pairs": pairs }), started))
}

pub async fn offsets(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<MatrixRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let Matrix { ids, rows } = matrix(&state, name, request).await?;
    let (mut offsets_row, mut offsets_col, mut scores) = (Vec::new(), Vec::new(), Vec::new());
    for (row, hits) in rows.iter().enumerate() {
        for hit in hits {
            let column = ids
                .binary_search(&hit.id)
                .expect("a hit is a sampled point");
            offsets_row.push(row);
            offsets_col.push(column);
            scores.push(hit.score);
        }
    }
    let ids: Vec<IdOutput> = ids.into_iter().map(IdOutput).collect();
    let result = json!({"offsets_row": offsets_row, "offsets_col": offsets_col,
                        "scores": scores, "ids": ids});
    Ok(ok(result, started))
}
