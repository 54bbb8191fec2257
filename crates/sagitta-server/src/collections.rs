//! Service and collection endpoints: `/`, health, and `/collections/...`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use sagitta_engine::collection::MAX_SHARDS;
use sagitta_engine::{Collection, CollectionConfig, Datatype, SideSpace, VectorSpaces};
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};

use crate::body::{wait_flag, JsonBody};
use crate::error::{ApiError, ApiResult};
use crate::indexes::{parse_schema, record_hints};
use crate::response::ok;
use crate::settings::Settings;
use crate::wire::config::{
    CreateCollectionRequest, CreateIndexRequest, OptimizationThreads, UpdateCollectionRequest,
};
use crate::wire::UpdateResult;
use crate::{SharedState, QDRANT_COMPATIBLE_VERSION};

/// Path parameters (`{name}`, `{id}`, `{field}`) whose rejections come in Qdrant's
/// envelope: a parameter that is not valid UTF-8 names nothing that can exist, so it is a
/// 404 (as Qdrant's router answers), naming the parameter.
pub(crate) struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(PathRejection::FailedToDeserializePathParams(error)) => match error.kind() {
                ErrorKind::InvalidUtf8InPathParam { key } => Err(ApiError::not_found(format!(
                    "Not found: the path parameter `{key}` is not valid UTF-8, so nothing \
                     has that name"
                ))),
                _ => Err(ApiError::bad_request(format!(
                    "Wrong input: {}",
                    error.body_text()
                ))),
            },
            Err(other) => Err(ApiError::bad_request(format!(
                "Wrong input: {}",
                other.body_text()
            ))),
        }
    }
}

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

pub async fn create(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<CreateCollectionRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let optimizers = request.optimizers_config.clone().unwrap_or_default();
    let settings =
        Settings::default().updated(request.metadata.clone(), request.strict_mode_config);
    let checked = request.checked(MAX_SHARDS)?;
    let mut config = CollectionConfig {
        dim: checked.dim,
        distance: checked.distance,
        shard_count: checked.shard_count,
        storage: checked.storage,
    };
    let spaces = checked.spaces;
    if spaces.is_named() {
        config = config.named(&spaces);
    }
    let database = Arc::clone(&state.database);
    let created_name = name.clone();
    blocking(move || {
        let created = database
            .create_collection_with_spaces(&created_name, config, spaces)
            .map_err(|error| ApiError::from_engine(error, &created_name))?;
        // a second publication of the manifest: a crash in between leaves the collection
        // without its settings (the create was not acknowledged)
        settings.store(&created, database.file_system(), &created_name)
    })
    .await?;
    state.rate_limits.forget(&name);
    let mut echoed = state.echoed.lock();
    let entry = echoed.entry(name).or_default();
    entry.max_optimization_threads = optimizers
        .max_optimization_threads
        .and_then(OptimizationThreads::echoed);
    entry.indexing_threshold = optimizers.indexing_threshold;
    std::mem::drop(echoed);
    Ok(ok(true, started))
}

/// `PATCH /collections/{c}`: optimizer settings are echoed by `GET` (the engine's
/// optimizer keeps its own policy); tuning hints are checked and accepted; the rest is
/// refused (see `wire::config`).
pub async fn update(
    State(state): State<SharedState>,
    Path(name): Path<String>,
    JsonBody(request): JsonBody<UpdateCollectionRequest>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    // an alias's settings are its collection's
    let name = state.database.resolve(&name).unwrap_or(name);
    let (metadata, strict) = (request.metadata.clone(), request.strict_mode_config);
    let update = request.checked(target.spaces(), target.graph())?;
    if let Some(graph) = update.graph {
        let database = Arc::clone(&state.database);
        let (stored, stored_name) = (Arc::clone(&target), name.clone());
        blocking(move || {
            stored
                .set_graph(database.file_system(), graph)
                .map_err(|error| ApiError::from_engine(error, &stored_name))
        })
        .await?;
    }
    if metadata.is_some() || strict.is_some() {
        let database = Arc::clone(&state.database);
        let (stored, stored_name) = (Arc::clone(&target), name.clone());
        blocking(move || {
            let settings = Settings::of(&stored).updated(metadata, strict);
            settings.store(&stored, database.file_system(), &stored_name)
        })
        .await?;
        state.rate_limits.forget(&name);
    }
    if let Some(optimizers) = update.optimizers {
        let mut echoed = state.echoed.lock();
        let entry = echoed.entry(name).or_default();
        if let Some(threads) = optimizers.max_optimization_threads {
            entry.max_optimization_threads = threads.echoed();
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
    state.rate_limits.forget(&name);
    Ok(ok(dropped, started))
}

pub async fn info(
    State(state): State<SharedState>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let started = Instant::now();
    let target = collection(&state, &name)?;
    let name = state.database.resolve(&name).unwrap_or(name);
    let echoed = state.echoed.lock().get(&name).cloned().unwrap_or_default();
    let result = read(&state, move || Ok(collection_info(&target, &echoed))).await?;
    Ok(ok(result, started))
}

fn collection_info(collection: &Collection, echoed: &crate::EchoedSettings) -> Value {
    let status = collection.status();
    let config = collection.config();
    let policy = collection.policy();
    let settings = Settings::of(collection);
    let health = status.health.name();
    // A shard that refuses writes is the reason a collection is red: Qdrant clients read
    // the reason of a red collection from optimizer_status.error.
    let optimizer_status = match status
        .write_error
        .as_ref()
        .or(status.optimizer_error.as_ref())
    {
        None => json!("ok"),
        Some(error) => json!({ "error": error }),
    };
    let payload_schema = crate::indexes::payload_schema(collection, &settings);
    json!({
        "status": health,
        "optimizer_status": optimizer_status,
        "warnings": [],
        "points_count": status.points,
        "indexed_vectors_count": status.indexed,
        "segments_count": status.segments,
        "config": {
            "params": params_info(&config, collection.spaces()),
            "hnsw_config": {
                "m": config.storage.graph.m,
                "ef_construct": config.storage.graph.ef_construct,
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
            "metadata": settings.metadata,
            "strict_mode_config": settings.strict_mode_config,
            "sagitta": {
                "segment_kind": config.storage.segment_kind.name(),
                "page_cache_mb": config.storage.page_cache_mb,
                "partition_size": config.storage.partition_size,
                "placement": config.storage.placement.name(),
                "vectors_tier": if config.storage.vectors_far { "far" } else { "local-dram" },
            },
        },
        "payload_schema": payload_schema,
        "sagitta": storage_report(&status, &config),
    })
}

/// `config.params` of collection info: the vector, shards and replication. `datatype`
/// and `on_disk` appear only when set to other than their defaults, as Qdrant leaves them
/// out when unset.
fn params_info(config: &CollectionConfig, spaces: &VectorSpaces) -> Value {
    let params = |dim: usize, distance: sagitta_engine::Distance| {
        let mut vector = json!({"size": dim, "distance": distance.name()});
        if config.storage.datatype != Datatype::Float32 {
            vector["datatype"] = json!(config.storage.datatype.name());
        }
        if config.storage.vectors_on_disk {
            vector["on_disk"] = json!(true);
        }
        vector
    };
    let multi = |space: &sagitta_engine::MultiSpace| {
        let mut vector = params(space.dim, space.distance);
        vector["multivector_config"] = json!({"comparator": "max_sim"});
        vector
    };
    let mut named: Map<String, Value> = spaces
        .iter()
        .map(|space| (space.name.clone(), params(space.dim, space.distance)))
        .collect();
    for space in spaces.side().iter().filter_map(SideSpace::as_multi) {
        named.insert(space.name.clone(), multi(space));
    }
    let vectors = match named.remove("") {
        // the unnamed vector (beside sparse ones, or a multivector): shown in the
        // single-vector form, as given
        Some(unnamed) if named.is_empty() => unnamed,
        Some(unnamed) => {
            named.insert(String::new(), unnamed);
            Value::Object(named)
        }
        None if spaces.is_named() => Value::Object(named),
        None => params(config.dim, config.distance),
    };
    let mut info = json!({
        "vectors": vectors,
        "shard_number": config.shard_count,
        "replication_factor": 1,
        "write_consistency_factor": 1,
        "on_disk_payload": false,
    });
    let sparse: Vec<&sagitta_engine::SparseSpace> = spaces
        .side()
        .iter()
        .filter_map(SideSpace::as_sparse)
        .collect();
    if !sparse.is_empty() {
        let sparse: Map<String, Value> = sparse
            .into_iter()
            .map(|space| {
                let params = if space.idf {
                    json!({"modifier": "idf"})
                } else {
                    json!({})
                };
                (space.name.clone(), params)
            })
            .collect();
        info["sparse_vectors"] = Value::Object(sparse);
    }
    info
}

/// SagittaDB's extension of collection info: what the sealed segments take in RAM and on
/// disk (RAM per vector over the points they hold), how many wait for a rebuild with the
/// collection's graph config, the NUMA node each shard runs on and where each structure
/// of a shard lies: `local-dram` (memory of the shard's node: first touched by threads
/// bound there), `far` (the shard's nearest memory-only node, by `mbind`) or `disk`
/// (read through the page cache).
fn storage_report(
    status: &sagitta_engine::CollectionStatus,
    config: &sagitta_engine::CollectionConfig,
) -> Value {
    #[allow(clippy::cast_precision_loss)]
    let per_vector =
        (status.indexed > 0).then(|| status.index_ram_bytes as f64 / status.indexed as f64);
    let disk_kind = config.storage.segment_kind == sagitta_engine::SegmentKindName::Disk;
    let far_everywhere = status.placement.far_nodes.iter().all(Option::is_some);
    let vectors = if disk_kind || config.storage.vectors_on_disk {
        "disk"
    } else if config.storage.vectors_far && far_everywhere {
        "far"
    } else {
        "local-dram"
    };
    let mut placement = status.placement.to_json(config.storage.placement);
    if config.storage.vectors_far {
        placement["vectors_tier_note"] = match (&status.vectors_tier_error, far_everywhere) {
            (_, false) => json!("no memory-only NUMA node: the vectors stay in local DRAM"),
            (Some(error), true) => json!(format!("some vectors stay in local DRAM: {error}")),
            (None, true) => Value::Null,
        };
    }
    placement["structures"] = json!({
        "graph": if disk_kind { "none" } else { "local-dram" },
        "codes": "local-dram",
        "vectors": vectors,
        "write_buffer": "local-dram",
    });
    json!({
        "index_ram_bytes": status.index_ram_bytes,
        "ram_bytes_per_vector": per_vector,
        "disk_bytes": status.disk_bytes,
        "stale_segments": status.stale_segments,
        "placement": placement,
    })
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
    let Some(schema) = request.field_schema else {
        return Err(ApiError::bad_request(
            "Wrong input: `field_schema` is required (a type name or {\"type\": name, ..})",
        ));
    };
    let schema = parse_schema(&schema)?;
    let database = Arc::clone(&state.database);
    let field = request.field_name;
    blocking(move || {
        let fs = database.file_system();
        target
            .create_payload_index(fs, &field, schema.kind)
            .map_err(|error| ApiError::from_engine(error, &name))?;
        record_hints(&target, fs, &name, &field, Some(schema.hints))
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
        let fs = database.file_system();
        target
            .delete_payload_index(fs, &field)
            .map_err(|error| ApiError::from_engine(error, &name))?;
        record_hints(&target, fs, &name, &field, None)
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
