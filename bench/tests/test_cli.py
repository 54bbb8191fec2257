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
    assert validate({"schema": "sagitta-bench/1"})  # incomplete -> errors
