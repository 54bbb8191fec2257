"""The scale-out model (bench/mpi_model.py): it fits what it is given and projects the
tree's and the gather's root cost as the design says they grow."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from bench import mpi_model


def document(ranks: int, search_us: float, merge_us_per_list: float) -> dict:
    """An ``mpi_bench`` result for ``ranks`` ranks (tree and gather alike)."""
    batch = 64
    results = []
    for engine, lists in (
        ("sagitta-mpi-tree", mpi_model.lists_merged_by_root(ranks, True)),
        ("sagitta-mpi-gather", mpi_model.lists_merged_by_root(ranks, False)),
    ):
        results.append(
            {
                "engine": engine,
                "ranks": ranks,
                "runs": [
                    {
                        "search_params": {"ef": 64, "batch": batch},
                        "qps": 1e6 / search_us,
                        "rank0_merge_us_per_query": lists * merge_us_per_list,
                        "slowest_rank_search_ms_per_batch": search_us * batch / 1e3,
                    }
                ],
            }
        )
    return {
        "machine": {"cores": 4},
        "dataset": {"n": 100_000, "dim": 384, "k": 10},
        "results": results,
    }


def test_the_fit_recovers_a_power_law_and_the_merge_cost(tmp_path: Path) -> None:
    # search time c * n ** 0.25 per query, 0.5 us per merged list
    c, p = 2.0, 0.25
    paths = []
    for ranks in (1, 2, 4):
        path = tmp_path / f"r{ranks}.json"
        path.write_text(json.dumps(document(ranks, c * (100_000 / ranks) ** p, 0.5)))
        paths.append(path)
    report = mpi_model.report(paths)
    fitted = report["fitted"]
    assert fitted["p"] == pytest.approx(p, rel=1e-9)
    assert fitted["c_us"] == pytest.approx(c, rel=1e-9)
    assert fitted["merge_us"] == pytest.approx(0.5)
    measured_one = [
        m for m in report["measured"] if m["ranks"] == 1 and m["mode"] == "tree"
    ]
    assert measured_one[0]["parallel_efficiency"] == pytest.approx(1.0)


def test_the_root_merges_log2_lists_up_the_tree_and_all_of_them_in_a_gather() -> None:
    model = mpi_model.Fitted(
        n=1_000_000, dim=768, k=10, batch=64, c_us=5.0, p=0.2, merge_us=0.3
    )
    for ranks, depth in ((1, 0), (2, 1), (4, 2), (5, 3), (16, 4), (256, 8)):
        tree = mpi_model.predict(model, ranks, tree=True)
        gather = mpi_model.predict(model, ranks, tree=False)
        assert tree["root_merge_us_per_query"] == pytest.approx(depth * 0.3)
        assert gather["root_merge_us_per_query"] == pytest.approx((ranks - 1) * 0.3)
    # one rank: the batch is its search alone, efficiency 1
    one = mpi_model.predict(model, 1, tree=True)
    assert one["parallel_efficiency"] == pytest.approx(1.0)
    assert one["batch_ms"] == pytest.approx(64 * 5.0 * 1_000_000**0.2 / 1e3)
    # every rank searches every query: QPS grows as R ** p before messages count
    two = mpi_model.predict(model, 2, tree=True)
    assert two["qps"] < one["qps"] * 2**0.2
    assert two["qps"] > one["qps"] * 2**0.2 * 0.95
    # far out, the gather's root falls behind the tree's
    assert (
        mpi_model.predict(model, 256, tree=False)["qps"]
        < mpi_model.predict(model, 256, tree=True)["qps"]
    )
    assert math.isclose(mpi_model.depth(256), 8)


def test_one_point_count_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r1.json"
    path.write_text(json.dumps(document(1, 100.0, 0.5)))
    with pytest.raises(SystemExit, match="two point counts"):
        mpi_model.report([path])


RESULTS = Path(__file__).resolve().parents[1] / "results"


def test_the_committed_runs_follow_the_schema_and_the_model_reads_them() -> None:
    from bench.report import validate

    runs = sorted(RESULTS.glob("mpi-debian-minilm-r[124].json"))
    assert len(runs) == 3
    for path in sorted(RESULTS.glob("mpi-*.json")):
        assert validate(json.loads(path.read_text())) == [], path.name
    report = mpi_model.report(runs)
    assert 0.0 < report["fitted"]["p"] < 1.0
    assert {row["ranks"] for row in report["measured"]} == {1, 2, 4}
