"""The ingestion benchmark: SagittaDB engines end to end on small data, and the pure helpers.
The peer adapters (qdrant-edge, LanceDB, Chroma) need packages CI does not install
(requirements-bench.txt); only their skip path is tested here."""

import json
import struct

import numpy as np
import pytest

from bench import ingest, ingest_common, ingest_peers
from bench.__main__ import main as bench_main
from bench.ingest import main


def _fake_minilm(tmp_path, n=2500, dim=16, nq=3):
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "base.npy", rng.standard_normal((n, dim)).astype(np.float16))
    np.save(data / "queries.npy", rng.standard_normal((nq, dim)).astype(np.float16))
    return data


def test_ingest_writes_a_valid_result(tmp_path):
    data = _fake_minilm(tmp_path)
    out = tmp_path / "ingest.json"
    args = [
        "--dataset-path",
        str(data),
        "--engines",
        "sagitta-wal-1shard,sagitta-wal-3shard,sagitta-import-1shard",
    ]
    args += ["--batch", "700", "--workdir", str(tmp_path / "db"), "--out", str(out)]
    assert main(args) == 0
    assert bench_main(["check", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["suite"] == "ingest"
    assert document["dataset"]["name"] == "debian-minilm"
    assert document["dataset"]["n"] == 2500
    results = document["results"]
    assert [r["engine"] for r in results] == [
        "sagitta-wal-1shard",
        "sagitta-wal-3shard",
        "sagitta-import-1shard",
    ]
    for result in results:
        assert result["disk_bytes_written"] >= result["raw_vector_bytes"]
        assert result["write_amplification"] > 1.0
        assert result["directory_bytes"] > 0
        (indexed_run,) = result["runs"]
        assert indexed_run["recall_at_k"] >= 0.9
        assert indexed_run["search_params"]["ef"] == 64
        assert result["build_seconds"] >= result["upload_seconds"]
        assert result["vectors_per_second_until_searchable"] > 0
        assert result["vectors_per_second_until_indexed"] > 0
    # the import writes no log: fewer bytes than the log-and-seal path
    wal, _, imported = results
    assert imported["disk_bytes_written"] < wal["disk_bytes_written"]
    assert imported["build_seconds"] == imported["upload_seconds"]
    reference = document["reference_bare_hnsw"]
    assert set(reference["recall_at_k_by_ef"]) == {"64", "128"}
    summary = document["ingest_summary"]["engines"]
    assert "recall_minus_bare_hnsw_ef64" in summary["sagitta-wal-1shard"]
    assert document["package_versions"]["sagittadb"]
    assert document["thread_env"]["RAYON_NUM_THREADS"] == "2"
    assert list((tmp_path / "db").iterdir()) == []  # databases removed


def test_ingest_synthetic_dataset(tmp_path):
    out = tmp_path / "synth.json"
    args = ["--dataset", "synth", "--n", "2000", "--dim", "32", "--queries", "20"]
    args += ["--engines", "sagitta-wal-1shard", "--no-bare-reference"]
    assert main([*args, "--workdir", str(tmp_path), "--out", str(out)]) == 0
    assert bench_main(["check", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["dataset"]["name"] == "synth-32-2k"
    assert document["dataset"]["source"]["generator"] == "bench.datasets.synthetic"
    assert document["reference_bare_hnsw"] is None
    (result,) = document["results"]
    assert result["runs"][-1]["recall_at_k"] >= 0.8


def test_missing_peer_is_skipped_or_fatal_with_strict(tmp_path, monkeypatch):
    monkeypatch.setitem(
        ingest.REQUIRES, "qdrant-edge", ("no_such_module_for_test", "qdrant-edge-py")
    )
    data = _fake_minilm(tmp_path, n=600)
    out = tmp_path / "skip.json"
    args = ["--dataset-path", str(data), "--engines", "sagitta-wal-1shard,qdrant-edge"]
    args += ["--no-bare-reference", "--workdir", str(tmp_path)]
    assert main([*args, "--out", str(out)]) == 0
    document = json.loads(out.read_text())
    assert [r["engine"] for r in document["results"]] == ["sagitta-wal-1shard"]
    assert "qdrant-edge-py" in document["skipped_engines"]["qdrant-edge"]
    with pytest.raises(SystemExit):
        main([*args, "--strict"])


def test_engine_names_and_registry():
    parser = ingest.build_parser()
    assert ingest.engine_names(parser.parse_args([])) == list(ingest.ENGINES)
    assert ingest.engine_names(parser.parse_args(["--shards", "1,2"])) == [
        "sagitta-wal-1shard",
        "sagitta-wal-2shard",
    ]
    both = parser.parse_args(["--engines", "chroma", "--shards", "4"])
    assert ingest.engine_names(both) == ["chroma", "sagitta-wal-4shard"]
    assert ingest.resolve_engine("sagitta-wal-5shard").keywords == {"shards": 5}
    assert ingest.resolve_engine("sagitta-wal-2shard-optimize").keywords == {
        "shards": 2,
        "optimize": True,
    }
    for bad in ("nope", "sagitta-wal-0shard"):
        with pytest.raises(KeyError):
            ingest.resolve_engine(bad)
    with pytest.raises(SystemExit):
        main(["--engines", "nope"])


def test_proc_io_parsing_and_meter(tmp_path):
    io = tmp_path / "io"
    io.write_text("rchar: 10\nwchar: 20\nwrite_bytes: 4096\ncancelled_write_bytes: 0\n")
    assert ingest_common.read_proc_io(str(io)) == {
        "rchar": 10,
        "wchar": 20,
        "write_bytes": 4096,
        "cancelled_write_bytes": 0,
    }
    assert ingest_common.read_proc_io(str(tmp_path / "missing")) is None
    samples = iter(
        [
            {"write_bytes": 100, "cancelled_write_bytes": 0, "wchar": 50},
            {"write_bytes": 8292, "cancelled_write_bytes": 4096, "wchar": 9000},
        ]
    )
    meter = ingest_common.DiskMeter(lambda: next(samples))
    assert meter.delta() == {
        "write_bytes": 8192,
        "cancelled_write_bytes": 4096,
        "wchar": 8950,
        "net_write_bytes": 4096,
    }
    assert ingest_common.DiskMeter(lambda: None).delta() is None


def test_directory_sizes(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 5000)
    (tmp_path / "sub").mkdir()
    with open(tmp_path / "sub" / "sparse", "wb") as f:
        f.truncate(1 << 20)  # a hole: apparent size only
    assert ingest_common.directory_bytes(tmp_path) == 5000 + (1 << 20)
    assert 5000 <= ingest_common.directory_allocated_bytes(tmp_path) < (1 << 20)


def test_chroma_header_reader(tmp_path):
    assert ingest_peers.chroma_hnsw_elements(tmp_path) is None
    segment = tmp_path / "6a0daada"
    segment.mkdir()
    header = struct.pack("<iQQQ", 1, 0, 4096, 3000) + bytes(72)
    (segment / "header.bin").write_bytes(header)
    assert ingest_peers.chroma_hnsw_elements(tmp_path) == 3000


def _result(engine, build, recall):
    run = {"recall_at_k": recall, "latency_ms": {"p50": 1.0, "p95": 1.0, "p99": 1.0}}
    return {
        "engine": engine,
        "upload_seconds": build / 2,
        "build_seconds": build,
        "vectors_per_second_until_searchable": 1.0,
        "vectors_per_second_until_indexed": 1.0,
        "write_amplification": 1.5,
        "runs": [run],
    }


def test_ingest_summary_ratios():
    results = [
        _result("sagitta-wal-1shard", 4.0, 0.99),
        _result("qdrant-edge", 10.0, 0.97),
    ]
    reference = {"recall_at_k_by_ef": {"64": 0.985}}
    summary = ingest.ingest_summary(results, reference, 64)["engines"]
    assert summary["sagitta-wal-1shard"]["indexed_time_over_qdrant_edge"] == 0.4
    assert "indexed_time_over_qdrant_edge" not in summary["qdrant-edge"]
    assert summary["sagitta-wal-1shard"][
        "recall_minus_bare_hnsw_ef64"
    ] == pytest.approx(0.005)
    assert summary["qdrant-edge"]["recall_minus_bare_hnsw_ef64"] == pytest.approx(
        -0.015
    )
    alone = ingest.ingest_summary(results[:1], None, 64)["engines"][
        "sagitta-wal-1shard"
    ]
    assert "indexed_time_over_qdrant_edge" not in alone
    assert "recall_minus_bare_hnsw_ef64" not in alone
