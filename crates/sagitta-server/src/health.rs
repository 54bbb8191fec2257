//! Readiness and the operator's way back from a red collection.
//!
//! `/readyz` answers 200 while every collection can take writes, and 503 in Qdrant's error
//! envelope naming each collection that cannot, with the reason (a shard whose log append
//! or seal publication failed refuses writes until the collection is reopened). `/healthz`
//! and `/livez` stay 200 while the process serves: a red collection does not make the
//! server dead, only not ready for writes there.
//!
//! `POST /collections/{name}/reopen` (a SagittaDB extension, read-write key) closes the
//! collection and opens it again from its files, once the operator has fixed the cause
//! (freed disk space, raised a file size limit). Writes acknowledged before the failure are
//! kept; the failed one was never acknowledged.

use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::collections::blocking;
use crate::response::ok;
use crate::{ApiError, ApiResult, SharedState};

/// Collections that refuse writes, each with its reason.
fn refusing_writes(state: &SharedState) -> Vec<(String, String)> {
    state
        .database
        .list()
        .into_iter()
        .filter_map(|name| {
            let collection = state.database.collection(&name).ok()?;
            let reason = collection.status().write_error?;
            Some((name, reason))
        })
        .collect()
}

pub async fn ready(State(state): State<SharedState>) -> Response {
    // off the async workers: a collection linked to other ranks asks them for its status
    let refusing = match blocking(move || Ok(refusing_writes(&state))).await {
        Ok(refusing) => refusing,
        Err(error) => return error.into_response(),
    };
    if refusing.is_empty() {
        return "all shards are ready".into_response();
    }
    let listed: Vec<String> = refusing
        .iter()
        .map(|(name, reason)| format!("`{name}` ({reason})"))
        .collect();
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!(
            "not ready: collections that cannot take writes until reopened \
             (POST /collections/{{name}}/reopen): {}",
            listed.join("; ")
        ),
    )
    .into_response()
}

pub async fn reopen(
    State(state): State<SharedState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    crate::collections::collection(&state, &name)?;
    let database = std::sync::Arc::clone(&state.database);
    let reopened = name.clone();
    let health = blocking(move || {
        database
            .reopen_collection(&reopened)
            .map(|collection| collection.status().health)
            .map_err(|error| ApiError::from_engine(error, &reopened))
    })
    .await?;
    Ok(ok(json!({ "status": health.name() }), started))
}
