//! SagittaDB's HTTP server: the Qdrant REST contract (`shared/reference/qdrant-rest.md`,
//! section 2b) on top of `sagitta-engine`, so qdrant-client, LlamaIndex's
//! `QdrantVectorStore` and the Qdrant benchmark tools work unchanged.
//!
//! Layers, outermost first: metrics (every request counted and timed) → API keys
//! (read-write and read-only) → the handlers, which read bodies through [`body::JsonBody`]
//! (size and nesting limits, errors in Qdrant's envelope) and run engine calls on tokio's
//! blocking pool, since they may fsync. Writes take a slot of a bounded semaphore first;
//! with none free the answer is 429 with `Retry-After`.
//!
//! Architecture invariant: this is the only crate that knows HTTP or JSON request shapes;
//! the engine sees points, filters and search requests.
#![deny(unsafe_code)]

pub mod auth;
pub mod body;
mod collections;
pub mod config;
pub mod error;
pub mod metrics;
mod points;
pub mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::routing::{delete, get, post, put};
use axum::Router;
use parking_lot::Mutex;
use sagitta_engine::Database;
use sagitta_storage::fs::OsFileSystem;
use tokio::sync::Semaphore;

pub use config::ServerConfig;
pub use error::{ApiError, ApiResult};

/// The Qdrant version reported at `GET /`: clients warn when it is more than one minor
/// version from theirs (qdrant-client 1.18 is what the tests use).
pub const QDRANT_COMPATIBLE_VERSION: &str = "1.18.0";

/// Optimizer settings a client set with `PATCH /collections/{c}`, echoed back by `GET`. The
/// engine's own optimizer policy does not depend on them (see ARCHITECTURE.md).
#[derive(Clone, Debug, Default)]
pub struct EchoedSettings {
    pub max_optimization_threads: Option<u64>,
    pub indexing_threshold: Option<u64>,
}

pub struct AppState {
    pub database: Arc<Database>,
    pub config: ServerConfig,
    /// The configured API keys' digests, computed once.
    pub api_keys: auth::ApiKeys,
    pub metrics: metrics::Metrics,
    /// Free slots for writes in flight.
    pub write_slots: Arc<Semaphore>,
    /// Reads (searches, scrolls, counts) running on the blocking pool at once: one per
    /// core. More only adds threads and context switches (1,024 clients grew the pool to
    /// ~150 threads and lost 10–30% of the throughput); the rest wait without a thread.
    pub read_slots: Arc<Semaphore>,
    operation_counter: AtomicU64,
    pub echoed: Mutex<HashMap<String, EchoedSettings>>,
    pub started: Instant,
}

impl AppState {
    pub fn new(database: Arc<Database>, config: ServerConfig) -> AppState {
        AppState {
            database,
            write_slots: Arc::new(Semaphore::new(config.max_pending_writes)),
            read_slots: Arc::new(Semaphore::new(
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
            )),
            api_keys: auth::ApiKeys::new(
                config.api_key.as_deref(),
                config.read_only_api_key.as_deref(),
            ),
            config,
            metrics: metrics::Metrics::default(),
            operation_counter: AtomicU64::new(0),
            echoed: Mutex::new(HashMap::new()),
            started: Instant::now(),
        }
    }

    /// Opens (or creates) the database in `config.data_dir` with the background optimizer.
    pub fn open(config: ServerConfig) -> Result<AppState, sagitta_engine::EngineError> {
        let database = Database::open(Arc::new(OsFileSystem), &config.data_dir)?;
        Ok(AppState::new(Arc::new(database), config))
    }

    /// The id reported for the next update operation.
    pub fn next_operation_id(&self) -> u64 {
        self.operation_counter.fetch_add(1, Ordering::Relaxed)
    }
}

pub type SharedState = Arc<AppState>;

/// Every route, with the metrics and API-key layers.
pub fn router(state: SharedState) -> Router {
    let api = Router::new()
        .route("/", get(collections::root))
        .route("/healthz", get(collections::health))
        .route("/livez", get(collections::health))
        .route("/readyz", get(collections::health))
        .route("/metrics", get(metrics::prometheus))
        .route("/telemetry", get(metrics::telemetry))
        .route("/collections", get(collections::list))
        .route(
            "/collections/{name}",
            get(collections::info)
                .put(collections::create)
                .patch(collections::update)
                .delete(collections::drop),
        )
        .route("/collections/{name}/exists", get(collections::exists))
        .route("/collections/{name}/index", put(collections::create_index))
        .route(
            "/collections/{name}/index/{field}",
            delete(collections::delete_index),
        )
        .route(
            "/collections/{name}/points",
            put(points::upsert).post(points::retrieve),
        )
        .route("/collections/{name}/points/{id}", get(points::retrieve_one))
        .route("/collections/{name}/points/query", post(points::query))
        .route(
            "/collections/{name}/points/query/batch",
            post(points::query_batch),
        )
        .route("/collections/{name}/points/search", post(points::search))
        .route(
            "/collections/{name}/points/search/batch",
            post(points::search_batch),
        )
        .route("/collections/{name}/points/scroll", post(points::scroll))
        .route("/collections/{name}/points/count", post(points::count))
        .route("/collections/{name}/points/delete", post(points::delete))
        .route(
            "/collections/{name}/points/payload",
            post(points::set_payload).put(points::overwrite_payload),
        )
        .route(
            "/collections/{name}/points/payload/delete",
            post(points::delete_payload),
        )
        .route(
            "/collections/{name}/points/payload/clear",
            post(points::clear_payload),
        )
        // Route layers run after routing, so the metrics see the route template; the
        // fallback (404) is neither authenticated nor counted.
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            auth::check_api_key,
        ))
        .route_layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            metrics::record,
        ))
        .fallback(collections::no_route);
    api.with_state(state)
}

/// Serves on `listener` until `shutdown` resolves, then lets requests in flight finish
/// and flushes every collection's log, so writes acknowledged with `wait=false` are
/// durable too.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: SharedState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = router(Arc::clone(&state));
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await?;
    let database = Arc::clone(&state.database);
    tokio::task::spawn_blocking(move || database.flush())
        .await
        .map_err(std::io::Error::other)?
        .map_err(std::io::Error::other)
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut terminate) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = interrupt.await;
            return;
        };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
