//! Request counters and latency histograms, `/metrics` in Prometheus' text format and
//! `/telemetry` as JSON.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use sagitta_engine::Database;
use serde_json::json;

use crate::response::ok;
use crate::SharedState;

/// Upper bounds of the latency histogram buckets, in seconds (+Inf is implied).
const LATENCY_BUCKETS_SECONDS: [f64; 14] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default)]
struct Latency {
    bucket_counts: [u64; LATENCY_BUCKETS_SECONDS.len()],
    count: u64,
    sum_seconds: f64,
}

impl Latency {
    fn add(&mut self, seconds: f64) {
        self.count += 1;
        self.sum_seconds += seconds;
        if let Some(bucket) = LATENCY_BUCKETS_SECONDS
            .iter()
            .position(|bound| seconds <= *bound)
        {
            self.bucket_counts[bucket] += 1;
        }
    }

    /// The histogram's series `name`_bucket/_sum/_count under `labels`.
    fn write(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (bound, count) in LATENCY_BUCKETS_SECONDS.iter().zip(self.bucket_counts) {
            cumulative += count;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum_seconds);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Counters of the connection layer (`connections.rs`) and of request bodies.
#[derive(Default)]
pub struct ConnectionMetrics {
    /// Connections open now (a gauge).
    pub open: AtomicU64,
    pub accepted: AtomicU64,
    /// Closed to admit a newer connection at a cap.
    pub evicted: AtomicU64,
    pub refused_address_full: AtomicU64,
    pub refused_server_full: AtomicU64,
    pub closed_header_timeout: AtomicU64,
    pub closed_idle_timeout: AtomicU64,
    pub closed_write_timeout: AtomicU64,
    /// Requests answered 413 on their declared `Content-Length` alone.
    pub declared_too_large: AtomicU64,
    /// Request bodies answered 408.
    pub body_read_timeouts: AtomicU64,
    /// Requests answered 503 because bodies in flight were at `max_inflight_request_bytes`.
    pub bodies_refused_inflight: AtomicU64,
}

#[derive(Default)]
pub struct Metrics {
    /// (method, route template, status) -> requests answered.
    responses: Mutex<BTreeMap<(String, String, u16), u64>>,
    /// (method, route template) -> latency histogram.
    latencies: Mutex<BTreeMap<(String, String), Latency>>,
    /// (gRPC method, status code) -> calls answered: the gRPC calls alone (each is also
    /// counted above under the REST route that answered it).
    grpc_calls: Mutex<BTreeMap<(String, String), u64>>,
    /// gRPC method -> latency histogram, call to response sent.
    grpc_latencies: Mutex<BTreeMap<String, Latency>>,
    points_upserted_total: AtomicU64,
    writes_rejected_total: AtomicU64,
    pub connections: ConnectionMetrics,
}

impl Metrics {
    pub fn observe(&self, method: &str, route: &str, status: u16, seconds: f64) {
        *self
            .responses
            .lock()
            .entry((method.to_string(), route.to_string(), status))
            .or_default() += 1;
        self.latencies
            .lock()
            .entry((method.to_string(), route.to_string()))
            .or_default()
            .add(seconds);
    }

    /// A gRPC call (`/qdrant.Points/Query`) answered with `code` after `seconds`.
    pub fn observe_grpc(&self, method: &str, code: &str, seconds: f64) {
        *self
            .grpc_calls
            .lock()
            .entry((method.to_string(), code.to_string()))
            .or_default() += 1;
        self.grpc_latencies
            .lock()
            .entry(method.to_string())
            .or_default()
            .add(seconds);
    }

    pub fn count_points_upserted(&self, count: u64) {
        self.points_upserted_total
            .fetch_add(count, Ordering::Relaxed);
    }

    pub fn count_rejected_write(&self) {
        self.writes_rejected_total.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests answered so far, all routes and statuses.
    pub fn requests_total(&self) -> u64 {
        self.responses.lock().values().sum()
    }
}

/// Counts and times every routed request under its route template (not its raw path, so
/// collection names do not multiply the series).
pub async fn record(State(state): State<SharedState>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |path| path.as_str().to_string());
    let response = next.run(request).await;
    state.metrics.observe(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// Bytes this process read from and wrote to storage (`/proc/self/io`), where the kernel
/// reports them.
fn process_io_bytes() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/self/io").ok()?;
    let field = |name: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    Some((field("read_bytes:")?, field("write_bytes:")?))
}

fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub async fn prometheus(State(state): State<SharedState>) -> Response {
    let mut out = String::new();
    request_series(&mut out, &state.metrics);
    let counters = [
        (
            "sagitta_points_upserted_total",
            "Points written by upserts.",
            &state.metrics.points_upserted_total,
        ),
        (
            "sagitta_writes_rejected_total",
            "Writes answered 429 because the write queue was full.",
            &state.metrics.writes_rejected_total,
        ),
    ];
    for (name, help, value) in counters {
        let value = value.load(Ordering::Relaxed);
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
        );
    }
    connection_series(&mut out, &state.metrics.connections);
    let _ = writeln!(
        out,
        "# HELP sagitta_http_request_body_bytes_inflight Bytes of request bodies and gRPC \
         messages being received (max_inflight_request_bytes).\n\
         # TYPE sagitta_http_request_body_bytes_inflight gauge\n\
         sagitta_http_request_body_bytes_inflight {}",
        state.inflight_bytes.used()
    );
    if let Some((read, written)) = process_io_bytes() {
        let _ = writeln!(
            out,
            "# HELP sagitta_storage_read_bytes_total Bytes the process read from storage.\n\
             # TYPE sagitta_storage_read_bytes_total counter\n\
             sagitta_storage_read_bytes_total {read}\n\
             # HELP sagitta_storage_written_bytes_total Bytes the process wrote to storage.\n\
             # TYPE sagitta_storage_written_bytes_total counter\n\
             sagitta_storage_written_bytes_total {written}"
        );
    }
    page_io_series(&mut out);
    collection_series(&mut out, &state.database);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], out).into_response()
}

/// The page reader disk segments read through (issue 15 §2): its backend as a label, reads,
/// bytes and the time spent reading (achieved IOPS = rate of reads).
fn page_io_series(out: &mut String) {
    let io = sagitta_storage::pageio::shared();
    let counters = io.counters();
    let backend = io.backend().name();
    #[allow(clippy::cast_precision_loss)]
    let seconds = counters.busy_nanos as f64 / 1e9;
    let series = [
        (
            "sagitta_page_reads_total",
            "Page reads of disk segments (one per read request).",
            counters.reads.to_string(),
        ),
        (
            "sagitta_page_read_bytes_total",
            "Bytes those reads returned.",
            counters.bytes.to_string(),
        ),
        (
            "sagitta_page_read_seconds_total",
            "Time spent in page reads, summed over reading threads.",
            seconds.to_string(),
        ),
    ];
    for (name, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} counter\n{name}{{backend=\"{backend}\"}} {value}"
        );
    }
}

/// The page reader's state for telemetry: backend, why it fell back, and totals, with the
/// IOPS achieved while reading.
fn page_io_report() -> serde_json::Value {
    let io = sagitta_storage::pageio::shared();
    let counters = io.counters();
    #[allow(clippy::cast_precision_loss)]
    let seconds = counters.busy_nanos as f64 / 1e9;
    #[allow(clippy::cast_precision_loss)]
    let iops = (seconds > 0.0).then(|| counters.reads as f64 / seconds);
    json!({
        "backend": io.backend().name(),
        "fallback_reason": io.fallback_reason(),
        "reads": counters.reads,
        "bytes": counters.bytes,
        "busy_seconds": seconds,
        "achieved_iops": iops,
    })
}

/// Requests answered, by method, route and status, and their latency histograms.
fn request_series(out: &mut String, metrics: &Metrics) {
    out.push_str("# HELP sagitta_http_requests_total HTTP requests answered.\n");
    out.push_str("# TYPE sagitta_http_requests_total counter\n");
    for ((method, route, status), count) in metrics.responses.lock().iter() {
        let _ = writeln!(
            out,
            "sagitta_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {count}",
            escape_label(route)
        );
    }
    out.push_str("# HELP sagitta_http_request_duration_seconds Time to answer a request.\n");
    out.push_str("# TYPE sagitta_http_request_duration_seconds histogram\n");
    for ((method, route), latency) in metrics.latencies.lock().iter() {
        let labels = format!("method=\"{method}\",route=\"{}\"", escape_label(route));
        latency.write(out, "sagitta_http_request_duration_seconds", &labels);
    }
    out.push_str(
        "# HELP sagitta_grpc_requests_total gRPC calls answered, by method and status code \
         (each also counted in sagitta_http_requests_total under the route that answered it).\n",
    );
    out.push_str("# TYPE sagitta_grpc_requests_total counter\n");
    for ((method, code), count) in metrics.grpc_calls.lock().iter() {
        let method = escape_label(method);
        let _ = writeln!(
            out,
            "sagitta_grpc_requests_total{{method=\"{method}\",code=\"{code}\"}} {count}"
        );
    }
    out.push_str("# HELP sagitta_grpc_request_duration_seconds Time to answer a gRPC call.\n");
    out.push_str("# TYPE sagitta_grpc_request_duration_seconds histogram\n");
    for (method, latency) in metrics.grpc_latencies.lock().iter() {
        let labels = format!("method=\"{}\"", escape_label(method));
        latency.write(out, "sagitta_grpc_request_duration_seconds", &labels);
    }
}

/// The connection layer's gauge and counters.
fn connection_series(out: &mut String, connections: &ConnectionMetrics) {
    let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let _ = writeln!(
        out,
        "# HELP sagitta_http_connections_open Client connections open.\n\
         # TYPE sagitta_http_connections_open gauge\n\
         sagitta_http_connections_open {}\n\
         # HELP sagitta_http_connections_accepted_total Client connections admitted.\n\
         # TYPE sagitta_http_connections_accepted_total counter\n\
         sagitta_http_connections_accepted_total {}",
        load(&connections.open),
        load(&connections.accepted)
    );
    by_reason(
        out,
        "sagitta_http_connections_closed_total",
        "Connections the server closed, by reason.",
        &[
            ("header_timeout", &connections.closed_header_timeout),
            ("idle_timeout", &connections.closed_idle_timeout),
            ("write_timeout", &connections.closed_write_timeout),
            ("evicted", &connections.evicted),
        ],
    );
    by_reason(
        out,
        "sagitta_http_connections_refused_total",
        "Connections refused at once, by cap.",
        &[
            ("per_address", &connections.refused_address_full),
            ("server", &connections.refused_server_full),
        ],
    );
    by_reason(
        out,
        "sagitta_http_request_bodies_refused_total",
        "Requests refused over their body, by reason.",
        &[
            ("declared_too_large", &connections.declared_too_large),
            ("read_timeout", &connections.body_read_timeouts),
            ("inflight_bytes", &connections.bodies_refused_inflight),
        ],
    );
}

/// A counter family labelled by `reason`.
fn by_reason(out: &mut String, name: &str, help: &str, counters: &[(&str, &AtomicU64)]) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (reason, counter) in counters {
        let _ = writeln!(
            out,
            "{name}{{reason=\"{reason}\"}} {}",
            counter.load(Ordering::Relaxed)
        );
    }
}

/// Each collection's gauges: points, indexed vectors, segments and status.
fn collection_series(out: &mut String, database: &Database) {
    let gauges = [
        ("sagitta_collection_points", "Live points."),
        (
            "sagitta_collection_indexed_vectors",
            "Live points in sealed HNSW segments.",
        ),
        ("sagitta_collection_segments", "Sealed segments."),
        (
            "sagitta_collection_optimizer_state",
            "1 for the collection's current status (green, yellow or red).",
        ),
    ];
    let mut rows: Vec<[String; 4]> = Vec::new();
    for name in database.list() {
        let Ok(collection) = database.collection(&name) else {
            continue;
        };
        let status = collection.status();
        let label = escape_label(&name);
        let health = status.health.name();
        rows.push([
            format!("{{collection=\"{label}\"}} {}", status.points),
            format!("{{collection=\"{label}\"}} {}", status.indexed),
            format!("{{collection=\"{label}\"}} {}", status.segments),
            format!("{{collection=\"{label}\",state=\"{health}\"}} 1"),
        ]);
    }
    for (column, (name, help)) in gauges.iter().enumerate() {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for row in &rows {
            let _ = writeln!(out, "{name}{}", row[column]);
        }
    }
}

pub async fn telemetry(State(state): State<SharedState>) -> Response {
    let started = Instant::now();
    let collections: Vec<serde_json::Value> = state
        .database
        .list()
        .into_iter()
        .filter_map(|name| {
            let collection = state.database.collection(&name).ok()?;
            let status = collection.status();
            Some(json!({
                "id": name,
                "points": status.points,
                "indexed_vectors": status.indexed,
                "segments": status.segments,
                "placement": status.placement.to_json(collection.config().storage.placement),
                "optimizer_error": status.optimizer_error,
                "write_error": status.write_error,
            }))
        })
        .collect();
    let simd = sagitta_kernels::detected_simd_level();
    let available: Vec<&str> = sagitta_kernels::available_simd_levels()
        .into_iter()
        .map(sagitta_kernels::SimdLevel::name)
        .collect();
    ok(
        json!({
            "app": {
                "name": "sagittadb",
                "version": env!("CARGO_PKG_VERSION"),
                "qdrant_compatible_version": crate::QDRANT_COMPATIBLE_VERSION,
                "simd": simd.name(),
                "simd_available": available,
                "cores": std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
                "uptime_seconds": state.started.elapsed().as_secs_f64(),
                "topology": state.database.machine().topology().to_json(),
            },
            "collections": {
                "number_of_collections": collections.len(),
                "collections": collections,
            },
            "requests": {"total": state.metrics.requests_total()},
            "page_io": page_io_report(),
        }),
        started,
    )
}
