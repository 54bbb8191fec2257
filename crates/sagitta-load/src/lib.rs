//! `sagitta-load`: a load generator for SagittaDB's Qdrant-compatible REST and gRPC APIs,
//! in the manner of qdrant's vector-db-benchmark.
//!
//! 1. (`--upload`) recreate the collection, upsert the base vectors in batches with
//!    `wait=false` and a few requests in flight, then poll `GET /collections/{c}` until green;
//! 2. for each concurrency level C: C client tasks, each with its own keep-alive connection,
//!    warm up, then share a counter over a fixed number of queries
//!    (`POST /collections/{c}/points/query`, or `Points/Query` over gRPC); RPS = requests /
//!    wall time, latency per request from send to full answer received, precision@k against
//!    exact ground truth.
//!
//! `--api rest,grpc` measures both APIs in one run: each uploads in turn (recreating the
//! collection), and the timed phases of the two alternate at each concurrency level.
//! Collection setup and the green polling stay on REST; the upserts and the timed queries
//! go over the API measured.
//!
//! So that the generator is not what is measured: request bodies are serialized before the
//! timed phase; hyper's client with TCP_NODELAY and no per-request allocation beyond the
//! request itself; its own CPU time (and the server's, with `--server-pid`) is reported per
//! phase; `--baseline-readyz` measures the same concurrency against `GET /readyz`.
#![deny(unsafe_code)]

pub mod body;
pub mod grpc;
pub mod http;
pub mod npy;
pub mod report;
pub mod search;
pub mod stats;
pub mod truth;
pub mod upload;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use clap::Parser;
use sagitta_server::grpc::api::{QueryPoints, UpsertPoints};
use serde_json::{json, Value};

use crate::grpc::GrpcEndpoint;
use crate::http::{new_client, Endpoint, HttpClient};
use crate::npy::{Matrix, NpyError};
use crate::search::{PhaseResult, PhaseSettings, Target};
use crate::upload::Batches;

/// An API the generator measures.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// Qdrant's REST API: JSON over HTTP/1.1 on --url.
    Rest,
    /// Qdrant's gRPC API: protobuf over HTTP/2 on --grpc-url.
    Grpc,
}

impl Api {
    pub fn name(self) -> &'static str {
        match self {
            Api::Rest => "rest",
            Api::Grpc => "grpc",
        }
    }
}

/// Load generator for SagittaDB's Qdrant-compatible REST and gRPC APIs: upload, wait for
/// green, then a fixed number of searches from N concurrent keep-alive clients. Reports RPS,
/// latency percentiles, precision@k and errors.
#[derive(Parser, Debug, Clone)]
#[command(name = "sagitta-load", version)]
pub struct Args {
    /// Server root URL (http only); collection setup and green polling always use it.
    #[arg(long, default_value = "http://127.0.0.1:6333")]
    pub url: String,
    /// APIs measured, comma-separated: rest, grpc, or both (the same run: uploads one after
    /// the other, timed phases alternating per concurrency level).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rest")]
    pub api: Vec<Api>,
    /// gRPC root URL (http only), for --api grpc.
    #[arg(long, default_value = "http://127.0.0.1:6334")]
    pub grpc_url: String,
    /// Collection to search (and, with --upload, to recreate).
    #[arg(long)]
    pub collection: String,
    /// Directory with base.npy, queries.npy (float32 or float16, rows x dim) and optionally
    /// gt.npy (integer row indices of the exact neighbours, queries x >=k).
    #[arg(long, value_name = "DIR")]
    pub data: PathBuf,
    /// Concurrency levels (clients), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    pub concurrency: Vec<usize>,
    /// Timed requests per concurrency level (cycling through the query set).
    #[arg(long, default_value_t = 10_000)]
    pub queries: usize,
    /// Neighbours per query (k).
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// `params.hnsw_ef` of every query [default: the server's].
    #[arg(long, value_name = "EF")]
    pub hnsw_ef: Option<usize>,
    /// Recreate the collection and upload base.npy first (ids = row numbers).
    #[arg(long)]
    pub upload: bool,
    /// Points per upsert request.
    #[arg(long, default_value_t = 512)]
    pub upload_batch: usize,
    /// `shard_number` of the collection --upload creates.
    #[arg(long, default_value_t = 1)]
    pub shards: usize,
    /// Upsert requests in flight.
    #[arg(long, default_value_t = 4)]
    pub upload_parallel: usize,
    /// Do not wait for the collection to turn green after the upload.
    #[arg(long)]
    pub skip_wait: bool,
    /// Write the result document (bench-schema "sagitta-bench/1") here.
    #[arg(long, value_name = "FILE.json")]
    pub out: Option<PathBuf>,
    /// `engine` name in the result document.
    #[arg(long, default_value = "sagitta-server")]
    pub engine_name: String,
    /// API key sent as the `api-key` header (and gRPC metadata).
    #[arg(long, value_name = "K")]
    pub api_key: Option<String>,
    /// Tokio worker threads of the generator [default 0: one per core].
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// Warm-up requests before each timed phase (at least one per client).
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Per-request timeout in seconds (a timeout counts as an error).
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Longest wait for green, in seconds.
    #[arg(long, default_value_t = 3600.0)]
    pub wait_timeout: f64,
    /// Server process id: its CPU time per phase and resident memory are reported too.
    #[arg(long, value_name = "PID")]
    pub server_pid: Option<u32>,
    /// Also run each concurrency level against GET /readyz (the HTTP stack's ceiling), and
    /// for gRPC against `Qdrant/HealthCheck`.
    #[arg(long)]
    pub baseline_readyz: bool,
    /// Dataset name in the result document [default: the --data directory's name].
    #[arg(long)]
    pub dataset_name: Option<String>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Npy(#[from] NpyError),
    #[error("{0}")]
    Other(String),
}

impl From<String> for LoadError {
    fn from(message: String) -> LoadError {
        LoadError::Other(message)
    }
}

/// Most clients in one phase.
pub const MAX_CONCURRENCY: usize = 65_536;

/// Raises the soft RLIMIT_NOFILE towards the hard one if `needed` descriptors do not fit;
/// an error that says what to do if they still do not. Returns the soft limit.
pub fn ensure_descriptors(needed: u64) -> Result<u64, String> {
    let soft = rlimit::increase_nofile_limit(needed)
        .map_err(|e| format!("cannot read or raise RLIMIT_NOFILE: {e}"))?;
    if soft < needed {
        return Err(format!(
            "{needed} file descriptors needed (one socket per client plus margin) but \
             RLIMIT_NOFILE is {soft} and cannot be raised further; raise the hard limit \
             (ulimit -Hn) or use fewer clients"
        ));
    }
    Ok(soft)
}

/// The data set, loaded and checked.
pub struct Data {
    pub n: usize,
    pub dim: usize,
    /// Base vectors, when needed (upload or ground truth to compute).
    pub base: Option<Matrix<f32>>,
    pub queries: Matrix<f32>,
    /// Exact top-k row numbers per query.
    pub truth: Vec<Vec<u64>>,
    /// How the ground truth was obtained.
    pub truth_source: String,
    pub base_dtype: &'static str,
}

/// Loads `dir`/{base,queries,gt}.npy; computes the ground truth by brute force (cosine)
/// without gt.npy.
pub fn load_data(dir: &Path, k: usize, need_base: bool) -> Result<Data, LoadError> {
    let base_path = dir.join("base.npy");
    let gt_path = dir.join("gt.npy");
    let queries = npy::read_f32(&dir.join("queries.npy"))?;
    let has_gt = gt_path.exists();
    let base_header = npy::read_header(&base_path)?;
    let (n, dim) = (base_header.rows, base_header.cols);
    if queries.cols != dim {
        return Err(format!(
            "{}: dimension {} differs from base.npy's {dim}",
            dir.join("queries.npy").display(),
            queries.cols
        )
        .into());
    }
    if queries.rows == 0 || n == 0 {
        return Err(format!("{}: no base vectors or no queries", dir.display()).into());
    }
    let base = if need_base || !has_gt {
        Some(npy::read_f32(&base_path)?)
    } else {
        None
    };
    let (truth, truth_source) = if has_gt {
        read_truth(&gt_path, queries.rows, k, n)?
    } else {
        let base = base.as_ref().expect("base is loaded without gt.npy");
        compute_truth(dir, base, n, &queries, k)
    };
    Ok(Data {
        n,
        dim,
        base,
        queries,
        truth,
        truth_source,
        base_dtype: base_header.dtype.descr(),
    })
}

/// The exact top-`k` of each of `queries` queries from gt.npy at `gt_path`, checked
/// against the data set (`n` base rows), and how it was obtained.
fn read_truth(
    gt_path: &Path,
    queries: usize,
    k: usize,
    n: usize,
) -> Result<(Vec<Vec<u64>>, String), LoadError> {
    let gt = npy::read_i64(gt_path)?;
    if gt.rows != queries {
        return Err(format!(
            "{}: {} rows, but queries.npy has {}",
            gt_path.display(),
            gt.rows,
            queries
        )
        .into());
    }
    if gt.cols < k.min(n) {
        return Err(format!(
            "{}: {} columns, fewer than --limit {k}",
            gt_path.display(),
            gt.cols
        )
        .into());
    }
    let mut truth = Vec::with_capacity(gt.rows);
    for q in 0..gt.rows {
        let row = &gt.row(q)[..k.min(gt.cols)];
        let ids = row
            .iter()
            .map(|&id| u64::try_from(id).ok().filter(|&id| id < n as u64))
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| {
                format!(
                    "{}: row {q} has an id outside 0..{n} (ids must be base row numbers)",
                    gt_path.display()
                )
            })?;
        truth.push(ids);
    }
    Ok((
        truth,
        format!("gt.npy ({}, first {k} columns)", gt.source_dtype.descr()),
    ))
}

/// The exact cosine top-`k` of each query by brute force over the `n` rows of `base` (the
/// data set in `dir`, which has no gt.npy), and how it was obtained.
fn compute_truth(
    dir: &Path,
    base: &Matrix<f32>,
    n: usize,
    queries: &Matrix<f32>,
    k: usize,
) -> (Vec<Vec<u64>>, String) {
    eprintln!(
        "no gt.npy in {}: computing exact cosine top-{k} by brute force ({n} x {} queries)",
        dir.display(),
        queries.rows
    );
    let truth = truth::brute_force_cosine(base, queries, k)
        .into_iter()
        .map(|row| row.into_iter().map(u64::from).collect())
        .collect();
    (
        truth,
        "computed by brute force (cosine, exact, float32) because gt.npy is absent".to_string(),
    )
}

fn available_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text
        .lines()
        .find(|line| line.starts_with("MemAvailable:"))?;
    Some(line.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

fn check_args(args: &Args) -> Result<(), String> {
    upload::check_collection_name(&args.collection)?;
    if args.concurrency.is_empty()
        || args
            .concurrency
            .iter()
            .any(|&c| c == 0 || c > MAX_CONCURRENCY)
    {
        return Err(format!(
            "--concurrency: each level must be 1..={MAX_CONCURRENCY}"
        ));
    }
    if args.queries == 0
        || args.limit == 0
        || args.upload_batch == 0
        || args.upload_parallel == 0
        || args.shards == 0
    {
        return Err(
            "--queries, --limit, --upload-batch, --upload-parallel and --shards must be > 0".into(),
        );
    }
    if !(args.timeout > 0.0 && args.wait_timeout > 0.0) {
        return Err("--timeout and --wait-timeout must be > 0".into());
    }
    if args.api.is_empty() || (1..args.api.len()).any(|i| args.api[..i].contains(&args.api[i])) {
        return Err("--api: name rest and/or grpc, each once".into());
    }
    Ok(())
}

/// Runs everything `args` asks for and returns the result document (also written to
/// `--out`). `argv` is recorded as the command.
pub fn run(args: &Args, argv: &[String]) -> Result<Value, LoadError> {
    check_args(args)?;
    let started_at = report::utc_now();
    let max_concurrency = args.concurrency.iter().copied().max().unwrap_or(1);
    let needed = (max_concurrency + args.upload_parallel + 64) as u64;
    let nofile = ensure_descriptors(needed)?;
    let timeout = Duration::from_secs_f64(args.timeout);
    let endpoint = Endpoint::new(&args.url, args.api_key.as_deref(), timeout)?;
    let grpc = args
        .api
        .contains(&Api::Grpc)
        .then(|| GrpcEndpoint::new(&args.grpc_url, args.api_key.as_deref(), timeout))
        .transpose()?;
    let mut data = load_data(&args.data, args.limit, args.upload)?;
    let prepared = prepare(args, &mut data)?;
    let threads = if args.threads == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    } else {
        args.threads
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the tokio runtime: {e}"))?;
    let measured = runtime.block_on(measure(args, &endpoint, grpc.as_ref(), &data, prepared))?;
    let document = build_document(args, argv, &started_at, &data, threads, nofile, &measured);
    if let Some(out) = &args.out {
        if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        let text = serde_json::to_string_pretty(&document).expect("the document serializes");
        std::fs::write(out, text + "\n").map_err(|e| format!("{}: {e}", out.display()))?;
        println!("wrote {}", out.display());
    }
    Ok(document)
}

/// The requests of a run, built before anything is timed: for each API measured, the
/// query of every query row and (with --upload) the upsert of every batch.
pub struct Prepared {
    pub query_bodies: Vec<Bytes>,
    pub query_messages: Vec<QueryPoints>,
    pub upload_bodies: Option<Arc<Vec<Bytes>>>,
    pub upload_messages: Option<Arc<Vec<UpsertPoints>>>,
}

/// Builds the requests `args` needs from `data`, taking its base vectors (the upload is
/// refused if its requests would take more than half of the available memory).
fn prepare(args: &Args, data: &mut Data) -> Result<Prepared, LoadError> {
    let (rest, grpc) = (args.api.contains(&Api::Rest), args.api.contains(&Api::Grpc));
    let rows = 0..data.queries.rows;
    let queries = &data.queries;
    let mut prepared = Prepared {
        query_bodies: rows
            .clone()
            .filter(|_| rest)
            .map(|q| body::query_body(queries.row(q), args.limit, args.hnsw_ef))
            .collect(),
        query_messages: rows
            .filter(|_| grpc)
            .map(|q| {
                grpc::query_message(&args.collection, queries.row(q), args.limit, args.hnsw_ef)
            })
            .collect(),
        upload_bodies: None,
        upload_messages: None,
    };
    let Some(base) = data.base.take().filter(|_| args.upload) else {
        return Ok(prepared);
    };
    // About 12 bytes of JSON per float, 4 of protobuf.
    let estimate = (base.data.len() as u64) * (u64::from(rest) * 12 + u64::from(grpc) * 4);
    if let Some(available) = available_memory_bytes() {
        if estimate > available / 2 {
            return Err(format!(
                "the upload requests would take about {} MiB, more than half of the \
                 available memory ({} MiB); use a smaller data set",
                estimate >> 20,
                available >> 20
            )
            .into());
        }
    }
    if rest {
        let bodies = body::upsert_bodies(&base.data, base.cols, args.upload_batch);
        prepared.upload_bodies = Some(Arc::new(bodies));
    }
    if grpc {
        let messages =
            grpc::upsert_messages(&args.collection, &base.data, base.cols, args.upload_batch);
        prepared.upload_messages = Some(Arc::new(messages));
    }
    Ok(prepared)
}

/// One API's upload and wait for green.
pub struct Uploaded {
    pub api: Api,
    pub upload: upload::UploadResult,
    pub wait: Option<upload::WaitResult>,
}

/// One API's timed phase at one concurrency level, and its baseline when asked.
pub struct Phase {
    pub api: Api,
    pub result: PhaseResult,
    pub baseline: Option<PhaseResult>,
}

/// What the asynchronous part measured.
pub struct Measured {
    pub server_app: Option<Value>,
    pub uploads: Vec<Uploaded>,
    pub collection_info: Value,
    pub phases: Vec<Phase>,
    pub server_rss_bytes: Option<u64>,
    pub warnings: Vec<String>,
}

/// Checks that the server answers, uploads (over each API in turn) and waits for green
/// when asked, then runs the timed phases.
async fn measure(
    args: &Args,
    endpoint: &Endpoint,
    grpc: Option<&GrpcEndpoint>,
    data: &Data,
    prepared: Prepared,
) -> Result<Measured, LoadError> {
    let control = new_client(&Arc::new(AtomicU64::new(0)));
    let name = &args.collection;
    let server_app = probe_server(endpoint, &control).await?;
    if let Some(grpc) = grpc {
        probe_grpc(grpc).await?;
    }
    let mut warnings = Vec::new();
    let uploads = upload_each(args, endpoint, grpc, &control, data, &prepared).await?;
    let collection_info = upload::collection_info(endpoint, &control, name).await?;
    if collection_info["points_count"].as_u64() != Some(data.n as u64) {
        let warning = format!(
            "collection {name} has points_count {} but base.npy has {} rows",
            collection_info["points_count"], data.n
        );
        eprintln!("warning: {warning}");
        warnings.push(warning);
    }
    let server_pid = args.server_pid.map(|pid| pid.to_string());
    let targets = targets(args, endpoint, grpc, data, prepared)?;
    let phases = run_phases(
        args,
        endpoint,
        &targets,
        server_pid.as_deref(),
        &mut warnings,
    )
    .await;
    let server_rss_bytes = server_pid.as_deref().and_then(stats::rss_bytes);
    Ok(Measured {
        server_app,
        uploads,
        collection_info,
        phases,
        server_rss_bytes,
        warnings,
    })
}

/// With --upload: over each API in turn, recreates the collection, uploads and (unless
/// --skip-wait) waits for green.
async fn upload_each(
    args: &Args,
    endpoint: &Endpoint,
    grpc: Option<&GrpcEndpoint>,
    control: &HttpClient,
    data: &Data,
    prepared: &Prepared,
) -> Result<Vec<Uploaded>, LoadError> {
    let name = &args.collection;
    let mut uploads = Vec::new();
    for &api in &args.api {
        let batches = match (api, grpc) {
            (Api::Rest, _) => prepared
                .upload_bodies
                .clone()
                .map(|bodies| Batches::rest(endpoint, name, bodies))
                .transpose()?,
            (Api::Grpc, Some(grpc)) => {
                prepared
                    .upload_messages
                    .clone()
                    .map(|messages| Batches::Grpc {
                        endpoint: grpc.clone(),
                        messages,
                    })
            }
            (Api::Grpc, None) => None,
        };
        if let Some(batches) = batches {
            let upload = upload_points(args, endpoint, control, data, api, batches).await?;
            let wait = if args.skip_wait {
                None
            } else {
                Some(wait_until_green(args, endpoint, control).await?)
            };
            uploads.push(Uploaded { api, upload, wait });
        }
    }
    Ok(uploads)
}

/// An error unless the gRPC API answers its health check.
async fn probe_grpc(grpc: &GrpcEndpoint) -> Result<(), LoadError> {
    let channel = grpc.channel(&Arc::new(AtomicU64::new(0)));
    grpc.health(&channel).await.map_err(|failure| {
        LoadError::Other(format!(
            "no answer from the gRPC health check at {} (is the server's gRPC API on?): {}",
            grpc.url, failure.message
        ))
    })
}

/// The server's `app` telemetry (name, version), if it reports one; an error if the
/// server does not answer at all.
async fn probe_server(
    endpoint: &Endpoint,
    control: &HttpClient,
) -> Result<Option<Value>, LoadError> {
    let root = upload::get_json(endpoint, control, "/").await;
    if root.is_none() {
        return Err(format!(
            "no answer from GET {}/ (is the server running?)",
            endpoint.base
        )
        .into());
    }
    Ok(upload::get_json(endpoint, control, "/telemetry")
        .await
        .map(|mut telemetry| telemetry["result"]["app"].take())
        .filter(|app| !app.is_null()))
}

/// Recreates the collection and sends `batches` into it over `api`, printing the upload
/// rate.
async fn upload_points(
    args: &Args,
    endpoint: &Endpoint,
    control: &HttpClient,
    data: &Data,
    api: Api,
    batches: Batches,
) -> Result<upload::UploadResult, LoadError> {
    let name = &args.collection;
    upload::recreate_collection(
        endpoint,
        control,
        name,
        body::create_collection_body(data.dim, args.shards),
    )
    .await?;
    eprintln!(
        "uploading {} points over {} in batches of {} ({} in flight)",
        data.n,
        api.name(),
        args.upload_batch,
        args.upload_parallel
    );
    let uploaded = upload::upload(batches, args.upload_parallel).await?;
    println!(
        "upload ({}): {} points in {:.3} s = {:.0} points/s ({} MiB sent, {} retries)",
        api.name(),
        data.n,
        uploaded.seconds,
        data.n as f64 / uploaded.seconds.max(1e-9),
        uploaded.bytes >> 20,
        uploaded.retries
    );
    Ok(uploaded)
}

/// Waits for the collection to turn green, printing how long it took and what it holds.
async fn wait_until_green(
    args: &Args,
    endpoint: &Endpoint,
    control: &HttpClient,
) -> Result<upload::WaitResult, LoadError> {
    let waited = upload::wait_for_green(
        endpoint,
        control,
        &args.collection,
        Duration::from_millis(200),
        Duration::from_secs_f64(args.wait_timeout),
    )
    .await?;
    println!(
        "wait for green: {:.3} s ({} polls); points {}, indexed {}, segments {}",
        waited.seconds,
        waited.polls,
        waited.info["points_count"],
        waited.info["indexed_vectors_count"],
        waited.info["segments_count"]
    );
    Ok(waited)
}

/// Each API's query target and baseline target.
type Targets = Vec<(Api, Arc<Target>, Arc<Target>)>;

fn targets(
    args: &Args,
    endpoint: &Endpoint,
    grpc: Option<&GrpcEndpoint>,
    data: &Data,
    prepared: Prepared,
) -> Result<Targets, LoadError> {
    let name = &args.collection;
    let (mut bodies, mut messages) = (Some(prepared.query_bodies), Some(prepared.query_messages));
    let mut targets = Vec::new();
    for &api in &args.api {
        let (query, baseline) = match (api, grpc) {
            (Api::Rest, _) => (
                Target::Query {
                    uri: endpoint.uri(&format!("/collections/{name}/points/query"))?,
                    bodies: bodies.take().unwrap_or_default(),
                    truth: data.truth.clone(),
                    k: args.limit,
                },
                Target::Get {
                    uri: endpoint.uri("/readyz")?,
                },
            ),
            (Api::Grpc, Some(grpc)) => (
                Target::GrpcQuery {
                    endpoint: grpc.clone(),
                    requests: messages.take().unwrap_or_default(),
                    truth: data.truth.clone(),
                    k: args.limit,
                },
                Target::GrpcHealth {
                    endpoint: grpc.clone(),
                },
            ),
            (Api::Grpc, None) => {
                return Err("--api grpc without a gRPC endpoint".to_string().into())
            }
        };
        targets.push((api, Arc::new(query), Arc::new(baseline)));
    }
    Ok(targets)
}

/// One timed phase per concurrency level and API (the APIs alternate at each level), each
/// followed by its baseline (`GET /readyz`, `Qdrant/HealthCheck`) when asked; failed
/// requests add a warning.
async fn run_phases(
    args: &Args,
    endpoint: &Endpoint,
    targets: &Targets,
    server_pid: Option<&str>,
    warnings: &mut Vec<String>,
) -> Vec<Phase> {
    let mut phases = Vec::new();
    for &concurrency in &args.concurrency {
        let settings = PhaseSettings {
            concurrency,
            requests: args.queries,
            warmup: args.warmup,
            server_pid: server_pid.map(str::to_string),
        };
        for (api, target, baseline_target) in targets {
            let (query_label, baseline_label) = match api {
                Api::Rest => ("query ", "readyz"),
                Api::Grpc => ("grpc query ", "grpc health"),
            };
            let result = search::run_phase(endpoint, target, &settings).await;
            println!("{}", report::phase_line(query_label, &result));
            report_phase_errors(concurrency, &result, warnings);
            let baseline = if args.baseline_readyz {
                let baseline = search::run_phase(endpoint, baseline_target, &settings).await;
                println!("{}", report::phase_line(baseline_label, &baseline));
                Some(baseline)
            } else {
                None
            };
            phases.push(Phase {
                api: *api,
                result,
                baseline,
            });
        }
    }
    phases
}

/// Prints the error samples of a phase and, if any of its requests failed, a warning,
/// which it adds to `warnings`.
fn report_phase_errors(concurrency: usize, phase: &PhaseResult, warnings: &mut Vec<String>) {
    for sample in &phase.error_samples {
        eprintln!("  error: {sample}");
    }
    if phase.errors > 0 || phase.warmup_errors > 0 {
        let warning = format!(
            "concurrency {concurrency}: {} of {} timed requests failed, {} of {} warm-up \
             requests failed ({:?})",
            phase.errors,
            phase.requests,
            phase.warmup_errors,
            phase.warmup_requests,
            phase.errors_by_kind
        );
        eprintln!("warning: {warning}");
        warnings.push(warning);
    }
}

/// The result document (bench-schema "sagitta-bench/1") of a run.
fn build_document(
    args: &Args,
    argv: &[String],
    started_at: &str,
    data: &Data,
    threads: usize,
    nofile: u64,
    measured: &Measured,
) -> Value {
    json!({
        "schema": report::SCHEMA,
        "suite": report::SUITE,
        "started_at": started_at,
        "command": report::shell_join(argv),
        "machine": report::machine_info(),
        "dataset": dataset_section(args, data),
        "notes": notes(data, measured),
        "warnings": measured.warnings,
        "load_generator": {
            "name": "sagitta-load",
            "version": env!("CARGO_PKG_VERSION"),
            "tokio_worker_threads": threads,
            "apis": args.api.iter().map(|api| api.name()).collect::<Vec<_>>(),
            "http": "hyper 1 legacy client, HTTP/1.1 keep-alive, one connection per client",
            "grpc": "tonic 0.14 channel, HTTP/2 with 8 MiB stream windows, one connection per client",
            "rlimit_nofile": nofile,
            "requests_per_level": args.queries,
            "warmup_per_level": args.warmup,
            "timeout_seconds": args.timeout,
        },
        "server": {
            "url": args.url,
            "grpc_url": args.api.contains(&Api::Grpc).then_some(&args.grpc_url),
            "pid": args.server_pid,
            "app": measured.server_app,
            "collection": args.collection,
            "collection_info": measured.collection_info,
        },
        "results": args.api.iter()
            .map(|&api| engine_result(args, data, threads, measured, api))
            .collect::<Vec<_>>(),
    })
}

/// The document's `dataset`: what was searched.
fn dataset_section(args: &Args, data: &Data) -> Value {
    let dataset_name = args.dataset_name.clone().unwrap_or_else(|| {
        args.data.file_name().map_or_else(
            || "unknown".to_string(),
            |n| n.to_string_lossy().into_owned(),
        )
    });
    json!({
        "name": dataset_name,
        "n": data.n,
        "dim": data.dim,
        "metric": "cosine",
        "queries": data.queries.rows,
        "k": args.limit,
        "path": args.data.display().to_string(),
        "base_dtype": data.base_dtype,
        "queries_dtype": data.queries.source_dtype.descr(),
    })
}

/// The document's `notes`: what each measurement means and how it was taken.
fn notes(data: &Data, measured: &Measured) -> Vec<String> {
    let mut notes = vec![
        "recall_at_k is precision@k: mean |returned ids ∩ exact top-k| / k over the successful \
         timed requests (ids are base row numbers)"
            .to_string(),
        "qps = timed requests (successes and errors) / wall time from the moment every client \
         has finished its warm-up (and so holds its connection) until the last response"
            .to_string(),
        "latency_ms: per request, send to full response body received, successful requests \
         only; errors are counted in `errors` (any non-200, transport error or unparsable body)"
            .to_string(),
        "threads = the load generator's tokio worker threads, not the server's".to_string(),
        "request bodies serialized before the timed phases; one keep-alive HTTP/1.1 connection \
         per client (hyper legacy client, TCP_NODELAY, no TLS)"
            .to_string(),
        "gRPC (engine *-grpc): `Points/Query` and `Points/Upsert` messages built before the \
         timed phases (each call copies its message's vectors and prost encodes them); one \
         tonic channel, so one HTTP/2 connection, per client; collection setup and green \
         polling over REST; the baseline is `Qdrant/HealthCheck` instead of GET /readyz"
            .to_string(),
        format!("ground truth: {}", data.truth_source),
        "cpu.*: CPU seconds (user + system, all threads, from /proc/<pid>/stat in 10 ms \
         ticks) used during the timed phase by this generator and, with --server-pid, by the \
         server; *_cores_busy = CPU seconds / wall seconds"
            .to_string(),
    ];
    if measured.uploads.is_empty() {
        notes.push("no --upload: build_seconds is 0 and upload_seconds null".to_string());
    }
    notes
}

/// The document's entry of `results` for `api`: the engine (`--engine-name`, with
/// `-grpc` for gRPC), its index, the upload over that API and its runs.
fn engine_result(args: &Args, data: &Data, threads: usize, measured: &Measured, api: Api) -> Value {
    let search_params = match args.hnsw_ef {
        Some(ef) => json!({"hnsw_ef": ef, "limit": args.limit, "api": api.name()}),
        None => json!({"hnsw_ef": null, "limit": args.limit, "api": api.name(),
                       "note": "server default ef"}),
    };
    let baseline_key = match api {
        Api::Rest => "baseline_get_readyz",
        Api::Grpc => "baseline_grpc_health_check",
    };
    let runs: Vec<Value> = measured
        .phases
        .iter()
        .filter(|phase| phase.api == api)
        .map(|phase| {
            let baseline = phase.baseline.as_ref().map(|b| (baseline_key, b));
            report::run_entry(&phase.result, &search_params, threads, baseline)
        })
        .collect();
    let uploaded = measured.uploads.iter().find(|u| u.api == api);
    let upload_seconds = uploaded.map(|u| u.upload.seconds);
    let wait = uploaded.and_then(|u| u.wait.as_ref());
    let wait_seconds = wait.map(|w| w.seconds);
    let build_seconds = upload_seconds.unwrap_or(0.0) + wait_seconds.unwrap_or(0.0);
    let config = &measured.collection_info["config"];
    let engine = match api {
        Api::Rest => args.engine_name.clone(),
        Api::Grpc => format!("{}-grpc", args.engine_name),
    };
    json!({
        "engine": engine,
        "api": api.name(),
        "engine_version": measured.server_app.as_ref()
            .and_then(|app| app["version"].as_str())
            .unwrap_or("unknown"),
        "index_params": {
            "hnsw_config": config["hnsw_config"],
            "quantization_config": config["quantization_config"],
        },
        "build_seconds": report::round(build_seconds, 4),
        "upload_seconds": upload_seconds.map(|s| report::round(s, 4)),
        "wait_for_green_seconds": wait_seconds.map(|s| report::round(s, 4)),
        "wait_for_green_polls": wait.map(|w| w.polls),
        "upload": upload_section(args, data, uploaded.map(|u| &u.upload)),
        "memory_bytes": null,
        "server_rss_bytes": measured.server_rss_bytes,
        "disk_bytes_written": null,
        "runs": runs,
    })
}

/// The result's `upload`: how the points were sent; `None` (null) without `--upload`.
fn upload_section(
    args: &Args,
    data: &Data,
    upload: Option<&upload::UploadResult>,
) -> Option<Value> {
    upload.map(|u| {
        json!({
            "points": data.n,
            "shards": args.shards,
            "batch": args.upload_batch,
            "parallel": args.upload_parallel,
            "batches": u.batches,
            "bytes_sent": u.bytes,
            "retries_asked_by_server": u.retries,
            "connections": u.connections,
            "wait": false,
            "points_per_second": data.n as f64 / u.seconds.max(1e-9),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse_with_defaults() {
        let args = Args::try_parse_from([
            "sagitta-load",
            "--collection",
            "c",
            "--data",
            "/tmp/d",
            "--concurrency",
            "1,64,1024",
            "--hnsw-ef",
            "64",
        ])
        .unwrap();
        assert_eq!(args.concurrency, vec![1, 64, 1024]);
        assert_eq!(args.hnsw_ef, Some(64));
        assert_eq!(args.url, "http://127.0.0.1:6333");
        assert_eq!((args.upload_batch, args.upload_parallel), (512, 4));
        assert!(check_args(&args).is_ok());
        let mut bad = args.clone();
        bad.concurrency = vec![0];
        assert!(check_args(&bad).is_err());
        bad = args.clone();
        bad.shards = 0;
        assert!(check_args(&bad).unwrap_err().contains("--shards"));
        bad = args.clone();
        bad.collection = "a/b".to_string();
        assert!(check_args(&bad).is_err());
        assert_eq!(args.api, vec![Api::Rest]);
        bad = args;
        bad.api = vec![Api::Grpc, Api::Grpc];
        assert!(check_args(&bad).unwrap_err().contains("--api"));
        let with_api = |api: &str| {
            Args::try_parse_from([
                "sagitta-load",
                "--collection",
                "c",
                "--data",
                "d",
                "--api",
                api,
            ])
        };
        let both = with_api("rest,grpc").unwrap();
        assert_eq!(both.api, vec![Api::Rest, Api::Grpc]);
        assert_eq!(both.grpc_url, "http://127.0.0.1:6334");
        assert!(check_args(&both).is_ok());
        assert!(with_api("soap").is_err());
    }

    #[test]
    fn descriptors_for_a_few_clients_are_available() {
        assert!(ensure_descriptors(64).unwrap() >= 64);
    }
}
