"""Embedded from Python: insert throughput, then QPS at recall@10 >= 0.95 found by an ef sweep,
for SagittaDB and its embedded peers (qdrant-edge-py, LanceDB, Chroma), one after another in
one process, on the same data, with the same threads.

    python -m bench.pysweep --dataset debian-minilm \\
        --out bench/results/pysweep-debian-minilm.json
    python -m bench.pysweep --n 5000 --queries 200 --workdir /tmp/pysweep     # a small run

Per engine (``--engines``, default ``DEFAULT_ENGINES``), with the adapters of
``bench.ingest`` / ``bench.ingest_peers`` (the same code, settings and index parameters):

1. **Insert**: the ``n`` float32 unit vectors in batches of ``--batch`` (1,000), ids 0..n-1, no
   payload, from one Python thread; ``vectors_per_second_until_searchable`` and
   ``..._until_indexed`` (and bytes written) exactly as ``bench.ingest``'s docstring defines
   them. Engines: ``sagitta-import-1shard`` (``Database.import_collection``, one segment;
   searchable == indexed when it returns); ``sagitta-wal-1shard`` (upserts with ``wait=True``
   into one shard, then ``wait_until_indexed()``); ``sagitta-wal-1shard-optimize`` (the same
   with ``Collection.optimize()`` after the last upsert: it seals the write buffer at once
   instead of after 0.5 s idle; it does not merge, so the collection keeps its sealed
   segments, about one per 20,000 points); ``qdrant-edge`` (``optimize()`` + ``flush()``);
   ``lancedb`` (IVF_HNSW_SQ, one partition); ``chroma`` (hnswlib built during ``add``).
   ``bench.ingest`` also searches the merely searchable data between the two phases; that
   is skipped here (it is not timed there either).
2. **ef sweep** on the indexed data: for each ef of ``--efs`` in increasing order, the
   engine's own ef knob is set (SagittaDB ``search(hnsw_ef=)``, qdrant-edge
   ``SearchParams.hnsw_ef`` with SQ8 rescoring, LanceDB ``query.ef()`` with
   ``nprobes(num_partitions)``, Chroma ``hnsw.ef_search`` through ``collection.modify`` and a
   reopened client: see ``ingest_peers.ChromaClient``), ``--warmup`` (100) unrecorded
   queries run, then ``--queries`` (2,000) single searches (limit 10) in a loop on one
   Python thread, each timed alone with ``perf_counter``: recall@10 against exact ground
   truth, QPS = queries / sum of the per-query times, p50/p95/p99 (``bench.ingest.
   latency_run``). Each ef point is one entry of the engine's ``runs``. Chroma is created
   with ``ef_search`` = the first ef, so its first point searches the index built in this
   process and later points the one reloaded from disk. qdrant-edge scans a segment instead
   of searching its HNSW while the segment's vectors are under ``full_scan_threshold``
   (10,000 KB, Qdrant's default, kept as in ``bench.ingest``): at small ``--n`` (under about
   6,600 x 384-d points per segment; it splits the data into 2 segments) ef has no effect.
   The queries are the dataset's query set as ``bench.ingest`` loads it (debian-minilm: its
   ``queries.npy``, 1,000 held-out passages, none in the base set; synth: generated), with
   exact top-10 ground truth computed on the same float32 data; when ``--queries`` is larger
   than the set it is cycled in order (debian-minilm at 2,000: every query twice), so
   ``dataset.queries`` is the number of distinct queries and ``sweep.queries_per_ef`` the
   number timed.
3. **Best QPS at recall >= 0.95** (``sweep_summary``): per engine, the sweep point with the
   highest QPS among those with recall@10 >= 0.95 (``report.best_run_at``), with its ef,
   recall and p50/p99, or null where no point reaches 0.95 (``max_recall_at_k`` says how
   close it came); and each engine's best QPS and vectors/s until indexed over
   qdrant-edge's. The generic ``summary`` (best QPS at 0.95 and 0.99 per engine) and a
   recall-vs-QPS plot next to the JSON come from ``bench.report``.

Threads: ``--threads`` (2) goes to every thread setting an engine has, as in
``bench.ingest`` (qdrant-edge indexing and search threads, Chroma ``hnsw.num_threads``,
``LANCE_CPU_THREADS``, ``OMP_NUM_THREADS``, ``RAYON_NUM_THREADS``); SagittaDB has no knob and
builds with all cores. Searches are single queries from one thread for every engine. A peer
whose package does not import is skipped (``skipped_engines``) unless ``--strict``.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from bench import ingest, report

DEFAULT_ENGINES = (
    "sagitta-import-1shard",
    "sagitta-wal-1shard",
    "sagitta-wal-1shard-optimize",
    "qdrant-edge",
    "lancedb",
    "chroma",
)
DEFAULT_EFS = (16, 24, 32, 48, 64, 96, 128, 192, 256)
RECALL_FLOOR = 0.95
BASELINE = "qdrant-edge"


# ---------------------------------------------------------------------------------------------
# Queries and the summary


def cycle_queries(
    queries: np.ndarray, gt: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """``count`` queries (and their ground truth): the set in order, cycled as often as
    needed; the whole set once when ``count`` <= 0."""
    if count <= 0:
        return queries, gt
    rows = np.arange(count) % len(queries)
    return np.ascontiguousarray(queries[rows]), np.ascontiguousarray(gt[rows])


def parse_efs(text: str) -> tuple[int, ...]:
    """'16,32,64' -> (16, 32, 64): sorted, without repeats; every ef >= 1."""
    try:
        efs = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma list of integers: {text!r}"
        ) from None
    if not efs or efs[0] < 1:
        raise argparse.ArgumentTypeError(f"need at least one ef >= 1: {text!r}")
    return tuple(efs)


def _ratio(value: float | None, baseline: float | None) -> float | None:
    return round(value / baseline, 4) if value and baseline else None


def engine_sweep_summary(result: dict, floor: float = RECALL_FLOOR) -> dict:
    """Insert rates and the best sweep point at ``recall_at_k >= floor`` of one result."""
    best = report.best_run_at(result["runs"], floor)
    return {
        "vectors_per_second_until_searchable": result[
            "vectors_per_second_until_searchable"
        ],
        "vectors_per_second_until_indexed": result["vectors_per_second_until_indexed"],
        "best_qps": None if best is None else best["qps"],
        "best_qps_ef": None if best is None else best["search_params"]["ef"],
        "best_qps_recall_at_k": None if best is None else best["recall_at_k"],
        "best_qps_latency_ms": None if best is None else best["latency_ms"],
        "max_recall_at_k": max(run["recall_at_k"] for run in result["runs"]),
    }


def sweep_summary(results: list[dict], floor: float = RECALL_FLOOR) -> dict:
    """Per engine: ``engine_sweep_summary``, and its best QPS and vectors/s until indexed
    over qdrant-edge's (null when either side has none)."""
    engines = {
        result["engine"]: engine_sweep_summary(result, floor) for result in results
    }
    baseline = engines.get(BASELINE, {})
    for entry in engines.values():
        entry["best_qps_over_qdrant_edge"] = _ratio(
            entry["best_qps"], baseline.get("best_qps")
        )
        entry["vectors_per_second_until_indexed_over_qdrant_edge"] = _ratio(
            entry["vectors_per_second_until_indexed"],
            baseline.get("vectors_per_second_until_indexed"),
        )
    return {
        "recall_floor": floor,
        "baseline": BASELINE,
        "engines": engines,
        "note": "best_qps: the highest QPS among the ef points with recall@10 >= the floor "
        "(single queries, 1 thread); null: no ef point reached it",
    }


# ---------------------------------------------------------------------------------------------
# Output


def format_sweep(result: dict) -> str:
    title = (
        f"{result['engine']}: {result['vectors_per_second_until_searchable']:,.0f} vectors/s "
        f"until searchable, {result['vectors_per_second_until_indexed']:,.0f} until "
        f"indexed ({result['build_seconds']:.2f} s); {result['wall_seconds']:.1f} s wall "
        "for the engine in all"
    )
    header = f"  {'ef':>5} {'recall@10':>9} {'QPS':>10} {'p50 ms':>8} {'p99 ms':>8}"
    lines = [title, header]
    for run in result["runs"]:
        lines.append(
            f"  {run['search_params']['ef']:>5} {run['recall_at_k']:>9.4f} "
            f"{run['qps']:>10.1f} {run['latency_ms']['p50']:>8.3f} "
            f"{run['latency_ms']['p99']:>8.3f}"
        )
    return "\n".join(lines)


def _cell(value, spec: str, width: int) -> str:
    return f"{value:>{width}{spec}}" if value is not None else f"{'-':>{width}}"


def format_summary(summary: dict) -> str:
    title = (
        f"best QPS at recall@10 >= {summary['recall_floor']} (single queries, 1 thread); "
        f"x = over {summary['baseline']}'s"
    )
    header = (
        f"  {'engine':<28} {'vec/s indexed':>13} {'x':>6} {'best QPS':>10} {'ef':>4} "
        f"{'recall':>7} {'p99 ms':>7} {'x':>6}"
    )
    lines = [title, header]
    for engine, entry in summary["engines"].items():
        latency = entry["best_qps_latency_ms"] or {}
        lines.append(
            f"  {engine:<28} "
            f"{_cell(entry['vectors_per_second_until_indexed'], ',.0f', 13)} "
            f"{_cell(entry['vectors_per_second_until_indexed_over_qdrant_edge'], '.2f', 6)} "
            f"{_cell(entry['best_qps'], ',.0f', 10)} {_cell(entry['best_qps_ef'], 'd', 4)} "
            f"{_cell(entry['best_qps_recall_at_k'], '.4f', 7)} "
            f"{_cell(latency.get('p99'), '.3f', 7)} "
            f"{_cell(entry['best_qps_over_qdrant_edge'], '.2f', 6)}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.pysweep", description=__doc__.split("\n")[0]
    )
    ingest.add_dataset_arguments(parser)
    parser.add_argument(
        "--queries",
        type=int,
        default=2000,
        help="timed single queries per ef (the query set cycled if smaller)",
    )
    parser.add_argument(
        "--engines", help=f"comma list (default: {','.join(DEFAULT_ENGINES)})"
    )
    parser.add_argument(
        "--efs",
        type=parse_efs,
        default=DEFAULT_EFS,
        help=f"ef sweep (default {','.join(map(str, DEFAULT_EFS))})",
    )
    parser.add_argument(
        "--warmup", type=int, default=100, help="unrecorded queries before each ef"
    )
    ingest.add_engine_arguments(parser)
    parser.add_argument("--out", help="result JSON (PNG plot written next to it)")
    parser.add_argument("--no-plot", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    started_at = report.utc_now()
    thread_env = ingest.set_thread_env(args.threads)
    names = [name.strip() for name in (args.engines or "").split(",") if name.strip()]
    runners, skipped = ingest.select_runners(
        list(dict.fromkeys(names or DEFAULT_ENGINES)), args.strict
    )
    dataset = ingest.load_dataset_from_args(args)
    queries, gt = cycle_queries(dataset.queries, dataset.gt, args.queries)
    ctx = ingest.context_from_args(
        args,
        dataset,
        queries=queries,
        gt=gt,
        ef=args.efs[0],
        efs=args.efs,
        warmup=args.warmup,
        search_unindexed=False,
    )
    print(
        f"ef sweep {list(args.efs)}: {len(queries)} timed queries per ef "
        f"({dataset.nq} distinct), {args.warmup} warm-up"
    )
    results = []
    for runner in runners.values():
        start = time.perf_counter()
        result = runner(ctx)
        result["wall_seconds"] = round(time.perf_counter() - start, 3)
        results.append(result)
        print(format_sweep(result), flush=True)
    summary = sweep_summary(results)
    print(format_summary(summary))
    extra = {
        "package_versions": ingest.package_versions(),
        "thread_env": thread_env,
        "sweep": {
            "efs": list(args.efs),
            "queries_per_ef": len(queries),
            "distinct_queries": dataset.nq,
            "warmup_queries_per_ef": args.warmup,
            "method": "per ef: warm-up, then single queries (limit 10) in a loop on one "
            "Python thread, each timed alone; QPS = queries / sum of query times",
        },
        "sweep_summary": summary,
    }
    if skipped:
        extra["skipped_engines"] = skipped
    document = report.build_document(
        suite="python-embedded-ef-sweep",
        command="python -m bench.pysweep " + shlex.join(argv),
        started_at=started_at,
        dataset=ingest.dataset_entry(dataset),
        results=results,
        extra=extra,
    )
    status = ingest.finish(document, args.out)
    if status == 0 and args.out and results and not args.no_plot:
        print(f"wrote {report.plot(document, Path(args.out).with_suffix('.png'))}")
    return status


if __name__ == "__main__":
    sys.exit(main())
