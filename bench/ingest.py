"""Ingestion: vectors/s until searchable and until fully indexed, bytes written, and search
before and after indexing, for SagittaDB's embedded engine and its embedded peers
(qdrant-edge-py, LanceDB, Chroma), one after another in one process on the same data.

    python -m bench.ingest --dataset debian-minilm \\
        --engines sagitta-wal-1shard,sagitta-wal-2shard,qdrant-edge,lancedb,chroma \\
        --out bench/results/ingest-debian-minilm.json
    python -m bench.ingest --dataset synth --n 200000 --dim 768 --out bench/results/ingest-synth.json

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
peers' live in ``bench/ingest_peers.py``);
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
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np

from bench import datasets, report
from bench.engines import _as_int64_ids

K = 10
DEFAULT_DATASET_PATH = datasets.DEBIAN_MINILM_PATH
WARMUP_QUERIES = 10
THREAD_ENV = ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "LANCE_CPU_THREADS")
# ef -> the engine's search at that ef: search(query) -> hit ids (row numbers), best first.
SearchAt = Callable[[int], Callable[[np.ndarray], list]]


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
    entry = {
        "name": dataset.name,
        "n": dataset.n,
        "dim": dataset.dim,
        "metric": dataset.metric,
        "queries": dataset.nq,
        "k": K,
    }
    if dataset.extra:
        entry["source"] = dataset.extra
    return entry


# ---------------------------------------------------------------------------------------------
# Measurement helpers


def directory_bytes(path: Path) -> int:
    """Sum of file sizes (apparent) under ``path``."""
    return sum(
        (Path(root) / name).stat().st_size
        for root, _, names in os.walk(path)
        for name in names
    )


def directory_allocated_bytes(path: Path) -> int:
    """Sum of allocated blocks (st_blocks * 512) under ``path``: sparse files count less."""
    return sum(
        (Path(root) / name).stat().st_blocks * 512
        for root, _, names in os.walk(path)
        for name in names
    )


def read_proc_io(path: str = "/proc/self/io") -> dict[str, int] | None:
    """This process's I/O counters (all threads), or None where the kernel has none."""
    try:
        text = Path(path).read_text()
    except OSError:
        return None
    counters = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            counters[key.strip()] = int(value)
    return counters if "write_bytes" in counters else None


class DiskMeter:
    """Bytes this process caused to be written since construction (from /proc/self/io)."""

    def __init__(self, reader: Callable[[], dict | None] = read_proc_io) -> None:
        self._reader = reader
        self._start = reader()

    def delta(self) -> dict | None:
        now = self._reader()
        if self._start is None or now is None:
            return None
        keys = ("write_bytes", "cancelled_write_bytes", "wchar")
        diff = {key: now.get(key, 0) - self._start.get(key, 0) for key in keys}
        diff["net_write_bytes"] = diff["write_bytes"] - diff["cancelled_write_bytes"]
        return diff


def percentiles_ms(seconds) -> dict:
    p50, p95, p99 = np.percentile(
        np.asarray(seconds, dtype=np.float64) * 1e3, [50, 95, 99]
    )
    return {
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "p99": round(float(p99), 4),
    }


def latency_run(
    search: Callable[[np.ndarray], list],
    queries: np.ndarray,
    gt: np.ndarray,
    *,
    stage: str,
    search_params: dict | None = None,
    scenario: str = "read-only",
    warmup: int = WARMUP_QUERIES,
) -> dict:
    """One-query searches in a loop on this thread: recall@10, QPS, p50/p95/p99.

    ``search(query)`` returns the ids (row numbers) of the hits, best first."""
    for query in queries[:warmup]:
        search(query)
    latencies = []
    found = 0
    for query, truth in zip(queries, gt, strict=True):
        start = time.perf_counter()
        ids = search(query)
        latencies.append(time.perf_counter() - start)
        found += len({int(i) for i in ids[:K]} & set(truth[:K].tolist()))
    return {
        "scenario": scenario,
        "search_params": {"stage": stage, "limit": K, **(search_params or {})},
        "threads": 1,
        "concurrency": 1,
        "recall_at_k": round(found / (K * len(queries)), 5),
        "qps": round(len(queries) / sum(latencies), 2),
        "latency_ms": percentiles_ms(latencies),
        "disk_bytes_read_per_query": None,
        "latency_method": f"single-query loop from Python, 1 thread, {warmup} warm-up queries",
    }


def wait_until(
    predicate: Callable[[], bool], timeout: float = 600.0, poll: float = 0.05
):
    """Poll ``predicate`` until true; raises TimeoutError after ``timeout`` seconds."""
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("index not complete in time")
        time.sleep(poll)


def package_version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------------------------------------
# Context and result


@dataclass
class IngestContext:
    base: np.ndarray
    queries: np.ndarray
    gt: np.ndarray
    workdir: Path
    batch: int = 1000
    threads: int = 2
    ef: int = 64
    m: int = 16
    ef_construction: int = 100
    lance_partitions: int = 1
    options: dict = field(default_factory=dict)
    # The indexed data is searched at each ef of ``efs`` in order (None: ``ef`` alone), with
    # ``warmup`` unrecorded queries before each; ``search_unindexed`` off skips the searches
    # between the two phases (bench.pysweep sets all three).
    efs: tuple[int, ...] | None = None
    warmup: int = WARMUP_QUERIES
    search_unindexed: bool = True

    @property
    def n(self) -> int:
        return int(self.base.shape[0])

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])

    def batches(self):
        """(first id, rows) for every batch, in order."""
        for first in range(0, self.n, self.batch):
            yield first, self.base[first : first + self.batch]

    def engine_dir(self, prefix: str) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f"ingest-{prefix}-", dir=self.workdir))

    def indexed_runs(
        self, search_at: SearchAt, *, stage: str, search_params: dict
    ) -> list[dict]:
        """``latency_run`` on the indexed data at every ef of ``efs`` (``ef`` alone when
        None), in order. ``search_at(ef)`` returns the engine's search at that ef and is
        called once per ef, before that ef's warm-up; ``search_params`` names the knob
        (``ef`` is added)."""
        return [
            latency_run(
                search_at(ef),
                self.queries,
                self.gt,
                stage=stage,
                search_params={"ef": ef, **search_params},
                warmup=self.warmup,
            )
            for ef in self.efs or (self.ef,)
        ]

    def unindexed_runs(
        self, search: Callable[[np.ndarray], list], *, stage: str, search_params: dict
    ) -> list[dict]:
        """``latency_run`` on the merely searchable data; none if ``search_unindexed`` is off."""
        if not self.search_unindexed:
            return []
        return [
            latency_run(
                search,
                self.queries,
                self.gt,
                stage=stage,
                search_params=search_params,
                warmup=self.warmup,
            )
        ]


def make_result(
    ctx: IngestContext,
    *,
    engine: str,
    version: str,
    index_params: dict,
    searchable_seconds: float,
    indexed_seconds: float,
    io: dict | None,
    root: Path,
    runs: list[dict],
    fallback_written: int | None = None,
    **extra,
) -> dict:
    """A bench-schema result with the ingestion fields every engine reports."""
    raw = ctx.base.nbytes
    directory = directory_bytes(root)
    allocated = directory_allocated_bytes(root)
    if io is not None and io["net_write_bytes"] > 0:
        written, method = io["net_write_bytes"], "/proc/self/io write_bytes - cancelled"
    else:
        written = fallback_written if fallback_written is not None else directory
        method = "directory sizes (no /proc/self/io counts)"
    return {
        "engine": engine,
        "engine_version": version,
        "index_params": index_params,
        "build_seconds": round(indexed_seconds, 3),
        "upload_seconds": round(searchable_seconds, 3),
        "memory_bytes": None,
        "disk_bytes_written": int(written),
        "runs": runs,
        "vectors_per_second_until_searchable": round(ctx.n / searchable_seconds, 1),
        "vectors_per_second_until_indexed": round(ctx.n / indexed_seconds, 1),
        "index_seconds": round(indexed_seconds - searchable_seconds, 3),
        "raw_vector_bytes": int(raw),
        "disk_bytes_written_method": method,
        "write_amplification": round(written / raw, 4),
        "bytes_written_io": None if io is None else int(io["net_write_bytes"]),
        "bytes_written_io_detail": io,
        "bytes_written_io_over_raw": None
        if io is None
        else round(io["net_write_bytes"] / raw, 4),
        "directory_bytes": directory,
        "directory_bytes_allocated": allocated,
        "directory_bytes_over_raw": round(directory / raw, 4),
        "batch": ctx.batch,
        **extra,
    }


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


def _peer(function_name: str) -> Callable[[IngestContext], dict]:
    """A peer adapter of bench.ingest_peers (imported when it runs: it imports this module)."""

    def run(ctx: IngestContext) -> dict:
        from bench import ingest_peers

        return getattr(ingest_peers, function_name)(ctx)

    run.__name__ = function_name
    return run


ENGINES: dict[str, Callable[[IngestContext], dict]] = {
    "sagitta-wal-1shard": partial(run_sagitta_wal, shards=1),
    "sagitta-wal-2shard": partial(run_sagitta_wal, shards=2),
    "sagitta-import-1shard": partial(run_sagitta_import, shards=1),
    "qdrant-edge": _peer("run_qdrant_edge"),
    "lancedb": _peer("run_lancedb"),
    "chroma": _peer("run_chroma"),
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
    errors = report.validate(document)
    if errors:  # a bug in the harness, never expected
        print("\n".join(errors), file=sys.stderr)
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
