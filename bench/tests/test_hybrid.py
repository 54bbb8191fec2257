"""The sparse / hybrid benchmark: its exact oracle (BM25 with Qdrant's IDF, RRF) against
hand-computed values, and ``main`` end to end on a tiny generated dataset (texts and vectors
made here) for each engine whose API is installed. qdrant-edge is not installed in CI
(requirements-bench.txt), so its run is skipped there."""

import importlib.util
import json
import math

import numpy as np
import pytest

from bench import hybrid
from bench.__main__ import main as bench_main

# The hand-made example (also run against qdrant-edge 0.9.0 when this was written: the same
# scores, 1.0397207 / 0.6931472 / 0.2079442, and fused scores 0.8333 / 0.5833 / 0.5 / 0.25).
DOCS = [
    {"indices": [1, 2], "values": [1.0, 0.5]},
    {"indices": [1], "values": [0.3]},
    {"indices": [3], "values": [2.0]},
    {"indices": [2, 3], "values": [1.0, 1.0]},
    {"indices": [], "values": []},  # no sparse vector: not counted in N
]
QUERY = {"indices": [1, 2], "values": [1.0, 1.0]}


def test_exact_sparse_scores_with_idf():
    oracle = hybrid.SparseOracle(DOCS)
    assert oracle.documents == 4
    # N 4, df 2 for both terms: ln(1 + (4 - 2 + 0.5) / (2 + 0.5)) = ln 2
    assert oracle.idf(1) == pytest.approx(math.log(2.0))
    assert oracle.idf(99) == pytest.approx(math.log(1.0 + 4.5 / 0.5))
    ln2 = math.log(2.0)
    expected = [1.5 * ln2, 0.3 * ln2, 0.0, ln2, 0.0]
    assert oracle.scores(QUERY).tolist() == pytest.approx(expected)
    assert [oracle.score(d, QUERY) for d in range(5)] == pytest.approx(expected)
    ids, scores = oracle.top(QUERY, 10)
    assert ids == [0, 3, 1]  # documents sharing no term are not results
    assert scores == pytest.approx([1.5 * ln2, ln2, 0.3 * ln2])
    assert oracle.top(QUERY, 2)[0] == [0, 3]
    # query weights multiply
    weighted = {"indices": [2], "values": [2.0]}
    assert oracle.scores(weighted)[3] == pytest.approx(2.0 * ln2)


def test_rrf_is_qdrants_formula():
    fused = hybrid.rrf([[3, 1, 4], [0, 3, 1]])
    assert fused == pytest.approx(
        {3: 1 / 2 + 1 / 3, 1: 1 / 3 + 1 / 4, 0: 1 / 2, 4: 1 / 4}
    )
    assert hybrid.ranked(fused, 3) == ([3, 1, 0], pytest.approx([5 / 6, 7 / 12, 0.5]))
    # equal scores by id
    assert hybrid.ranked({7: 0.5, 2: 0.5, 5: 1.0}, 3)[0] == [5, 2, 7]
    assert hybrid.rrf([[1], [2]], k=60) == pytest.approx({1: 1 / 60, 2: 1 / 60})


def test_overlap_counts_ties_of_the_kth_score():
    scores = {1: 3.0, 2: 2.0, 3: 1.0, 4: 1.0, 5: 0.5}
    truth = hybrid.Truth([1, 2, 3], [3.0, 2.0, 1.0], lambda p: scores.get(p, 0.0))
    assert hybrid.overlap([1, 2, 3], truth, k=3) == (3, 3, 3)
    assert hybrid.overlap([1, 2, 4], truth, k=3) == (2, 3, 3)  # 4 ties the 3rd
    assert hybrid.overlap([1, 5, 9], truth, k=3) == (1, 1, 3)
    assert hybrid.overlap([], truth, k=3) == (0, 0, 3)
    short = hybrid.Truth([1], [3.0], lambda p: scores.get(p, 0.0))
    assert hybrid.overlap([1, 2], short, k=3) == (1, 1, 1)


def test_texts_map_to_base_rows_then_queries(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text("\n".join(json.dumps(f"text {i}") for i in range(5)) + "\n")
    base, queries = hybrid.read_texts(path, 3, 2)
    assert base == ["text 0", "text 1", "text 2"]
    assert queries == ["text 3", "text 4"]
    with pytest.raises(ValueError, match="5 lines"):
        hybrid.read_texts(path, 3, 3)


def _tiny_dataset(tmp_path, n=400, nq=30, dim=16):
    """base.npy / queries.npy (float16) and texts.jsonl with n + nq lines of words from a
    Zipf-like vocabulary (so terms repeat and scores tie as in real text)."""
    rng = np.random.default_rng(7)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "base.npy", rng.standard_normal((n, dim)).astype(np.float16))
    np.save(data / "queries.npy", rng.standard_normal((nq, dim)).astype(np.float16))
    vocabulary = [f"word{i}x" for i in range(150)]
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    weights /= weights.sum()
    lines = []
    for i in range(n + nq):
        length = int(rng.integers(3, 25)) if i < n else int(rng.integers(2, 6))
        words = rng.choice(vocabulary, size=length, p=weights)
        lines.append(json.dumps(" ".join(words)))
    (data / "texts.jsonl").write_text("\n".join(lines) + "\n")
    return data


def _run_main(tmp_path, engine, *extra):
    data = _tiny_dataset(tmp_path)
    out = tmp_path / "hybrid.json"
    args = ["--dataset-path", str(data), "--engines", engine, "--strict", *extra]
    args += ["--queries", "25", "--warmup", "2", "--candidates", "15"]
    args += ["--workdir", str(tmp_path / "work"), "--out", str(out)]
    assert hybrid.main(args) == 0
    assert bench_main(["check", str(out)]) == 0
    assert list((tmp_path / "work").iterdir()) == []  # databases removed
    document = json.loads(out.read_text())
    assert document["suite"] == "hybrid-sparse"
    assert document["dataset"]["n"] == 400
    assert document["dataset"]["queries"] == 25
    assert document["command"].startswith("python -m bench.hybrid ")
    (result,) = document["results"]
    sparse, fused = result["runs"]
    assert sparse["scenario"] == "sparse"
    assert fused["scenario"] == "hybrid"
    assert fused["search_params"]["candidates"] == 15
    # exact sparse search: every hit ties or beats the exact 10th, scores as the oracle's
    assert sparse["recall_at_k_ties"] == 1.0
    assert sparse["score_check"]["max_relative_error"] < 1e-4
    assert sparse["queries_short_of_k"] == 0
    # 400 points of 16 dims: the dense prefetch is all but exact
    assert fused["recall_at_k_ties"] >= 0.9
    for run in (sparse, fused):
        assert run["qps"] > 0
        assert run["latency_ms"]["p50"] <= run["latency_ms"]["p99"]
    assert set(document["summary"]) == {"sparse", "hybrid", "note"}
    return document


def test_main_sagitta_end_to_end(tmp_path):
    document = _run_main(tmp_path, "sagitta")
    assert document["results"][0]["engine"] == "sagitta-embedded"
    assert "import_collection" in document["results"][0]["index_params"]["method"]


def test_main_sagitta_through_the_write_path(tmp_path):
    document = _run_main(tmp_path, "sagitta", "--sagitta-load", "upsert")
    assert "upsert" in document["results"][0]["index_params"]["method"]


@pytest.mark.skipif(
    importlib.util.find_spec("qdrant_edge") is None,
    reason="qdrant-edge-py not installed (requirements-bench.txt)",
)
def test_main_qdrant_edge_end_to_end(tmp_path):
    document = _run_main(tmp_path, "qdrant-edge")
    assert document["results"][0]["engine"] == "qdrant-edge"


def test_a_missing_engine_is_skipped_or_fatal(monkeypatch):
    monkeypatch.setattr(hybrid, "missing", lambda name: f"{name} absent")
    assert hybrid.select_engines("sagitta", strict=False) == (
        [],
        {"sagitta": "sagitta absent"},
    )
    with pytest.raises(SystemExit, match="sagitta absent"):
        hybrid.select_engines("sagitta", strict=True)
    with pytest.raises(SystemExit, match="unknown engine"):
        hybrid.select_engines("faiss", strict=False)
