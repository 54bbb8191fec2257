//! End to end against a real `sagitta-server` on 127.0.0.1: upload, wait for green, searches
//! at two concurrency levels plus the GET /readyz baseline, and the result document; the
//! same over REST and gRPC in one run.

use std::path::Path;
use std::sync::Arc;

use clap::Parser;
use sagitta_load::npy::{encode, Dtype};
use serde_json::Value;

const N: usize = 300;
const NQ: usize = 20;
const DIM: usize = 16;

fn pseudo_random(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % 20_001) as f32 / 10_000.0 - 1.0
        })
        .collect()
}

fn write_dataset(dir: &Path) {
    let base: Vec<u8> = pseudo_random(N * DIM, 7)
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(
        dir.join("base.npy"),
        encode(Dtype::F32, &[N, DIM], &base, 1),
    )
    .unwrap();
    // Queries as float16, to go through the conversion.
    let queries: Vec<u8> = pseudo_random(NQ * DIM, 11)
        .iter()
        .flat_map(|v| half::f16::from_f32(*v).to_le_bytes())
        .collect();
    std::fs::write(
        dir.join("queries.npy"),
        encode(Dtype::F16, &[NQ, DIM], &queries, 1),
    )
    .unwrap();
}

struct Server {
    runtime: tokio::runtime::Runtime,
    url: String,
    /// `http://127.0.0.1:port` of the gRPC API, when started with one.
    grpc_url: Option<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl Server {
    fn start(data_dir: &Path, grpc: bool) -> Server {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let state = Arc::new(
            sagitta_server::AppState::open(sagitta_server::ServerConfig {
                data_dir: data_dir.to_path_buf(),
                ..Default::default()
            })
            .unwrap(),
        );
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let grpc_listener = grpc.then(|| {
            runtime
                .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
                .unwrap()
        });
        let grpc_url = grpc_listener
            .as_ref()
            .map(|l| format!("http://{}", l.local_addr().unwrap()));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = sagitta_server::serve_with_grpc(listener, grpc_listener, state, async move {
            let _ = stopped.await;
        });
        let handle = runtime.spawn(serving);
        Server {
            runtime,
            url,
            grpc_url,
            stop: Some(stop),
            handle: Some(handle),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(handle) = self.handle.take() {
            let _ = self.runtime.block_on(handle);
        }
    }
}

/// A work directory with the data set in `data/`, and a server on `db/` (with gRPC when
/// asked).
fn setup(grpc: bool) -> (tempfile::TempDir, std::path::PathBuf, Server) {
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    std::fs::create_dir(&data).unwrap();
    write_dataset(&data);
    let server = Server::start(&work.path().join("db"), grpc);
    (work, data, server)
}

fn run(args: &[&str]) -> Result<Value, sagitta_load::LoadError> {
    let argv: Vec<String> = std::iter::once("sagitta-load")
        .chain(args.iter().copied())
        .map(String::from)
        .collect();
    let parsed = sagitta_load::Args::try_parse_from(&argv).unwrap();
    sagitta_load::run(&parsed, &argv)
}

#[test]
fn upload_wait_and_search_against_a_real_server() {
    let (work, data, server) = setup(false);
    let out = work.path().join("out.json");
    let pid = std::process::id().to_string();
    let document = run(&[
        "--url",
        &server.url,
        "--collection",
        "load_test",
        "--data",
        data.to_str().unwrap(),
        "--concurrency",
        "1,8",
        "--queries",
        "200",
        "--limit",
        "10",
        "--hnsw-ef",
        "64",
        "--upload",
        "--upload-batch",
        "64",
        "--upload-parallel",
        "2",
        "--baseline-readyz",
        "--server-pid",
        &pid,
        "--out",
        out.to_str().unwrap(),
    ])
    .unwrap();
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(written, document);
    assert_eq!(document["schema"], "sagitta-bench/1");
    assert_eq!(document["suite"], "server-load");
    assert_eq!(document["dataset"]["n"], N);
    assert_eq!(document["dataset"]["queries"], NQ);
    assert_eq!(document["dataset"]["queries_dtype"], "<f2");
    assert!(document["command"]
        .as_str()
        .unwrap()
        .contains("--concurrency 1,8"));
    assert!(document["machine"]["memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(document["server"]["collection_info"]["points_count"], N);
    assert_eq!(document["server"]["collection_info"]["status"], "green");
    let result = &document["results"][0];
    assert_eq!(result["engine"], "sagitta-server");
    assert_ne!(result["engine_version"], "unknown");
    assert_eq!(result["upload"]["batches"], N.div_ceil(64));
    let upload = result["upload_seconds"].as_f64().unwrap();
    let build = result["build_seconds"].as_f64().unwrap();
    assert!(upload > 0.0 && build >= upload);
    let runs = result["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (run, concurrency) in runs.iter().zip([1u64, 8]) {
        assert_eq!(run["scenario"], "read-only");
        assert_eq!(run["concurrency"], concurrency);
        assert_eq!(run["errors"], 0, "{run}");
        assert_eq!(run["requests"], 200);
        assert_eq!(run["search_params"]["hnsw_ef"], 64);
        assert!(run["recall_at_k"].as_f64().unwrap() > 0.9, "{run}");
        assert!(run["qps"].as_f64().unwrap() > 0.0);
        let latency = &run["latency_ms"];
        assert!(latency["p50"].as_f64().unwrap() <= latency["p99"].as_f64().unwrap());
        // One connection per client, opened during warm-up and kept.
        assert_eq!(run["connections_opened_warmup"], concurrency);
        assert_eq!(run["connections_opened_timed"], 0);
        assert_eq!(run["baseline_get_readyz"]["errors"], 0);
        assert!(run["cpu"]["server_cpu_seconds"].is_number());
    }

    // Searching again without --upload, now with gt.npy: the same precision.
    let truth: Vec<u8> = {
        let base = sagitta_load::npy::read_f32(&data.join("base.npy")).unwrap();
        let queries = sagitta_load::npy::read_f32(&data.join("queries.npy")).unwrap();
        sagitta_load::truth::brute_force_cosine(&base, &queries, 10)
            .into_iter()
            .flatten()
            .flat_map(|id| i64::from(id).to_le_bytes())
            .collect()
    };
    std::fs::write(
        data.join("gt.npy"),
        encode(Dtype::I64, &[NQ, 10], &truth, 1),
    )
    .unwrap();
    let again = run(&[
        "--url",
        &server.url,
        "--collection",
        "load_test",
        "--data",
        data.to_str().unwrap(),
        "--concurrency",
        "4",
        "--queries",
        "100",
        "--hnsw-ef",
        "64",
    ])
    .unwrap();
    let run_again = &again["results"][0]["runs"][0];
    assert_eq!(run_again["errors"], 0);
    assert_eq!(run_again["recall_at_k"], runs[1]["recall_at_k"]);
    assert!(again["results"][0]["upload_seconds"].is_null());

    // A collection that does not exist is an error, not an empty result.
    let missing = run(&[
        "--url",
        &server.url,
        "--collection",
        "missing",
        "--data",
        data.to_str().unwrap(),
        "--queries",
        "10",
    ])
    .unwrap_err()
    .to_string();
    assert!(missing.contains("404"), "{missing}");
    drop(server);
}

#[test]
fn rest_and_grpc_in_one_run() {
    let (_work, data, server) = setup(true);
    let grpc_url = server.grpc_url.clone().unwrap();
    let common = [
        "--url",
        &server.url,
        "--grpc-url",
        &grpc_url,
        "--collection",
        "both",
        "--data",
        data.to_str().unwrap(),
        "--queries",
        "150",
        "--hnsw-ef",
        "64",
    ];
    let mut args = common.to_vec();
    args.extend([
        "--api",
        "rest,grpc",
        "--concurrency",
        "1,4",
        "--upload",
        "--upload-batch",
        "50",
        "--upload-parallel",
        "3",
        "--baseline-readyz",
    ]);
    let document = run(&args).unwrap();
    assert_eq!(
        document["load_generator"]["apis"],
        serde_json::json!(["rest", "grpc"])
    );
    assert_eq!(document["server"]["grpc_url"], grpc_url.as_str());
    // The last upload (gRPC's) holds the collection the searches ran on.
    assert_eq!(document["server"]["collection_info"]["points_count"], N);
    let results = document["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let (rest, grpc) = (&results[0], &results[1]);
    assert_eq!(
        (&rest["engine"], &rest["api"]),
        (&"sagitta-server".into(), &"rest".into())
    );
    assert_eq!(
        (&grpc["engine"], &grpc["api"]),
        (&"sagitta-server-grpc".into(), &"grpc".into())
    );
    for result in results {
        assert_eq!(result["upload"]["batches"], N.div_ceil(50), "{result}");
        assert!(result["upload"]["bytes_sent"].as_u64().unwrap() > (N * DIM * 4) as u64);
        assert!(result["upload"]["connections"].as_u64().unwrap() <= 3);
        assert!(result["wait_for_green_seconds"].as_f64().is_some());
        let runs = result["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        for (run, concurrency) in runs.iter().zip([1u64, 4]) {
            assert_eq!(run["concurrency"], concurrency);
            assert_eq!(run["errors"], 0, "{run}");
            assert_eq!(run["search_params"]["api"], result["api"]);
            assert!(run["recall_at_k"].as_f64().unwrap() > 0.9, "{run}");
            assert_eq!(run["connections_opened_warmup"], concurrency, "{run}");
            assert_eq!(run["connections_opened_timed"], 0, "{run}");
        }
    }
    // Protobuf's packed floats against JSON's decimal text.
    let bytes = |r: &Value| r["upload"]["bytes_sent"].as_u64().unwrap();
    assert!(
        bytes(grpc) < bytes(rest),
        "{} vs {}",
        bytes(grpc),
        bytes(rest)
    );
    assert_eq!(rest["runs"][0]["baseline_get_readyz"]["errors"], 0);
    let health = &grpc["runs"][0]["baseline_grpc_health_check"];
    assert_eq!(health["errors"], 0, "{health}");
    assert_eq!(health["requests"], 150);

    // gRPC answers with the same hits: a gRPC-only search equals a REST-only one.
    let only = |api: &'static str| {
        let mut args = common.to_vec();
        args.extend(["--api", api, "--concurrency", "2"]);
        run(&args).unwrap()["results"][0]["runs"][0]["recall_at_k"].clone()
    };
    assert_eq!(only("grpc"), only("rest"));

    // A collection that does not exist is an error before anything is timed.
    let mut args = common.to_vec();
    args[5] = "missing";
    args.extend(["--api", "grpc", "--concurrency", "1"]);
    let error = run(&args).unwrap_err().to_string();
    assert!(error.contains("404"), "{error}");
    drop(server);
}

#[test]
fn grpc_against_a_server_without_grpc_is_a_clear_error() {
    let (_work, data, server) = setup(false);
    // A port nothing listens on: bind one, then close it.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let grpc_url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let error = run(&[
        "--url",
        &server.url,
        "--grpc-url",
        &grpc_url,
        "--api",
        "grpc",
        "--collection",
        "c",
        "--data",
        data.to_str().unwrap(),
        "--upload",
        "--timeout",
        "5",
    ])
    .unwrap_err()
    .to_string();
    assert!(error.contains("gRPC health check"), "{error}");
    assert!(error.contains(&grpc_url), "{error}");
    let bad_url = run(&[
        "--grpc-url",
        "https://127.0.0.1:6334",
        "--api",
        "grpc",
        "--collection",
        "c",
        "--data",
        data.to_str().unwrap(),
    ])
    .unwrap_err()
    .to_string();
    assert!(bad_url.contains("--grpc-url"), "{bad_url}");
    drop(server);
}
