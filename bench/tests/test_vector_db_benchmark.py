"""The vector-db-benchmark harness's own logic on tiny generated data: the ann-benchmarks HDF5
conversion, the suite's copy, the reading of its results directory into a bench-schema
document, and failed runs reported as failed. No network, no server, no suite checkout:
the suite's directory and result files are small stand-ins written here."""

import json
import stat
from pathlib import Path

import h5py
import numpy as np
import pytest

from bench import report
from bench import vector_db_benchmark as vdb
from bench.datasets import Dataset, normalize


def _read_h5(path: Path) -> tuple[dict[str, np.ndarray], dict]:
    """The file's datasets as arrays, and its attributes."""
    with h5py.File(path, "r") as f:
        arrays = {}
        for name, item in f.items():
            assert isinstance(item, h5py.Dataset), name
            arrays[name] = item[()]
        return arrays, dict(f.attrs)


def _dataset(n=60, nq=9, dim=8, seed=5):
    rng = np.random.default_rng(seed)
    base = normalize(rng.standard_normal((n, dim)).astype(np.float32))
    queries = normalize(rng.standard_normal((nq, dim)).astype(np.float32))
    return Dataset("tiny", base, queries, "cosine", None, {})


# ---------------------------------------------------------------------------------------------
# HDF5 conversion


def test_write_h5_has_the_ann_benchmarks_layout_and_exact_neighbours(tmp_path):
    dataset = _dataset()
    entry = vdb.write_h5(dataset, tmp_path / "d" / "tiny.hdf5", k=10)
    assert entry == {
        "name": "tiny-60-9q-8-angular",
        "vector_size": 8,
        "distance": "cosine",
        "type": "h5",
    }
    arrays, attrs = _read_h5(tmp_path / "d" / "tiny.hdf5")
    assert sorted(arrays) == ["distances", "neighbors", "test", "train"]
    assert attrs["distance"] == "angular"
    train, test = arrays["train"], arrays["test"]
    neighbors, distances = arrays["neighbors"], arrays["distances"]
    assert train.dtype == np.float32 and train.shape == (60, 8)
    assert test.dtype == np.float32 and test.shape == (9, 8)
    assert neighbors.dtype == np.int32 and neighbors.shape == (9, 10)
    assert distances.dtype == np.float32 and distances.shape == (9, 10)
    np.testing.assert_array_equal(train, dataset.base)
    np.testing.assert_array_equal(test, dataset.queries)
    # brute force, independently of bench.datasets: best first by cosine similarity
    scores = test.astype(np.float64) @ train.astype(np.float64).T
    expected = np.argsort(-scores, axis=1, kind="stable")[:, :10]
    np.testing.assert_array_equal(neighbors, expected)
    # each distance is 1 - cos of that neighbour, ascending along the row
    rows = np.arange(9)[:, None]
    np.testing.assert_allclose(distances, 1.0 - scores[rows, neighbors], atol=1e-6)
    assert np.all(np.diff(distances, axis=1) >= -1e-6)


def test_write_h5_caps_the_width_at_the_base_size(tmp_path):
    dataset = _dataset(n=6, nq=3)
    vdb.write_h5(dataset, tmp_path / "small.hdf5", k=10)
    neighbors = _read_h5(tmp_path / "small.hdf5")[0]["neighbors"]
    assert neighbors.shape == (3, 6)
    assert sorted(neighbors[0].tolist()) == list(range(6))


def test_subset_takes_the_leading_rows_and_drops_the_ground_truth():
    dataset = _dataset()
    dataset.gt = np.zeros((9, 10), dtype=np.int64)
    small = vdb.subset(dataset, 20, 4)
    assert (small.n, small.nq, small.gt) == (20, 4, None)
    np.testing.assert_array_equal(small.base, dataset.base[:20])
    assert vdb.subset(dataset, 60, 9) is dataset
    with pytest.raises(SystemExit):
        vdb.subset(dataset, 61, 4)


# ---------------------------------------------------------------------------------------------
# The suite's copy and command


CONFIGS = [
    {
        "name": "qdrant-default",
        "engine": "qdrant",
        "connection_params": {"timeout": 30},
        "collection_params": {},
        "search_params": [{"parallel": 8, "config": {"hnsw_ef": 128}}],
        "upload_params": {"parallel": 16, "batch_size": 1024},
    },
    {
        "name": "qdrant-native-default",
        "engine": "qdrant_native",
        "connection_params": {"timeout": 30},
        "collection_params": {},
        "search_params": [{"parallel": 8, "config": {"hnsw_ef": 128}}],
        "upload_params": {"parallel": 16, "batch_size": 1024},
    },
]


def _fake_suite(root: Path) -> Path:
    """A directory shaped like the suite's checkout (a stand-in; none of its code)."""
    (root / "datasets").mkdir(parents=True)
    (root / "datasets" / "datasets.json").write_text(
        json.dumps([{"name": "other", "type": "h5", "path": "other/other.hdf5"}])
    )
    (root / "experiments" / "configurations").mkdir(parents=True)
    (root / "experiments" / "configurations" / "qdrant.json").write_text(
        json.dumps(CONFIGS)
    )
    (root / "run.py").write_text("raise SystemExit(0)\n")
    (root / "results").mkdir()
    (root / "results" / "stale.json").write_text("{}")
    (root / ".git").mkdir()
    return root


def test_prepare_copy_adds_only_the_dataset_and_leaves_the_suite_alone(tmp_path):
    suite = _fake_suite(tmp_path / "suite")
    before = {
        path.relative_to(suite): path.read_bytes()
        for path in suite.rglob("*")
        if path.is_file()
    }
    entry = vdb.prepare_copy(suite, tmp_path / "copy", _dataset(), k=10)
    after = {
        path.relative_to(suite): path.read_bytes()
        for path in suite.rglob("*")
        if path.is_file()
    }
    assert after == before
    copy = tmp_path / "copy"
    assert entry["path"] == "tiny-60-9q-8-angular/tiny-60-9q-8-angular.hdf5"
    assert (copy / "datasets" / entry["path"]).is_file()
    entries = json.loads((copy / "datasets" / "datasets.json").read_text())
    assert entries == [*json.loads(before[Path("datasets/datasets.json")]), entry]
    assert (copy / "run.py").read_bytes() == before[Path("run.py")]
    assert not (copy / ".git").exists()
    assert not (copy / "results").exists()
    assert vdb.engine_config(copy, "qdrant-native-default") == CONFIGS[1]
    with pytest.raises(SystemExit):
        vdb.engine_config(copy, "qdrant-missing")


def test_suite_command_is_the_suites_own_cli():
    assert vdb.suite_command("py", "qdrant-default", "d") == [
        "py",
        "run.py",
        "--engines",
        "qdrant-default",
        "--datasets",
        "d",
        "--host",
        "localhost",
    ]
    assert {api: config for api, (config, _, _) in vdb.APIS.items()} == {
        "grpc": "qdrant-default",
        "rest": "qdrant-native-default",
    }


def test_suite_digest_changes_with_the_suites_code(tmp_path):
    suite = _fake_suite(tmp_path / "suite")
    first = vdb.suite_digest(suite)
    assert vdb.suite_digest(suite) == first
    (suite / "run.py").write_text("raise SystemExit(1)\n")
    assert vdb.suite_digest(suite) != first


# ---------------------------------------------------------------------------------------------
# Results


DATASET = "tiny-60-9q-8-angular"


def _write_results(
    results: Path, experiment="qdrant-default", latencies=True, rps=400.0
):
    """Result files in the suite's shape (``BaseClient.save_upload_results`` and
    ``save_search_results`` with DETAILED_RESULTS=1)."""
    results.mkdir(parents=True, exist_ok=True)
    upload = {
        "params": {
            "experiment": experiment,
            "engine": "qdrant",
            "dataset": DATASET,
            "parallel": 16,
            "batch_size": 1024,
            "optimizers_config": {"memmap_threshold": 10000000},
        },
        "results": {
            "post_upload": {},
            "upload_time": 2.5,
            "total_time": 13.25,
            "latencies": [0.1, 0.2],
        },
    }
    (results / f"{experiment}-{DATASET}-upload-2026-11-26-09-00-00.json").write_text(
        json.dumps(upload)
    )
    search_results = {
        "total_time": 0.5,
        "mean_time": 0.004,
        "mean_precisions": 0.987,
        "std_time": 0.001,
        "min_time": 0.001,
        "max_time": 0.02,
        "rps": rps,
        "p95_time": 0.009,
        "p99_time": 0.015,
        "precisions": [1.0, 0.9, 1.0, 1.0],
    }
    if latencies:
        search_results["latencies"] = [0.001, 0.002, 0.003, 0.02]
    search = {
        "params": {
            "dataset": DATASET,
            "experiment": experiment,
            "engine": "qdrant",
            "parallel": 8,
            "config": {"hnsw_ef": 128},
        },
        "results": search_results,
    }
    name = f"{experiment}-{DATASET}-search-0-2026-11-26-09-00-20.json"
    (results / name).write_text(json.dumps(search))


def test_parse_results_reads_the_suites_files_of_one_experiment(tmp_path):
    _write_results(tmp_path)
    # the other configuration's files in the same directory are not read
    _write_results(tmp_path, experiment="qdrant-native-default", rps=1.0)
    assert len(list(tmp_path.glob("*.json"))) == 4
    parsed = vdb.parse_results(tmp_path, "qdrant-default", DATASET)
    assert parsed["upload"]["upload_time"] == 2.5
    assert parsed["upload"]["total_time"] == 13.25
    assert parsed["upload"]["params"]["batch_size"] == 1024
    [search] = parsed["searches"]
    assert search["rps"] == 400.0
    assert search["mean_precisions"] == 0.987
    assert search["parallel"] == 8
    assert search["config"] == {"hnsw_ef": 128}
    assert search["p50_time"] == pytest.approx(0.0025)
    assert search["queries"] == 4


def test_parse_results_refuses_a_directory_without_a_search_result(tmp_path):
    _write_results(tmp_path)
    for file in tmp_path.glob("*-search-*.json"):
        file.unlink()
    with pytest.raises(vdb.ResultError, match="no search result"):
        vdb.parse_results(tmp_path, "qdrant-default", DATASET)
    with pytest.raises(vdb.ResultError, match="no upload result"):
        vdb.parse_results(tmp_path, "qdrant-native-default", DATASET)


def _ok_outcome(results: Path, api="grpc") -> dict:
    config, engine, client = vdb.APIS[api]
    return {
        "api": api,
        "engine_config": config,
        "suite_engine": engine,
        "client": client,
        "status": "ok",
        "parsed": vdb.parse_results(results, "qdrant-default", DATASET),
        "server": {
            "version": "0.1.0",
            "memory_bytes": 1 << 20,
            "disk_bytes_written": 4096,
            "collection": {
                "points_count": 60,
                "config": {
                    "hnsw_config": {"m": 16, "ef_construct": 100},
                    "quantization_config": None,
                },
            },
        },
    }


def _assemble(outcomes):
    return vdb.assemble(
        command="python -m bench.vector_db_benchmark",
        started_at="2026-11-26T09:00:00Z",
        dataset={
            "name": "tiny",
            "n": 60,
            "dim": 8,
            "metric": "cosine",
            "queries": 9,
            "k": 10,
        },
        outcomes=outcomes,
        extra={},
    )


def test_a_successful_run_becomes_a_valid_bench_schema_record(tmp_path):
    _write_results(tmp_path)
    document, ok = _assemble([_ok_outcome(tmp_path)])
    assert ok and document["status"] == "ok"
    assert report.validate(document) == []
    assert document["suite"] == "vector-db-benchmark"
    [result] = document["results"]
    assert result["engine"] == "sagitta-server"
    assert (result["api"], result["engine_config"]) == ("grpc", "qdrant-default")
    assert result["upload_seconds"] == 2.5
    assert result["build_seconds"] == 13.25
    assert result["index_params"] == {
        "m": 16,
        "ef_construct": 100,
        "quantization": None,
    }
    [run] = result["runs"]
    assert run["recall_at_k"] == 0.987
    assert run["qps"] == 400.0
    assert (run["threads"], run["concurrency"]) == (8, 8)
    assert run["search_params"] == {"hnsw_ef": 128}
    assert run["latency_ms"] == {"p50": 2.5, "p95": 9.0, "p99": 15.0, "avg": 4.0}
    assert document["summary"]["best_qps_at_recall"] == {
        "sagitta-server/grpc": {"0.95": 400.0, "0.99": None}
    }


def test_a_failed_run_is_reported_as_failed_without_figures(tmp_path):
    _write_results(tmp_path)
    failed = {
        "api": "rest",
        "engine_config": "qdrant-native-default",
        "suite_engine": "qdrant_native",
        "client": vdb.APIS["rest"][2],
        "status": "failed",
        "error": "run.py exited 1",
        "run_tail": ["httpx.HTTPStatusError: 400 Bad Request"],
    }
    document, ok = _assemble([_ok_outcome(tmp_path), failed])
    assert not ok
    assert document["status"] == "failed"
    assert report.validate(document) == []
    assert [result["api"] for result in document["results"]] == ["grpc"]
    rest = document["side_by_side"][1]
    assert rest["status"] == "failed"
    assert rest["recall_at_k"] is None and rest["qps"] is None
    assert document["apis"][1]["error"] == "run.py exited 1"


def test_a_result_without_per_query_latencies_counts_as_failed(tmp_path):
    _write_results(tmp_path, latencies=False)
    document, ok = _assemble([_ok_outcome(tmp_path)])
    assert not ok
    assert document["results"] == []
    assert "per-query latencies" in document["apis"][0]["error"]


def test_main_exits_nonzero_and_writes_failed_when_the_server_does_not_start(
    tmp_path, monkeypatch
):
    suite = _fake_suite(tmp_path / "suite")
    (suite / ".git").rmdir()  # not a git checkout: the pinned commit is recorded
    data = tmp_path / "debian-minilm"
    data.mkdir()
    rng = np.random.default_rng(1)
    np.save(data / "base.npy", rng.standard_normal((40, 8)).astype(np.float16))
    np.save(data / "queries.npy", rng.standard_normal((5, 8)).astype(np.float16))
    binary = tmp_path / "sagitta"
    binary.write_text("#!/bin/sh\nexit 3\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    # ports nothing listens on (not 6333/6334), so no server on this machine is touched
    port = next(
        p for p in range(47301, 47399, 2) if vdb.port_free(p) and vdb.port_free(p + 1)
    )
    monkeypatch.setattr(vdb, "PORT", port)
    out = tmp_path / "out.json"
    status = vdb.main(
        [
            *("--suite", str(suite)),
            *("--dataset-path", str(data)),
            *("--n", "40", "--queries", "5"),
            *("--binary", str(binary)),
            *("--apis", "rest"),
            *("--work-dir", str(tmp_path / "work")),
            *("--out", str(out)),
        ]
    )
    assert status == 1
    document = json.loads(out.read_text())
    assert document["status"] == "failed"
    assert document["results"] == []
    assert document["apis"][0]["status"] == "failed"
    assert "did not start" in document["apis"][0]["error"]
    assert report.validate(document) == []
    assert (tmp_path / "work").is_dir()  # kept for a look after a failure
    assert document["vector_db_benchmark"]["commit"].startswith(vdb.PINNED_COMMIT)
    assert document["dataset"]["suite_name"] == "debian-minilm-40-5q-8-angular"
