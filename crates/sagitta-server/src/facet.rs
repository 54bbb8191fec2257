//! `POST /collections/{c}/facet`: how many points passing a filter hold each value of an
//! indexed keyword, integer or bool field (`Collection::facet`), as Qdrant answers it:
//! `{"hits": [{"value": .., "count": ..}]}`, count descending, then value ascending.

use std::time::Instant;

use axum::extract::State;
use axum::response::Response;
use sagitta_engine::collection::FacetValue;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::body::JsonBody;
use crate::collections::{collection, read, Path};
use crate::error::{ApiError, ApiResult};
use crate::response::ok;
use crate::wire::{parse_filter, NoShardKeys, NullOnly};
use crate::SharedState;

/// Hits returned when the request gives no `limit` (Qdrant's default).
const DEFAULT_FACET_LIMIT: usize = 10;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FacetRequest {
    key: String,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    filter: Option<Value>,
    /// Counts are always exact here; `false` allows an estimate, which an exact count is.
    #[serde(default)]
    #[allow(dead_code)]
    exact: Option<bool>,
    #[serde(default)]
    #[allow(dead_code)]
    shard_key: Option<NullOnly<NoShardKeys>>,
}

pub async fn facet(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<FacetRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let filter = parse_filter(request.filter.as_ref(), "filter")?;
    let limit = request.limit.unwrap_or(DEFAULT_FACET_LIMIT);
    let hits = read(&state, move || {
        let filter = crate::wire::bound_filter(&target, filter, &name)?;
        target
            .facet(&request.key, filter.as_ref(), limit)
            .map_err(|error| ApiError::from_engine(error, &name))
    })
    .await?;
    let hits: Vec<Value> = hits
        .into_iter()
        .map(|(value, count)| {
            let value = match value {
                FacetValue::Keyword(text) => json!(text),
                FacetValue::Integer(number) => json!(number),
                FacetValue::Bool(flag) => json!(flag),
            };
            json!({"value": value, "count": count})
        })
        .collect();
    Ok(ok(json!({ "hits": hits }), started))
}
