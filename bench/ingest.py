"""Ingestion: vectors/s until searchable and until fully indexed, bytes written, and search
before and after indexing, for SagittaDB's embedded engine and its embedded peers
(qdrant-edge-py, LanceDB, Chroma), one after another in one process on the same data.

    python -m bench.ingest --dataset debian-minilm \\
        --engines sagitta-wal-1shard,sagitta-wal-2shard,qdrant-edge,lancedb,chroma \\
        --out bench/results/ingest-debian-minilm.json
    python -m bench.ingest --dataset synth --n 200000 --dim 768 \\
        --out bench/results/ingest-synth.json

Every engine gets the same float32 unit vectors in batches of ``--batch`` (1,000) points, ids
0..n-1 (row numbers), no payload, from one Python thread.

- **until searchable** (``upload_seconds``): from the first insert call to the return of the
  last one. Each engine's write call makes the batch visible to a search when it returns
  (checked afterwards, untimed, by counting the points). Durability differs and is not
  equalized: SagittaDB upserts with ``wait=True`` (each batch fsynced); qdrant-edge logs to
  its WAL without an fsync per call (its ``flush()`` runs inside the indexing phase below);
  LanceDB commits a new table version per ``add``; Chroma appends to its SQLite log.
- **until fully indexed** (``build_seconds``): until searchable plus the index phase, which
  is per engine (``index_method`` in each result):
  SagittaDB's background optimizer seals write buffers into HNSW+SQ8 segments while the
  upload runs (at 20,000 points, and 0.5 s after the last write) and merges past 8 segments
  per shard; fully indexed is ``wait_until_indexed()`` returning (status green,
  ``indexed_vectors_count == n``), so the optimizer's work during and after the upload is
  all inside ``build_seconds``. ``sagitta-import-1shard`` is the bulk import
  (``Database.import_collection``): searchable == indexed == when it returns;
  qdrant-edge ``shard.optimize()`` (it has no background optimizer; the call blocks until no
  optimization is planned) then ``shard.flush()``, checked with ``info().indexed_vectors_count
  >= points_count``;
  LanceDB ``table.create_index("vector", config=HnswSq(...))`` (IVF_HNSW_SQ, the closest to
  HNSW + SQ8; ``num_partitions`` 1 by default, i.e. one HNSW graph), checked by polling
  ``index_stats(...)`` until ``num_unindexed_rows == 0``;
  Chroma builds its HNSW (hnswlib, f32) during ``add`` and persists it every
  ``sync_threshold`` (1,000) points, so its index phase is empty: indexed == searchable. The
  number of elements in the persisted HNSW header is reported as a check.
  Searches run between the two phases are not timed.
- **bytes written**: ``bytes_written_io`` is the growth of this process's
  ``/proc/self/io`` ``write_bytes - cancelled_write_bytes`` from the first insert to the end
  of the index phase (bytes sent, or dirtied for later writeback, to the block layer, mmap'd
  files included; a page dirtied twice before writeback counts once). ``directory_bytes`` is
  the sum of file sizes in the engine's directory after indexing (``directory_bytes_allocated``
  the blocks actually allocated: qdrant-edge preallocates 32 MiB WAL and payload files).
  ``disk_bytes_written`` = ``bytes_written_io`` where /proc/self/io counts (else the directory
  sizes), and ``write_amplification`` = ``disk_bytes_written`` / raw float32 vector bytes.
- **search**: a single-thread loop of one-query searches (limit 10), after 10 unrecorded
  warm-up queries, first on the merely searchable data and then on the indexed data; recall@10
  against exact ground truth. ``ef`` (``--ef``, 64) goes to qdrant-edge ``SearchParams.hnsw_ef``,
  LanceDB ``.ef()`` (with ``.nprobes(num_partitions)``) and Chroma ``hnsw.ef_search``.
  and SagittaDB ``search(hnsw_ef=)``. SagittaDB is searched only once indexed (its
  optimizer runs in the background, so a search loop between the phases would slow it).
- **reference**: ``reference_bare_hnsw`` is a bare ``sagittadb.HnswIndex`` (M 16,
  ef_construction 100, SQ8) built on the same data, its recall@10 at ef 64 (and 128); the
  ``ingest_summary`` compares every engine's indexed recall to it and SagittaDB's time to fully
  indexed to qdrant-edge's (issue targets: <= 0.5x, recall within 0.01 of the bare index).
- **threads**: ``--threads`` (2) goes to every thread setting an engine has (qdrant-edge
  ``max_indexing_threads`` and ``max_search_threads``, Chroma ``hnsw.num_threads``,
  ``LANCE_CPU_THREADS``, ``OMP_NUM_THREADS``, ``RAYON_NUM_THREADS``); SagittaDB has no knob and
  seals with all cores.

Engines are functions in ``ENGINES`` (name -> function(IngestContext) -> result dict; the
peers' live in ``bench/ingest_peers.py``, what both use in ``bench/ingest_common.py``);
``sagitta-wal-<N>shard`` works for any N, and ``sagitta-wal-<N>shard-optimize`` calls
``Collection.optimize()`` (seal the write buffers now instead of after 0.5 s idle) after the
last upsert, inside the index phase, before ``wait_until_indexed()``. ``bench.pysweep`` runs
the same engines with an ef sweep instead of the one ``--ef`` (``IngestContext.efs``). A
peer whose package does not import is skipped (``skipped_engines``) unless ``--strict``.
Peers are pinned in requirements-bench.txt (``scripts/setup-bench.sh`` installs them).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import datasets, ingest_peers, report
from bench.engines import _as_int64_ids
from bench.ingest_common import (
    DiskMeter,
    IngestContext,
    K,
    make_result,
    package_version,
)

DEFAULT_DATASET_PATH = datasets.DEBIAN_MINILM_PATH
THREAD_ENV = ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "LANCE_CPU_THREADS")


# ---------------------------------------------------------------------------------------------
# Data


def load_dataset(
    name: str,
    path: str | None = None,
    n: int | None = None,
    dim: int | None = None,
    queries: int = 200,
    seed: int = datasets.DEFAULT_SEED,
) -> datasets.Dataset:
    """debian-minilm (first ``n`` rows) or the ``ann`` suite's synthetic set (default
    200,000 x 768, e.g. synth-768-200k); exact top-10 ground truth, cached like ``ann``'s."""
    if name == "debian-minilm":
        dataset = datasets.load_debian_minilm(path or DEFAULT_DATASET_PATH)
        if n:
            dataset = datasets.Dataset(
                dataset.name,
                dataset.base[:n],
                dataset.queries,
                dataset.metric,
                None,
                dataset.extra,
            )
        dataset = dataset.subsample_queries(queries)
    elif name == "synth":
        dataset = datasets.synthetic(n or 200_000, queries, dim or 768, seed=seed)
    else:
        raise ValueError(f"unknown dataset {name!r} (debian-minilm or synth)")
    dataset.ensure_gt(K)
    return dataset


def dataset_entry(dataset: datasets.Dataset) -> dict:
    return dataset.result_entry(K)


# ---------------------------------------------------------------------------------------------
# SagittaDB


def _sagitta_runs(ctx: IngestContext, collection, stage: str) -> list[dict]:
    """The single-query loops over a SagittaDB collection (``ctx.indexed_runs``)."""

    def search_at(ef: int):
        def search(query):
            hits = collection.search(query, limit=K, with_payload=False, hnsw_ef=ef)
            return [hit["id"] for hit in hits]

        return search

    return ctx.indexed_runs(
        search_at, stage=stage, search_params={"ef_knob": "Collection.search(hnsw_ef=)"}
    )


def run_sagitta_wal(ctx: IngestContext, shards: int, optimize: bool = False) -> dict:
    """Upserts through the write-ahead log (wait=True) while the background optimizer seals
    and merges; fully indexed when the collection turns green (every point in an HNSW
    segment, nothing planned). ``optimize``: ``Collection.optimize()`` (seals the write
    buffers at once) after the last upsert, before waiting."""
    import sagittadb

    root = ctx.engine_dir(f"sagitta-{shards}")
    try:
        collection = sagittadb.open(root).create_collection(
            "ingest", dim=ctx.dim, distance="Cosine", shard_number=shards
        )
        meter = DiskMeter()
        start = time.perf_counter()
        for first, rows in ctx.batches():
            collection.upsert(
                ids=range(first, first + len(rows)), vectors=rows, wait=True
            )
        searchable = time.perf_counter() - start
        assert collection.count() == ctx.n
        extra = {}
        if optimize:
            extra["optimize_sealed_points"] = collection.optimize()
            extra["optimize_seconds"] = round(
                time.perf_counter() - start - searchable, 3
            )
        collection.wait_until_indexed(timeout=3600)
        indexed = time.perf_counter() - start
        io = meter.delta()
        status = collection.status()
        assert status["indexed_vectors_count"] == ctx.n
        runs = _sagitta_runs(ctx, collection, "indexed (green)")
        return make_result(
            ctx,
            engine=f"sagitta-wal-{shards}shard" + ("-optimize" if optimize else ""),
            version=sagittadb.__version__,
            index_params={
                "shards": shards,
                "batch": ctx.batch,
                "wait": True,
                "segments": "hnsw m=16 ef_construct=100 sq8 (fixed in the engine)",
                "optimizer": "defaults: seal at 20,000 points or 0.5 s idle, <= 8 "
                "segments per shard",
            },
            searchable_seconds=searchable,
            indexed_seconds=indexed,
            io=io,
            root=root,
            runs=runs,
            index_method=("Collection.optimize(), then " if optimize else "")
            + "background optimizer; wait_until_indexed() (status green, "
            "indexed_vectors_count == n)",
            threads_setting=f"no knob: seals use all cores ({os.cpu_count()})",
            segments=status["segments_count"],
            **extra,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_sagitta_import(ctx: IngestContext, shards: int = 1) -> dict:
    """Bulk import (``Database.import_collection``): no write-ahead log, one segment per
    shard built in memory and published all at once; searchable == fully indexed."""
    import sagittadb

    root = ctx.engine_dir("sagitta-import")
    try:
        database = sagittadb.open(root)
        meter = DiskMeter()
        start = time.perf_counter()
        collection = database.import_collection(
            "ingest",
            ids=range(ctx.n),
            vectors=ctx.base,
            distance="Cosine",
            shard_number=shards,
        )
        indexed = time.perf_counter() - start
        io = meter.delta()
        assert collection.status()["indexed_vectors_count"] == ctx.n
        runs = _sagitta_runs(ctx, collection, "indexed (import)")
        return make_result(
            ctx,
            engine=f"sagitta-import-{shards}shard",
            version=sagittadb.__version__,
            index_params={
                "shards": shards,
                "segments": "hnsw m=16 ef_construct=100 sq8 (fixed in the engine)",
            },
            searchable_seconds=indexed,
            indexed_seconds=indexed,
            io=io,
            root=root,
            runs=runs,
            index_method="Database.import_collection(): one segment per shard, "
            "published with one manifest swap",
            threads_setting=f"no knob: the build uses all cores ({os.cpu_count()})",
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Registry


ENGINES: dict[str, Callable[[IngestContext], dict]] = {
    "sagitta-wal-1shard": partial(run_sagitta_wal, shards=1),
    "sagitta-wal-2shard": partial(run_sagitta_wal, shards=2),
    "sagitta-import-1shard": partial(run_sagitta_import, shards=1),
    "qdrant-edge": ingest_peers.run_qdrant_edge,
    "lancedb": ingest_peers.run_lancedb,
    "chroma": ingest_peers.run_chroma,
}
# Package each engine needs (module, distribution); checked before the run.
REQUIRES = {
    "qdrant-edge": ("qdrant_edge", "qdrant-edge-py"),
    "lancedb": ("lancedb", "lancedb"),
    "chroma": ("chromadb", "chromadb"),
}
VERSIONED_PACKAGES = (
    "sagittadb",
    "numpy",
    "qdrant-edge-py",
    "lancedb",
    "pylance",
    "pyarrow",
    "chromadb",
)
_SHARDS = re.compile(r"sagitta-wal-(\d+)shard(-optimize)?")


def resolve_engine(name: str) -> Callable[[IngestContext], dict]:
    if name in ENGINES:
        return ENGINES[name]
    match = _SHARDS.fullmatch(name)
    if match and int(match.group(1)) >= 1:
        if match.group(2):
            return partial(run_sagitta_wal, shards=int(match.group(1)), optimize=True)
        return partial(run_sagitta_wal, shards=int(match.group(1)))
    raise KeyError(name)


def missing_package(name: str) -> str | None:
    """The distribution an engine needs that does not import, or None."""
    module, distribution = REQUIRES.get(name, ("sagittadb", "sagittadb"))
    try:
        importlib.import_module(module)
    except ImportError:
        return distribution
    return None


def package_versions() -> dict:
    versions = {"python": sys.version.split()[0]}
    for distribution in VERSIONED_PACKAGES:
        version = package_version(distribution)
        if version != "unknown":
            versions[distribution] = version
    return versions


def bare_hnsw_reference(dataset: datasets.Dataset, threads: int, efs=(64, 128)) -> dict:
    """Recall@10 of a bare sagittadb.HnswIndex (M 16, ef_construction 100, SQ8) by ef."""
    import sagittadb

    start = time.perf_counter()
    index = sagittadb.HnswIndex(
        dataset.dim, metric="cosine", m=16, ef_construction=100, quantization="sq8"
    )
    index.add(dataset.base, threads=threads)
    build = time.perf_counter() - start
    recall = {}
    for ef in efs:
        ids, _ = index.search(dataset.queries, K, ef=ef, threads=threads)
        ids = _as_int64_ids(ids)  # u64::MAX (empty slot) -> -1
        recall[str(ef)] = round(datasets.recall_at_k(ids, dataset.gt, K), 5)
    return {
        "engine": "sagittadb.HnswIndex (bare, in memory)",
        "index_params": {"m": 16, "ef_construct": 100, "quantization": "sq8"},
        "build_seconds": round(build, 3),
        "threads": threads,
        "recall_at_k_by_ef": recall,
    }


def ingest_summary(results: list[dict], reference: dict | None, ef: int) -> dict:
    """Per engine: times, write amplification, indexed recall; SagittaDB / qdrant-edge."""
    by_engine = {result["engine"]: result for result in results}
    qdrant = by_engine.get("qdrant-edge")
    bare = (reference or {}).get("recall_at_k_by_ef", {}).get(str(ef))
    summary = {}
    for name, result in by_engine.items():
        last = result["runs"][-1]
        entry = {
            "seconds_until_searchable": result["upload_seconds"],
            "seconds_until_indexed": result["build_seconds"],
            "vectors_per_second_until_searchable": result[
                "vectors_per_second_until_searchable"
            ],
            "vectors_per_second_until_indexed": result[
                "vectors_per_second_until_indexed"
            ],
            "write_amplification": result["write_amplification"],
            "recall_at_k_indexed": last["recall_at_k"],
            "latency_ms_indexed": last["latency_ms"],
        }
        if bare is not None:
            entry[f"recall_minus_bare_hnsw_ef{ef}"] = round(
                last["recall_at_k"] - bare, 5
            )
        if name.startswith("sagitta-") and qdrant is not None:
            entry["indexed_time_over_qdrant_edge"] = round(
                result["build_seconds"] / qdrant["build_seconds"], 4
            )
        summary[name] = entry
    return {
        "engines": summary,
        "targets": "sagitta time to fully indexed <= 0.5 x qdrant-edge's; recall@10 within "
        f"0.01 of the bare HNSW index at ef {ef}",
    }


# ---------------------------------------------------------------------------------------------
# Command line


def add_dataset_arguments(parser: argparse.ArgumentParser) -> None:
    """--dataset, --dataset-path, --n and --dim (shared with bench.mixed)."""
    parser.add_argument(
        "--dataset", default="debian-minilm", choices=["debian-minilm", "synth"]
    )
    parser.add_argument(
        "--dataset-path", help=f"debian-minilm directory ({DEFAULT_DATASET_PATH})"
    )
    parser.add_argument(
        "--n", type=int, help="debian-minilm: first N; synth: N (200000)"
    )
    parser.add_argument("--dim", type=int, help="synth: dimension (768)")


def finish(document: dict, out: str | None) -> int:
    """Validates a result document and writes it to `out`; 2 if it does not validate."""
    if report.invalid(document):
        return 2
    if out:
        report.write_json(document, out)
        print(f"wrote {out}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ingest", description=__doc__.split("\n")[0]
    )
    add_dataset_arguments(parser)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--engines", help=f"comma list (default: {','.join(ENGINES)})")
    parser.add_argument(
        "--shards",
        help="add sagitta-wal-<N>shard for each N (e.g. 1,2); alone: only those",
    )
    parser.add_argument(
        "--ef", type=int, default=64, help="search ef for engines with a knob"
    )
    add_engine_arguments(parser)
    parser.add_argument(
        "--no-bare-reference",
        action="store_true",
        help="skip the bare HnswIndex recall",
    )
    parser.add_argument("--out", help="result JSON")
    return parser


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    """--seed, --batch, --threads, the peers' index settings, --strict and --workdir
    (shared with bench.pysweep; ``context_from_args`` reads them)."""
    parser.add_argument("--seed", type=int, default=datasets.DEFAULT_SEED, help="synth")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--m", type=int, default=16, help="peers' HNSW M")
    parser.add_argument("--ef-construction", type=int, default=100, help="peers' HNSW")
    parser.add_argument(
        "--lance-partitions", type=int, default=1, help="IVF partitions"
    )
    parser.add_argument(
        "--lance-refine-factor", type=int, help="LanceDB re-ranking (none)"
    )
    parser.add_argument("--qdrant-quantization", choices=["sq8", "none"], default="sq8")
    parser.add_argument("--strict", action="store_true", help="fail on a missing peer")
    parser.add_argument(
        "--workdir", default=".", help="where the databases are written"
    )


def engine_names(args: argparse.Namespace) -> list[str]:
    names = [name.strip() for name in (args.engines or "").split(",") if name.strip()]
    if args.shards:
        names += [
            f"sagitta-wal-{int(s)}shard" for s in args.shards.split(",") if s.strip()
        ]
    elif not names:
        names = list(ENGINES)
    return list(dict.fromkeys(names))


def set_thread_env(threads: int) -> dict:
    """Thread-count variables the engines read at import; returned for the record."""
    for variable in THREAD_ENV:
        os.environ[variable] = str(threads)
    return {variable: os.environ[variable] for variable in THREAD_ENV}


def summary_line(result: dict) -> str:
    first, last = result["runs"][0], result["runs"][-1]
    return (
        f"{result['engine']}: {result['vectors_per_second_until_searchable']:,.0f} vectors/s "
        f"until searchable, {result['vectors_per_second_until_indexed']:,.0f} until indexed "
        f"({result['build_seconds']:.2f} s); written/raw {result['write_amplification']:.3f} "
        f"(dir {result['directory_bytes_over_raw']:.3f}); search p50 "
        f"{first['latency_ms']['p50']:.2f} -> {last['latency_ms']['p50']:.2f} ms, p99 "
        f"{last['latency_ms']['p99']:.2f} ms, recall {first['recall_at_k']:.4f} -> "
        f"{last['recall_at_k']:.4f}"
    )


def select_runners(
    names: list[str], strict: bool
) -> tuple[dict[str, Callable[[IngestContext], dict]], dict[str, str]]:
    """(name -> runner, name -> why skipped): an unknown name exits; an engine whose package
    does not import is skipped, or exits with ``strict``."""
    runners = {}
    for name in names:
        try:
            runners[name] = resolve_engine(name)
        except KeyError:
            raise SystemExit(
                f"unknown engine {name!r}; known: {', '.join(ENGINES)}, "
                "sagitta-wal-<N>shard[-optimize]"
            ) from None
    skipped = {}
    for name in names:
        missing = missing_package(name)
        if missing:
            if strict:
                raise SystemExit(f"{name}: package {missing} does not import")
            skipped[name] = f"{missing} not installed (scripts/setup-bench.sh)"
            print(f"skipping {name}: {skipped[name]}")
            del runners[name]
    return runners, skipped


def load_dataset_from_args(args: argparse.Namespace) -> datasets.Dataset:
    dataset = load_dataset(
        args.dataset, args.dataset_path, args.n, args.dim, args.queries, args.seed
    )
    print(
        f"dataset {dataset.name}: n={dataset.n} dim={dataset.dim} queries={dataset.nq}, "
        f"raw {dataset.base.nbytes / 2**20:.1f} MiB"
    )
    return dataset


def context_from_args(
    args: argparse.Namespace, dataset: datasets.Dataset, **fields
) -> IngestContext:
    """An IngestContext from ``add_engine_arguments``' options; ``fields`` override."""
    options = {
        "lance_refine_factor": args.lance_refine_factor,
        "qdrant_quantization": args.qdrant_quantization,
    }
    settings = {
        "base": dataset.base,
        "queries": dataset.queries,
        "gt": dataset.gt,
        "workdir": Path(args.workdir),
        "batch": args.batch,
        "threads": args.threads,
        "m": args.m,
        "ef_construction": args.ef_construction,
        "lance_partitions": args.lance_partitions,
        "options": options,
    }
    return IngestContext(**{**settings, **fields})


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    started_at = report.utc_now()
    thread_env = set_thread_env(args.threads)
    runners, skipped = select_runners(engine_names(args), args.strict)
    dataset = load_dataset_from_args(args)
    ctx = context_from_args(args, dataset, ef=args.ef)
    results = []
    for runner in runners.values():
        result = runner(ctx)
        results.append(result)
        print(summary_line(result), flush=True)
    reference = (
        None if args.no_bare_reference else bare_hnsw_reference(dataset, args.threads)
    )
    if reference:
        print(f"bare HnswIndex sq8 recall@10 by ef: {reference['recall_at_k_by_ef']}")
    extra = {
        "package_versions": package_versions(),
        "thread_env": thread_env,
        "reference_bare_hnsw": reference,
        "ingest_summary": ingest_summary(results, reference, args.ef),
    }
    if skipped:
        extra["skipped_engines"] = skipped
    document = report.build_document(
        suite="ingest",
        command="python -m bench.ingest " + shlex.join(argv),
        started_at=started_at,
        dataset=dataset_entry(dataset),
        results=results,
        extra=extra,
    )
    return finish(document, args.out)


if __name__ == "__main__":
    sys.exit(main())
