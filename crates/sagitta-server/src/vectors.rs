//! `PUT /collections/{c}/points/vectors` (update vectors) and
//! `POST /collections/{c}/points/vectors/delete` (delete vectors): a stored point's named
//! vectors replaced or removed, its other vectors and its payload kept.
//!
//! Each is a read of the points and an upsert of their new state, under the collection's
//! write stripe held exclusively (as conditional upserts are), so no other write to the
//! collection falls between the read and the write. The upsert is one log record per
//! shard: a crash keeps all of a shard's changes or none.

use std::time::Instant;

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use sagitta_engine::{Collection, Point, PointId, VectorSpaces};
use serde::Deserialize;
use serde_json::Value;

use crate::body::{wait_flag, JsonBody};
use crate::collections::{blocking, collection, update_result, Path};
use crate::error::{ApiError, ApiResult};
use crate::points::{exclusive, selected_ids, write_order, write_slot};
use crate::response::ok;
use crate::wire::{check_count, parse_filter, IdInput, NoShardKeys, NullOnly, VectorInput};
use crate::SharedState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointVectorsInput {
    pub id: IdInput,
    pub vector: VectorInput,
}

/// `PUT /collections/{c}/points/vectors`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateVectorsRequest {
    pub points: Vec<PointVectorsInput>,
    /// Checked as it is read (only `null` is taken: SagittaDB has no shard keys).
    #[serde(default)]
    #[allow(dead_code)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
    /// Only points whose current state passes this filter are updated.
    #[serde(default)]
    pub update_filter: Option<Value>,
}

/// `POST /collections/{c}/points/vectors/delete`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteVectorsRequest {
    pub vector: Vec<String>,
    #[serde(default)]
    pub points: Option<Vec<IdInput>>,
    #[serde(default)]
    pub filter: Option<Value>,
    /// Checked as it is read (only `null` is taken: SagittaDB has no shard keys).
    #[serde(default)]
    #[allow(dead_code)]
    pub shard_key: Option<NullOnly<NoShardKeys>>,
}

/// `stored` with the spaces `given` holds (NaN-free parts) put in place of its own.
fn merged(stored: &[f32], given: &[f32], spaces: &VectorSpaces) -> Vec<f32> {
    if !spaces.is_named() {
        return given.to_vec();
    }
    let old = spaces.split(stored);
    let new = spaces.split(given);
    let parts: Vec<Option<&[f32]>> = old
        .into_iter()
        .zip(new)
        .map(|(old, new)| new.or(old))
        .collect();
    spaces.join(&parts)
}

fn missing(id: PointId) -> ApiError {
    ApiError::not_found(format!("Not found: No point with id {id} found"))
}

pub async fn update_vectors(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<UpdateVectorsRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    check_count(
        "points",
        request.points.len(),
        state.config.max_batch_points,
    )?;
    let update_filter = parse_filter(request.update_filter.as_ref(), "update_filter")?;
    let spaces = target.spaces().clone();
    let given = request
        .points
        .into_iter()
        .enumerate()
        .map(|(index, point)| {
            let vector = point
                .vector
                .into_stored(&format!("points[{index}].vector"), &spaces)?;
            Ok((point.id.0, vector))
        })
        .collect::<ApiResult<Vec<_>>>()?;
    let slot = write_slot(&state)?;
    blocking(move || {
        let _slot = slot;
        let _order = exclusive(write_order(&name));
        let mut points: Vec<Point> = Vec::with_capacity(given.len());
        for (id, vector) in given {
            // an earlier entry of the same request for this id counts as its state
            let stored = match points.iter().rposition(|point| point.id == id) {
                Some(at) => points[at].clone(),
                None => stored_point(&target, id, &name)?,
            };
            let passes = update_filter.as_ref().is_none_or(|filter| {
                let payload = stored
                    .payload
                    .as_deref()
                    .and_then(|text| serde_json::from_str(text).ok());
                filter.matches(&id, payload.as_ref())
            });
            if passes {
                points.push(Point {
                    id,
                    vector: merged(&stored.vector, &vector, &spaces),
                    payload: stored.payload,
                });
            }
        }
        write(&target, points, wait, &name)
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

pub async fn delete_vectors(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<DeleteVectorsRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let spaces = target.spaces().clone();
    if !spaces.is_named() {
        return Err(ApiError::bad_request(
            "Wrong input: the collection has one unnamed vector, which a point cannot be \
             without; delete the point instead",
        ));
    }
    let removed = request
        .vector
        .iter()
        .map(|name| {
            spaces
                .index_of(name)
                .ok_or_else(|| crate::wire::unknown_vector_name("vector", name))
        })
        .collect::<ApiResult<Vec<usize>>>()?;
    parse_filter(request.filter.as_ref(), "filter")?;
    let max_points = state.config.max_batch_points;
    let slot = write_slot(&state)?;
    blocking(move || {
        let _slot = slot;
        let _order = exclusive(write_order(&name));
        let ids = selected_ids(&target, request.points, request.filter.as_ref(), max_points)?;
        let mut points = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(stored) = target
                .get(&id)
                .map_err(|error| ApiError::from_engine(error, &name))?
            else {
                continue; // as Qdrant: a listed id that does not exist is skipped
            };
            let parts: Vec<Option<&[f32]>> = spaces
                .split(&stored.vector)
                .into_iter()
                .enumerate()
                .map(|(index, part)| part.filter(|_| !removed.contains(&index)))
                .collect();
            points.push(Point {
                id,
                vector: spaces.join(&parts),
                payload: stored.payload,
            });
        }
        write(&target, points, wait, &name)
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

fn stored_point(collection: &Collection, id: PointId, name: &str) -> ApiResult<Point> {
    collection
        .get(&id)
        .map_err(|error| ApiError::from_engine(error, name))?
        .ok_or_else(|| missing(id))
}

fn write(collection: &Collection, points: Vec<Point>, wait: bool, name: &str) -> ApiResult<()> {
    if points.is_empty() {
        return Ok(());
    }
    collection
        .upsert(points, wait)
        .map_err(|error| ApiError::from_engine(error, name))
}
