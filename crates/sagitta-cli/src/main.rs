//! `sagitta`, the SagittaDB command-line tool.
//!
//! `sagitta serve` runs the HTTP server (Qdrant's REST API) on a data directory;
//! `sagitta import` bulk-loads a `.npy`, `.fvecs` / `.bvecs` or Parquet file into a new
//! collection. Exit status: 0 on success, 2 when the command line (or configuration) is
//! wrong, 1 when the data or the disk is.
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sagitta_cli::logger;
use sagitta_cli::readers::{read_points, Format, ImportError, ReadOptions, ReadPoints};
use sagitta_engine::collection::{
    CollectionConfig, Datatype, SegmentKindName, StorageConfig, DEFAULT_PARTITION_SIZE,
    MAX_PAGE_CACHE_MB, MAX_PARTITION_SIZE, MAX_SHARDS, MIN_PARTITION_SIZE,
};
use sagitta_engine::database::{check_collection_name, Database};
use sagitta_engine::point::Distance;
use sagitta_engine::topology::Topology;
use sagitta_engine::Placement;
use sagitta_server::{AppState, ServerConfig};
use sagitta_storage::fs::OsFileSystem;

#[derive(Parser)]
#[command(name = "sagitta", version, about = "SagittaDB command-line tool")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Qdrant-compatible REST API. Settings: defaults, then --config FILE (TOML),
    /// then SAGITTA_* environment variables, then these flags.
    Serve(ServeArgs),
    /// Bulk-load a .npy, .fvecs/.bvecs or Parquet file into a new collection, all or nothing.
    Import(ImportArgs),
    /// Print the NUMA topology the engine found (nodes, their CPUs, memory and distances)
    /// and where a collection's shards would run.
    Topology(TopologyArgs),
}

#[derive(Args)]
struct TopologyArgs {
    /// Print JSON (as telemetry reports it) instead of text.
    #[arg(long)]
    json: bool,
    /// Read this sysfs tree (a directory holding `devices/system/node`) instead of the
    /// machine's, with no CPU binding applied.
    #[arg(long, value_name = "DIR")]
    sysfs: Option<PathBuf>,
    /// Shards of the collection whose placement is shown.
    #[arg(long, value_name = "N", default_value_t = 4)]
    shards: usize,
    /// Placement policy shown: spread, or node:K.
    #[arg(long, value_name = "POLICY", default_value = "spread")]
    placement: String,
}

#[derive(Args)]
struct ImportArgs {
    /// Database directory (created if missing).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Name of the collection to create.
    #[arg(long, value_name = "NAME")]
    collection: String,
    /// Distance of the collection.
    #[arg(long, value_enum, ignore_case = true)]
    distance: DistanceArg,
    /// Number of shards.
    #[arg(long, value_name = "N", default_value_t = 1)]
    shards: usize,
    /// Segment kind: hnsw (graph and vectors in RAM) or disk (codes in RAM, vectors read
    /// from disk).
    #[arg(long, value_enum, default_value = "hnsw")]
    segment_kind: SegmentKindArg,
    /// MiB of RAM for hot pages of disk segments.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    page_cache_mb: usize,
    /// Precision the vectors are kept at (Qdrant's datatype): float16 rounds every value
    /// to half precision and halves a disk segment's records.
    #[arg(long, value_enum, default_value = "float32")]
    datatype: DatatypeArg,
    /// Vectors a disk segment's partition aims at.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_PARTITION_SIZE)]
    partition_size: usize,
    /// Keep HNSW segments' full vectors on disk (Qdrant's `vectors.on_disk`): RAM holds
    /// the graph and its codes, searches read ~40 rows a query through the page cache.
    #[arg(long)]
    on_disk: bool,
    /// How the shards are spread over NUMA nodes: spread (shard i on compute node
    /// i mod N) or node:K (every shard on node K).
    #[arg(long, value_name = "POLICY", default_value = "spread")]
    placement: String,
    /// Keep HNSW segments' full vectors on each shard's far memory tier (its nearest
    /// memory-only NUMA node); the graph and codes stay in local DRAM.
    #[arg(long, conflicts_with = "on_disk")]
    far_vectors: bool,
    /// Run as one rank of an MPI job (`mpirun -n N sagitta import --mpi`, the same
    /// arguments on every rank): each rank reads the source, keeps the points it owns and
    /// imports them into DATA/rank-K, for `sagitta serve --mpi`; all or nothing — when one
    /// rank fails, the others drop what they imported (needs `--features mpi`).
    #[arg(long)]
    mpi: bool,
    /// Source format; by default taken from the extension (.npy, .fvecs, .bvecs, .parquet).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// npy/fvecs/bvecs: 1-D integer .npy file with one id per row.
    #[arg(long, value_name = "FILE")]
    ids: Option<PathBuf>,
    /// npy/fvecs/bvecs: JSON Lines file with one payload object per row.
    #[arg(long, value_name = "FILE")]
    payloads: Option<PathBuf>,
    /// Ids are row number + N when no --ids file or id column gives them [default: 0].
    #[arg(long, value_name = "N")]
    id_offset: Option<u64>,
    /// Parquet: id column, integer or UUID string [default: `id` if present, else row numbers].
    #[arg(long, value_name = "COLUMN")]
    id_column: Option<String>,
    /// Parquet: vector column, a list of floats [default: vector].
    #[arg(long, value_name = "COLUMN")]
    vector_column: Option<String>,
    /// The file to import.
    source: PathBuf,
}

#[derive(Args)]
struct ServeArgs {
    /// TOML file with any of the settings below (keys as the flag names, `_` for `-`).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Database directory, created if missing [default: ./sagitta-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// A directory on another device that disk segments' records spread over (repeat for
    /// several; give the same ones, in order, every time) [default: none].
    #[arg(long = "stripe-dir", value_name = "DIR")]
    stripe_dirs: Vec<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long)]
    host: Option<String>,
    /// Port [default: 6333].
    #[arg(long)]
    port: Option<u16>,
    /// Port of the gRPC API (Qdrant's services); 0 turns it off [default: 6334].
    #[arg(long)]
    grpc_port: Option<u16>,
    /// Read-write API key (`api-key` header) [default: none, everything allowed].
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,
    /// Read-only API key [default: none].
    #[arg(long, value_name = "KEY")]
    read_only_api_key: Option<String>,
    /// Largest request body in bytes [default: 33554432].
    #[arg(long, value_name = "BYTES")]
    max_request_bytes: Option<usize>,
    /// Most points, ids or searches in one request [default: 10000].
    #[arg(long, value_name = "N")]
    max_batch_points: Option<usize>,
    /// Deepest JSON nesting accepted [default: 64].
    #[arg(long, value_name = "N")]
    max_json_depth: Option<usize>,
    /// Writes in flight before new ones get 429 [default: 256].
    #[arg(long, value_name = "N")]
    max_pending_writes: Option<usize>,
    /// HTTP worker threads, 0 = one per core [default: 0].
    #[arg(long, value_name = "N")]
    http_threads: Option<usize>,
    /// Bytes of all request bodies and gRPC messages being received at once; beyond, 503 +
    /// Retry-After (gRPC: UNAVAILABLE) [default: 268435456].
    #[arg(long, value_name = "BYTES")]
    max_inflight_request_bytes: Option<usize>,
    /// Open client connections (at most 3/4 of the open-file limit); at the cap the
    /// stalest idle or stalled connection is closed for a new one [default: 16384].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Open connections from one client address (IPv6: per /64) [default: 4096].
    #[arg(long, value_name = "N")]
    max_connections_per_ip: Option<usize>,
    /// Seconds to receive a request head [default: 10].
    #[arg(long, value_name = "SECONDS")]
    header_read_timeout_secs: Option<u64>,
    /// Seconds of grace to receive a request body or gRPC message (plus one per
    /// --min-body-bytes-per-sec bytes received) and for a stalled response write; beyond,
    /// 408 (gRPC: DEADLINE_EXCEEDED) [default: 30].
    #[arg(long, value_name = "SECONDS")]
    body_read_timeout_secs: Option<u64>,
    /// Body bytes that buy one more second to receive the rest [default: 4096].
    #[arg(long, value_name = "BYTES")]
    min_body_bytes_per_sec: Option<u64>,
    /// Seconds an idle keep-alive connection stays open [default: 60].
    #[arg(long, value_name = "SECONDS")]
    keep_alive_timeout_secs: Option<u64>,
    /// Run as one rank of an MPI job (`mpirun -n N sagitta serve --mpi`): rank K keeps
    /// the points it owns in DATA_DIR/rank-K; rank 0 serves the API for the whole job
    /// (needs a build with `--features mpi`).
    #[arg(long)]
    mpi: bool,
    /// With --mpi: milliseconds rank 0 waits for another rank's answer before it names
    /// that rank unavailable (a search waits this once per level of the tree).
    #[arg(long, value_name = "MS", default_value_t = 10_000, requires = "mpi")]
    rank_timeout_ms: u64,
}

#[derive(Clone, Copy, ValueEnum)]
enum DistanceArg {
    #[value(name = "Cosine")]
    Cosine,
    #[value(name = "Dot")]
    Dot,
    #[value(name = "Euclid")]
    Euclid,
}

impl From<DistanceArg> for Distance {
    fn from(distance: DistanceArg) -> Distance {
        match distance {
            DistanceArg::Cosine => Distance::Cosine,
            DistanceArg::Dot => Distance::Dot,
            DistanceArg::Euclid => Distance::Euclid,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum SegmentKindArg {
    Hnsw,
    Disk,
}

impl From<SegmentKindArg> for SegmentKindName {
    fn from(kind: SegmentKindArg) -> SegmentKindName {
        match kind {
            SegmentKindArg::Hnsw => SegmentKindName::Hnsw,
            SegmentKindArg::Disk => SegmentKindName::Disk,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum DatatypeArg {
    Float32,
    Float16,
}

impl From<DatatypeArg> for Datatype {
    fn from(datatype: DatatypeArg) -> Datatype {
        match datatype {
            DatatypeArg::Float32 => Datatype::Float32,
            DatatypeArg::Float16 => Datatype::Float16,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum FormatArg {
    Npy,
    Fvecs,
    Bvecs,
    Parquet,
}

impl From<FormatArg> for Format {
    fn from(format: FormatArg) -> Format {
        match format {
            FormatArg::Npy => Format::Npy,
            FormatArg::Fvecs => Format::Fvecs,
            FormatArg::Bvecs => Format::Bvecs,
            FormatArg::Parquet => Format::Parquet,
        }
    }
}

/// A failed command: the message and whether the command line (not the data) is at fault.
struct Failure {
    message: String,
    usage: bool,
}

impl From<ImportError> for Failure {
    fn from(error: ImportError) -> Failure {
        Failure {
            usage: error.is_usage(),
            message: error.to_string(),
        }
    }
}

fn usage_failure(message: String) -> Failure {
    Failure {
        message,
        usage: true,
    }
}

/// `eprintln!` as one write per line (`logger::say`): the ranks of an MPI job share
/// mpirun's output.
macro_rules! say {
    ($($line:tt)*) => {
        logger::say(format_args!($($line)*))
    };
}

fn main() -> ExitCode {
    // clap prints its own usage errors and exits with status 2.
    let outcome = match Cli::parse().command {
        Command::Import(args) => import(&args).map(|summary| println!("{summary}")),
        Command::Serve(args) => serve(&args),
        Command::Topology(args) => topology(&args).map(|report| println!("{report}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            say!("error: {}", failure.message);
            ExitCode::from(if failure.usage { 2 } else { 1 })
        }
    }
}

/// The server's settings: defaults, the config file, the environment, then the flags.
fn server_config(args: &ServeArgs) -> Result<ServerConfig, Failure> {
    let mut config = match &args.config {
        Some(path) => ServerConfig::from_file(path),
        None => Ok(ServerConfig::default()),
    }
    .map_err(|error| usage_failure(error.to_string()))?;
    config
        .apply_environment(|name| std::env::var(name).ok())
        .map_err(|error| usage_failure(error.to_string()))?;
    let ServeArgs {
        config: _,
        data_dir,
        stripe_dirs,
        host,
        port,
        grpc_port,
        api_key,
        read_only_api_key,
        max_request_bytes,
        max_batch_points,
        max_json_depth,
        max_pending_writes,
        http_threads,
        max_inflight_request_bytes,
        max_connections,
        max_connections_per_ip,
        header_read_timeout_secs,
        body_read_timeout_secs,
        min_body_bytes_per_sec,
        keep_alive_timeout_secs,
        mpi: _,             // how the process runs,
        rank_timeout_ms: _, // not server settings
    } = args;
    if let Some(value) = data_dir {
        config.data_dir.clone_from(value);
    }
    if !stripe_dirs.is_empty() {
        config.stripe_dirs.clone_from(stripe_dirs);
    }
    if let Some(value) = host {
        config.host.clone_from(value);
    }
    if api_key.is_some() {
        config.api_key.clone_from(api_key);
    }
    if read_only_api_key.is_some() {
        config.read_only_api_key.clone_from(read_only_api_key);
    }
    config.port = port.unwrap_or(config.port);
    config.grpc_port = grpc_port.unwrap_or(config.grpc_port);
    config.max_request_bytes = max_request_bytes.unwrap_or(config.max_request_bytes);
    config.max_batch_points = max_batch_points.unwrap_or(config.max_batch_points);
    config.max_json_depth = max_json_depth.unwrap_or(config.max_json_depth);
    config.max_pending_writes = max_pending_writes.unwrap_or(config.max_pending_writes);
    config.http_threads = http_threads.unwrap_or(config.http_threads);
    config.max_inflight_request_bytes =
        max_inflight_request_bytes.unwrap_or(config.max_inflight_request_bytes);
    config.max_connections = max_connections.unwrap_or(config.max_connections);
    config.max_connections_per_ip = max_connections_per_ip.unwrap_or(config.max_connections_per_ip);
    config.header_read_timeout_secs =
        header_read_timeout_secs.unwrap_or(config.header_read_timeout_secs);
    config.body_read_timeout_secs = body_read_timeout_secs.unwrap_or(config.body_read_timeout_secs);
    config.min_body_bytes_per_sec = min_body_bytes_per_sec.unwrap_or(config.min_body_bytes_per_sec);
    config.keep_alive_timeout_secs =
        keep_alive_timeout_secs.unwrap_or(config.keep_alive_timeout_secs);
    config
        .validate()
        .map_err(|error| usage_failure(error.to_string()))?;
    Ok(config)
}

/// Opens the database and serves until SIGINT or SIGTERM, then flushes.
fn serve(args: &ServeArgs) -> Result<(), Failure> {
    let config = server_config(args)?;
    logger::install(logger::level_from_env().map_err(|message| Failure {
        usage: true,
        message,
    })?);
    if args.mpi {
        return serve_mpi(config, Duration::from_millis(args.rank_timeout_ms));
    }
    let data_dir = config.data_dir.clone();
    let state = AppState::open(config).map_err(|error| {
        data_failure(format!(
            "cannot open the database in {}: {error}",
            data_dir.display()
        ))
    })?;
    http(state)
}

#[cfg(not(feature = "mpi"))]
fn serve_mpi(_: ServerConfig, _: Duration) -> Result<(), Failure> {
    Err(usage_failure(
        "--mpi needs a sagitta built with MPI: `cargo build --release -p sagitta-cli \
         --features mpi` (Debian: apt-get install openmpi-bin libopenmpi-dev libclang-dev)"
            .to_string(),
    ))
}

/// This process as one rank of an MPI job: rank 0 serves the API over a database linked
/// to the other ranks (its main thread sends their work), the others serve rank 0.
#[cfg(feature = "mpi")]
fn serve_mpi(config: ServerConfig, timeout: Duration) -> Result<(), Failure> {
    use sagitta_cluster::{link::Link, local::DatabaseLocal, service, window, world::Rank};
    use sagitta_engine::collection::peers::Linked;
    use sagitta_engine::database::DatabaseOptions;
    let rank = Rank::init().map_err(|error| data_failure(error.to_string()))?;
    let mut config = config;
    config.data_dir = config.data_dir.join(format!("rank-{}", rank.rank()));
    let window = Arc::new(window::Window::new(window::Bounds::default()));
    let peers = (rank.rank() == 0).then(|| {
        let link = Link::new(Arc::clone(&window), rank.size());
        Linked(Arc::new(link))
    });
    let options = DatabaseOptions {
        stripe_dirs: config.stripe_dirs.clone(),
        peers,
        ..DatabaseOptions::default()
    };
    let database = Database::open_with(Arc::new(OsFileSystem), &config.data_dir, options).map_err(
        |error| {
            data_failure(format!(
                "rank {}: cannot open the database in {}: {error}",
                rank.rank(),
                config.data_dir.display()
            ))
        },
    )?;
    let database = Arc::new(database);
    let local = DatabaseLocal(Arc::clone(&database));
    if rank.rank() != 0 {
        say!(
            "sagitta serve --mpi: rank {} of {}, data in {}",
            rank.rank(),
            rank.size(),
            config.data_dir.display()
        );
        // mpirun passes SIGINT and SIGTERM to every rank: this one keeps serving until
        // rank 0, stopping, has sent its last work and the stop after it — or, if no stop
        // comes (rank 0 is dead), leaves STOP_GRACE after the signal (every write it
        // acknowledged is in its logs)
        std::thread::spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build();
            if let Ok(runtime) = runtime {
                runtime.block_on(sagitta_server::shutdown_signal());
                std::thread::sleep(STOP_GRACE);
                say!("sagitta serve --mpi: no stop from rank 0 {STOP_GRACE:?} after the signal; leaving");
                std::process::exit(1);
            }
        });
        service::follow(&rank, &local, timeout);
        return database
            .flush()
            .map_err(|error| data_failure(format!("rank {}: flush: {error}", rank.rank())));
    }
    // the API on its own threads; MPI from this one, the thread that initialised it
    // searches wait in the window together: up to a few batches' worth at once
    let reads = 4 * window::Bounds::default().max_queries;
    let state = AppState::new(database, config).with_read_slots(reads);
    let closing = Arc::clone(&window);
    let api = std::thread::spawn(move || {
        let served = http(state);
        closing.close();
        served
    });
    service::lead(&rank, &window, &local, timeout);
    api.join().expect("the API thread does not panic")
}

/// How long a rank other than 0 waits, after mpirun passed it SIGINT or SIGTERM, for rank
/// 0's stop.
#[cfg(feature = "mpi")]
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Serves `state` over HTTP until SIGINT or SIGTERM, then flushes.
fn http(state: AppState) -> Result<(), Failure> {
    let config = state.config.clone();
    // Each client connection is a file descriptor; a soft limit of 1,024 (a common
    // default) would make the 1,025th client wait unanswered.
    let open_files = rlimit::increase_nofile_limit(u64::MAX).map_or_else(
        |error| format!("unknown ({error})"),
        |limit| limit.to_string(),
    );
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if config.http_threads > 0 {
        runtime.worker_threads(config.http_threads);
    }
    let runtime = runtime
        .enable_all()
        .build()
        .map_err(|error| data_failure(format!("cannot start the runtime: {error}")))?;
    let address = format!("{}:{}", config.host, config.port);
    let data_dir = config.data_dir.clone();
    // After the open-file limit is raised: the cap is at most 3/4 of it.
    let max_connections = sagitta_server::effective_max_connections(&config);
    runtime.block_on(async move {
        let listener = sagitta_server::bind(&address)
            .await
            .map_err(|error| data_failure(format!("cannot listen on {address}: {error}")))?;
        let local = listener
            .local_addr()
            .map_or_else(|_| address.clone(), |a| a.to_string());
        let grpc = match config.grpc_port {
            0 => None,
            port => {
                let address = format!("{}:{port}", config.host);
                let grpc = tokio::net::TcpListener::bind(&address)
                    .await
                    .map_err(|error| {
                        data_failure(format!("cannot listen for gRPC on {address}: {error}"))
                    })?;
                Some(grpc)
            }
        };
        let grpc_at = grpc
            .as_ref()
            .and_then(|grpc| grpc.local_addr().ok())
            .map_or_else(|| "off".to_string(), |at| format!("on {at}"));
        say!(
            "sagitta serve: listening on http://{local}, gRPC {grpc_at}, data in {}, \
             open-file limit {open_files}, at most {max_connections} connections",
            data_dir.display()
        );
        let shutdown = sagitta_server::shutdown_signal();
        sagitta_server::serve_with_grpc(listener, grpc, Arc::new(state), shutdown)
            .await
            .map_err(|error| data_failure(format!("server stopped with an error: {error}")))?;
        say!("sagitta serve: stopped; every acknowledged write is flushed");
        Ok(())
    })
}

fn data_failure(message: String) -> Failure {
    Failure {
        usage: false,
        message,
    }
}

/// Checks the command line, reads the source and imports it; returns the summary line.
fn import(args: &ImportArgs) -> Result<String, Failure> {
    check_collection_name(&args.collection).map_err(|error| usage_failure(error.to_string()))?;
    check_shards(args.shards)?;
    if args.page_cache_mb > MAX_PAGE_CACHE_MB {
        return Err(usage_failure(format!(
            "--page-cache-mb {} is more than {MAX_PAGE_CACHE_MB}",
            args.page_cache_mb
        )));
    }
    if !(MIN_PARTITION_SIZE..=MAX_PARTITION_SIZE).contains(&args.partition_size) {
        return Err(usage_failure(format!(
            "--partition-size {} is outside {MIN_PARTITION_SIZE}..={MAX_PARTITION_SIZE}",
            args.partition_size
        )));
    }
    let options = ReadOptions {
        format: args.format.map(Format::from),
        ids: args.ids.clone(),
        payloads: args.payloads.clone(),
        id_offset: args.id_offset,
        id_column: args.id_column.clone(),
        vector_column: args.vector_column.clone(),
    };
    let read = read_points(&args.source, &options)?;
    if args.mpi {
        return import_mpi(args, read);
    }
    import_points(args, &args.data, read)
}

#[cfg(not(feature = "mpi"))]
fn import_mpi(_: &ImportArgs, _: ReadPoints) -> Result<String, Failure> {
    Err(usage_failure(
        "--mpi needs a sagitta built with MPI: `cargo build --release -p sagitta-cli \
         --features mpi`"
            .to_string(),
    ))
}

/// This process's part of a scattered import: the points this rank owns into
/// DATA/rank-K; then every rank learns whether all succeeded, and each drops its import
/// again if one did not.
#[cfg(feature = "mpi")]
fn import_mpi(args: &ImportArgs, read: ReadPoints) -> Result<String, Failure> {
    use sagitta_cluster::{owner::owner_rank, world::Rank};
    let rank = Rank::init().map_err(|error| data_failure(error.to_string()))?;
    let (me, ranks) = (rank.rank(), rank.size());
    let ReadPoints {
        points,
        dim,
        bytes_read,
    } = read;
    let mine = points
        .into_iter()
        .filter(|point| owner_rank(&point.id, ranks) == me)
        .collect();
    let data = args.data.join(format!("rank-{me}"));
    let read = ReadPoints {
        points: mine,
        dim,
        bytes_read,
    };
    let imported = import_points(args, &data, read);
    let failed = rank.failed(imported.is_ok());
    let at = |message: String| data_failure(format!("rank {me} of {ranks}: {message}"));
    match imported {
        Ok(summary) if failed.is_empty() => Ok(format!("rank {me} of {ranks}: {summary}")),
        Ok(_) => {
            let database = Database::open(Arc::new(OsFileSystem), &data)
                .map_err(|error| at(error.to_string()))?;
            database
                .drop_collection(&args.collection)
                .map_err(|error| at(format!("dropping the import again: {error}")))?;
            Err(at(format!(
                "imported, then dropped again: the import failed on ranks {failed:?}"
            )))
        }
        Err(failure) => Err(at(failure.message)),
    }
}

/// Creates the collection from the points read, published with one manifest swap.
fn import_points(args: &ImportArgs, data: &Path, read: ReadPoints) -> Result<String, Failure> {
    let ReadPoints {
        points,
        dim,
        bytes_read,
    } = read;
    let config = CollectionConfig {
        dim,
        distance: args.distance.into(),
        shard_count: args.shards,
        storage: StorageConfig {
            segment_kind: args.segment_kind.into(),
            page_cache_mb: args.page_cache_mb,
            datatype: args.datatype.into(),
            partition_size: args.partition_size,
            vectors_on_disk: args.on_disk,
            graph: sagitta_engine::DEFAULT_GRAPH,
            placement: parse_placement(&args.placement)?,
            vectors_far: args.far_vectors,
        },
    };
    let data_failure = |error: sagitta_engine::EngineError| Failure {
        usage: false,
        message: error.to_string(),
    };
    let database = Database::open(Arc::new(OsFileSystem), data).map_err(data_failure)?;
    let (_, report) = database
        .import_collection(&args.collection, config, points)
        .map_err(data_failure)?;
    Ok(format!(
        "imported {} points (dim {dim}, {:?}, {bytes_read} bytes read) into collection `{}` \
         in {}: {} segments, {} bytes written",
        report.points,
        config.distance,
        args.collection,
        data.display(),
        report.segments,
        report.bytes_written,
    ))
}

/// `--placement`'s value, or a usage error naming it.
fn parse_placement(text: &str) -> Result<Placement, Failure> {
    Placement::parse(text).ok_or_else(|| {
        usage_failure(format!(
            "--placement {text:?}: expected \"spread\" or \"node:K\" (K at most {})",
            sagitta_engine::machine::MAX_NODE_ID
        ))
    })
}

/// The topology report: the machine's (or a given sysfs tree's) nodes and a placement.
fn topology(args: &TopologyArgs) -> Result<String, Failure> {
    let placement = parse_placement(&args.placement)?;
    check_shards(args.shards)?;
    let topology = match &args.sysfs {
        Some(root) => Topology::read(root, None).map_err(|error| Failure {
            usage: false,
            message: format!("cannot read the topology under {}: {error}", root.display()),
        })?,
        None => Topology::detect(),
    };
    let placed = sagitta_engine::machine::place(&topology, placement, args.shards);
    Ok(if args.json {
        let mut report = topology.to_json();
        report["placement"] = placed.to_json(placement);
        report.to_string()
    } else {
        sagitta_cli::topology_text(&topology, placement, &placed)
    })
}

/// `--shards`' value within 1..=MAX_SHARDS, or a usage error naming it.
fn check_shards(shards: usize) -> Result<(), Failure> {
    if (1..=MAX_SHARDS).contains(&shards) {
        Ok(())
    } else {
        Err(usage_failure(format!(
            "--shards {shards} is outside 1..={MAX_SHARDS}"
        )))
    }
}
