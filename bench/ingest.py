"""Ingestion of the embedded engine through the write-ahead log: vectors/s until
searchable and until fully indexed, bytes written, and search before and after sealing.

    python -m bench.ingest --dataset-path ../shared/datasets/debian-minilm --shards 1,2 \
        --out bench/results/ingest-wal-debian-minilm.json

Each batch (default 1,000 points) is upserted with wait=True, so it is fsynced before the
next starts; "until searchable" is the end of the last batch (the write buffer is searchable
as soon as a write is acknowledged). "Until fully indexed" adds `optimize()`, which seals
every shard's buffer into an HNSW segment. Bytes written are the collection's files on disk
after the seal, against the raw float32 vectors (the log of sealed data is removed, so this
counts the segment files: vectors, SQ8 codes, graph, ids). Search is a single-thread loop
over the queries (limit 10) on the buffer and then on the sealed segments. The peers of
issue 3 (qdrant-edge-py, LanceDB, Chroma) are not in this run yet.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import report
from bench.datasets import exact_search, load_debian_minilm


def directory_bytes(path: Path) -> int:
    return sum(
        (Path(root) / name).stat().st_size
        for root, _, names in os.walk(path)
        for name in names
    )


def _search_run(collection, queries, gt, stage: str) -> dict:
    latencies = []
    found = 0
    for query, truth in zip(queries, gt):
        start = time.perf_counter()
        hits = collection.search(query, limit=10, with_payload=False)
        latencies.append(time.perf_counter() - start)
        found += len({hit["id"] for hit in hits} & set(truth[:10].tolist()))
    p50, p95, p99 = np.percentile(np.array(latencies) * 1e3, [50, 95, 99])
    return {
        "scenario": "read-only",
        "search_params": {"stage": stage, "limit": 10},
        "threads": 1,
        "concurrency": 1,
        "recall_at_k": round(found / (10 * len(queries)), 5),
        "qps": round(len(queries) / sum(latencies), 2),
        "latency_ms": {
            "p50": round(float(p50), 4),
            "p95": round(float(p95), 4),
            "p99": round(float(p99), 4),
        },
        "disk_bytes_read_per_query": None,
        "latency_method": "single-query loop from Python, 1 thread",
    }


def run(
    base: np.ndarray,
    queries: np.ndarray,
    gt: np.ndarray,
    shards: int,
    batch: int,
    workdir: Path,
) -> dict:
    import sagittadb

    root = Path(tempfile.mkdtemp(dir=workdir))
    try:
        collection = sagittadb.open(root).create_collection(
            "ingest", dim=base.shape[1], distance="Cosine", shard_number=shards
        )
        start = time.perf_counter()
        for first in range(0, base.shape[0], batch):
            rows = base[first : first + batch]
            collection.upsert(ids=range(first, first + len(rows)), vectors=rows)
        searchable = time.perf_counter() - start
        assert collection.count() == base.shape[0]
        logged = directory_bytes(root)
        buffer_run = _search_run(collection, queries, gt, "write buffer (exact)")
        start = time.perf_counter()
        collection.optimize()
        sealing = time.perf_counter() - start
        assert collection.point_counts()["indexed"] == base.shape[0]
        sealed = directory_bytes(root)
        sealed_run = _search_run(collection, queries, gt, "sealed HNSW segments")
    finally:
        shutil.rmtree(root)
    return {
        "engine": f"sagitta-engine-wal-{shards}shard",
        "engine_version": sagittadb.__version__,
        "index_params": {
            "shards": shards,
            "batch": batch,
            "wait": True,
            "segments": "hnsw m=16 ef_construct=100 sq8",
        },
        "build_seconds": round(searchable + sealing, 3),
        "upload_seconds": round(searchable, 3),
        "memory_bytes": None,
        "disk_bytes_written": logged + sealed,
        "runs": [buffer_run, sealed_run],
        "vectors_per_second_until_searchable": round(base.shape[0] / searchable, 1),
        "vectors_per_second_until_indexed": round(
            base.shape[0] / (searchable + sealing), 1
        ),
        "seal_seconds": round(sealing, 3),
        "log_bytes_over_raw": round(logged / base.nbytes, 4),
        "sealed_bytes_over_raw": round(sealed / base.nbytes, 4),
        "write_amplification": round((logged + sealed) / base.nbytes, 4),
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.ingest")
    parser.add_argument("--dataset-path", default="/work/shared/datasets/debian-minilm")
    parser.add_argument("--shards", default="1,2")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--n", type=int, help="use the first N vectors")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workdir", default=".", help="where the database is written")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    started_at = report.utc_now()
    dataset = load_debian_minilm(args.dataset_path)
    base = dataset.base[: args.n] if args.n else dataset.base
    queries = dataset.queries[: args.queries]
    gt = exact_search(base, queries, 10, dataset.metric)
    results = []
    for shards in (int(value) for value in args.shards.split(",")):
        result = run(base, queries, gt, shards, args.batch, Path(args.workdir))
        results.append(result)
        buffer_run, sealed_run = result["runs"]
        print(
            f"{result['engine']}: {result['vectors_per_second_until_searchable']:,.0f}"
            f" vectors/s until searchable, "
            f"{result['vectors_per_second_until_indexed']:,.0f} until indexed; "
            f"written/raw {result['write_amplification']:.3f}; search p50 "
            f"{buffer_run['latency_ms']['p50']:.2f} ms -> "
            f"{sealed_run['latency_ms']['p50']:.2f} ms, recall "
            f"{buffer_run['recall_at_k']:.4f} -> {sealed_run['recall_at_k']:.4f}"
        )
    document = report.build_document(
        suite="ingest-wal",
        command="python -m bench.ingest " + shlex.join(argv),
        started_at=started_at,
        dataset={
            "name": dataset.name,
            "n": int(base.shape[0]),
            "dim": int(base.shape[1]),
            "metric": dataset.metric,
            "queries": int(queries.shape[0]),
            "k": 10,
        },
        results=results,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(document, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
