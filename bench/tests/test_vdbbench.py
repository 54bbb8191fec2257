"""The VectorDBBench harness's dataset conversion (the custom-dataset Parquet layout), its
log/metrics parsing and its two clients' command lines and API key handling, on tiny generated
data: no network (a loopback stand-in at most), no vectordb-bench import."""

import argparse
import http.server
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.datasets import Dataset, exact_search, normalize
from bench.vdbbench import (
    CLIENTS,
    convert,
    http_json,
    index_settings,
    optimizer_counts,
    redacted,
    send_api_key,
    unauthenticated_status,
    vdbbench_command,
)


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


# ---------------------------------------------------------------------------------------------
# Clients: qdrantlocal (REST) and qdrantcloud (gRPC with an API key)


def _args(client, **settings):
    resolved = index_settings(client, None, None, None) | settings
    return argparse.Namespace(
        client=client,
        vdbbench=Path("vectordbbench"),
        k=10,
        concurrency="1",
        duration=5,
        **resolved,
    )


CUSTOM = {"dir": "/data/x", "size": 50, "dim": 8, "metric_type": "COSINE"}


def test_index_settings_are_the_clients_and_qdrantcloud_cannot_change_them():
    assert index_settings("qdrantlocal", None, None, None) == {
        "m": 16,
        "ef_construct": 100,
        "hnsw_ef": 64,
    }
    assert index_settings("qdrantlocal", 32, None, 128) == {
        "m": 32,
        "ef_construct": 100,
        "hnsw_ef": 128,
    }
    # what VectorDBBench's QdrantIndexConfig() sends; ef_construct is not sent
    assert index_settings("qdrantcloud", None, None, None) == {
        "m": 16,
        "ef_construct": None,
        "hnsw_ef": 100,
    }
    assert index_settings("qdrantcloud", 16, None, 100)["hnsw_ef"] == 100
    with pytest.raises(ValueError, match="--hnsw-ef"):
        index_settings("qdrantcloud", None, None, 64)
    with pytest.raises(ValueError, match="--ef-construct"):
        index_settings("qdrantcloud", None, 200, None)


def test_qdrantlocal_command_sends_the_index_settings_and_no_key():
    cmd = vdbbench_command(_args("qdrantlocal"), CUSTOM, "http://127.0.0.1:6333")
    assert cmd[:3] == ["vectordbbench", "qdrantlocal", "--url"]
    assert cmd[cmd.index("--m") + 1] == "16"
    assert cmd[cmd.index("--ef-construct") + 1] == "100"
    assert cmd[cmd.index("--hnsw-ef") + 1] == "64"
    assert "--api-key" not in cmd
    assert cmd[cmd.index("--custom-dataset-dir") + 1] == "/data/x"


def test_qdrantcloud_command_has_the_key_and_no_index_options():
    args = _args("qdrantcloud")
    cmd = vdbbench_command(args, CUSTOM, "http://127.0.0.1:6333", "k3y")
    assert cmd[:6] == [
        "vectordbbench",
        "qdrantcloud",
        "--url",
        "http://127.0.0.1:6333",
        "--api-key",
        "k3y",
    ]
    for option in ("--m", "--ef-construct", "--hnsw-ef"):
        assert option not in cmd  # the qdrantcloud command has none of them
    assert cmd[cmd.index("--case-type") + 1] == "PerformanceCustomDataset"
    with pytest.raises(ValueError, match="API key"):
        vdbbench_command(args, CUSTOM, "http://127.0.0.1:6333", None)
    assert CLIENTS["qdrantcloud"]["api"] == "grpc"
    assert CLIENTS["qdrantlocal"]["api"] == "rest"
    assert CLIENTS["qdrantcloud"]["collection"] == "QdrantCloudCollection"


def test_the_api_key_is_never_recorded():
    cmd = ["vectordbbench", "qdrantcloud", "--api-key", "s3cret", "--k", "10"]
    assert redacted(cmd) == [
        "vectordbbench",
        "qdrantcloud",
        "--api-key",
        "<api-key>",
        "--k",
        "10",
    ]
    assert "s3cret" not in " ".join(redacted(cmd))


class _KeyedHandler(http.server.BaseHTTPRequestHandler):
    """A loopback stand-in that answers 401 without ``api-key: k3y``, as the server does."""

    def do_GET(self):
        status = 200 if self.headers.get("api-key") == "k3y" else 401
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"result": {}}')

    def log_message(self, format: str, *args) -> None:
        pass


def test_the_harness_requests_carry_the_key_once_it_is_set():
    server = http.server.HTTPServer(("127.0.0.1", 0), _KeyedHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/collections"
    try:
        with pytest.raises(urllib.error.HTTPError):
            http_json(url)
        send_api_key("k3y")
        assert http_json(url) == {"result": {}}
        # the check that the server enforces the key sends none
        assert unauthenticated_status(url) == 401
    finally:
        urllib.request.install_opener(None)  # type: ignore[arg-type]
        server.shutdown()
        server.server_close()
