//! Scale-out benchmark, run under MPI: `mpirun -n R target/release/examples/mpi_bench
//! --base base.npy --queries queries.npy --gt gt.npy --out result.json`. Every rank keeps
//! the points it owns; rank 0 sends batches of queries down the tree and merges the
//! partial top-k lists, first up the tree, then by a plain gather to rank 0, and writes
//! QPS, latency per batch, recall, rank 0's merge CPU per query and the bytes every rank
//! sent per query (bench-schema JSON, suite `mpi-scaleout`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sagitta_cluster::batch::QueryBatch;
use sagitta_cluster::owner::owner_rank;
use sagitta_cluster::world::{complete, Rank};
use sagitta_engine::database::DatabaseOptions;
use sagitta_engine::{
    Collection, CollectionConfig, Database, Distance, Point, PointId, StorageConfig,
};
use sagitta_storage::fs::OsFileSystem;

const TIMEOUT: Duration = Duration::from_secs(120);
const TAG_STATS: i32 = 20;

struct Args {
    base: PathBuf,
    queries: PathBuf,
    gt: PathBuf,
    out: PathBuf,
    batch: usize,
    ef: usize,
    limit: usize,
    seconds: f64,
    /// When the run began, seconds since the Unix epoch.
    started_at: u64,
}

fn args() -> Args {
    let given: Vec<String> = std::env::args().collect();
    let value = |name: &str| {
        given
            .iter()
            .position(|arg| arg == name)
            .and_then(|at| given.get(at + 1).cloned())
    };
    let path = |name: &str| PathBuf::from(value(name).unwrap_or_else(|| panic!("{name} PATH")));
    let number =
        |name: &str, default: usize| value(name).map_or(default, |v| v.parse().expect(name));
    Args {
        base: path("--base"),
        queries: path("--queries"),
        gt: path("--gt"),
        out: path("--out"),
        batch: number("--batch", 64),
        ef: number("--ef", 64),
        limit: number("--limit", 10),
        seconds: value("--seconds").map_or(5.0, |v| v.parse().expect("--seconds")),
        started_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs()),
    }
}

/// An .npy matrix: its rows' width and values (floats), or ids (integers) as f64.
fn read_npy(path: &Path) -> (usize, Vec<f64>) {
    let mut file = sagitta_storage::npy::open(path).expect("npy");
    let header = file.header.clone();
    let width = header.shape.get(1).copied().unwrap_or(1) as usize;
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut file.reader, &mut bytes).expect("read");
    let values = if header.dtype.is_float() {
        let mut floats = Vec::new();
        sagitta_storage::npy::decode_floats(&bytes, header.dtype, &mut floats);
        floats.into_iter().map(f64::from).collect()
    } else if header.dtype.size_bytes() == 8 {
        bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect()
    } else {
        bytes
            .chunks_exact(4)
            .map(|b| f64::from(i32::from_le_bytes(b.try_into().unwrap())))
            .collect()
    };
    (width, values)
}

fn build(rank: &Rank, database: &Database, base: &[f64], dim: usize) -> (Arc<Collection>, f64) {
    let started = Instant::now();
    let config = CollectionConfig {
        dim,
        distance: Distance::Cosine,
        shard_count: 1,
        storage: StorageConfig::default(),
    };
    let collection = database.create_collection("docs", config).expect("create");
    let owned: Vec<Point> = base
        .chunks_exact(dim)
        .enumerate()
        .map(|(row, values)| (PointId::Number(row as u64), values))
        .filter(|(id, _)| owner_rank(id, rank.size()) == rank.rank())
        .map(|(id, values)| Point {
            id,
            vector: values.iter().map(|&v| v as f32).collect(),
            payload: None,
            side: Vec::new(),
        })
        .collect();
    for chunk in owned.chunks(2_000) {
        collection.upsert(chunk.to_vec(), false).expect("upsert");
    }
    collection.optimize(&OsFileSystem).expect("seal");
    (collection, started.elapsed().as_secs_f64())
}

/// What one mode measured on rank 0.
#[derive(Default)]
struct Measured {
    latencies: Vec<f64>,
    queries: usize,
    wall: f64,
    found: Vec<Vec<u64>>,
    search_ms: f64,
}

/// Serves batches until rank 0 sends the stop batch (limit 0); rank 0 sends them, every
/// query in turn, for `args.seconds`.
fn run_mode(
    rank: &Rank,
    collection: &Collection,
    args: &Args,
    queries: &[f32],
    dim: usize,
    tree: bool,
) -> Measured {
    let mut measured = Measured::default();
    let total = queries.len() / dim;
    let started = Instant::now();
    let (mut number, mut next) = (0_u64, 0_usize);
    loop {
        number += 1;
        let sent = if rank.rank() == 0 {
            let stop =
                started.elapsed().as_secs_f64() > args.seconds && measured.found.len() >= total;
            let rows: Vec<f32> = (0..args.batch)
                .flat_map(|i| &queries[((next + i) % total) * dim..][..dim])
                .copied()
                .collect();
            QueryBatch {
                number,
                collection: "docs".into(),
                limit: if stop { 0 } else { args.limit },
                ef: args.ef,
                dim,
                vectors: rows,
            }
            .encode()
        } else {
            Vec::new()
        };
        let at = Instant::now();
        let batch =
            QueryBatch::decode(&rank.broadcast(sent, TIMEOUT).expect("batch")).expect("decode");
        if batch.limit == 0 {
            break;
        }
        let searched = Instant::now();
        let mine = batch.search(collection).expect("search");
        measured.search_ms += searched.elapsed().as_secs_f64() * 1e3;
        let merged = if tree {
            rank.reduce_tree(mine, batch.limit, Distance::Cosine, TIMEOUT)
        } else {
            rank.gather_to_root(mine, batch.limit, Distance::Cosine, TIMEOUT)
        };
        if let Some(merged) = merged.expect("reduce") {
            let merged = complete(merged, TIMEOUT).expect("every rank answered");
            measured.latencies.push(at.elapsed().as_secs_f64() * 1e3);
            measured.queries += batch.len();
            for list in merged.lists {
                if measured.found.len() < total {
                    measured.found.push(
                        list.iter()
                            .map(|hit| match hit.id {
                                PointId::Number(id) => id,
                                PointId::Uuid(_) => u64::MAX,
                            })
                            .collect(),
                    );
                }
            }
            next = (next + args.batch) % total;
        }
    }
    measured.wall = started.elapsed().as_secs_f64();
    measured
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Every rank's bytes sent and search time for the mode, summed (bytes) and the largest
/// (search) at rank 0.
fn collect_stats(rank: &Rank, search_ms: f64) -> (u64, u64, f64, f64) {
    let traffic = rank.take_traffic();
    let line = format!(
        "{} {} {search_ms}",
        traffic.bytes_sent, traffic.messages_sent
    );
    if rank.rank() != 0 {
        rank.send(0, TAG_STATS, line.as_bytes());
        return (0, 0, 0.0, 0.0);
    }
    let merge_us = traffic.merge_time.as_secs_f64() * 1e6;
    let (mut bytes, mut messages, mut slowest) =
        (traffic.bytes_sent, traffic.messages_sent, search_ms);
    for from in 1..rank.size() {
        let text = rank
            .receive(from, TAG_STATS, Instant::now() + TIMEOUT)
            .expect("stats");
        let fields: Vec<String> = String::from_utf8(text)
            .unwrap()
            .split(' ')
            .map(str::to_string)
            .collect();
        bytes += fields[0].parse::<u64>().unwrap();
        messages += fields[1].parse::<u64>().unwrap();
        slowest = slowest.max(fields[2].parse().unwrap());
    }
    (bytes, messages, slowest, merge_us)
}

fn main() {
    let rank = Rank::init().expect("MPI");
    let args = args();
    let (dim, base) = read_npy(&args.base);
    let (_, queries) = read_npy(&args.queries);
    let queries: Vec<f32> = queries.iter().map(|&v| v as f32).collect();
    let directory = tempfile::tempdir().expect("a temporary directory");
    let options = DatabaseOptions {
        background_optimizer: false,
        ..DatabaseOptions::default()
    };
    let database =
        Database::open_with(Arc::new(OsFileSystem), directory.path(), options).expect("database");
    let (collection, build_seconds) = build(&rank, &database, &base, dim);
    drop(base);
    rank.barrier();
    let mut results = Vec::new();
    for tree in [true, false] {
        let _ = rank.take_traffic();
        let measured = run_mode(&rank, &collection, &args, &queries, dim, tree);
        let (bytes, messages, slowest_search, merge_us) = collect_stats(&rank, measured.search_ms);
        rank.barrier();
        if rank.rank() == 0 {
            results.push(report(
                &rank,
                &args,
                tree,
                &measured,
                (bytes, messages, slowest_search, merge_us),
                build_seconds,
            ));
        }
    }
    if rank.rank() == 0 {
        write_report(&args, (dim, base_len(&args), queries.len() / dim), &results);
    }
}

fn base_len(args: &Args) -> u64 {
    sagitta_storage::npy::open(&args.base)
        .expect("npy")
        .header
        .shape[0]
}

fn recall(found: &[Vec<u64>], gt: &(usize, Vec<f64>), limit: usize) -> f64 {
    let (width, ids) = gt;
    let mut hit = 0;
    for (query, mine) in found.iter().enumerate() {
        let truth = &ids[query * width..][..limit];
        hit += mine
            .iter()
            .filter(|id| truth.iter().any(|&t| t as u64 == **id))
            .count();
    }
    hit as f64 / (found.len() * limit) as f64
}

fn report(
    rank: &Rank,
    args: &Args,
    tree: bool,
    measured: &Measured,
    (bytes, messages, slowest_search, merge_us): (u64, u64, f64, f64),
    build_seconds: f64,
) -> serde_json::Value {
    let mut sorted = measured.latencies.clone();
    sorted.sort_by(f64::total_cmp);
    let queries = measured.queries as f64;
    let batches = measured.latencies.len() as f64;
    serde_json::json!({
        "engine": if tree { "sagitta-mpi-tree" } else { "sagitta-mpi-gather" },
        "engine_version": env!("CARGO_PKG_VERSION"),
        "ranks": rank.size(),
        "index_params": {"m": 16, "ef_construct": 100, "quantization": "sq8"},
        "build_seconds": build_seconds,
        "upload_seconds": null, "memory_bytes": null, "disk_bytes_written": null,
        "runs": [{
            "scenario": "read-only",
            "search_params": {"ef": args.ef, "batch": args.batch},
            "threads": std::thread::available_parallelism().map_or(1, usize::from),
            "concurrency": 1,
            "recall_at_k": recall(&measured.found, &read_npy(&args.gt), args.limit),
            "qps": queries / measured.wall,
            "latency_ms": {"p50": percentile(&sorted, 0.5), "p95": percentile(&sorted, 0.95), "p99": percentile(&sorted, 0.99)},
            "latency_is_per_batch": true,
            "disk_bytes_read_per_query": null,
            "rank0_merge_us_per_query": merge_us / queries,
            "bytes_sent_per_query": bytes as f64 / queries,
            "messages_per_batch": messages as f64 / batches,
            "slowest_rank_search_ms_per_batch": slowest_search / batches,
        }],
    })
}

fn write_report(
    args: &Args,
    (dim, n, queries): (usize, u64, usize),
    results: &[serde_json::Value],
) {
    let command: Vec<String> = std::env::args().collect();
    let document = serde_json::json!({
        "schema": "sagitta-bench/1",
        "suite": "mpi-scaleout",
        "started_at": sagitta_storage::utc::utc_timestamp(args.started_at),
        "command": command.join(" "),
        "machine": machine(),
        "dataset": {"name": args.base.parent().and_then(Path::file_name).map(|name| name.to_string_lossy().to_string()),
                    "n": n, "dim": dim, "metric": "cosine", "queries": queries, "k": args.limit},
        "results": results,
    });
    std::fs::write(&args.out, serde_json::to_string_pretty(&document).unwrap()).expect("write");
}

/// The machine's CPUs (all of them: each rank's own view is narrowed by mpirun's binding)
/// and their model, from /proc/cpuinfo.
fn machine() -> serde_json::Value {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cores = info
        .lines()
        .filter(|line| line.starts_with("processor"))
        .count();
    let model = info
        .lines()
        .find_map(|line| line.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory_bytes = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches(" kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .map(|kib| kib * 1024);
    serde_json::json!({"cpu_model": model, "cores": cores.max(1), "simd": simd(),
                       "memory_bytes": memory_bytes})
}

/// The widest vector instructions this CPU has (the kernels pick them at run time).
fn simd() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return "avx512";
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return "avx2";
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        return "neon";
    }
    #[allow(unreachable_code)]
    "scalar"
}
