"""The larger-than-memory harness end to end on small data it makes itself (no memory limit:
CI runs in a container without a cgroup of its own to create; the 1M run sets one)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from bench import disk, report


def test_the_harness_builds_searches_and_reports_each_engine(tmp_path) -> None:
    engines = ["sagitta-ivf-disk", "sagitta-hnsw-disk", "sagitta-hnsw-ram"]
    if importlib.util.find_spec("faiss") is not None:
        engines.append("faiss-ivf-flat-disk")
    out = tmp_path / "disk.json"
    status = disk.main(
        [
            "--n", "4000", "--dim", "48", "--queries", "40", "--latency-queries", "5",
            "--memory-limit-mb", "0", "--no-drop-caches", "--engines", ",".join(engines),
            "--workdir", str(tmp_path / "work"), "--out", str(out),
        ]
    )  # fmt: skip
    assert status == 0
    document = json.loads(out.read_text())
    assert report.validate(document) == []
    assert [result["engine"] for result in document["results"]] == engines
    for result in document["results"]:
        runs = result["runs"]
        assert runs, result["engine"]
        # the sweep widens the search until recall 0.99 (or its last setting)
        assert runs[-1]["recall_at_k"] >= 0.9, (result["engine"], runs[-1])
        assert all(run["qps"] > 0 and run["disk_reads_per_query"] >= 0 for run in runs)
        assert result["build_seconds"] > 0
        assert result["disk_bytes_written"] > 4000 * 48 * 4 // 2
    best = document["disk_summary"]["best_at_recall"]
    for ours in ("sagitta-ivf-disk", "sagitta-hnsw-disk"):
        assert best[ours]["max_recall"] >= 0.9, ours
    # HNSW with its vectors on disk holds the graph and codes, not the 192-byte rows
    ram = {
        result["engine"]: result["engine_report"]["index_ram_bytes"]
        for result in document["results"]
        if result["engine"].startswith("sagitta-hnsw")
    }
    assert ram["sagitta-hnsw-disk"] + 4000 * 48 * 4 <= ram["sagitta-hnsw-ram"], ram
    # the build runs once: indexes are removed unless asked to keep them
    assert not (tmp_path / "work" / "engines" / "sagitta-ivf-disk").exists()


def test_an_engine_that_cannot_start_is_reported_not_dropped(tmp_path) -> None:
    out = tmp_path / "disk.json"
    status = disk.main(
        [
            "--n", "500", "--dim", "16", "--queries", "5", "--latency-queries", "2",
            "--memory-limit-mb", "0", "--no-drop-caches", "--engines", "diskann",
            "--diskann-python", str(tmp_path / "no-such-python"),
            "--workdir", str(tmp_path / "work"), "--out", str(out),
        ]
    )  # fmt: skip
    assert status == 0
    document = json.loads(out.read_text())
    assert document["results"] == []
    assert document["skipped"][0]["engine"] == "diskann"
    assert "no interpreter" in document["skipped"][0]["skipped"]


def test_unknown_engines_are_refused(tmp_path) -> None:
    with pytest.raises(SystemExit):
        disk.main(
            [
                "--engines",
                "nope",
                "--workdir",
                str(tmp_path),
                "--out",
                str(tmp_path / "o"),
            ]
        )
