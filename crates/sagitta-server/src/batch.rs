//! `POST /collections/{c}/points/batch`: a list of update operations (upsert, delete,
//! set / overwrite / delete / clear payload) applied in order, as Qdrant applies them: one
//! after another, each seeing the ones before it, an operation that fails stopping the
//! rest (those before it stay applied, as in Qdrant). The whole list is parsed and checked
//! (shapes, ids, vectors, filters) before the first is applied, and no other write to the
//! collection runs in between. `update_vectors` and `delete_vectors` replace or remove a
//! stored point's named vectors (`crate::vectors`).

use std::time::Instant;

use axum::extract::State;
use axum::http::Uri;
use axum::response::Response;
use sagitta_engine::{Collection, Filter, Point, PointId};
use serde::Deserialize;
use serde_json::Value;

use crate::body::{wait_flag, JsonBody};
use crate::collections::{blocking, collection, update_result, Path};
use crate::error::{ApiError, ApiResult};
use crate::points::{
    admitted, exclusive, refuse_nested_key, selected_ids, set_change, write_order, write_slot,
    PayloadChange,
};
use crate::response::ok;
use crate::vectors::{
    apply_delete_vectors, apply_update_vectors, DeleteVectorsRequest, GivenVectors,
    UpdateVectorsRequest,
};
use crate::wire::{
    parse_filter, DeletePayloadRequest, IdInput, PointSelector, SetPayloadRequest, UpdateMode,
    UpsertRequest,
};
use crate::SharedState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    operations: Vec<Operation>,
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum Operation {
    Upsert(UpsertRequest),
    Delete(PointSelector),
    SetPayload(SetPayloadRequest),
    OverwritePayload(SetPayloadRequest),
    DeletePayload(DeletePayloadRequest),
    ClearPayload(PointSelector),
    UpdateVectors(UpdateVectorsRequest),
    DeleteVectors(DeleteVectorsRequest),
}

/// Points chosen by the operation: ids, or a filter evaluated when the operation runs.
struct Selection {
    points: Option<Vec<IdInput>>,
    filter: Option<Value>,
}

/// An operation checked and ready to apply.
enum Step {
    Upsert {
        points: Vec<Point>,
        mode: UpdateMode,
        update_filter: Option<Filter>,
    },
    Delete(Selection),
    Payload(Selection, PayloadChange),
    UpdateVectors(GivenVectors, Option<Filter>),
    DeleteVectors(Vec<usize>, Selection),
}

fn selection(
    points: Option<Vec<IdInput>>,
    filter: Option<Value>,
    at: &str,
) -> ApiResult<Selection> {
    // a bad filter is refused before anything is applied
    parse_filter(filter.as_ref(), &format!("{at}.filter"))?;
    Ok(Selection { points, filter })
}

/// Operation `index` checked against the collection: a vector the engine would refuse
/// (its dimension, values or norm) is refused before any operation is applied.
fn checked(
    index: usize,
    operation: Operation,
    max_points: usize,
    collection: &Collection,
) -> ApiResult<Step> {
    let at = format!("operations[{index}]");
    Ok(match operation {
        Operation::Upsert(mut request) => {
            let mode = request.update_mode.unwrap_or_default();
            let filter = request.update_filter.take();
            let update_filter =
                parse_filter(filter.as_ref(), &format!("{at}.upsert.update_filter"))?;
            let points = request.into_points(max_points, collection.spaces())?;
            for point in &points {
                collection.check_point(point).map_err(|error| {
                    ApiError::bad_request(format!("Wrong input: `{at}.upsert`: {error}"))
                })?;
            }
            Step::Upsert {
                points,
                mode,
                update_filter,
            }
        }
        Operation::Delete(selector) => Step::Delete(selection(
            selector.points,
            selector.filter,
            &format!("{at}.delete"),
        )?),
        Operation::SetPayload(request) => {
            let payload = set_change(&request)?;
            let at = format!("{at}.set_payload");
            Step::Payload(selection(request.points, request.filter, &at)?, payload)
        }
        Operation::OverwritePayload(request) => {
            refuse_nested_key(&request)?;
            let payload = PayloadChange::Overwrite(request.payload_text()?);
            let at = format!("{at}.overwrite_payload");
            Step::Payload(selection(request.points, request.filter, &at)?, payload)
        }
        Operation::DeletePayload(request) => {
            let keys = PayloadChange::DeleteKeys(request.keys);
            let at = format!("{at}.delete_payload");
            Step::Payload(selection(request.points, request.filter, &at)?, keys)
        }
        Operation::ClearPayload(selector) => {
            let at = format!("{at}.clear_payload");
            let cleared = PayloadChange::Overwrite("{}".to_string());
            Step::Payload(selection(selector.points, selector.filter, &at)?, cleared)
        }
        Operation::UpdateVectors(request) => {
            let at = format!("{at}.update_vectors");
            let (given, filter) = request
                .checked(collection, max_points)
                .map_err(|error| error.at(&at))?;
            Step::UpdateVectors(given, filter)
        }
        Operation::DeleteVectors(request) => {
            let at = format!("{at}.delete_vectors");
            let (removed, (points, filter)) = request
                .checked(collection.spaces())
                .map_err(|error| error.at(&at))?;
            Step::DeleteVectors(removed, Selection { points, filter })
        }
    })
}

/// Applies one step to collection `name` (`target`).
fn apply(
    target: &Collection,
    name: &str,
    step: Step,
    wait: bool,
    max_points: usize,
) -> ApiResult<()> {
    let engine = |error| ApiError::from_engine(error, name);
    let ids = |selection: Selection| -> ApiResult<Vec<PointId>> {
        selected_ids(
            target,
            selection.points,
            selection.filter.as_ref(),
            max_points,
        )
    };
    match step {
        Step::Upsert {
            points,
            mode,
            update_filter,
        } => {
            let points = admitted(target, points, mode, update_filter.as_ref()).map_err(engine)?;
            if !points.is_empty() {
                target.upsert(points, wait).map_err(engine)?;
            }
        }
        Step::Delete(selection) => target.delete(&ids(selection)?, wait).map_err(engine)?,
        Step::Payload(selection, change) => {
            let selector = (selection.points, selection.filter);
            change.apply((target, name), selector, wait, max_points)?;
        }
        Step::UpdateVectors(given, filter) => {
            apply_update_vectors(target, name, given, filter.as_ref(), wait)?;
        }
        Step::DeleteVectors(removed, selection) => {
            let selector = (selection.points, selection.filter);
            apply_delete_vectors(target, name, &removed, selector, wait, max_points)?;
        }
    }
    Ok(())
}

pub async fn batch(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<BatchRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let max_points = state.config.max_batch_points;
    let steps = request
        .operations
        .into_iter()
        .enumerate()
        .map(|(index, operation)| checked(index, operation, max_points, &target))
        .collect::<ApiResult<Vec<Step>>>()?;
    let count = steps.len();
    let slot = write_slot(&state)?;
    blocking(move || {
        let _slot = slot;
        // conditional upserts read then write: nothing else writes in between
        let _order = exclusive(write_order(&name));
        for step in steps {
            apply(&target, &name, step, wait, max_points)?;
        }
        Ok(())
    })
    .await?;
    let results: Vec<_> = (0..count).map(|_| update_result(&state, wait)).collect();
    Ok(ok(results, started))
}
