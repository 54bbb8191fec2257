"""WAL-path ingestion of the embedded engine: vectors/s until searchable and bytes written.

    python -m bench.ingest --dataset-path ../shared/datasets/debian-minilm --shards 1,2 \
        --out bench/results/ingest-wal-debian-minilm.json

Each point is upserted in batches (default 1,000) with wait=True, so every batch is fsynced
before the next starts; "until searchable" is the end of the last batch (the write buffer
is searchable as soon as a write is acknowledged). Bytes written are the collection's files
on disk afterwards, against the raw float32 vectors. The peers of issue 3 (qdrant-edge-py,
LanceDB, Chroma) and the "until fully indexed" time arrive with sealed segments.
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
from bench.datasets import load_debian_minilm


def directory_bytes(path: Path) -> int:
    return sum(
        (Path(root) / name).stat().st_size
        for root, _, names in os.walk(path)
        for name in names
    )


def run(base: np.ndarray, shards: int, batch: int, workdir: Path) -> dict:
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
        seconds = time.perf_counter() - start
        assert collection.count() == base.shape[0]
        written = directory_bytes(root)
    finally:
        shutil.rmtree(root)
    return {
        "engine": f"sagitta-engine-wal-{shards}shard",
        "engine_version": sagittadb.__version__,
        "index_params": {"shards": shards, "batch": batch, "wait": True},
        # No index is built on this path yet (the buffer is scanned exactly), so the time
        # until searchable is also the whole build time.
        "build_seconds": round(seconds, 3),
        "upload_seconds": round(seconds, 3),
        "memory_bytes": None,
        "disk_bytes_written": written,
        "runs": [],
        "vectors_per_second_until_searchable": round(base.shape[0] / seconds, 1),
        "write_amplification": round(written / base.nbytes, 4),
        "index": "none yet: write buffer only, searched exactly",
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m bench.ingest")
    parser.add_argument("--dataset-path", default="/work/shared/datasets/debian-minilm")
    parser.add_argument("--shards", default="1,2")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--n", type=int, help="use the first N vectors")
    parser.add_argument("--workdir", default=".", help="where the database is written")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    started_at = report.utc_now()
    dataset = load_debian_minilm(args.dataset_path)
    base = dataset.base[: args.n] if args.n else dataset.base
    results = []
    for shards in (int(value) for value in args.shards.split(",")):
        result = run(base, shards, args.batch, Path(args.workdir))
        results.append(result)
        print(
            f"{result['engine']}: {result['vectors_per_second_until_searchable']:,.0f}"
            f" vectors/s, write amplification {result['write_amplification']:.3f}"
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
            "queries": 0,
            "k": 0,
        },
        results=results,
    )
    if args.out:
        Path(args.out).write_text(json.dumps(document, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
