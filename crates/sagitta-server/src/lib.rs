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
//! Below the layers, [`connections`] runs the accept loop: hyper's HTTP/1 connections
//! under header, body and keep-alive timeouts, caps on open connections (per server and
//! per client address, evicting idle and stalled connections first), and an early 413 for
//! a declared body over the limit; [`body::ByteBudget`] bounds the bytes of all bodies
//! being received.
//!
//! Architecture invariant: this is the only crate that knows HTTP or JSON request shapes;
//! the engine sees points, filters and search requests.
#![deny(unsafe_code)]

mod aliases;
pub mod auth;
mod batch;
pub mod body;
mod collections;
pub mod config;
pub mod connections;
pub mod dashboard;
pub mod error;
mod facet;
mod groups;
pub mod grpc;
mod health;
mod indexes;
mod matrix;
pub mod metrics;
mod mmr;
mod payload_key;
mod points;
mod prefetch;
mod recommend;
pub mod response;
mod settings;
mod similarity;
mod snapshots;
mod target;
mod vectors;
pub mod wire;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::Router;
use parking_lot::Mutex;
use sagitta_engine::Database;
use sagitta_storage::fs::OsFileSystem;
use tokio::sync::Semaphore;

pub use config::ServerConfig;
pub use connections::{bind, effective_max_connections};
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
    /// Bytes of request bodies being received (`max_inflight_request_bytes`).
    pub inflight_bytes: Arc<body::ByteBudget>,
    /// Free slots for writes in flight.
    pub write_slots: Arc<Semaphore>,
    /// Reads (searches, scrolls, counts) running on the blocking pool at once: one per
    /// core. More only adds threads and context switches (1,024 clients grew the pool to
    /// ~150 threads and lost 10–30% of the throughput); the rest wait without a thread.
    pub read_slots: Arc<Semaphore>,
    operation_counter: AtomicU64,
    pub echoed: Mutex<HashMap<String, EchoedSettings>>,
    /// Strict mode's read and write rate buckets, per collection.
    pub(crate) rate_limits: settings::RateLimits,
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
            inflight_bytes: Arc::new(body::ByteBudget::new(config.max_inflight_request_bytes)),
            config,
            metrics: metrics::Metrics::default(),
            operation_counter: AtomicU64::new(0),
            echoed: Mutex::new(HashMap::new()),
            rate_limits: settings::RateLimits::default(),
            started: Instant::now(),
        }
    }

    /// Opens (or creates) the database in `config.data_dir` (its records files spread over
    /// `config.stripe_dirs` too) with the background optimizer.
    pub fn open(config: ServerConfig) -> Result<AppState, sagitta_engine::EngineError> {
        let options = sagitta_engine::database::DatabaseOptions {
            stripe_dirs: config.stripe_dirs.clone(),
            ..sagitta_engine::database::DatabaseOptions::default()
        };
        let database = Database::open_with(Arc::new(OsFileSystem), &config.data_dir, options)?;
        Ok(AppState::new(Arc::new(database), config))
    }

    /// This state with `slots` reads at once instead of one per core: a database linked to
    /// the other ranks of a job spends a read mostly waiting for them, and the
    /// micro-batching window needs many reads waiting together to fill a batch.
    #[must_use]
    pub fn with_read_slots(mut self, slots: usize) -> AppState {
        self.read_slots = Arc::new(Semaphore::new(slots.max(1)));
        self
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
        .route("/readyz", get(health::ready))
        .route("/metrics", get(metrics::prometheus))
        .route("/telemetry", get(metrics::telemetry))
        .route("/collections", get(collections::list))
        .route("/collections/aliases", post(aliases::change))
        .route("/aliases", get(aliases::list))
        .route("/collections/{name}/aliases", get(aliases::of_collection))
        .route(
            "/collections/{name}",
            get(collections::info)
                .put(collections::create)
                .patch(collections::update)
                .delete(collections::drop),
        )
        .route("/collections/{name}/exists", get(collections::exists))
        .route("/collections/{name}/facet", post(facet::facet))
        .route("/collections/{name}/reopen", post(health::reopen))
        .route("/collections/{name}/index", put(collections::create_index))
        .route(
            "/collections/{name}/index/{field}",
            delete(collections::delete_index),
        )
        .merge(point_routes())
        .merge(snapshot_routes())
        // A known path with a method it does not answer: 405 in the envelope (501 for a
        // Qdrant endpoint this server lacks whose path collides with one of these).
        .method_not_allowed_fallback(method_not_allowed)
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
        // after the layers: the dashboard's assets are open (its data comes through the API)
        .merge(dashboard::routes())
        .fallback(no_route);
    api.with_state(state)
}

/// The snapshot routes: a collection's, a shard's and the whole storage's.
fn snapshot_routes() -> Router<SharedState> {
    Router::new()
        .route(
            "/collections/{name}/snapshots",
            post(snapshots::create).get(snapshots::list),
        )
        .route(
            "/collections/{name}/snapshots/recover",
            put(snapshots::recover),
        )
        .route(
            "/collections/{name}/snapshots/{file}",
            get(snapshots::download).delete(snapshots::delete),
        )
        .route(
            "/collections/{name}/shards/{shard}/snapshots",
            post(snapshots::create_shard).get(snapshots::list_shard),
        )
        .route(
            "/collections/{name}/shards/{shard}/snapshots/recover",
            put(snapshots::recover_shard),
        )
        .route(
            "/collections/{name}/shards/{shard}/snapshots/{file}",
            get(snapshots::download_shard).delete(snapshots::delete_shard),
        )
        .route(
            "/snapshots",
            post(snapshots::create_full).get(snapshots::list_full),
        )
        .route(
            "/snapshots/{file}",
            get(snapshots::download_full).delete(snapshots::delete_full),
        )
}

/// The `/collections/{name}/points...` routes.
fn point_routes() -> Router<SharedState> {
    Router::new()
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
            "/collections/{name}/points/search/matrix/pairs",
            post(matrix::pairs),
        )
        .route(
            "/collections/{name}/points/search/matrix/offsets",
            post(matrix::offsets),
        )
        .route(
            "/collections/{name}/points/query/groups",
            post(groups::query_groups),
        )
        .route(
            "/collections/{name}/points/search/groups",
            post(groups::search_groups),
        )
        .route(
            "/collections/{name}/points/search/batch",
            post(points::search_batch),
        )
        .route("/collections/{name}/points/scroll", post(points::scroll))
        .route("/collections/{name}/points/count", post(points::count))
        .route("/collections/{name}/points/batch", post(batch::batch))
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
        .route(
            "/collections/{name}/points/vectors",
            put(vectors::update_vectors),
        )
        .route(
            "/collections/{name}/points/vectors/delete",
            post(vectors::delete_vectors),
        )
}

/// Qdrant endpoints SagittaDB does not implement: (path pattern, what it does). `*`
/// matches one segment, a trailing `**` any rest. Consulted only for requests no route
/// answers, so a pattern never shadows an endpoint that exists.
const UNSUPPORTED_QDRANT_ENDPOINTS: [(&str, &str); 7] = [
    (
        "/collections/*/points/recommend/**",
        "recommendation search",
    ),
    ("/collections/*/points/discover/**", "discovery search"),
    (
        "/collections/*/snapshots/upload",
        "snapshot uploads (recover from a snapshot of this server instead)",
    ),
    (
        "/collections/*/shards/**",
        "shard keys (custom sharding) and shard snapshot uploads",
    ),
    ("/collections/*/cluster/**", "cluster (distributed) mode"),
    ("/cluster/**", "cluster (distributed) mode"),
    ("/locks", "write locks"),
];

/// The feature a Qdrant endpoint at `path` provides, if it is one SagittaDB lacks.
fn unsupported_qdrant_endpoint(path: &str) -> Option<&'static str> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    UNSUPPORTED_QDRANT_ENDPOINTS
        .iter()
        .find(|(pattern, _)| {
            let pattern: Vec<&str> = pattern.split('/').collect();
            match pattern.split_last() {
                Some((&"**", head)) => {
                    segments.len() >= head.len()
                        && head.iter().zip(&segments).all(|(p, s)| *p == "*" || p == s)
                }
                _ => {
                    pattern.len() == segments.len()
                        && pattern
                            .iter()
                            .zip(&segments)
                            .all(|(p, s)| *p == "*" || p == s)
                }
            }
        })
        .map(|(_, feature)| *feature)
}

fn not_supported(method: &axum::http::Method, path: &str, feature: &str) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::NOT_IMPLEMENTED,
        format!(
            "Not implemented: {method} {path} is Qdrant's endpoint for {feature}, which is \
             not supported by SagittaDB"
        ),
    )
}

/// Answers a request that matches no route: 501 for a Qdrant endpoint SagittaDB lacks,
/// else 404.
async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> Response {
    match unsupported_qdrant_endpoint(uri.path()) {
        Some(feature) => not_supported(&method, uri.path(), feature).into_response(),
        None => collections::no_route(uri).await.into_response(),
    }
}

/// The methods each route template of [`router`] answers (`get` answers HEAD too), for the
/// `Allow` header and the message of a 405. A unit test checks it against the router.
const ROUTE_METHODS: [(&str, &str); 29] = [
    ("/", "GET, HEAD"),
    ("/healthz", "GET, HEAD"),
    ("/livez", "GET, HEAD"),
    ("/readyz", "GET, HEAD"),
    ("/metrics", "GET, HEAD"),
    ("/telemetry", "GET, HEAD"),
    ("/collections", "GET, HEAD"),
    ("/collections/aliases", "POST"),
    ("/aliases", "GET, HEAD"),
    ("/collections/{name}/aliases", "GET, HEAD"),
    ("/collections/{name}", "GET, HEAD, PUT, PATCH, DELETE"),
    ("/collections/{name}/exists", "GET, HEAD"),
    ("/collections/{name}/facet", "POST"),
    ("/collections/{name}/reopen", "POST"),
    ("/collections/{name}/index", "PUT"),
    ("/collections/{name}/index/{field}", "DELETE"),
    ("/collections/{name}/points", "PUT, POST"),
    ("/collections/{name}/points/{id}", "GET, HEAD"),
    ("/collections/{name}/points/query", "POST"),
    ("/collections/{name}/points/query/batch", "POST"),
    ("/collections/{name}/points/search", "POST"),
    ("/collections/{name}/points/search/batch", "POST"),
    ("/collections/{name}/points/scroll", "POST"),
    ("/collections/{name}/points/batch", "POST"),
    ("/collections/{name}/points/count", "POST"),
    ("/collections/{name}/points/delete", "POST"),
    ("/collections/{name}/points/payload", "POST, PUT"),
    ("/collections/{name}/points/payload/delete", "POST"),
    ("/collections/{name}/points/payload/clear", "POST"),
];

/// The answer to a method a route does not answer: 405 naming the request, the endpoint
/// it matched and the methods that endpoint answers, with `Allow`; 501 instead for a
/// Qdrant endpoint SagittaDB lacks whose path collides with a route of another method
/// (`POST /collections/aliases` with `/collections/{name}`).
async fn method_not_allowed(
    method: axum::http::Method,
    uri: axum::http::Uri,
    matched: Option<axum::extract::MatchedPath>,
) -> Response {
    let path = uri.path();
    if let Some(feature) = unsupported_qdrant_endpoint(path) {
        return not_supported(&method, path, feature).into_response();
    }
    let template = matched.map_or_else(|| path.to_string(), |m| m.as_str().to_string());
    let allowed = ROUTE_METHODS
        .iter()
        .find(|(route, _)| *route == template)
        .map(|(_, methods)| *methods);
    let message = match allowed {
        Some(methods) => format!(
            "Method not allowed: {method} {path}: the endpoint {template} answers {methods} only"
        ),
        None => format!(
            "Method not allowed: {method} {path}: the endpoint {template} answers other methods"
        ),
    };
    let mut response =
        ApiError::new(axum::http::StatusCode::METHOD_NOT_ALLOWED, message).into_response();
    if let Some(methods) = allowed {
        response
            .headers_mut()
            .insert(header::ALLOW, header::HeaderValue::from_static(methods));
    }
    response
}

/// Serves on `listener` (best made with [`bind`], for its longer accept queue) under the
/// connection limits of [`connections`] until `shutdown` resolves, then lets requests in
/// flight finish and flushes every collection's log, so writes acknowledged with
/// `wait=false` are durable too.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: SharedState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_grpc(listener, None, state, shutdown).await
}

/// [`serve`], and the gRPC API ([`grpc`]) on `grpc` when given: both stop when `shutdown`
/// resolves, and the logs are flushed once both have let their calls in flight finish.
pub async fn serve_with_grpc(
    listener: tokio::net::TcpListener,
    grpc: Option<tokio::net::TcpListener>,
    state: SharedState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    let when_stopped = |mut stopped: tokio::sync::watch::Receiver<bool>| async move {
        // a dropped sender (the signal task gone) also stops
        let _ = stopped.wait_for(|stop| *stop).await;
    };
    // one table: the connection caps count REST and gRPC connections together
    let table = connections::Table::new(&state);
    let grpc = grpc.map(|listener| {
        tokio::spawn(grpc::serve(
            listener,
            Arc::clone(&table),
            when_stopped(stopped.clone()),
        ))
    });
    let app = router(Arc::clone(&state));
    let rest = connections::serve(listener, app, table, when_stopped(stopped)).await;
    if let Some(grpc) = grpc {
        grpc.await.map_err(std::io::Error::other)??;
    }
    rest?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Method, Request, StatusCode};
    use tower::ServiceExt;

    /// `ROUTE_METHODS` lists exactly the methods each route answers.
    #[tokio::test]
    async fn route_methods_match_the_router() {
        let directory = tempfile::tempdir().unwrap();
        let state = AppState::open(ServerConfig {
            data_dir: directory.path().to_path_buf(),
            ..ServerConfig::default()
        })
        .unwrap();
        let app = router(Arc::new(state));
        let methods = [
            Method::GET,
            Method::HEAD,
            Method::PUT,
            Method::POST,
            Method::PATCH,
            Method::DELETE,
        ];
        for (template, allowed) in ROUTE_METHODS {
            let path = template
                .replace("{name}", "docs")
                .replace("{field}", "f")
                .replace("{id}", "1");
            for method in &methods {
                let request = Request::builder()
                    .method(method)
                    .uri(&path)
                    .body(Body::from("{}"))
                    .unwrap();
                let status = app.clone().oneshot(request).await.unwrap().status();
                let listed = allowed.split(", ").any(|m| m == method.as_str());
                assert_eq!(
                    status == StatusCode::METHOD_NOT_ALLOWED,
                    !listed,
                    "{method} {path}: {status}, listed {allowed}"
                );
            }
        }
    }

    #[test]
    fn unsupported_endpoints_match_by_segment() {
        assert!(unsupported_qdrant_endpoint("/collections/a/points/recommend").is_some());
        assert!(unsupported_qdrant_endpoint("/collections/a/snapshots/upload").is_some());
        assert!(unsupported_qdrant_endpoint("/collections/a/shards/1/snapshots/upload").is_some());
        assert!(unsupported_qdrant_endpoint("/collections/a/snapshots").is_none());
        assert!(unsupported_qdrant_endpoint("/collections/a/points/recommend/batch").is_some());
        assert!(unsupported_qdrant_endpoint("/collections/a").is_none());
        assert!(unsupported_qdrant_endpoint("/collections/a/points/search").is_none());
        assert!(unsupported_qdrant_endpoint("/collections/a/points/vectorsx").is_none());
    }
}
