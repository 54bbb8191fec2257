"""Mixed read/write: single-query latency while a second client inserts, against the same
queries with no inserts, on one SagittaDB collection.

    python -m bench.mixed --dataset debian-minilm --out bench/results/mixed-debian-minilm.json
    python -m bench.mixed --n 20000 --duration 5           # a small run
    python -m bench.mixed --n 200000 --segment-kind disk --ef 64   # the disk index

Procedure (one process; the ``sagittadb`` extension releases the GIL inside ``upsert`` and
``search``, so the two Python threads overlap in the engine; the achieved insert rates and
QPS in the result show how far):

1. Every measurement starts from a fresh collection: the first ``--preload-fraction`` (80%)
   of the rows bulk imported (``Database.import_collection``: one HNSW segment per shard,
   nothing buffered, status green). The background optimizer runs as in production: it
   seals what the inserter writes (at 20,000 points or 0.5 s idle) and merges segments
   while the queries run.
2. Maximum ingest rate (its own fresh collection): one insert thread inserts new points in
   batches of ``--insert-batch`` (100) with ``wait=True``, as fast as it can, for
   ``--max-rate-seconds``, with no queries; then the run waits until the collection is
   indexed (green). The maximum is the sustained rate, vectors / (insert time + time until
   indexed): the rate the engine can keep up with indefinitely. The burst rate (inserts
   alone, which outrun the indexer) is reported next to it.
3. For each ``--loads`` entry (default 0.2 and 1.0, fractions of that maximum), on a fresh
   collection: ``read-only``: the query loop (one thread, one query per call, limit 10,
   queries cycled) runs for ``--duration`` seconds; then ``mixed-insert``: the same loop for
   the same time while the insert thread inserts. Below 1.0 the inserter follows a fixed
   schedule (the batch that starts with the v-th vector is due at start + v / rate; it sleeps
   until then, never "sleep after each batch", and a late batch goes at once); at 1.0 it is
   unpaced (the maximum).

What is inserted: new points only (never an overwrite). The held-out rows go first with
their row numbers as ids; when they run out they start over under fresh ids (n, n+1, ...),
so the vectors repeat but every write adds a point. ``collection_state_after`` (the
collection's status) shows how much the optimizer had indexed when a run ended.

Reported per run: p50/p95/p99 ms, QPS of the loop, recall@10 against the exact top 10 of
the preloaded rows (exact for ``read-only``; in ``mixed-insert`` inserted points can take
those places, so it undercounts there), and for mixed runs the target and achieved insert
rates; per load the ratios mixed / read-only of p50, p95, p99 (issue target: p99 ratio <= 1.5
at the 0.2 load).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import datasets, report
from bench.ingest import (
    add_dataset_arguments,
    dataset_entry,
    finish,
    load_dataset,
    package_versions,
)
from bench.ingest_common import K, percentiles_ms


@dataclass
class Pacer:
    """A fixed schedule: the batch that starts with the ``v``-th vector is due at
    ``start + v / rate``. ``rate`` is in vectors per second; ``None`` (or <= 0) means
    unpaced (every batch due at once)."""

    rate: float | None
    start: float

    @property
    def paced(self) -> bool:
        return self.rate is not None and self.rate > 0

    def due(self, vectors_sent: int) -> float:
        return self.start + vectors_sent / self.rate if self.paced else self.start

    def delay(self, vectors_sent: int, now: float) -> float:
        """Seconds to wait before the next batch (0 when it is due or late)."""
        return max(0.0, self.due(vectors_sent) - now)


class InsertStream:
    """Batch ``i`` of an endless stream of new points: the held-out rows in batches of
    ``batch``, over and over, under ids that keep counting from ``first_id``."""

    def __init__(self, rows: np.ndarray, first_id: int, batch: int) -> None:
        self.batches = [rows[i : i + batch] for i in range(0, len(rows), batch)]
        self.offsets = np.cumsum([0] + [len(b) for b in self.batches]).tolist()
        self.first_id = first_id

    def __call__(self, i: int) -> tuple[list[int], np.ndarray]:
        cycle, j = divmod(i, len(self.batches))
        rows = self.batches[j]
        first = self.first_id + cycle * self.offsets[-1] + self.offsets[j]
        return list(range(first, first + len(rows))), rows


def insert_loop(
    upsert: Callable[[list[int], np.ndarray], None],
    batch_source: Callable[[int], tuple[list[int], np.ndarray]],
    rate: float | None,
    stop: threading.Event,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """Upserts ``batch_source(0)``, ``batch_source(1)``, ... until ``stop`` is set, paced to
    ``rate`` vectors/s (unpaced when None). Returns vectors written, elapsed seconds, the
    achieved rate, the worst lag behind the schedule and the fraction of time in upsert."""
    pacer = Pacer(rate, clock())
    sent = vectors = 0
    max_lag = 0.0
    call_seconds = 0.0
    while not stop.is_set():
        wait = pacer.delay(vectors, clock())
        if wait > 0 and stop.wait(wait):
            break
        now = clock()
        if pacer.paced:
            max_lag = max(max_lag, now - pacer.due(vectors))
        ids, rows = batch_source(sent)
        upsert(ids, rows)
        call_seconds += clock() - now
        sent += 1
        vectors += len(ids)
    elapsed = clock() - pacer.start
    return {
        "batches": sent,
        "vectors": vectors,
        "seconds": round(elapsed, 4),
        "achieved_vectors_per_second": round(vectors / elapsed, 1)
        if elapsed > 0
        else 0.0,
        "target_vectors_per_second": round(rate, 1) if pacer.paced else None,
        "max_lag_seconds": round(max_lag, 4) if pacer.paced else None,
        "busy_fraction": round(call_seconds / elapsed, 4) if elapsed > 0 else 0.0,
    }


def query_loop(
    search: Callable[[np.ndarray], list],
    queries: np.ndarray,
    gt: np.ndarray,
    duration: float,
    max_queries: int | None = None,
) -> dict:
    """One-query searches cycling over ``queries`` for ``duration`` seconds (or
    ``max_queries``); latencies of every call, recall@10 over every call."""
    latencies = []
    found = 0
    nq = len(queries)
    start = time.perf_counter()
    deadline = start + duration
    i = 0
    while True:
        now = time.perf_counter()
        if now >= deadline or (max_queries is not None and i >= max_queries):
            break
        query = queries[i % nq]
        begin = time.perf_counter()
        ids = search(query)
        latencies.append(time.perf_counter() - begin)
        found += len(set(ids[:K]) & set(gt[i % nq, :K].tolist()))
        i += 1
    wall = time.perf_counter() - start
    return {
        "latencies": latencies,
        "queries": i,
        "wall_seconds": wall,
        "recall_at_k": found / (K * i) if i else 0.0,
    }


def scenario_run(
    loop: dict, *, scenario: str, insert: dict | None, load: float | None, state: dict
) -> dict:
    run = {
        "scenario": scenario,
        "search_params": {
            "limit": K,
            "ef": None,
            "ef_knob": "none (Collection.search)",
        },
        "threads": 1,
        "concurrency": 1,
        "recall_at_k": round(loop["recall_at_k"], 5),
        "qps": round(loop["queries"] / loop["wall_seconds"], 2),
        "latency_ms": percentiles_ms(loop["latencies"]),
        "disk_bytes_read_per_query": None,
        "queries_run": loop["queries"],
        "duration_seconds": round(loop["wall_seconds"], 3),
        "latency_method": "single-query loop from Python, 1 thread, queries cycled",
        "collection_state_before": state,
        "insert_threads": 0 if insert is None else 1,
    }
    if insert is not None:
        run["insert_load"] = {"fraction_of_max": load, **insert}
    return run


def ratios(mixed: dict, baseline: dict) -> dict:
    return {
        key: round(mixed["latency_ms"][key] / baseline["latency_ms"][key], 4)
        for key in ("p50", "p95", "p99")
    }


def run_mixed(
    dataset,
    *,
    workdir: Path,
    shards: int = 1,
    preload_fraction: float = 0.8,
    insert_batch: int = 100,
    loads: tuple[float, ...] = (0.2, 1.0),
    duration: float = 10.0,
    max_rate_seconds: float = 5.0,
    max_queries: int | None = None,
    segment_kind: str = "hnsw",
    ef: int | None = None,
    log: Callable[[str], None] = print,
) -> dict:
    import sagittadb

    base, queries = dataset.base, dataset.queries
    n = base.shape[0]
    preload = int(n * preload_fraction)
    if not 0 < preload < n:
        raise ValueError("--preload-fraction must leave rows on both sides")
    gt = datasets.ground_truth(base[:preload], queries, K, dataset.metric)
    stream = InsertStream(base[preload:], preload, insert_batch)
    workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="mixed-", dir=workdir))
    preloads = []

    def fresh_collection(tag: str):
        start = time.perf_counter()
        collection = sagittadb.open(root / tag).import_collection(
            "mixed",
            ids=range(preload),
            vectors=base[:preload],
            distance="Cosine",
            shard_number=shards,
            segment_kind=segment_kind,
            progress=False,
        )
        build = time.perf_counter() - start
        preloads.append({"import_seconds": build})
        log(f"{tag}: imported {preload} of {n} in {build:.2f} s")
        return collection

    def with_inserter(collection, rate, body):
        def upsert(ids, rows):
            collection.upsert(ids=ids, vectors=rows, wait=True)

        stop = threading.Event()
        out = {}
        thread = threading.Thread(
            target=lambda: out.update(insert_loop(upsert, stream, rate, stop)),
            name="inserter",
        )
        thread.start()
        try:
            result = body(stop)
        finally:
            stop.set()
            thread.join()
        return result, out

    try:
        collection = fresh_collection("max-rate")
        _, maximum = with_inserter(
            collection, None, lambda stop: stop.wait(max_rate_seconds)
        )
        # Sustained rate: what the engine can index, not only log. The inserts alone
        # (the burst rate) outrun the indexer; a steady load above the sustained rate
        # would grow the write buffer without bound.
        start = time.perf_counter()
        collection.wait_until_indexed(timeout=3600)
        drain = time.perf_counter() - start
        maximum["burst_vectors_per_second"] = maximum["achieved_vectors_per_second"]
        maximum["seconds_until_indexed_after_inserts"] = round(drain, 3)
        maximum["sustained_vectors_per_second"] = round(
            maximum["vectors"] / (maximum["seconds"] + drain), 1
        )
        maximum["collection_state_after"] = dict(collection.status())
        del collection
        shutil.rmtree(root / "max-rate", ignore_errors=True)
        max_rate = maximum["sustained_vectors_per_second"]
        log(
            f"maximum insert rate: burst {maximum['burst_vectors_per_second']:,.0f}, "
            f"sustained (until indexed) {max_rate:,.0f} vectors/s (batch {insert_batch})"
        )

        runs, load_ratios = [], {}

        def measure(load: float, tag: str) -> tuple[dict, dict, dict]:
            collection = fresh_collection(tag)

            def search(query):
                hits = collection.search(query, limit=K, with_payload=False, hnsw_ef=ef)
                return [hit["id"] for hit in hits]

            for query in queries[:10]:  # warm-up
                search(query)
            state = dict(collection.status())
            baseline = scenario_run(
                query_loop(search, queries, gt, duration, max_queries),
                scenario="read-only",
                insert=None,
                load=None,
                state=state,
            )
            baseline["collection_state_after"] = dict(collection.status())
            rate = None if load >= 1.0 else load * max_rate
            loop, insert = with_inserter(
                collection,
                rate,
                lambda stop: query_loop(search, queries, gt, duration, max_queries),
            )
            mixed = scenario_run(
                loop, scenario="mixed-insert", insert=insert, load=load, state=state
            )
            mixed["collection_state_after"] = dict(collection.status())
            mixed["points_after"] = collection.count()
            return baseline, mixed, insert

        for load in loads:
            key = "max" if load >= 1.0 else f"{load:g}"
            baseline, mixed, insert = measure(load, f"load-{key}")
            shutil.rmtree(root / f"load-{key}", ignore_errors=True)
            runs += [baseline, mixed]
            load_ratios[key] = {
                "mixed_over_read_only": ratios(mixed, baseline),
                "target_vectors_per_second": insert["target_vectors_per_second"],
                "achieved_vectors_per_second": insert["achieved_vectors_per_second"],
                "qps_read_only": baseline["qps"],
                "qps_mixed": mixed["qps"],
            }
            log(
                f"load {key}: read-only p50/p99 {baseline['latency_ms']['p50']:.3f}/"
                f"{baseline['latency_ms']['p99']:.3f} ms, mixed "
                f"{mixed['latency_ms']['p50']:.3f}/{mixed['latency_ms']['p99']:.3f} ms "
                f"(x{load_ratios[key]['mixed_over_read_only']['p99']:.2f} p99) with "
                f"{insert['achieved_vectors_per_second']:,.0f} vectors/s inserted"
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return {
        "engine": f"sagitta-wal-{shards}shard",
        "engine_version": sagittadb.__version__,
        "index_params": {
            "shards": shards,
            "segments": (
                "hnsw m=16 ef_construct=100 sq8 (fixed in the engine)"
                if segment_kind == "hnsw"
                else f"disk (RaBitQ codes in RAM, records on disk), hnsw_ef {ef}"
            ),
            "preload_rows": preload,
            "held_out_rows": n - preload,
            "insert_batch": insert_batch,
            "wait": True,
        },
        "build_seconds": round(preloads[0]["import_seconds"], 3),
        "upload_seconds": round(preloads[0]["import_seconds"], 3),
        "memory_bytes": None,
        "disk_bytes_written": None,
        "runs": runs,
        "max_insert_rate": maximum,
        "load_ratios": load_ratios,
        "preloads": [
            {key: round(value, 3) for key, value in entry.items()} for entry in preloads
        ],
        "inserts": "new points only: the held-out rows under their row numbers, then the "
        "same vectors again under fresh ids; a fresh preloaded collection per measurement",
        "recall_reference": f"exact top-{K} of the {preload} preloaded rows (in mixed-insert "
        "runs inserted points can take their places, so recall undercounts there)",
        "client_model": "one process: query loop on the main thread, inserter on a second "
        "Python thread (the extension releases the GIL in upsert and search)",
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.mixed", description=__doc__.split("\n")[0]
    )
    add_dataset_arguments(parser)
    parser.add_argument(
        "--queries", type=int, default=200, help="distinct queries, cycled"
    )
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--preload-fraction", type=float, default=0.8)
    parser.add_argument("--insert-batch", type=int, default=100)
    parser.add_argument(
        "--loads",
        default="0.2,1.0",
        help="insert loads, fractions of the max rate (1 = max)",
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--max-rate-seconds", type=float, default=5.0)
    parser.add_argument(
        "--max-queries", type=int, help="stop a run after this many queries"
    )
    parser.add_argument(
        "--segment-kind",
        choices=("hnsw", "disk"),
        default="hnsw",
        help="the collection's sealed segments (disk: codes in RAM, records on disk)",
    )
    parser.add_argument("--ef", type=int, help="hnsw_ef of the queries (disk: probes)")
    parser.add_argument("--workdir", default=".", help="where the database is written")
    parser.add_argument("--out", help="result JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    started_at = report.utc_now()
    dataset = load_dataset(
        args.dataset, args.dataset_path, args.n, args.dim, args.queries
    )
    print(
        f"dataset {dataset.name}: n={dataset.n} dim={dataset.dim} queries={dataset.nq}"
    )
    result = run_mixed(
        dataset,
        workdir=Path(args.workdir),
        shards=args.shards,
        preload_fraction=args.preload_fraction,
        insert_batch=args.insert_batch,
        loads=tuple(float(x) for x in args.loads.split(",") if x.strip()),
        duration=args.duration,
        max_rate_seconds=args.max_rate_seconds,
        max_queries=args.max_queries,
        segment_kind=args.segment_kind,
        ef=args.ef,
    )
    document = report.build_document(
        suite="mixed-read-write",
        command=report.repo_relative_text("python -m bench.mixed " + shlex.join(argv)),
        started_at=started_at,
        dataset=dataset_entry(dataset),
        results=[result],
        extra={
            "package_versions": package_versions(),
            "target": "p99 mixed-insert / read-only <= 1.5 at 20% of the maximum insert rate",
        },
    )
    return finish(document, args.out)


if __name__ == "__main__":
    sys.exit(main())
