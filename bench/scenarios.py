"""Scenario runner: build every engine, sweep its search parameter, measure recall/QPS/latency.

Engines run one after another in this process on the same data with the same threads; each is
freed (del + gc) before the next so memory does not pile up.

Measurement
- build_seconds: wall time of ``Engine.build`` (index construction over ``threads`` threads).
- qps: nq / wall time of one batched ``search`` call over all queries with ``threads`` threads,
  after a warm-up call on a few queries. When one call takes less than ``min_seconds`` the call
  is repeated (at most ``max_repeats`` times) and the fastest is kept (``qps_method``).
- recall_at_k: mean |result ∩ exact top-k| / k from the first timed call.
- latency_ms: p50/p95/p99 of a single-threaded loop of ``search_one`` over the first
  ``latency_queries`` queries.
"""

from __future__ import annotations

import gc
import os
import sys
import time

import numpy as np

from bench.datasets import Dataset, recall_at_k
from bench.engines import (
    DEFAULT_EF_SWEEP,
    DEFAULT_KFACTOR_SWEEP,
    DEFAULT_NPROBE_SWEEP,
    engine_available,
    make_engine,
)

LATENCY_METHOD = "single-query loop, 1 thread"


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc/self/statm), 0 where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def timed_search(engine, queries, k, params, threads, min_seconds, max_repeats):
    """(ids of the first call, seconds of the fastest call, calls made): batched searches
    of all ``queries`` are repeated while their total is under ``min_seconds``, at most
    ``max_repeats`` calls (``min_seconds=math.inf``: exactly ``max_repeats``)."""
    start = time.perf_counter()
    ids = engine.search(queries, k, params, threads)
    best = time.perf_counter() - start
    total, repeats = best, 1
    while total < min_seconds and repeats < max_repeats:
        start = time.perf_counter()
        engine.search(queries, k, params, threads)
        elapsed = time.perf_counter() - start
        best, total, repeats = min(best, elapsed), total + elapsed, repeats + 1
    return ids, best, repeats


def single_query_latency(engine, queries, k, params, count):
    """p50/p95/p99 in ms of ``search_one`` over the first ``count`` queries, one thread
    (``LATENCY_METHOD``); None when ``count`` is 0."""
    count = min(count, queries.shape[0])
    if count <= 0:
        return None
    engine.search_one(queries[0], k, params)  # warm-up
    samples = np.empty(count, dtype=np.float64)
    for i in range(count):
        start = time.perf_counter()
        engine.search_one(queries[i], k, params)
        samples[i] = time.perf_counter() - start
    p50, p95, p99 = np.percentile(samples * 1e3, [50, 95, 99])
    return {
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "p99": round(float(p99), 4),
    }


def build_engine(
    name: str,
    dataset: Dataset,
    *,
    threads: int,
    m: int,
    ef_construction: int,
    seed: int = 42,
    log=print,
):
    """Make one engine and build it on ``dataset`` with ``threads`` threads; returns the
    engine and its build fields (``build_seconds``, ``memory_bytes``, ``memory_method``,
    ``rss_delta_bytes``) for ``result_entry``."""
    engine = make_engine(
        name, {"m": m, "ef_construction": ef_construction, "seed": seed}
    )
    gc.collect()
    rss_before = rss_bytes()
    start = time.perf_counter()
    engine.build(dataset.base, dataset.metric, threads)
    build_seconds = time.perf_counter() - start
    gc.collect()
    rss_delta = rss_bytes() - rss_before
    reported = engine.memory_bytes()
    memory = reported if reported is not None else max(rss_delta, 0)
    memory_method = (
        engine.memory_method if reported is not None else "rss-delta around build"
    )
    log(f"  {name}: built in {build_seconds:.2f} s, memory {memory / 2**20:.1f} MiB")
    build = {
        "build_seconds": build_seconds,
        "memory_bytes": int(memory),
        "memory_method": memory_method,
        "rss_delta_bytes": int(rss_delta),
    }
    return engine, build


def result_entry(engine, build: dict, runs: list[dict], **fields) -> dict:
    """One engine's result (bench-schema format) from ``build_engine``'s fields, its runs
    and suite-specific ``fields``; ``engine_extra`` last where the engine has any."""
    result = {
        "engine": engine.name,
        "engine_version": engine.version,
        "index_params": engine.index_params,
        "build_seconds": round(build["build_seconds"], 3),
        "upload_seconds": None,
        "memory_bytes": build["memory_bytes"],
        "disk_bytes_written": None,
        "runs": runs,
        "memory_method": build["memory_method"],
        "rss_delta_bytes": build["rss_delta_bytes"],
        **fields,
    }
    if engine.extra:
        result["engine_extra"] = engine.extra
    return result


def release_engine(engine) -> None:
    """Close ``engine`` and collect, so its memory is freed before the next one builds."""
    engine.close()
    del engine
    gc.collect()


def run_engine(
    name: str,
    dataset: Dataset,
    *,
    k: int,
    threads: int,
    m: int,
    ef_construction: int,
    ef_sweep=DEFAULT_EF_SWEEP,
    nprobe_sweep=DEFAULT_NPROBE_SWEEP,
    kfactor_sweep=DEFAULT_KFACTOR_SWEEP,
    latency_queries: int = 200,
    min_seconds: float = 0.5,
    max_repeats: int = 5,
    seed: int = 42,
    log=print,
) -> dict:
    """Build one engine, run its sweep and return its result entry (bench-schema format)."""
    gt = dataset.ensure_gt(k)
    queries = dataset.queries
    engine, build = build_engine(
        name,
        dataset,
        threads=threads,
        m=m,
        ef_construction=ef_construction,
        seed=seed,
        log=log,
    )

    runs = []
    warm = queries[: min(16, queries.shape[0])]
    for params in engine.sweep(ef_sweep, nprobe_sweep, kfactor_sweep):
        engine.search(warm, k, params, threads)
        ids, seconds, repeats = timed_search(
            engine, queries, k, params, threads, min_seconds, max_repeats
        )
        recall = recall_at_k(ids, gt, k)
        qps = queries.shape[0] / seconds if seconds > 0 else float("inf")
        latency = single_query_latency(engine, queries, k, params, latency_queries)
        work = engine.work_per_query(queries[: latency_queries or 200], k, params)
        runs.append(
            {
                "scenario": "read-only",
                "search_params": params,
                "threads": threads,
                "concurrency": threads,
                "recall_at_k": round(recall, 5),
                "qps": round(qps, 2),
                "latency_ms": latency,
                "disk_bytes_read_per_query": None,
                "latency_method": LATENCY_METHOD,
                "timed_calls": repeats,
            }
        )
        if work is not None:
            runs[-1]["work_per_query"] = work
        label = ", ".join(f"{key}={value}" for key, value in params.items()) or "exact"
        p50 = latency["p50"] if latency else float("nan")
        bytes_read = f"  {work['bytes_read'] / 1024:.0f} KiB/query" if work else ""
        log(
            f"    {label:>12}  recall@{k} {recall:.4f}  qps {qps:10.1f}  p50 {p50:.3f} ms"
            f"{bytes_read}"
        )

    result = result_entry(
        engine,
        build,
        runs,
        latency_method=LATENCY_METHOD,
        qps_method=(
            f"nq / wall time of one batched search call ({threads} threads); repeated until "
            f"{min_seconds} s or {max_repeats} calls, fastest kept"
        ),
    )
    release_engine(engine)
    return result


def run_each(
    names: list[str], run_one, *, require: bool = False, log=print
) -> tuple[list[dict], list[dict]]:
    """``run_one(name)`` for every engine whose package imports, in order: (results,
    skipped), as ``usable`` decides."""
    results: list[dict] = []
    skipped: list[dict] = []
    for name in names:
        if not usable(name, require, skipped):
            continue
        log(f"engine {name}")
        results.append(run_one(name))
    return results, skipped


def usable(name: str, require: bool, skipped: list[dict]) -> bool:
    """Whether engine ``name``'s package imports. When it does not: raises ImportError if
    ``require``, else warns and appends ``{"engine", "reason"}`` to ``skipped``."""
    available, reason = engine_available(name)
    if available:
        return True
    if require:
        raise ImportError(f"engine {name}: {reason}")
    print(f"WARNING: skipping engine {name}: {reason}", file=sys.stderr)
    skipped.append({"engine": name, "reason": reason})
    return False


def run_ann(
    dataset: Dataset,
    engines: list[str],
    *,
    k: int = 10,
    threads: int = 2,
    m: int = 16,
    ef_construction: int = 100,
    ef_sweep=DEFAULT_EF_SWEEP,
    nprobe_sweep=DEFAULT_NPROBE_SWEEP,
    kfactor_sweep=DEFAULT_KFACTOR_SWEEP,
    latency_queries: int = 200,
    min_seconds: float = 0.5,
    seed: int = 42,
    log=print,
    require: bool = False,
) -> tuple[list[dict], list[dict]]:
    """Run every engine in turn; returns (results, skipped). Unimportable engines are skipped
    with a warning unless ``require`` is set, in which case the ImportError propagates."""
    dataset.ensure_gt(k)
    return run_each(
        engines,
        lambda name: run_engine(
            name,
            dataset,
            k=k,
            threads=threads,
            m=m,
            ef_construction=ef_construction,
            ef_sweep=ef_sweep,
            nprobe_sweep=nprobe_sweep,
            kfactor_sweep=kfactor_sweep,
            latency_queries=latency_queries,
            min_seconds=min_seconds,
            seed=seed,
            log=log,
        ),
        require=require,
        log=log,
    )
