//! Qdrant's JSON request and response shapes, and their conversion to engine types.
//!
//! One module per job: point ids ([`ids`]), vector values ([`vectors`]), the upsert
//! request ([`upsert`]), the search and query requests ([`search`]), the other point
//! requests ([`requests`]), points out ([`output`]), `with_payload` / `with_vector` and
//! the payload selection they ask for ([`select`]), collection requests ([`config`]), and
//! the helpers for fields Qdrant defines that SagittaDB refuses ([`fields`]). This module
//! holds what they share, and re-exports their items.
//!
//! Vectors are deserialized straight into `Vec<f32>` (never through `serde_json::Value`:
//! a 10,000 × 768 batch would take ~250 MB as a `Value` tree), and payloads pass through
//! as raw JSON text, which is what the engine stores.

use sagitta_engine::{Collection, Filter};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{ApiError, ApiResult};

pub mod config;
mod fields;
pub mod graph;
mod ids;
mod output;
mod requests;
mod search;
mod select;
mod upsert;
mod vectors;

pub use fields::{NoPrefetch, NoShardKeys, NullOnly};
pub use ids::{IdInput, IdOutput};
pub use output::{
    record_output, scored_output, vector_output, RecordOutput, ScoredPointOutput, SearchHits,
    VectorOutput,
};
pub use requests::{
    CountRequest, DeletePayloadRequest, PointSelector, RetrieveRequest, ScrollRequest,
    SetPayloadRequest,
};
pub use search::{
    AcornInput, ExampleInput, Fusion, LookupLocation, MmrInput, Prefetches,
    QuantizationSearchInput, QueryBatchRequest, QueryInput, QueryRequest, RecommendInput,
    SearchBatchRequest, SearchParamsInput, SearchRequestInput, SearchVectorInput,
};
pub use select::{
    select_payload, PayloadOutput, PayloadSelector, VectorPick, WithPayload, WithVector,
};
pub use upsert::{BatchInput, PointInput, UpdateMode, UpsertRequest};
pub use vectors::{
    multi_vector, unknown_vector_name, BatchVectors, NamedVector, StoredVectors, VectorInput,
};

/// The name of the unnamed default vector in Qdrant's API.
pub const DEFAULT_VECTOR_NAME: &str = "";

/// 413 when a list field has more than `max` entries.
pub fn check_count(field: &str, count: usize, max: usize) -> ApiResult<()> {
    if count > max {
        return Err(ApiError::new(
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            format!("`{field}` has {count} entries, over the limit of {max} per request"),
        ));
    }
    Ok(())
}

/// A filter as sent; parsed by the engine, which names the path of a bad condition.
pub fn parse_filter(value: Option<&Value>, field: &str) -> ApiResult<Option<Filter>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => Filter::parse(value, field)
            .map(Some)
            .map_err(|error| ApiError::bad_request(format!("Wrong input: {error}"))),
    }
}

/// `filter` with its `has_vector` conditions resolved against `collection`
/// ([`Collection::bind_filter`]: a scan of its points when a named vector is asked for);
/// errors name collection `name`.
pub fn bound_filter(
    collection: &Collection,
    filter: Option<Filter>,
    name: &str,
) -> ApiResult<Option<Filter>> {
    let Some(filter) = filter else {
        return Ok(None);
    };
    match collection.bind_filter(&filter) {
        Ok(bound) => Ok(Some(bound.unwrap_or(filter))),
        Err(error) => Err(ApiError::from_engine(error, name)),
    }
}

/// Payload JSON text for the engine: `null` means none; anything but an object is refused
/// with the field named.
fn payload_text(raw: Option<Box<RawValue>>, field: &str) -> ApiResult<Option<String>> {
    let Some(raw) = raw else { return Ok(None) };
    let text = raw.get().trim();
    if text == "null" {
        return Ok(None);
    }
    if !text.starts_with('{') {
        return Err(ApiError::bad_request(format!(
            "Wrong input: `{field}`: payload must be a JSON object"
        )));
    }
    Ok(Some(text.to_string()))
}

/// `UpdateResult`.
#[derive(Serialize)]
pub struct UpdateResult {
    pub operation_id: u64,
    pub status: &'static str,
}
