"""``python -m bench scaling``: QPS against search threads (issue 17), every engine in one
process on the same data, one after another.

Method
1. Thread counts: ``--threads-list`` (1,2,4,8,16) without those above ``os.cpu_count()``
   (listed in ``threads.dropped_above_cores``); 1 is always measured, as the speedup's base.
   Each engine is built once, with the largest thread count measured.
2. Search parameter, picked once per engine: the first setting of its sweep (``--ef-sweep``
   for the HNSW engines, ascending) whose recall@k over all queries, searched with the
   largest thread count, is at least ``--recall-floor`` (0.95). When none reaches it the
   last (largest) is used and ``selection.recall_floor_reached`` is false.
3. At that setting and each thread count N: a warm-up call on 16 queries, then
   ``qps`` = nq / the fastest of ``--repeats`` (3) batched calls over all queries;
   ``speedup`` = QPS(N) / QPS(1) (exactly 1.0 at N = 1), ``parallel_efficiency`` =
   speedup / N, ``cpu_utilization`` = this process's CPU seconds / wall seconds over the
   timed calls (how many cores the N threads kept busy), ``recall_at_k`` from the first
   timed call.
4. ``latency_ms`` is the single-query loop on one thread at the chosen setting
   (``LATENCY_METHOD``), measured once per engine and shown in each of its runs: this suite
   measures throughput.
5. Memory traffic per query (``memory_traffic``), at the chosen setting over all queries:
   ``estimated`` from the engine's own counters (``Engine.work_per_query``: rows scored ×
   bytes per row; each engine's ``work_method`` says which counters and formula, or why it
   has none: then ``bytes_per_query`` is null with the reason), and each run's
   ``estimated_bytes_per_second`` = bytes per query × QPS. ``perf`` holds hardware counts
   where ``perf stat -e cache-misses`` counts for this process: one extra untimed call per
   thread count under ``perf stat -p``, last-level cache misses × 64-byte lines per query
   (``bytes_per_query_measured``; prefetches and write-backs are not in it). Where perf is
   missing or counts nothing (a VM without a PMU) ``perf`` is ``{"available": false,
   "reason": ...}`` and no number is written.
6. Engines that search one query per call (``Engine.one_query_per_call``: qdrant-edge) get
   N Python threads; ``gil_probe`` measures whether their call releases the GIL (the
   fraction of calls during which another Python thread advanced: near 1 released, near 0
   held) and ``notes`` says what that means for their curve.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from bench import engines, report, scenarios
from bench.datasets import Dataset, recall_at_k

DEFAULT_ENGINES = ("sagitta-hnsw-sq8", "hnswlib", "faiss-hnsw", "qdrant-edge")
DEFAULT_THREADS = (1, 2, 4, 8, 16)
DEFAULT_EF_SWEEP = (*engines.DEFAULT_EF_SWEEP, 384, 512)
DEFAULT_RECALL_FLOOR = 0.95
DEFAULT_REPEATS = 3
WARM_QUERIES = 16
CACHE_LINE_BYTES = 64
PERF_EVENT = "cache-misses"
PERF_ATTACH_SECONDS = 0.2  # perf stat -p needs a moment before it counts
GIL_PROBE_SECONDS = 0.5
# gil_probe's switch interval: at least this, and 10 calls long, so that a call that holds
# the GIL is rarely the one at which CPython hands the GIL to the counting thread.
GIL_PROBE_MIN_SWITCH_SECONDS = 0.02
GIL_RELEASED_AT = 0.5  # gil_probe fraction: at least this = released, below = held
# A thread waiting for the GIL can take some 300 µs to wake on a VM (measured on 2 vCPUs:
# sagittadb's exact search, which releases the GIL, showed 0.12 for 270 µs calls and 1.0
# for 470 µs ones; qdrant-edge's search 0.03-0.13 for 0.6-4 ms calls), so shorter calls
# cannot be told apart.
GIL_PROBE_MIN_CALL_SECONDS = 0.0005
GIL_PROBE_EF_STEPS = 5

# ---------------------------------------------------------------------------------------------
# Threads


def thread_counts(requested: list[int], cores: int) -> dict:
    """The thread counts to measure: ``requested`` up to ``cores``, ascending, with 1."""
    if any(count < 1 for count in requested):
        raise ValueError(f"thread counts must be at least 1: {requested}")
    measured = sorted({1, *(count for count in requested if count <= cores)})
    return {
        "requested": list(requested),
        "measured": measured,
        "dropped_above_cores": sorted({c for c in requested if c > cores}),
        "cores": cores,
        "cores_source": "os.cpu_count()",
        "build_threads": measured[-1],
    }


def median_call_seconds(call, calls: int = 5) -> float:
    """The median duration of ``calls`` calls of ``call()``, after one more to warm up."""
    call()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return sorted(samples)[calls // 2]


def gil_probe(call, seconds: float = GIL_PROBE_SECONDS) -> dict:
    """Whether ``call()`` lets other Python threads run: the fraction of calls during which
    a counting Python thread advanced. A call that releases the GIL lets it run throughout
    (fraction near 1); one that holds it lets it run only when CPython forces a switch,
    once per switch interval, which is made ten calls long (fraction near 0)."""
    call_seconds = median_call_seconds(call)
    interval = max(GIL_PROBE_MIN_SWITCH_SECONDS, 10 * call_seconds)
    count = 0
    stop = False

    def spin() -> None:
        nonlocal count
        while not stop:
            count += 1

    previous = sys.getswitchinterval()
    sys.setswitchinterval(interval)
    spinner = threading.Thread(target=spin, daemon=True)
    calls = advanced = 0
    try:
        spinner.start()
        time.sleep(0.01)
        start = time.perf_counter()
        while time.perf_counter() - start < seconds or calls < 5:
            before = count
            call()
            advanced += count != before
            calls += 1
    finally:
        stop = True
        spinner.join()
        sys.setswitchinterval(previous)
    return {
        "fraction": round(advanced / calls, 3),
        "calls": calls,
        "call_seconds": call_seconds,
        "switch_interval_seconds": interval,
    }


def gil_verdict(probe: dict, cores: int) -> str:
    """``released`` or ``held`` from ``gil_probe``'s answer, or why it cannot say."""
    if cores < 2:
        return "unknown: needs two cores"
    if probe["call_seconds"] < GIL_PROBE_MIN_CALL_SECONDS:
        return (
            f"unknown: calls of {probe['call_seconds'] * 1e6:.0f} µs are shorter than a "
            f"waiting thread's wake-up ({GIL_PROBE_MIN_CALL_SECONDS * 1e6:.0f} µs needed)"
        )
    return "released" if probe["fraction"] >= GIL_RELEASED_AT else "held"


def probe_search_gil(engine, query, k: int, params: dict) -> dict:
    """``gil_probe`` of the engine's ``search_one`` at ``params`` with its verdict; where
    those calls are too short to tell (under twice ``GIL_PROBE_MIN_CALL_SECONDS``), at 4×
    the ef instead, at most ``GIL_PROBE_EF_STEPS`` times: whether the call releases the GIL
    is the binding's doing, the same at any ef."""
    probe_params = dict(params)
    for _ in range(GIL_PROBE_EF_STEPS if "ef" in params else 0):
        seconds = median_call_seconds(
            lambda p=probe_params: engine.search_one(query, k, p)
        )
        if seconds >= 2 * GIL_PROBE_MIN_CALL_SECONDS:  # a margin for the probe's own
            break
        probe_params = {**probe_params, "ef": probe_params["ef"] * 4}
    probe = gil_probe(lambda: engine.search_one(query, k, probe_params))
    return {
        **probe,
        "search_params": probe_params,
        "verdict": gil_verdict(probe, os.cpu_count() or 1),
        "method": "fraction of search_one calls during which a counting Python thread "
        f"advanced, the switch interval set to max({GIL_PROBE_MIN_SWITCH_SECONDS} s, 10 "
        f"calls); >= {GIL_RELEASED_AT}: released; the ef is raised 4× at a time while "
        f"calls take under {2 * GIL_PROBE_MIN_CALL_SECONDS} s; calls under "
        f"{GIL_PROBE_MIN_CALL_SECONDS} s get no verdict",
    }


def _python_threads_note(verdict: str, fraction: float) -> str:
    if verdict == "released":
        meaning = "the call releases the GIL, so the threads search in parallel"
    elif verdict == "held":
        meaning = (
            "the call holds the GIL, so the threads take turns instead of adding "
            "cores: QPS(N) is not N cores' work (see cpu_utilization)"
        )
    else:
        meaning = (
            f"whether the call releases the GIL is {verdict}; cpu_utilization shows "
            "how many cores the threads kept busy"
        )
    return (
        "threads > 1 are Python threads, each calling search one query at a time; "
        f"gil_probe: another Python thread advanced during {fraction:.0%} of the calls, "
        f"{meaning}"
    )


# ---------------------------------------------------------------------------------------------
# perf


def parse_perf_csv(text: str) -> dict[str, int]:
    """Counts by event from ``perf stat -x ,`` output (value,unit,event,...); events
    perf could not count (``<not supported>``, ``<not counted>``) are left out."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) < 3 or not fields[0].strip().isdigit():
            continue
        counts[fields[2].split(":")[0].strip()] = int(fields[0])
    return counts


def _perf_command(path: str) -> list[str]:
    return [path, "stat", "-x", ",", "-e", PERF_EVENT, "-p", str(os.getpid())]


def perf_support() -> dict:
    """``{"available": True, ...}`` when ``perf stat -e cache-misses`` counts for this
    process, else ``{"available": False, "reason": ...}``."""
    path = shutil.which("perf")
    if path is None:
        return {"available": False, "reason": "perf not found on PATH"}
    try:
        completed = subprocess.run(
            [*_perf_command(path), "--", "sleep", "0.1"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"available": False, "reason": f"perf stat failed: {error}"}
    if PERF_EVENT in parse_perf_csv(completed.stderr):
        return {
            "available": True,
            "path": path,
            "event": PERF_EVENT,
            "method": f"one untimed batched call per thread count under `perf stat -e "
            f"{PERF_EVENT} -p <this process>`; bytes_per_query_measured = misses × "
            f"{CACHE_LINE_BYTES} / nq (prefetches and write-backs not counted; the "
            f"{PERF_ATTACH_SECONDS} s perf waits to attach is counted, idle)",
        }
    output = " ".join(completed.stderr.split())[-300:]
    return {
        "available": False,
        "reason": f"`perf stat -e {PERF_EVENT} -p <this process>` counted nothing "
        f"(exit {completed.returncode}): {output}",
    }


def perf_count(path: str, call) -> int | None:
    """``PERF_EVENT`` count of this process while ``call()`` runs (None when perf gives
    none)."""
    process = subprocess.Popen(
        _perf_command(path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(PERF_ATTACH_SECONDS)
        call()
    finally:
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    return parse_perf_csv(stderr).get(PERF_EVENT)


# ---------------------------------------------------------------------------------------------
# One engine


def pick_search_params(
    engine, dataset: Dataset, *, k: int, ef_sweep, threads: int, floor: float, log
) -> dict:
    """The first setting of the engine's sweep whose recall@k reaches ``floor`` with
    ``threads`` threads, else its last; with every recall measured on the way."""
    gt = dataset.ensure_gt(k)
    tried = []
    reached = False
    for params in engine.sweep(ef_sweep=sorted(set(ef_sweep))):
        recall = recall_at_k(engine.search(dataset.queries, k, params, threads), gt, k)
        tried.append({"search_params": params, "recall_at_k": round(recall, 5)})
        reached = recall >= floor
        if reached:
            break
    chosen = tried[-1]
    log(
        f"  search params {chosen['search_params']}: recall@{k} "
        f"{chosen['recall_at_k']:.4f} ({'reaches' if reached else 'below'} {floor})"
    )
    return {
        "search_params": chosen["search_params"],
        "recall_at_k": chosen["recall_at_k"],
        "recall_floor": floor,
        "recall_floor_reached": reached,
        "threads": threads,
        "tried": tried,
        "method": "first setting of the sweep (ascending) whose recall@k over all "
        "queries reaches the floor at the largest thread count; else the last",
    }


def estimated_traffic(engine, dataset: Dataset, k: int, params: dict) -> dict:
    """Bytes per query from the engine's counters over all queries, or null and why."""
    counters = engine.work_per_query(dataset.queries, k, params)
    if counters is None:
        return {
            "bytes_per_query": None,
            "graph_bytes_per_query": None,
            "counters": None,
            "reason": engine.work_method,
        }
    return {
        "bytes_per_query": counters["bytes_read"],
        "graph_bytes_per_query": counters.get("graph_bytes_read"),
        "counters": counters,
        "method": engine.work_method,
        "queries": dataset.nq,
    }


@dataclass(frozen=True)
class Settings:
    """What every engine of one run shares (the command line's options)."""

    k: int = 10
    threads_requested: tuple[int, ...] = DEFAULT_THREADS
    m: int = 16
    ef_construction: int = 100
    ef_sweep: tuple[int, ...] = DEFAULT_EF_SWEEP
    recall_floor: float = DEFAULT_RECALL_FLOOR
    repeats: int = DEFAULT_REPEATS
    latency_queries: int = 200
    seed: int = 42


def _timed(engine, queries, k, params, threads: int, repeats: int) -> dict:
    """One thread count: warm-up, then the fastest of ``repeats`` calls over all queries."""
    engine.search(queries[: min(WARM_QUERIES, queries.shape[0])], k, params, threads)
    cpu_before, wall_before = time.process_time(), time.perf_counter()
    ids, seconds, calls = scenarios.timed_search(
        engine, queries, k, params, threads, math.inf, repeats
    )
    wall = time.perf_counter() - wall_before
    cpu = time.process_time() - cpu_before  # every thread of this process
    return {
        "ids": ids,
        "seconds": seconds,
        "calls": calls,
        "cpu_utilization": cpu / wall if wall > 0 else float("nan"),
    }


def _perf_run(perf: dict, engine, queries, k, params, threads: int) -> dict:
    misses = perf_count(
        perf["path"], lambda: engine.search(queries, k, params, threads)
    )
    if misses is None:
        return {"cache_misses_per_query": None, "bytes_per_query_measured": None}
    return {
        "cache_misses_per_query": round(misses / queries.shape[0], 1),
        "bytes_per_query_measured": round(
            misses * CACHE_LINE_BYTES / queries.shape[0], 1
        ),
    }


def measure_threads(
    engine,
    dataset: Dataset,
    settings: Settings,
    *,
    params: dict,
    threads: list[int],
    latency: dict | None,
    perf: dict,
    bytes_per_query: float | None,
    log,
) -> list[dict]:
    """One run per thread count (ascending from 1), all at ``params``."""
    assert threads[0] == 1, "QPS(1) is every speedup's base"
    k, queries = settings.k, dataset.queries
    gt = dataset.ensure_gt(k)
    runs: list[dict] = []
    qps_one = 0.0
    for count in threads:
        timed = _timed(engine, queries, k, params, count, settings.repeats)
        recall = recall_at_k(timed["ids"], gt, k)
        qps = queries.shape[0] / timed["seconds"]
        qps_one = qps if count == 1 else qps_one
        speedup = qps / qps_one
        run = {
            "scenario": "read-only",
            "search_params": params,
            "threads": count,
            "concurrency": count,
            "recall_at_k": round(recall, 5),
            "qps": round(qps, 2),
            "latency_ms": latency,
            "disk_bytes_read_per_query": None,
            "speedup": round(speedup, 4),
            "parallel_efficiency": round(speedup / count, 4),
            "cpu_utilization": round(timed["cpu_utilization"], 3),
            "timed_calls": timed["calls"],
            "estimated_bytes_per_second": None
            if bytes_per_query is None
            else round(bytes_per_query * qps),
        }
        if perf["available"]:
            run["perf"] = _perf_run(perf, engine, queries, k, params, count)
        runs.append(run)
        log(
            f"    threads {count:>3}  qps {qps:10.1f}  speedup {speedup:5.2f}  "
            f"cpu {timed['cpu_utilization']:5.2f}  recall@{k} {recall:.4f}"
        )
    return runs


def run_engine(
    name: str,
    dataset: Dataset,
    settings: Settings,
    *,
    threads: list[int],
    perf: dict,
    log=print,
) -> dict:
    """Build one engine with ``max(threads)`` threads, pick its setting, measure each
    thread count; its result entry (bench-schema format)."""
    k = settings.k
    engine, build = scenarios.build_engine(
        name,
        dataset,
        threads=threads[-1],
        m=settings.m,
        ef_construction=settings.ef_construction,
        seed=settings.seed,
        log=log,
    )
    selection = pick_search_params(
        engine,
        dataset,
        k=k,
        ef_sweep=settings.ef_sweep,
        threads=threads[-1],
        floor=settings.recall_floor,
        log=log,
    )
    params = selection["search_params"]
    latency = scenarios.single_query_latency(
        engine, dataset.queries, k, params, settings.latency_queries
    )
    traffic = {
        "search_params": params,
        "estimated": estimated_traffic(engine, dataset, k, params),
        "perf": dict(perf),
    }
    fields: dict = {}
    if engine.one_query_per_call:
        probe = probe_search_gil(engine, dataset.queries[0], k, params)
        fields["gil_probe"] = probe
        fields["notes"] = [_python_threads_note(probe["verdict"], probe["fraction"])]
    runs = measure_threads(
        engine,
        dataset,
        settings,
        params=params,
        threads=threads,
        latency=latency,
        perf=perf,
        bytes_per_query=traffic["estimated"]["bytes_per_query"],
        log=log,
    )
    result = scenarios.result_entry(
        engine,
        build,
        runs,
        selection=selection,
        memory_traffic=traffic,
        **fields,
        build_threads=threads[-1],
        latency_method=f"{scenarios.LATENCY_METHOD}, at the chosen setting, measured "
        "once per engine (the same in every run)",
        qps_method=f"nq / the fastest of {settings.repeats} batched calls over all "
        f"queries, after a warm-up call on {WARM_QUERIES} queries; speedup = QPS(N) / "
        "QPS(1)",
        threads_method="N Python threads, each calling search one query at a time"
        if engine.one_query_per_call
        else "the engine's own N threads inside one batched call",
    )
    scenarios.release_engine(engine)
    return result


# ---------------------------------------------------------------------------------------------
# All engines, summary, table, plot


def run_scaling(
    dataset: Dataset,
    names: list[str],
    settings: Settings,
    *,
    require: bool = False,
    log=print,
) -> tuple[list[dict], dict]:
    """Every engine in turn; (results, extra document fields: threads, perf, skipped
    engines, scaling_summary)."""
    threads = thread_counts(list(settings.threads_requested), os.cpu_count() or 1)
    if threads["dropped_above_cores"]:
        log(
            f"threads {threads['dropped_above_cores']} dropped: "
            f"{threads['cores']} cores; measuring {threads['measured']}"
        )
    perf = perf_support()
    log(f"perf: {'available' if perf['available'] else perf['reason']}")
    dataset.ensure_gt(settings.k)
    results, skipped = scenarios.run_each(
        names,
        lambda name: run_engine(
            name, dataset, settings, threads=threads["measured"], perf=perf, log=log
        ),
        require=require,
        log=log,
    )
    extra = {
        "threads": threads,
        "perf": perf,
        "scaling_summary": summarize(results),
    }
    if skipped:
        extra["skipped_engines"] = skipped
    return results, extra


def summarize(results: list[dict]) -> dict:
    """Per engine: its setting, QPS, speedup and efficiency by thread count; and our QPS
    over each peer's at every thread count."""
    by_engine = {}
    for result in results:
        runs = result["runs"]
        selection = result["selection"]
        by_engine[result["engine"]] = {
            "search_params": selection["search_params"],
            "recall_at_k": selection["recall_at_k"],
            "recall_floor_reached": selection["recall_floor_reached"],
            "qps": {str(run["threads"]): run["qps"] for run in runs},
            "speedup": {str(run["threads"]): run["speedup"] for run in runs},
            "parallel_efficiency": {
                str(run["threads"]): run["parallel_efficiency"] for run in runs
            },
            "bytes_per_query_estimated": result["memory_traffic"]["estimated"][
                "bytes_per_query"
            ],
        }
    ratios: dict = {}
    for ours in report.OURS:
        if ours not in by_engine:
            continue
        for peer, entry in by_engine.items():
            if peer.startswith("sagitta-"):
                continue
            ratios.setdefault(ours, {})[peer] = {
                threads: round(qps / entry["qps"][threads], 3)
                for threads, qps in by_engine[ours]["qps"].items()
                if entry["qps"].get(threads)
            }
    return {
        "engines": by_engine,
        "qps_ratio_to_peer": ratios,
        "note": "each engine at its own setting (the first reaching the recall floor); "
        "ratio = our QPS / the peer's at the same thread count",
    }


def _traffic_label(result: dict) -> str:
    estimated = result["memory_traffic"]["estimated"]["bytes_per_query"]
    return "n/a" if estimated is None else f"{estimated / 1024:.1f}"


def _curve_notes(result: dict) -> str:
    """Memory traffic per query (and the GIL where Python threads search), for a legend."""
    estimated = result["memory_traffic"]["estimated"]["bytes_per_query"]
    notes = [
        "no traffic counters"
        if estimated is None
        else f"{estimated / 1024:.1f} KiB/query est."
    ]
    measured = result["runs"][0].get("perf", {}).get("bytes_per_query_measured")
    if measured is not None:
        notes.append(f"{measured / 1024:.1f} KiB/query perf")
    if "gil_probe" in result:
        notes.append(
            f"Python threads, GIL {result['gil_probe']['verdict'].split(':')[0]}"
        )
    return ", ".join(notes)


def format_table(document: dict) -> str:
    k = document["dataset"]["k"]
    lines = [
        f"{'engine':<18} {'params':<10} {'recall@' + str(k):>9} {'threads':>7} "
        f"{'qps':>11} {'speedup':>8} {'effic.':>7} {'cpu':>5} {'KiB/q est':>10} "
        f"{'GB/s est':>9}"
    ]
    for result in document["results"]:
        traffic = _traffic_label(result)
        for run in result["runs"]:
            params = ",".join(f"{key}={v}" for key, v in run["search_params"].items())
            rate = run["estimated_bytes_per_second"]
            lines.append(
                f"{result['engine']:<18} {params or 'exact':<10} "
                f"{run['recall_at_k']:>9.4f} {run['threads']:>7} {run['qps']:>11.1f} "
                f"{run['speedup']:>8.2f} {run['parallel_efficiency']:>7.2f} "
                f"{run['cpu_utilization']:>5.2f} {traffic:>10} "
                f"{'n/a' if rate is None else f'{rate / 1e9:.2f}':>9}"
            )
    threads = document["threads"]
    if threads["dropped_above_cores"]:
        lines.append(
            f"threads {threads['dropped_above_cores']} not measured: "
            f"{threads['cores']} cores"
        )
    perf = document["perf"]
    if not perf["available"]:
        lines.append(f"perf: not available ({perf['reason']})")
    for result in document["results"]:
        for note in result.get("notes", []):
            lines.append(f"{result['engine']}: {note}")
    return "\n".join(lines)


def plot(document: dict, path: str | Path) -> Path:
    """QPS against threads (log-log), one line per engine labelled with its setting and
    estimated bytes per query; beside it the speedup QPS(N)/QPS(1) with the ideal line."""
    plt = report.pyplot()
    fig, (qps_axes, speedup_axes) = plt.subplots(1, 2, figsize=(12, 5), dpi=110)
    markers = "osD^v<>ph*X"
    threads = document["threads"]["measured"]
    for i, result in enumerate(document["results"]):
        runs = sorted(result["runs"], key=lambda run: run["threads"])
        counts = [run["threads"] for run in runs]
        params = ",".join(f"{key}={v}" for key, v in runs[0]["search_params"].items())
        style = {
            "marker": markers[i % len(markers)],
            "linewidth": 2.2 if result["engine"].startswith("sagitta-") else 1.3,
            "markersize": 5,
        }
        qps_axes.plot(
            counts,
            [run["qps"] for run in runs],
            label=f"{result['engine']} ({params or 'exact'}; {_curve_notes(result)})",
            **style,
        )
        speedup_axes.plot(
            counts, [run["speedup"] for run in runs], label=result["engine"], **style
        )
    speedup_axes.plot(threads, threads, "k--", linewidth=1, label="ideal (N)")
    for axes in (qps_axes, speedup_axes):
        axes.set_xscale("log", base=2)
        axes.set_xticks(threads, [str(count) for count in threads])
        axes.set_xlabel("search threads")
        axes.grid(True, which="both", alpha=0.3)
    qps_axes.set_yscale("log")
    qps_axes.set_ylabel("queries per second (log scale)")
    speedup_axes.set_ylabel("speedup QPS(N) / QPS(1)")
    qps_axes.legend(fontsize=7, loc="best")
    speedup_axes.legend(fontsize=7, loc="upper left")
    fig.suptitle(report.plot_title(document), fontsize=10)
    return report.save_figure(fig, path)
