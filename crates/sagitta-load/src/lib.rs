//! `sagitta-load`: a load generator for SagittaDB's Qdrant-compatible REST API, in the
//! manner of qdrant's vector-db-benchmark.
//!
//! 1. (`--upload`) recreate the collection, upsert the base vectors in batches with
//!    `wait=false` and a few requests in flight, then poll `GET /collections/{c}` until green;
//! 2. for each concurrency level C: C client tasks, each with its own keep-alive HTTP/1.1
//!    connection, warm up, then share a counter over a fixed number of
//!    `POST /collections/{c}/points/query` requests; RPS = requests / wall time, latency per
//!    request from send to full body received, precision@k against exact ground truth.
//!
//! So that the generator is not what is measured: request bodies are serialized before the
//! timed phase; hyper's client with TCP_NODELAY and no per-request allocation beyond the
//! request itself; its own CPU time (and the server's, with `--server-pid`) is reported per
//! phase; `--baseline-readyz` measures the same concurrency against `GET /readyz`.
#![deny(unsafe_code)]

pub mod body;
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
use serde_json::{json, Value};

use crate::http::{new_client, Endpoint, HttpClient};
use crate::npy::{Matrix, NpyError};
use crate::search::{PhaseResult, PhaseSettings, Target};

/// Load generator for SagittaDB's Qdrant-compatible REST API: upload, wait for green, then a
/// fixed number of searches from N concurrent keep-alive clients. Reports RPS, latency
/// percentiles, precision@k and errors.
#[derive(Parser, Debug, Clone)]
#[command(name = "sagitta-load", version)]
pub struct Args {
    /// Server root URL (http only).
    #[arg(long, default_value = "http://127.0.0.1:6333")]
    pub url: String,
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
    /// API key sent as the `api-key` header.
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
    /// Also run each concurrency level against GET /readyz (the HTTP stack's ceiling).
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
    let endpoint = Endpoint::new(
        &args.url,
        args.api_key.as_deref(),
        Duration::from_secs_f64(args.timeout),
    )?;

    let mut data = load_data(&args.data, args.limit, args.upload)?;
    let hnsw_ef = args.hnsw_ef;
    let query_bodies: Vec<Bytes> = (0..data.queries.rows)
        .map(|q| body::query_body(data.queries.row(q), args.limit, hnsw_ef))
        .collect();
    let upload_bodies = match (args.upload, data.base.take()) {
        (true, Some(base)) => {
            // About 12 bytes of JSON per float.
            let estimate = (base.data.len() as u64) * 12;
            if let Some(available) = available_memory_bytes() {
                if estimate > available / 2 {
                    return Err(format!(
                        "the upload bodies would take about {} MiB, more than half of the \
                         available memory ({} MiB); use a smaller data set",
                        estimate >> 20,
                        available >> 20
                    )
                    .into());
                }
            }
            Some(Arc::new(body::upsert_bodies(
                &base.data,
                base.cols,
                args.upload_batch,
            )))
        }
        _ => None,
    };
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
    let measured =
        runtime.block_on(measure(args, &endpoint, &data, query_bodies, upload_bodies))?;
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

/// What the asynchronous part measured.
pub struct Measured {
    pub server_app: Option<Value>,
    pub upload: Option<upload::UploadResult>,
    pub wait: Option<upload::WaitResult>,
    pub collection_info: Value,
    pub phases: Vec<(PhaseResult, Option<PhaseResult>)>,
    pub server_rss_bytes: Option<u64>,
    pub warnings: Vec<String>,
}

/// Checks that the server answers, uploads and waits for green when asked, then runs the
/// timed phases.
async fn measure(
    args: &Args,
    endpoint: &Endpoint,
    data: &Data,
    query_bodies: Vec<Bytes>,
    upload_bodies: Option<Arc<Vec<Bytes>>>,
) -> Result<Measured, LoadError> {
    let control = new_client(&Arc::new(AtomicU64::new(0)));
    let name = &args.collection;
    let server_app = probe_server(endpoint, &control).await?;
    let mut warnings = Vec::new();
    let (mut upload_result, mut wait_result) = (None, None);
    if let Some(bodies) = upload_bodies {
        upload_result = Some(upload_points(args, endpoint, &control, data, bodies).await?);
        if !args.skip_wait {
            wait_result = Some(wait_until_green(args, endpoint, &control).await?);
        }
    }
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
    let phases = run_phases(
        args,
        endpoint,
        data,
        query_bodies,
        server_pid.as_deref(),
        &mut warnings,
    )
    .await?;
    let server_rss_bytes = server_pid.as_deref().and_then(stats::rss_bytes);
    Ok(Measured {
        server_app,
        upload: upload_result,
        wait: wait_result,
        collection_info,
        phases,
        server_rss_bytes,
        warnings,
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

/// Recreates the collection and upserts `bodies` into it, printing the upload rate.
async fn upload_points(
    args: &Args,
    endpoint: &Endpoint,
    control: &HttpClient,
    data: &Data,
    bodies: Arc<Vec<Bytes>>,
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
        "uploading {} points in {} batches of {} ({} in flight)",
        data.n,
        bodies.len(),
        args.upload_batch,
        args.upload_parallel
    );
    let uploaded = upload::upload(endpoint, name, bodies, args.upload_parallel).await?;
    println!(
        "upload: {} points in {:.3} s = {:.0} points/s ({} MiB of JSON, {} retries after 429)",
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

/// One timed phase per concurrency level, each followed by its `/readyz` baseline when
/// asked; failed requests add a warning.
async fn run_phases(
    args: &Args,
    endpoint: &Endpoint,
    data: &Data,
    query_bodies: Vec<Bytes>,
    server_pid: Option<&str>,
    warnings: &mut Vec<String>,
) -> Result<Vec<(PhaseResult, Option<PhaseResult>)>, LoadError> {
    let name = &args.collection;
    let query_uri = endpoint.uri(&format!("/collections/{name}/points/query"))?;
    let target = Arc::new(Target::Query {
        uri: query_uri,
        bodies: query_bodies,
        truth: data.truth.clone(),
        k: args.limit,
    });
    let readyz = Arc::new(Target::Get {
        uri: endpoint.uri("/readyz")?,
    });
    let mut phases = Vec::new();
    for &concurrency in &args.concurrency {
        let settings = PhaseSettings {
            concurrency,
            requests: args.queries,
            warmup: args.warmup,
            server_pid: server_pid.map(str::to_string),
        };
        let phase = search::run_phase(endpoint, &target, &settings).await;
        println!("{}", report::phase_line("query ", &phase));
        report_phase_errors(concurrency, &phase, warnings);
        let baseline = if args.baseline_readyz {
            let baseline = search::run_phase(endpoint, &readyz, &settings).await;
            println!("{}", report::phase_line("readyz", &baseline));
            Some(baseline)
        } else {
            None
        };
        phases.push((phase, baseline));
    }
    Ok(phases)
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
            "http": "hyper 1 legacy client, HTTP/1.1 keep-alive, one connection per client",
            "rlimit_nofile": nofile,
            "requests_per_level": args.queries,
            "warmup_per_level": args.warmup,
            "timeout_seconds": args.timeout,
        },
        "server": {
            "url": args.url,
            "pid": args.server_pid,
            "app": measured.server_app,
            "collection": args.collection,
            "collection_info": measured.collection_info,
        },
        "results": [engine_result(args, data, threads, measured)],
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
        format!("ground truth: {}", data.truth_source),
        "cpu.*: CPU seconds (user + system, all threads, from /proc/<pid>/stat in 10 ms \
         ticks) used during the timed phase by this generator and, with --server-pid, by the \
         server; *_cores_busy = CPU seconds / wall seconds"
            .to_string(),
    ];
    if measured.upload.is_none() {
        notes.push("no --upload: build_seconds is 0 and upload_seconds null".to_string());
    }
    notes
}

/// The document's one entry of `results`: the engine, its index, the build and the runs.
fn engine_result(args: &Args, data: &Data, threads: usize, measured: &Measured) -> Value {
    let search_params = match args.hnsw_ef {
        Some(ef) => json!({"hnsw_ef": ef, "limit": args.limit}),
        None => json!({"hnsw_ef": null, "limit": args.limit, "note": "server default ef"}),
    };
    let runs: Vec<Value> = measured
        .phases
        .iter()
        .map(|(phase, baseline)| {
            report::run_entry(phase, &search_params, threads, baseline.as_ref())
        })
        .collect();
    let upload_seconds = measured.upload.as_ref().map(|u| u.seconds);
    let wait_seconds = measured.wait.as_ref().map(|w| w.seconds);
    let build_seconds = upload_seconds.unwrap_or(0.0) + wait_seconds.unwrap_or(0.0);
    let config = &measured.collection_info["config"];
    json!({
        "engine": args.engine_name,
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
        "wait_for_green_polls": measured.wait.as_ref().map(|w| w.polls),
        "upload": upload_section(args, data, measured.upload.as_ref()),
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
            "json_bytes": u.bytes,
            "retries_after_429": u.retries,
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
        bad = args;
        bad.collection = "a/b".to_string();
        assert!(check_args(&bad).is_err());
    }

    #[test]
    fn descriptors_for_a_few_clients_are_available() {
        assert!(ensure_descriptors(64).unwrap() >= 64);
    }
}
