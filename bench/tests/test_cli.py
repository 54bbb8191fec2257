import json

import pytest

from bench.__main__ import main
from bench.report import summarize, validate

TINY = ["--quick", "--n", "3000", "--dim", "32", "--queries", "60", "--threads", "2"]


def test_end_to_end_peers(tmp_path, capsys):
    out = tmp_path / "ann-tiny.json"
    engines = "hnswlib,faiss-hnsw"
    assert main(["ann", *TINY, "--engines", engines, "--out", str(out)]) == 0
    assert out.exists() and out.with_suffix(".png").stat().st_size > 1000
    assert main(["check", str(out)]) == 0
    assert "ok" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["schema"] == "sagitta-bench/1" and doc["suite"] == "ann-peers"
    assert doc["command"].startswith("python -m bench ann --quick")
    assert doc["dataset"] == {
        **doc["dataset"],
        "n": 3000,
        "dim": 32,
        "queries": 60,
        "k": 10,
    }
    assert [r["engine"] for r in doc["results"]] == ["hnswlib", "faiss-hnsw"]
    for result in doc["results"]:
        assert [run["search_params"]["ef"] for run in result["runs"]] == [
            16,
            32,
            64,
            128,
        ]
        assert (
            result["runs"][-1]["recall_at_k"] >= 0.9
        )  # correctness floor, not a timing
        assert result["memory_bytes"] > 3000 * 32 * 4
        assert result["memory_method"]
    assert set(doc["summary"]["best_qps_at_recall"]) == {"hnswlib", "faiss-hnsw"}


def test_refining_peers_sweep_probes_and_depths(tmp_path):
    """The IVF peers with exact refinement sweep nprobe × k_factor, and deeper refinement
    at the widest probe reaches high recall (re-scoring is exact); usearch with re-scoring
    beats its own int8 results at the same ef."""
    out = tmp_path / "ann-refine.json"
    engines = "faiss-ivfpq-fs-refine,faiss-ivf-rabitq,usearch-i8,usearch-i8-rerank"
    args = ["--nprobe-sweep", "4,64", "--kfactor-sweep", "2,16"]
    assert main(["ann", *TINY, *args, "--engines", engines, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    by_engine = {result["engine"]: result for result in doc["results"]}
    for name in ("faiss-ivfpq-fs-refine", "faiss-ivf-rabitq"):
        result = by_engine[name]
        params = [run["search_params"] for run in result["runs"]]
        assert params == [
            {"nprobe": p, "k_factor": f} for p in (4, 64) for f in (2, 16)
        ]
        recalls = [run["recall_at_k"] for run in result["runs"]]
        assert recalls[-1] >= 0.95 and recalls[-1] >= recalls[0]
        report = result["engine_extra"]["memory_report"]
        assert report["refine_vectors"] == 3000 * 32 * 4
        assert result["memory_bytes"] == sum(report.values())
        assert result["index_params"]["factory"].startswith(
            f"IVF{result['index_params']['nlist']},"
        )
    plain = by_engine["usearch-i8"]["runs"]
    reranked = by_engine["usearch-i8-rerank"]["runs"]
    assert sum(r["recall_at_k"] for r in reranked) > sum(
        r["recall_at_k"] for r in plain
    )


def test_unknown_engine_is_rejected(tmp_path):
    with pytest.raises(SystemExit):
        main(["ann", *TINY, "--engines", "nope", "--out", str(tmp_path / "x.json")])


def test_check_rejects_broken_files(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"schema": "sagitta-bench/1", "results": [{"engine": "x"}]})
    )
    assert main(["check", str(bad)]) == 1
    text = capsys.readouterr().out
    assert "missing 'machine'" in text and "missing 'runs'" in text
    (tmp_path / "garbage.json").write_text("{")
    assert main(["check", str(tmp_path / "garbage.json")]) == 1


def _result(engine, points):
    runs = [
        {
            "scenario": "read-only",
            "search_params": {"ef": ef},
            "threads": 2,
            "concurrency": 2,
            "recall_at_k": r,
            "qps": q,
            "latency_ms": {"p50": 1, "p95": 1, "p99": 1},
            "disk_bytes_read_per_query": None,
        }
        for ef, (r, q) in enumerate(points)
    ]
    return {
        "engine": engine,
        "engine_version": "1",
        "index_params": {},
        "build_seconds": 1.0,
        "upload_seconds": None,
        "memory_bytes": 1,
        "disk_bytes_written": None,
        "runs": runs,
    }


def test_summary_ratios():
    results = [
        _result("sagitta-hnsw-sq8", [(0.9, 4000.0), (0.96, 2000.0), (0.995, 1000.0)]),
        _result("hnswlib", [(0.96, 1000.0), (0.98, 800.0)]),
    ]
    summary = summarize(results)
    assert summary["best_qps_at_recall"]["hnswlib"] == {"0.95": 1000.0, "0.99": None}
    assert summary["ratio_to_peer"]["sagitta-hnsw-sq8"]["hnswlib"] == {
        "0.95": 2.0,
        "0.99": None,
    }
    assert "sagitta-hnsw" not in summary["ratio_to_peer"]
    assert summary["ratio_to_best_peer"]["sagitta-hnsw-sq8"] == {
        "0.95": {"peer": "hnswlib", "ratio": 2.0},
        "0.99": {"peer": None, "ratio": None},
    }


def test_summary_names_the_fastest_peer_at_each_floor():
    results = [
        _result("sagitta-hnsw-sq8", [(0.96, 3000.0), (0.995, 1200.0)]),
        _result("hnswlib", [(0.96, 1000.0), (0.995, 600.0)]),
        _result("faiss-ivfpq-fs-refine", [(0.96, 1500.0), (0.98, 900.0)]),
        _result("sagitta-flat", [(1.0, 5000.0)]),
    ]
    best = summarize(results)["ratio_to_best_peer"]["sagitta-hnsw-sq8"]
    assert best == {
        "0.95": {"peer": "faiss-ivfpq-fs-refine", "ratio": 2.0},
        "0.99": {"peer": "hnswlib", "ratio": 2.0},
    }
    assert validate({"schema": "sagitta-bench/1"})  # incomplete -> errors
