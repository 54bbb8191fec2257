"""What the ingestion benchmark (``bench.ingest``) and its peer adapters
(``bench.ingest_peers``) share: the measurement helpers, the context an engine runs in and
the result it returns. A module of its own so that neither of the two imports the other.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

K = 10
WARMUP_QUERIES = 10
# ef -> the engine's search at that ef: search(query) -> hit ids (row numbers), best first.
SearchAt = Callable[[int], Callable[[np.ndarray], list]]


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
