"""The VectorDBBench harness's dataset conversion (the custom-dataset Parquet layout) and its
log/metrics parsing, on tiny generated data: no network, no vectordb-bench import."""

import numpy as np
import pyarrow.parquet as pq

from bench.datasets import Dataset, exact_search, normalize
from bench.vdbbench import convert, optimizer_counts


def _dataset(n=50, nq=7, dim=8, seed=3):
    rng = np.random.default_rng(seed)
    base = normalize(rng.standard_normal((n, dim)).astype(np.float32))
    queries = normalize(rng.standard_normal((nq, dim)).astype(np.float32))
    return Dataset("tiny", base, queries, "cosine", None, {})


def test_convert_writes_the_custom_dataset_layout(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGITTA_BENCH_CACHE", str(tmp_path / "cache"))
    dataset = _dataset()
    dataset.gt = exact_search(dataset.base, dataset.queries, 20, "cosine")
    custom = convert(dataset, tmp_path / "out", gt_width=20)
    assert custom == {
        "dir": str(tmp_path / "out"),
        "size": 50,
        "dim": 8,
        "queries": 7,
        "metric_type": "COSINE",
        "file_count": 1,
        "gt_width": 20,
    }
    train = pq.read_table(tmp_path / "out" / "train.parquet")
    test = pq.read_table(tmp_path / "out" / "test.parquet")
    neighbors = pq.read_table(tmp_path / "out" / "neighbors.parquet")
    assert train.column_names == ["id", "emb"]
    assert test.column_names == ["id", "emb"]
    assert neighbors.column_names == ["id", "neighbors_id"]
    assert train.column("id").to_pylist() == list(range(50))
    assert test.column("id").to_pylist() == neighbors.column("id").to_pylist()
    emb = np.array(train.column("emb").to_pylist(), dtype=np.float32)
    np.testing.assert_array_equal(emb, dataset.base)
    np.testing.assert_array_equal(
        np.array(test.column("emb").to_pylist(), dtype=np.float32), dataset.queries
    )
    truth = np.array(neighbors.column("neighbors_id").to_pylist())
    assert truth.shape == (7, 20)
    # exact cosine neighbours of each query, best first
    scores = dataset.queries @ dataset.base.T
    np.testing.assert_array_equal(truth[:, 0], scores.argmax(axis=1))
    np.testing.assert_array_equal(truth, dataset.gt[:, :20])


def test_ground_truth_width_is_capped_by_the_base_size(tmp_path):
    dataset = _dataset(n=12, nq=3)
    dataset.gt = exact_search(dataset.base, dataset.queries, 12, "cosine")
    custom = convert(dataset, tmp_path, gt_width=100)
    assert custom["gt_width"] == 12
    neighbors = pq.read_table(tmp_path / "neighbors.parquet")
    assert [len(row) for row in neighbors.column("neighbors_id").to_pylist()] == [
        12
    ] * 3


def test_optimizer_counts_reads_the_servers_info_lines():
    log = "\n".join(
        [
            "2026-11-25T16:21:03Z INFO sagitta::optimizer: collection `C` shard 0: "
            "sealed the write buffer into a segment: 40000 points in 0.600 s",
            "2026-11-25T16:21:09Z INFO sagitta::optimizer: collection `C` shard 0: "
            "merged segments [1, 2] into one: 60000 points in 2.000 s",
            "2026-11-25T16:21:10Z INFO sagitta::optimizer: collection `C` shard 1: "
            "vacuumed segment 3: 10 points in 0.010 s",
            "2026-11-25T16:21:11Z INFO sagitta_server: listening",
        ]
    )
    assert optimizer_counts(log) == {"seals": 1, "merges": 1, "vacuums": 1}
