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
use sagitta_engine::{Collection, Filter, Point, PointId, VectorSpaces};
use serde::Deserialize;
use serde_json::Value;

use crate::body::{wait_flag, JsonBody};
use crate::collections::{blocking, collection, update_result, Path};
use crate::error::{ApiError, ApiResult};
use crate::points::{exclusive, selected_ids, write_order, write_slot};
use crate::response::ok;
use crate::wire::{
    check_count, parse_filter, IdInput, NoShardKeys, NullOnly, StoredVectors, VectorInput,
};
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
        let kept = given.is_empty() || sagitta_engine::spaces::is_absent(given);
        return if kept { stored } else { given }.to_vec();
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

/// The vectors of an update: each point's id and its vectors as given (NaNs where a
/// dense named vector is not, `None` where a side one is not).
pub(crate) type GivenVectors = Vec<(PointId, StoredVectors)>;

/// The points of a delete: listed ids, or a filter.
pub(crate) type PointChoice = (Option<Vec<IdInput>>, Option<Value>);

impl UpdateVectorsRequest {
    /// The vectors given, each checked as the engine would check it (size, values, norm),
    /// and the update filter; errors name the field.
    pub(crate) fn checked(
        self,
        collection: &Collection,
        max_points: usize,
    ) -> ApiResult<(GivenVectors, Option<Filter>)> {
        check_count("points", self.points.len(), max_points)?;
        let update_filter = parse_filter(self.update_filter.as_ref(), "update_filter")?;
        let update_filter = crate::wire::bound_filter(collection, update_filter, "")?;
        let given = self
            .points
            .into_iter()
            .enumerate()
            .map(|(index, point)| {
                let field = format!("points[{index}].vector");
                let (vector, side) = point.vector.into_stored(&field, collection.spaces())?;
                let check = Point {
                    id: point.id.0,
                    vector,
                    payload: None,
                    side,
                };
                collection.check_point(&check).map_err(|error| {
                    ApiError::bad_request(format!("Wrong input: `{field}`: {error}"))
                })?;
                Ok((check.id, (check.vector, check.side)))
            })
            .collect::<ApiResult<Vec<_>>>()?;
        Ok((given, update_filter))
    }
}

impl DeleteVectorsRequest {
    /// The numbers of the named vectors to remove (a sparse vector's number is the dense
    /// ones' count plus its own), and the points (ids or a filter).
    /// The unnamed vector of a collection with one vector is number 0.
    pub(crate) fn checked(self, spaces: &VectorSpaces) -> ApiResult<(Vec<usize>, PointChoice)> {
        let removed = self
            .vector
            .iter()
            .map(|name| {
                let unnamed = (!spaces.is_named() && name.is_empty()).then_some(0);
                unnamed
                    .or_else(|| spaces.number_of(name))
                    .ok_or_else(|| crate::wire::unknown_vector_name("vector", name))
            })
            .collect::<ApiResult<Vec<usize>>>()?;
        parse_filter(self.filter.as_ref(), "filter")?;
        Ok((removed, (self.points, self.filter)))
    }
}

/// Replaces the given named vectors of stored points (all of a point's vector for a
/// collection without names), keeping the rest and the payload; the caller holds the
/// collection's write stripe exclusively. A point not stored fails the whole request
/// before anything is written; one whose state fails `update_filter` is left as it is.
pub(crate) fn apply_update_vectors(
    target: &Collection,
    name: &str,
    given: GivenVectors,
    update_filter: Option<&Filter>,
    wait: bool,
) -> ApiResult<()> {
    let spaces = target.spaces();
    let mut points: Vec<Point> = Vec::with_capacity(given.len());
    for (id, (vector, side)) in given {
        // an earlier entry of the same request for this id counts as its state
        let stored = match points.iter().rposition(|point| point.id == id) {
            Some(at) => points[at].clone(),
            None => stored_point(target, id, name)?,
        };
        let passes = update_filter.is_none_or(|filter| {
            let payload = stored
                .payload
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok());
            filter.matches(&id, payload.as_ref())
        });
        if passes {
            let mut kept = stored.side;
            kept.resize(side.len(), None);
            points.push(Point {
                id,
                vector: merged(&stored.vector, &vector, spaces),
                payload: stored.payload,
                side: side
                    .into_iter()
                    .zip(kept)
                    .map(|(new, old)| new.or(old))
                    .collect(),
            });
        }
    }
    write(target, points, wait, name)
}

/// Removes named vectors `removed` from the selected points (ids that are not stored are
/// skipped, as Qdrant skips them); the caller holds the write stripe exclusively. Dense
/// vectors are numbered as the spaces, sparse ones after them (see
/// [`DeleteVectorsRequest::checked`]).
pub(crate) fn apply_delete_vectors(
    target: &Collection,
    name: &str,
    removed: &[usize],
    selection: PointChoice,
    wait: bool,
    max_points: usize,
) -> ApiResult<()> {
    let spaces = target.spaces();
    let ids = selected_ids(target, selection.0, selection.1.as_ref(), max_points)?;
    let mut points = Vec::with_capacity(ids.len());
    for id in ids {
        let Some(stored) = target
            .get(&id)
            .map_err(|error| ApiError::from_engine(error, name))?
        else {
            continue;
        };
        if !spaces.is_named() {
            // the one unnamed vector: the point stays, without it (the engine's NaNs)
            if !removed.is_empty() {
                points.push(Point {
                    vector: Vec::new(),
                    ..stored
                });
            }
            continue;
        }
        let parts: Vec<Option<&[f32]>> = spaces
            .split(&stored.vector)
            .into_iter()
            .enumerate()
            .map(|(index, part)| part.filter(|_| !removed.contains(&index)))
            .collect();
        let side = stored
            .side
            .into_iter()
            .enumerate()
            .map(|(index, vector)| vector.filter(|_| !removed.contains(&spaces.side_number(index))))
            .collect();
        points.push(Point {
            id,
            vector: spaces.join(&parts),
            payload: stored.payload,
            side,
        });
    }
    write(target, points, wait, name)
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
    let (given, update_filter) = request.checked(&target, state.config.max_batch_points)?;
    let slot = write_slot(&state)?;
    blocking(move || {
        let _slot = slot;
        let _order = exclusive(write_order(&name));
        apply_update_vectors(&target, &name, given, update_filter.as_ref(), wait)
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
    let (removed, selection) = request.checked(target.spaces())?;
    let max_points = state.config.max_batch_points;
    let slot = write_slot(&state)?;
    blocking(move || {
        let _slot = slot;
        let _order = exclusive(write_order(&name));
        apply_delete_vectors(&target, &name, &removed, selection, wait, max_points)
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
