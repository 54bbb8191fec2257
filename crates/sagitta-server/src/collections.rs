//! Service and collection endpoints: `/`, health, and `/collections/...`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use sagitta_engine::collection::MAX_SHARDS;
use sagitta_engine::{Collection, CollectionConfig, Distance, FieldType, Health};
use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use crate::body::{ok, wait_flag, JsonBody};
use crate::error::{ApiError, ApiResult};
use crate::wire::{UpdateResult, DEFAULT_VECTOR_NAME};
use crate::{SharedState, QDRANT_COMPATIBLE_VERSION};

/// Runs a blocking engine call on tokio's blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("Service internal error: {error}"),
        )
    })?
}

/// Runs a read on the blocking pool once a read slot is free (see `AppState::read_slots`).
pub(crate) async fn read<T: Send + 'static>(
    state: &SharedState,
    work: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    let slot = Arc::clone(&state.read_slots)
        .acquire_owned()
        .await
        .map_err(|_| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server is shutting down"))?;
    blocking(move || {
        let _slot = slot;
        work()
    })
    .await
}

pub(crate) fn collection(state: &SharedState, name: &str) -> ApiResult<Arc<Collection>> {
    state
        .database
        .collection(name)
        .map_err(|_| ApiError::collection_not_found(name))
}

pub async fn root() -> Response {
    axum::Json(json!({
        "title": "qdrant - vector search engine",
        "version": QDRANT_COMPATIBLE_VERSION,
        "commit": null,
        "engine": "sagittadb",
        "engine_version": env!("CARGO_PKG_VERSION"),
    }))
    .into_response()
}

pub async fn health() -> &'static str {
    "healthz check passed"
}

pub async fn no_route(uri: Uri) -> ApiError {
    ApiError::not_found(format!("Not found: no endpoint {}", uri.path()))
}

pub async fn list(State(state): State<SharedState>) -> Response {
    let started = Instant::now();
    let collections: Vec<Value> = state
        .database
        .list()
        .into_iter()
        .map(|name| json!({ "name": name }))
        .collect();
    ok(json!({ "collections": collections }), started)
}

pub async fn exists(State(state): State<SharedState>, Path(name): Path<String>) -> Response {
    let started = Instant::now();
    let exists = state.database.collection(&name).is_ok();
    ok(json!({ "exists": exists }), started)
}

/// `vectors` of a create request: `{size, distance, ..}` or a map of one name (`""`) to
/// that.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum VectorsConfigInput {
    Single(VectorParamsInput),
    Named(std::collections::BTreeMap<String, VectorParamsInput>),
}

#[derive(Deserialize)]
pub struct VectorParamsInput {
    size: usize,
    distance: String,
    #[serde(default)]
    datatype: Option<String>,
    #[serde(default, rename = "multivector_config")]
    multivector: Option<IgnoredAny>,
}

#[derive(Deserialize)]
pub struct CreateCollectionRequest {
    vectors: VectorsConfigInput,
    #[serde(default)]
    shard_number: Option<usize>,
    #[serde(default)]
    sparse_vectors: Option<Map<String, Value>>,
    #[serde(default)]
    optimizers_config: Option<OptimizersInput>,
}

#[derive(Deserialize, Default, Clone)]
#[serde(default)]
pub struct OptimizersInput {
    max_optimization_threads: Option<u64>,
    indexing_threshold: Option<u64>,
}

fn parse_distance(name: &str) -> ApiResult<Distance> {
    match name {
        "Cosine" => Ok(Distance::Cosine),
        "Dot" => Ok(Distance::Dot),
        "Euclid" => Ok(Distance::Euclid),
        other => Err(ApiError::bad_request(format!(
            "Wrong input: `vectors.distance` = {other:?}: use Cosine, Dot or Euclid"
        ))),
    }
}

fn distance_name(distance: Distance) -> &'static str {
    match distance {
        Distance::Cosine => "Cosine",
        Distance::Dot => "Dot",
        Distance::Euclid => "Euclid",
    }
}

impl CreateCollectionRequest {
    fn into_config(self) -> ApiResult<CollectionConfig> {
        let vectors = match self.vectors {
            VectorsConfigInput::Single(params) => params,
            VectorsConfigInput::Named(mut named) => {
                if named.len() != 1 || !named.contains_key(DEFAULT_VECTOR_NAME) {
                    let names: Vec<&String> = named.keys().collect();
                    return Err(ApiError::bad_request(format!(
                        "Wrong input: `vectors`: named vectors {names:?} are not supported; \
                         a collection has one unnamed vector ({{\"size\", \"distance\"}})"
                    )));
                }
                named.remove(DEFAULT_VECTOR_NAME).expect("checked above")
            }
        };
        if self
            .sparse_vectors
            .as_ref()
            .is_some_and(|map| !map.is_empty())
        {
            return Err(ApiError::bad_request(
                "Wrong input: `sparse_vectors` are not supported",
            ));
        }
        if vectors.multivector.is_some() {
            return Err(ApiError::bad_request(
                "Wrong input: `vectors.multivector_config`: multi-vectors are not supported",
            ));
        }
        if let Some(datatype) = vectors.datatype.as_deref() {
            if datatype != "float32" {
                return Err(ApiError::bad_request(format!(
                    "Wrong input: `vectors.datatype` = {datatype:?}: only float32 is supported"
                )));
            }
        }
        if vectors.size == 0 {
            return Err(ApiError::bad_request(
                "Wrong input: `vectors.size` must be at least 1",
            ));
        }
        let shard_count = self.shard_number.unwrap_or(1);
        if shard_count == 0 || shard_count > MAX_SHARDS {
            return Err(ApiError::bad_request(format!(
                "Wrong input: `shard_number` = {shard_count}: must be 1..={MAX_SHARDS}"
            )));
        }
        Ok(CollectionConfig {
            dim: vectors.size,
            distance: parse_distance(&vectors.distance)?,
            shard_count,
        })
    }
}

pub async fn create(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<CreateCollectionRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let optimizers = request.optimizers_config.clone().unwrap_or_default();
    let config = request.into_config()?;
    let database = Arc::clone(&state.database);
    let created_name = name.clone();
    blocking(move || {
        database
            .create_collection(&created_name, config)
            .map(|_| ())
            .map_err(|error| ApiError::from_engine(error, &created_name))
    })
    .await?;
    let mut echoed = state.echoed.lock();
    let entry = echoed.entry(name).or_default();
    entry.max_optimization_threads = optimizers.max_optimization_threads;
    entry.indexing_threshold = optimizers.indexing_threshold;
    std::mem::drop(echoed);
    Ok(ok(true, started))
}

#[derive(Deserialize)]
pub struct UpdateCollectionRequest {
    #[serde(default)]
    optimizers_config: Option<OptimizersInput>,
}

/// `PATCH /collections/{c}`: accepted for the fields clients send; optimizer settings are
/// echoed by `GET`, the engine's optimizer keeps its own policy.
pub async fn update(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<UpdateCollectionRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    collection(&state, &name)?;
    if let Some(optimizers) = request.optimizers_config {
        let mut echoed = state.echoed.lock();
        let entry = echoed.entry(name).or_default();
        if optimizers.max_optimization_threads.is_some() {
            entry.max_optimization_threads = optimizers.max_optimization_threads;
        }
        if optimizers.indexing_threshold.is_some() {
            entry.indexing_threshold = optimizers.indexing_threshold;
        }
    }
    Ok(ok(true, started))
}

/// `DELETE /collections/{c}`: `true`, or `false` when there was none (as Qdrant).
pub async fn drop(
    State(state): State<SharedState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let database = Arc::clone(&state.database);
    let dropped_name = name.clone();
    let dropped = blocking(move || match database.drop_collection(&dropped_name) {
        Ok(()) => Ok(true),
        Err(sagitta_engine::EngineError::CollectionNotFound { .. }) => Ok(false),
        Err(error) => Err(ApiError::from_engine(error, &dropped_name)),
    })
    .await?;
    state.echoed.lock().remove(&name);
    Ok(ok(dropped, started))
}

pub async fn info(
    State(state): State<SharedState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let echoed = state.echoed.lock().get(&name).cloned().unwrap_or_default();
    let result = read(&state, move || Ok(collection_info(&target, &echoed))).await?;
    Ok(ok(result, started))
}

fn collection_info(collection: &Collection, echoed: &crate::EchoedSettings) -> Value {
    let status = collection.status();
    let config = collection.config();
    let policy = collection.policy();
    let health = match status.health {
        Health::Green => "green",
        Health::Yellow => "yellow",
        Health::Red => "red",
    };
    let optimizer_status = match &status.optimizer_error {
        None => json!("ok"),
        Some(error) => json!({ "error": error }),
    };
    let payload_schema: Map<String, Value> = collection
        .payload_schema()
        .into_iter()
        .map(|(field, kind)| {
            let points = indexed_points(collection, &field);
            (
                field,
                json!({ "data_type": kind.name(), "params": null, "points": points }),
            )
        })
        .collect();
    json!({
        "status": health,
        "optimizer_status": optimizer_status,
        "warnings": [],
        "points_count": status.points,
        "indexed_vectors_count": status.indexed,
        "segments_count": status.segments,
        "config": {
            "params": {
                "vectors": {"size": config.dim, "distance": distance_name(config.distance)},
                "shard_number": config.shard_count,
                "replication_factor": 1,
                "write_consistency_factor": 1,
                "on_disk_payload": false,
            },
            "hnsw_config": {
                "m": 16,
                "ef_construct": 100,
                "full_scan_threshold": 10_000,
                "max_indexing_threads": 0,
                "on_disk": false,
            },
            "optimizer_config": {
                "deleted_threshold": policy.vacuum_fraction,
                "vacuum_min_vector_number": policy.vacuum_min_deleted,
                "default_segment_number": 0,
                "max_segment_size": null,
                "memmap_threshold": null,
                "indexing_threshold": echoed.indexing_threshold.unwrap_or(policy.seal_points as u64),
                "flush_interval_sec": 0,
                "max_optimization_threads": echoed.max_optimization_threads,
            },
            "wal_config": {"wal_capacity_mb": 32, "wal_segments_ahead": 0},
            "quantization_config": {"scalar": {"type": "int8", "always_ram": true}},
        },
        "payload_schema": payload_schema,
    })
}

/// Points that have a value for `field` (what Qdrant reports as indexed by its index).
fn indexed_points(collection: &Collection, field: &str) -> usize {
    let has_value = json!({"must_not": [{"is_empty": {"key": field}}]});
    sagitta_engine::Filter::parse(&has_value, "payload_schema")
        .map_or(0, |filter| collection.count(Some(&filter)))
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum FieldSchemaInput {
    Name(String),
    Params {
        #[serde(rename = "type")]
        kind: String,
    },
}

#[derive(Deserialize)]
pub struct CreateIndexRequest {
    field_name: String,
    #[serde(default)]
    field_schema: Option<FieldSchemaInput>,
}

pub async fn create_index(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    uri: Uri,
    JsonBody(request): JsonBody<CreateIndexRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let Some(FieldSchemaInput::Name(kind_name) | FieldSchemaInput::Params { kind: kind_name }) =
        request.field_schema
    else {
        return Err(ApiError::bad_request(
            "Wrong input: `field_schema` is required (keyword, integer, float or bool)",
        ));
    };
    let kind = FieldType::parse(&kind_name).map_err(|_| {
        ApiError::bad_request(format!(
            "Wrong input: `field_schema` = {kind_name:?}: SagittaDB indexes keyword, integer, \
             float and bool fields"
        ))
    })?;
    let database = Arc::clone(&state.database);
    let field = request.field_name;
    blocking(move || {
        target
            .create_payload_index(database.file_system(), &field, kind)
            .map_err(|error| ApiError::from_engine(error, &name))
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

pub async fn delete_index(
    State(state): State<SharedState>,
    Path((name, field)): Path<(String, String)>,
    uri: Uri,
) -> ApiResult<Response> {
    let started = Instant::now();
    let wait = wait_flag(uri.query())?;
    let target = collection(&state, &name)?;
    let database = Arc::clone(&state.database);
    blocking(move || {
        target
            .delete_payload_index(database.file_system(), &field)
            .map_err(|error| ApiError::from_engine(error, &name))
    })
    .await?;
    Ok(ok(update_result(&state, wait), started))
}

/// `UpdateResult` of an operation that has been applied (and, with `wait`, synced).
pub(crate) fn update_result(state: &SharedState, wait: bool) -> UpdateResult {
    UpdateResult {
        operation_id: state.next_operation_id(),
        status: if wait { "completed" } else { "acknowledged" },
    }
}
