//! The timed search phase: `concurrency` client tasks, each with its own keep-alive
//! connection (HTTP/1.1, or HTTP/2 for gRPC), share one counter over a fixed number of
//! requests.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hyper::{Method, StatusCode, Uri};
use serde::Deserialize;
use tokio::sync::Barrier;
use tokio::task::JoinHandle;

use sagitta_server::grpc::api::QueryPoints;
use tonic::transport::Channel;

use crate::grpc::{Failure, GrpcEndpoint};
use crate::http::{body_excerpt, new_client, Endpoint, HttpClient};
use crate::stats::{cpu_seconds, summarize, Summary};
use crate::truth::precision_at_k;

/// What each request asks.
pub enum Target {
    /// `POST {uri}` with `bodies[i % len]`; precision against `truth[i % len]`.
    Query {
        uri: Uri,
        bodies: Vec<Bytes>,
        truth: Vec<Vec<u64>>,
        k: usize,
    },
    /// `GET {uri}` with no body and nothing to check but the status (a baseline of what the
    /// HTTP stack and this generator can do).
    Get { uri: Uri },
    /// `Points/Query` with `requests[i % len]` over gRPC; precision against `truth[i % len]`.
    GrpcQuery {
        endpoint: GrpcEndpoint,
        requests: Vec<QueryPoints>,
        truth: Vec<Vec<u64>>,
        k: usize,
    },
    /// `Qdrant/HealthCheck` over gRPC: the gRPC stack's baseline.
    GrpcHealth { endpoint: GrpcEndpoint },
}

impl Target {
    fn grpc(&self) -> Option<&GrpcEndpoint> {
        match self {
            Target::GrpcQuery { endpoint, .. } | Target::GrpcHealth { endpoint } => Some(endpoint),
            Target::Query { .. } | Target::Get { .. } => None,
        }
    }
}

/// One client's connection.
pub enum Connection {
    Http(Box<HttpClient>),
    Grpc(Channel),
}

/// One phase's settings.
#[derive(Clone, Debug)]
pub struct PhaseSettings {
    pub concurrency: usize,
    /// Requests in the timed part.
    pub requests: usize,
    /// Warm-up requests before the clock starts: at least one per client (which opens its
    /// connection), at least this many in all.
    pub warmup: usize,
    /// Process whose CPU time is measured alongside this one's (the server).
    pub server_pid: Option<String>,
}

/// What a phase measured.
#[derive(Clone, Debug, Default)]
pub struct PhaseResult {
    pub concurrency: usize,
    /// Requests sent in the timed part (successes + errors).
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    /// Error kind ("HTTP 503", "transport", "bad body", "gRPC UNAVAILABLE") -> count.
    pub errors_by_kind: BTreeMap<String, u64>,
    /// A few error messages, for the report.
    pub error_samples: Vec<String>,
    pub wall_seconds: f64,
    /// Latency in milliseconds of successful requests, send to full body received.
    pub latency_ms: Option<Summary>,
    /// Mean precision@k over successful query requests.
    pub precision: Option<f64>,
    pub warmup_requests: u64,
    pub warmup_errors: u64,
    /// Connections opened during warm-up (one per client when all is well) and during the
    /// timed part (reconnects after errors; 0 when all is well).
    pub connections_warmup: u64,
    pub connections_timed: u64,
    pub client_cpu_seconds: Option<f64>,
    pub server_cpu_seconds: Option<f64>,
}

impl PhaseResult {
    pub fn qps(&self) -> f64 {
        if self.wall_seconds > 0.0 {
            self.requests as f64 / self.wall_seconds
        } else {
            0.0
        }
    }
}

struct Shared {
    endpoint: Endpoint,
    target: Arc<Target>,
    requests: usize,
    warmup: usize,
    next: AtomicUsize,
    warmup_next: AtomicUsize,
    opened: Arc<AtomicU64>,
}

#[derive(Default)]
struct TaskOut {
    latencies_ms: Vec<f64>,
    precision_sum: f64,
    precision_count: u64,
    ok: u64,
    errors: BTreeMap<String, u64>,
    samples: Vec<String>,
    warmup_requests: u64,
    warmup_errors: u64,
}

const SAMPLES_PER_TASK: usize = 2;
const SAMPLES_KEPT: usize = 10;

#[derive(Deserialize)]
struct QueryResponse {
    result: QueryResult,
}

#[derive(Deserialize)]
struct QueryResult {
    points: Vec<ScoredPoint>,
}

#[derive(Deserialize)]
struct ScoredPoint {
    id: serde_json::Value,
}

/// The point ids of a query response, in order; ids that are not integers are dropped
/// (they cannot be row numbers).
pub fn parse_ids(body: &[u8]) -> Result<Vec<u64>, String> {
    let response: QueryResponse = serde_json::from_slice(body).map_err(|e| {
        format!(
            "response is not a query result ({e}): {}",
            body_excerpt(body)
        )
    })?;
    Ok(response
        .result
        .points
        .iter()
        .filter_map(|point| point.id.as_u64())
        .collect())
}

enum Outcome {
    Ok {
        latency_ms: f64,
        precision: Option<f64>,
    },
    Error {
        kind: String,
        message: String,
    },
}

async fn exchange(shared: &Shared, connection: &Connection, index: usize) -> Outcome {
    match connection {
        Connection::Http(client) => exchange_http(shared, client, index).await,
        Connection::Grpc(channel) => exchange_grpc(&shared.target, channel, index).await,
    }
}

async fn exchange_http(shared: &Shared, client: &HttpClient, index: usize) -> Outcome {
    let (method, uri, body) = match &*shared.target {
        Target::Query { uri, bodies, .. } => (
            Method::POST,
            uri.clone(),
            bodies[index % bodies.len()].clone(),
        ),
        Target::Get { uri } => (Method::GET, uri.clone(), Bytes::new()),
        Target::GrpcQuery { .. } | Target::GrpcHealth { .. } => return mismatched(),
    };
    let started = Instant::now();
    let reply = shared.endpoint.send(client, method, uri, body).await;
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    let reply = match reply {
        Ok(reply) => reply,
        Err(error) => {
            return Outcome::Error {
                kind: "transport".to_string(),
                message: error.0,
            }
        }
    };
    if reply.status != StatusCode::OK {
        return Outcome::Error {
            kind: format!("HTTP {}", reply.status.as_u16()),
            message: format!("HTTP {}: {}", reply.status, body_excerpt(&reply.body)),
        };
    }
    let precision = match &*shared.target {
        Target::Query { truth, k, .. } => match parse_ids(&reply.body) {
            Ok(ids) => Some(precision_at_k(&ids, &truth[index % truth.len()], *k)),
            Err(message) => {
                return Outcome::Error {
                    kind: "bad body".to_string(),
                    message,
                }
            }
        },
        Target::Get { .. } | Target::GrpcQuery { .. } | Target::GrpcHealth { .. } => None,
    };
    Outcome::Ok {
        latency_ms,
        precision,
    }
}

/// A target sent over the other API's connection: `client_task` never does this.
fn mismatched() -> Outcome {
    Outcome::Error {
        kind: "internal".to_string(),
        message: "a request and a connection of different APIs".to_string(),
    }
}

async fn exchange_grpc(target: &Target, channel: &Channel, index: usize) -> Outcome {
    let started = Instant::now();
    let (reply, precision) = match target {
        Target::GrpcQuery {
            endpoint,
            requests,
            truth,
            k,
        } => match endpoint
            .query(channel, &requests[index % requests.len()])
            .await
        {
            Ok(ids) => (
                Ok(()),
                Some(precision_at_k(&ids, &truth[index % truth.len()], *k)),
            ),
            Err(failure) => (Err(failure), None),
        },
        Target::GrpcHealth { endpoint } => (endpoint.health(channel).await, None),
        Target::Query { .. } | Target::Get { .. } => return mismatched(),
    };
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    match reply {
        Ok(()) => Outcome::Ok {
            latency_ms,
            precision,
        },
        Err(Failure { kind, message, .. }) => Outcome::Error { kind, message },
    }
}

fn record_error(out: &mut TaskOut, kind: String, message: String) {
    *out.errors.entry(kind).or_insert(0) += 1;
    if out.samples.len() < SAMPLES_PER_TASK {
        out.samples.push(message);
    }
}

async fn client_task(shared: Arc<Shared>, barrier: Arc<Barrier>, expected: usize) -> TaskOut {
    let client = match shared.target.grpc() {
        Some(endpoint) => Connection::Grpc(endpoint.channel(&shared.opened)),
        None => Connection::Http(Box::new(new_client(&shared.opened))),
    };
    let mut out = TaskOut {
        latencies_ms: Vec::with_capacity(expected),
        ..TaskOut::default()
    };
    // Warm-up: one request of our own (it opens this client's connection), then a share of
    // the rest. Query indexes count down from the end so they differ from the timed ones
    // where the query set allows.
    let mut first = true;
    loop {
        let i = shared.warmup_next.fetch_add(1, Ordering::Relaxed);
        if i >= shared.warmup && !first {
            break;
        }
        first = false;
        out.warmup_requests += 1;
        let index = usize::MAX / 2 - i;
        if let Outcome::Error { kind, message } = exchange(&shared, &client, index).await {
            out.warmup_errors += 1;
            record_error(&mut out, format!("warm-up {kind}"), message);
        }
    }
    barrier.wait().await;
    loop {
        let i = shared.next.fetch_add(1, Ordering::Relaxed);
        if i >= shared.requests {
            break;
        }
        match exchange(&shared, &client, i).await {
            Outcome::Ok {
                latency_ms,
                precision,
            } => {
                out.ok += 1;
                out.latencies_ms.push(latency_ms);
                if let Some(precision) = precision {
                    out.precision_sum += precision;
                    out.precision_count += 1;
                }
            }
            Outcome::Error { kind, message } => record_error(&mut out, kind, message),
        }
    }
    out
}

/// Runs one phase: spawns the clients, lets each warm up, starts the clock when all are
/// ready, and stops it when the last request has completed.
pub async fn run_phase(
    endpoint: &Endpoint,
    target: &Arc<Target>,
    settings: &PhaseSettings,
) -> PhaseResult {
    let concurrency = settings.concurrency.max(1);
    let opened = Arc::new(AtomicU64::new(0));
    let shared = Arc::new(Shared {
        endpoint: endpoint.clone(),
        target: Arc::clone(target),
        requests: settings.requests,
        warmup: settings.warmup.max(concurrency),
        next: AtomicUsize::new(0),
        warmup_next: AtomicUsize::new(0),
        opened: Arc::clone(&opened),
    });
    let barrier = Arc::new(Barrier::new(concurrency + 1));
    let expected = settings.requests.div_ceil(concurrency) * 2 + 16;
    let handles: Vec<_> = (0..concurrency)
        .map(|_| {
            tokio::spawn(client_task(
                Arc::clone(&shared),
                Arc::clone(&barrier),
                expected,
            ))
        })
        .collect();
    barrier.wait().await;
    let started = Instant::now();
    let connections_warmup = opened.load(Ordering::Relaxed);
    let client_cpu = cpu_seconds("self");
    let server_cpu = settings.server_pid.as_deref().and_then(cpu_seconds);
    let (outs, panics) = join_clients(handles).await;
    let wall_seconds = started.elapsed().as_secs_f64();
    let client_cpu_after = cpu_seconds("self");
    let server_cpu_after = settings.server_pid.as_deref().and_then(cpu_seconds);

    let mut result = PhaseResult {
        concurrency,
        wall_seconds,
        connections_warmup,
        connections_timed: opened.load(Ordering::Relaxed) - connections_warmup,
        client_cpu_seconds: client_cpu.zip(client_cpu_after).map(|(a, b)| b - a),
        server_cpu_seconds: server_cpu.zip(server_cpu_after).map(|(a, b)| b - a),
        ..PhaseResult::default()
    };
    if panics > 0 {
        result
            .errors_by_kind
            .insert("client task panicked".to_string(), panics);
    }
    add_client_outputs(&mut result, outs, settings.requests);
    result
}

/// Waits for every client task: their outputs, and how many panicked.
async fn join_clients(handles: Vec<JoinHandle<TaskOut>>) -> (Vec<TaskOut>, u64) {
    let mut outs = Vec::with_capacity(handles.len());
    let mut panics = 0u64;
    for handle in handles {
        match handle.await {
            Ok(out) => outs.push(out),
            Err(_) => panics += 1,
        }
    }
    (outs, panics)
}

/// Adds the clients' counts, errors, latencies (about `requests` of them) and precision
/// to `result`.
fn add_client_outputs(result: &mut PhaseResult, outs: Vec<TaskOut>, requests: usize) {
    let mut latencies = Vec::with_capacity(requests);
    let (mut precision_sum, mut precision_count) = (0.0, 0u64);
    for out in outs {
        latencies.extend_from_slice(&out.latencies_ms);
        precision_sum += out.precision_sum;
        precision_count += out.precision_count;
        result.ok += out.ok;
        result.warmup_requests += out.warmup_requests;
        result.warmup_errors += out.warmup_errors;
        for (kind, count) in out.errors {
            if !kind.starts_with("warm-up") {
                result.errors += count;
            }
            *result.errors_by_kind.entry(kind).or_insert(0) += count;
        }
        for sample in out.samples {
            if result.error_samples.len() < SAMPLES_KEPT {
                result.error_samples.push(sample);
            }
        }
    }
    result.requests = result.ok + result.errors;
    result.latency_ms = summarize(&mut latencies);
    result.precision = (precision_count > 0).then(|| precision_sum / precision_count as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ids_of_a_query_response() {
        let body = br#"{"result":{"points":[{"id":7,"version":0,"score":0.9},
            {"id":"5c56c793-69f3-4fbf-87e6-c4bf54c28c26","version":1,"score":0.8},
            {"id":3,"version":2,"score":0.1}]},"status":"ok","time":0.001}"#;
        assert_eq!(parse_ids(body).unwrap(), vec![7, 3]);
        let error = parse_ids(br#"{"status":{"error":"nope"}}"#).unwrap_err();
        assert!(error.contains("nope"), "{error}");
    }

    #[test]
    fn qps_is_requests_over_wall_time() {
        let result = PhaseResult {
            requests: 500,
            wall_seconds: 0.25,
            ..PhaseResult::default()
        };
        assert_eq!(result.qps(), 2000.0);
        assert_eq!(PhaseResult::default().qps(), 0.0);
    }
}
