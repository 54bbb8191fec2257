"""The WAL ingestion benchmark runs end to end on a small fake real-text directory."""

import json

import numpy as np

from bench.ingest import main


def test_ingest_writes_a_valid_result(tmp_path):
    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "base.npy", rng.standard_normal((2500, 16)).astype(np.float16))
    np.save(data / "queries.npy", rng.standard_normal((3, 16)).astype(np.float16))
    out = tmp_path / "ingest.json"
    args = ["--dataset-path", str(data), "--shards", "1,3", "--batch", "700"]
    assert main([*args, "--workdir", str(tmp_path), "--out", str(out)]) == 0
    from bench.__main__ import main as bench_main

    assert bench_main(["check", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["engine"] for r in results] == [
        "sagitta-engine-wal-1shard",
        "sagitta-engine-wal-3shard",
    ]
    # Each point is logged once: 4·dim vector bytes + 9 id + 4 payload-length bytes; record
    # and file headers add well under 1% on top (docs/format.md).
    per_point = (4 * 16 + 13) / (4 * 16)
    for result in results:
        assert per_point <= result["log_bytes_over_raw"] < per_point + 0.01
        assert result["sealed_bytes_over_raw"] > 1.0  # vectors, codes, graph, ids
        buffer_run, sealed_run = result["runs"]
        assert buffer_run["recall_at_k"] == 1.0  # the write buffer is searched exactly
        assert sealed_run["recall_at_k"] >= 0.9
        assert result["build_seconds"] >= result["upload_seconds"]
        assert result["vectors_per_second_until_searchable"] > 0
