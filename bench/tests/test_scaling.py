"""``python -m bench scaling`` end to end on a small synthetic set it makes itself, and its
helpers. No timing is asserted: only what the document must say and how its numbers relate.
qdrant-edge (requirements-bench.txt, which CI does not install) is covered wherever it
imports."""

import importlib.util
import json
import os
import random
import signal
import time

import pytest

from bench import scaling
from bench.__main__ import main
from bench.report import validate

HAS_QDRANT_EDGE = importlib.util.find_spec("qdrant_edge") is not None
ENGINES = [
    "sagitta-hnsw-sq8",
    "hnswlib",
    "faiss-hnsw",
    *(["qdrant-edge"] if HAS_QDRANT_EDGE else []),
]
CORES = 2  # os.cpu_count() as the run sees it, so the cap is the same on every machine
ARGS = [
    "scaling",
    "--n",
    "2000",
    "--dim",
    "32",
    "--queries",
    "100",
    "--threads-list",
    "1,2,4,8,16",
    "--ef-sweep",
    "16,32,64,128",
    "--repeats",
    "2",
    "--latency-queries",
    "20",
    "--strict",
]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """One run of every engine in ENGINES: (exit status, document, its JSON path)."""
    import sagittadb  # noqa: F401 - CI builds it; an ImportError here is a failure

    directory = tmp_path_factory.mktemp("scaling")
    out = directory / "scaling.json"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SAGITTA_BENCH_CACHE", str(directory / "cache"))
        patch.setattr(os, "cpu_count", lambda: CORES)
        status = main([*ARGS, "--engines", ",".join(ENGINES), "--out", str(out)])
    return status, json.loads(out.read_text()), out


def _results(document: dict) -> dict:
    return {result["engine"]: result for result in document["results"]}


def test_document_has_every_schema_field_and_passes_check(run, capsys):
    status, document, out = run
    assert status == 0
    assert validate(document) == []
    assert main(["check", str(out)]) == 0
    assert "ok (" in capsys.readouterr().out
    assert document["suite"] == "scaling"
    assert document["command"] == "python -m bench " + " ".join(
        [*ARGS, "--engines", ",".join(ENGINES), "--out", str(out)]
    )
    assert document["dataset"] == {
        **document["dataset"],
        "n": 2000,
        "dim": 32,
        "queries": 100,
        "k": 10,
    }
    assert list(_results(document)) == ENGINES
    assert out.with_suffix(".png").stat().st_size > 1000
    assert set(document["scaling_summary"]["engines"]) == set(ENGINES)


def test_thread_counts_are_capped_at_the_core_count(run):
    _, document, _ = run
    assert document["threads"] == {
        "requested": [1, 2, 4, 8, 16],
        "measured": [1, 2],
        "dropped_above_cores": [4, 8, 16],
        "cores": CORES,
        "cores_source": "os.cpu_count()",
        "build_threads": 2,
    }
    for result in document["results"]:
        assert [r["threads"] for r in result["runs"]] == [1, 2]
        assert [r["concurrency"] for r in result["runs"]] == [1, 2]
        assert result["build_threads"] == 2


def test_speedup_is_relative_to_one_thread(run):
    _, document, _ = run
    for result in document["results"]:
        one, two = result["runs"]
        assert one["speedup"] == 1.0 and one["parallel_efficiency"] == 1.0
        assert two["speedup"] == pytest.approx(two["qps"] / one["qps"], rel=1e-3)
        assert two["parallel_efficiency"] == pytest.approx(two["speedup"] / 2, abs=1e-4)
        summary = document["scaling_summary"]["engines"][result["engine"]]
        assert summary["speedup"] == {"1": 1.0, "2": two["speedup"]}
        for run_ in result["runs"]:
            assert run_["timed_calls"] == 2
            assert run_["cpu_utilization"] >= 0
    ratios = document["scaling_summary"]["qps_ratio_to_peer"]["sagitta-hnsw-sq8"]
    assert set(ratios) == set(ENGINES) - {"sagitta-hnsw-sq8"}


def test_one_setting_per_engine_reaching_the_recall_floor(run):
    _, document, _ = run
    for result in document["results"]:
        selection = result["selection"]
        assert selection["recall_floor"] == 0.95 and selection["threads"] == 2
        # easy data: some ef of the sweep reaches the floor, and it is the first that does
        assert selection["recall_floor_reached"], result["engine"]
        assert selection["recall_at_k"] >= 0.95
        tried = selection["tried"]
        efs = [entry["search_params"]["ef"] for entry in tried]
        assert efs == sorted(efs) and set(efs) <= {16, 32, 64, 128}
        assert all(entry["recall_at_k"] < 0.95 for entry in tried[:-1])
        assert tried[-1]["search_params"] == selection["search_params"]
        for run_ in result["runs"]:
            assert run_["search_params"] == selection["search_params"]
            assert 0.0 <= run_["recall_at_k"] <= 1.0


def test_memory_traffic_is_counted_or_says_why_not(run):
    _, document, _ = run
    results = _results(document)
    sq8 = results["sagitta-hnsw-sq8"]["memory_traffic"]["estimated"]
    counters = sq8["counters"]
    assert sq8["bytes_per_query"] == counters["bytes_read"] > 0
    assert counters["traversal_row_bytes"] >= 32  # an SQ8 row: dim bytes + its header
    faiss = results["faiss-hnsw"]["memory_traffic"]["estimated"]
    assert faiss["counters"]["row_bytes"] == 32 * 4
    assert faiss["bytes_per_query"] == pytest.approx(
        faiss["counters"]["distances"] * 128, rel=1e-3
    )
    assert faiss["graph_bytes_per_query"] > 0
    no_counters = ["hnswlib", *(["qdrant-edge"] if HAS_QDRANT_EDGE else [])]
    for name in no_counters:
        estimated = results[name]["memory_traffic"]["estimated"]
        assert estimated["bytes_per_query"] is None
        assert estimated["reason"].startswith("none: ")
        assert all(
            r["estimated_bytes_per_second"] is None for r in results[name]["runs"]
        )
    for run_ in results["sagitta-hnsw-sq8"]["runs"]:
        expected = sq8["bytes_per_query"] * run_["qps"]
        assert run_["estimated_bytes_per_second"] == pytest.approx(expected, rel=1e-3)
    perf = document["perf"]
    for result in document["results"]:
        assert result["memory_traffic"]["perf"]["available"] == perf["available"]
        assert all(("perf" in r) == perf["available"] for r in result["runs"])
    if not perf["available"]:
        assert perf["reason"]


@pytest.mark.skipif(not HAS_QDRANT_EDGE, reason="qdrant-edge-py not installed")
def test_qdrant_edge_threads_are_python_threads_and_the_gil_is_probed(run):
    _, document, _ = run
    result = _results(document)["qdrant-edge"]
    assert result["threads_method"].startswith("N Python threads")
    probe = result["gil_probe"]
    assert 0.0 <= probe["fraction"] <= 1.0 and probe["calls"] >= 5
    # qdrant-edge-py 0.9 holds the GIL; on a machine fast enough that even the probe's
    # largest ef is too short to tell, it says so instead of guessing
    assert probe["verdict"] == "held" or probe["verdict"].startswith("unknown")
    assert result["notes"][0].startswith("threads > 1 are Python threads")
    assert result["engine_extra"]["segments"] >= 1
    assert result["index_params"]["m"] == 16


def test_gil_probe_tells_a_released_gil_from_a_held_one():
    numbers = random.Random(1).sample(range(10**6), 30_000)
    released = scaling.gil_probe(lambda: time.sleep(0.005), seconds=0.3)
    held = scaling.gil_probe(lambda: sorted(numbers), seconds=0.3)
    assert released["fraction"] >= scaling.GIL_RELEASED_AT
    assert held["fraction"] < scaling.GIL_RELEASED_AT
    assert scaling.gil_verdict(held, 1).startswith("unknown")


def test_thread_counts():
    counts = scaling.thread_counts([2, 4, 2], 3)
    assert counts["measured"] == [1, 2] and counts["dropped_above_cores"] == [4]
    assert counts["build_threads"] == 2
    with pytest.raises(ValueError):
        scaling.thread_counts([0, 2], 4)


def test_perf_output_is_parsed_and_uncounted_events_left_out():
    assert scaling.parse_perf_csv("<not supported>,,cache-misses,0,100.00,,\n") == {}
    assert scaling.parse_perf_csv("<not counted>,,cache-misses,0,0.00,,") == {}
    text = "\n123456,,cache-misses:u,2000000,100.00,,\n7,,other,1,100.00,,\n"
    assert scaling.parse_perf_csv(text) == {"cache-misses": 123456, "other": 7}


def test_unknown_engines_and_bad_thread_lists_are_refused(tmp_path):
    out = str(tmp_path / "x.json")
    with pytest.raises(SystemExit):
        main(["scaling", "--n", "500", "--engines", "nope", "--out", out])
    with pytest.raises(SystemExit):
        main(["scaling", "--n", "500", "--threads-list", "0,2", "--out", out])


FAKE_PERF = """#!/bin/sh
# Stands in for perf: counts once for the support check (`... -- sleep`), and while
# attached (-p) until SIGINT, as `perf stat -x ,` prints them.
trap 'echo "4096,,cache-misses:u,1000,100.00,," >&2; exit 0' INT
case "$*" in *" -- "*) echo "123,,cache-misses,1000,100.00,," >&2; exit 0;; esac
while :; do sleep 0.01; done
"""


def test_perf_is_attached_around_the_call_and_read_back(tmp_path, monkeypatch):
    """The plumbing only (perf itself counts nothing on a VM without a PMU)."""
    perf = tmp_path / "perf"
    perf.write_text(FAKE_PERF)
    perf.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    support = scaling.perf_support()
    assert support["available"] and support["path"] == str(perf)
    calls = []
    # A shell cannot trap a signal that was ignored when it started, as SIGINT is for a
    # background job of a shell without job control (real perf installs its handler all
    # the same): the fake starts with SIGINT at its default, as under a terminal or CI.
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        counted = scaling.perf_count(support["path"], lambda: calls.append(1))
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert counted == 4096
    assert calls == [1]
    perf.write_text('#!/bin/sh\necho "<not supported>,,cache-misses,0,100.00,," >&2\n')
    support = scaling.perf_support()
    assert not support["available"] and "not supported" in support["reason"]
