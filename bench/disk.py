"""Larger than memory (issue 15): disk-resident indexes side by side under one memory limit.

Every engine builds its index from the same vectors (``base.npy``, memory-mapped), then a
fresh process opens that index and is searched with the same queries, k and threads while it
runs inside a cgroup (v1 memory controller) whose ``memory.limit_in_bytes`` is
``--memory-limit-mb`` (page cache counts against it), with the kernel's caches dropped just
before. Builds run outside the limit (every engine alike; the time is reported). Per engine:

- ``build_seconds`` (the build process's wall time to a persisted index), its CPU seconds
  (``build_cpu_seconds``, threads and child processes) and the index's bytes on disk;
- per search setting: QPS of all queries with ``--threads`` threads (the engine's own batch
  call where it has one, else that many Python threads of single queries), recall@k against
  exact ground truth, p50/p95/p99 of ``--latency-queries`` single queries on one thread,
  and the device's reads and bytes per query during the QPS pass (``/proc/diskstats`` of
  the device holding ``--workdir``: run nothing else meanwhile);
- RAM: the search process's anonymous resident memory after opening the index, less before
  (``memory_bytes``, per vector in ``ram_bytes_per_vector``), and the cgroup's peak usage,
  page cache included (``cgroup_peak_bytes``).

A sweep stops at the first setting reaching recall ``--stop-recall``. An engine whose
package does not import, whose build outlasts ``--build-timeout`` or whose search process
dies (an out-of-memory kill under the limit) gets a ``skipped`` entry saying why.

    python -m bench.disk --n 1000000 --dim 768 --workdir /path/on/the/disk \\
        --out bench/results/disk-synth-768-1m.json

``--build-only`` builds and keeps the indexes; ``--reuse-builds`` then searches them (a
build kept for other data is rebuilt), so an hour-long peer build need not be repeated.

DiskANN (``diskannpy``) pins numpy 1.25, which the other peers cannot share: it runs from its
own virtual environment (``--diskann-python``, default ``.venv-diskann/bin/python``; made by
``scripts/setup-bench.sh``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import mmap
import os
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import numpy as np

from bench.datasets import recall_at_k
from bench.ingest_common import directory_bytes, package_version, percentiles_ms

ENGINES = (
    "sagitta-ivf-disk",
    "sagitta-hnsw-disk",
    "sagitta-hnsw-ram",
    "diskann",
    "lancedb-ivf-pq",
    "faiss-ivf-flat-disk",
    "faiss-ivf-rabitq-disk",
    "qdrant-edge-disk",
)
# Queries drawn after the measured ones, searched once untimed before the sweep so every
# engine starts with its caches in use, never with the measured queries' own pages.
WARMUP_QUERIES = 200
REPO = Path(__file__).resolve().parent.parent
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
# One page cache / node cache budget for every engine that has one.
CACHE_MB = 64


# ---------------------------------------------------------------------------------------------
# Measurements shared by the parent and the workers


def device_of(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return os.major(st.st_dev), os.minor(st.st_dev)


def disk_counters(device: tuple[int, int]) -> tuple[int, int]:
    """Reads completed and bytes read so far by the block device ``device``."""
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if (int(fields[0]), int(fields[1])) == device:
            return int(fields[3]), int(fields[5]) * 512
    raise RuntimeError(f"device {device} not in /proc/diskstats")


def process_cpu_seconds() -> float:
    import resource

    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def anonymous_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------------------------------------
# Engines (worker side): build(base, directory, threads) -> index params; open(...) -> Searcher

Sweep = tuple[dict, ...]


class Searcher:
    """An opened index: ``sweep`` settings, batch and single search returning row ids."""

    sweep: ClassVar[Sweep] = ()

    def batch(self, queries: np.ndarray, k: int, setting: dict) -> np.ndarray:
        raise NotImplementedError

    def one(self, query: np.ndarray, k: int, setting: dict) -> list[int]:
        raise NotImplementedError

    def threaded_batch(
        self, queries: np.ndarray, k: int, setting: dict, threads: int
    ) -> np.ndarray:
        with ThreadPoolExecutor(threads) as pool:
            rows = list(pool.map(lambda q: self.one(q, k, setting), queries))
        out = np.full((len(rows), k), -1, dtype=np.int64)
        for i, row in enumerate(rows):
            out[i, : len(row)] = row[:k]
        return out


def _ef_settings(values: list[int]) -> Sweep:
    return tuple({"ef": value} for value in values)


class SagittaSearcher(Searcher):
    sweep: ClassVar[Sweep] = _ef_settings(
        [8, 16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536]
    )

    def __init__(self, directory: Path, threads: int) -> None:
        import sagittadb

        self.database = sagittadb.open(directory, background_optimizer=False)
        self.collection = self.database.collection("bench")

    def batch(self, queries, k, setting):
        results = self.collection.search_batch(
            queries, limit=k, hnsw_ef=setting["ef"], with_payload=False
        )
        out = np.full((len(results), k), -1, dtype=np.int64)
        for i, hits in enumerate(results):
            out[i, : len(hits)] = [hit["id"] for hit in hits]
        return out

    def one(self, query, k, setting):
        hits = self.collection.search(
            query, limit=k, hnsw_ef=setting["ef"], with_payload=False
        )
        return [hit["id"] for hit in hits]

    def report(self) -> dict:
        status = self.collection.status()
        keys = ("index_ram_bytes", "disk_bytes", "segments_count", "points_count")
        return {key: status[key] for key in keys if key in status}


def build_sagitta(
    base: np.ndarray, directory: Path, threads: int, datatype: str = "float32"
) -> dict:
    import sagittadb

    if isinstance(base, np.memmap) and hasattr(mmap, "MADV_SEQUENTIAL"):
        # The build reads the file front to back, a batch of rows at a time
        base._mmap.madvise(mmap.MADV_SEQUENTIAL)  # type: ignore[attr-defined]
    database = sagittadb.open(directory, background_optimizer=False)
    # The rows are unit vectors, so Dot ranks as Cosine does; a Dot disk collection
    # builds from the memory-mapped file in place (Cosine would copy it to normalize).
    database.import_collection(
        "bench",
        np.arange(base.shape[0], dtype=np.uint64),
        base,
        distance="Dot",
        segment_kind="disk",
        page_cache_mb=CACHE_MB,
        progress=False,
        datatype=datatype,
    )
    return {
        "distance": "Dot (unit vectors)",
        "datatype": datatype,
        "segment_kind": "disk",
        "partition_size": 1000,
        "codes": "1-bit RaBitQ + 2 extended bits, 4-bit and 8-bit query",
        "page_cache_mb": CACHE_MB,
        "search_knob": "hnsw_ef (probes = ceil(ef / 4))",
    }


class SagittaHnswSearcher(SagittaSearcher):
    """HNSW segments (vectors in RAM, or on disk with ``on_disk=True``): ``hnsw_ef`` is
    the beam; the best ``max(4k, 32)`` candidates are re-scored on the full vectors."""

    sweep: ClassVar[Sweep] = _ef_settings(
        [16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048]
    )


def build_sagitta_hnsw(
    base: np.ndarray, directory: Path, threads: int, on_disk: bool
) -> dict:
    import sagittadb

    database = sagittadb.open(directory, background_optimizer=False)
    database.import_collection(
        "bench",
        np.arange(base.shape[0], dtype=np.uint64),
        np.asarray(base),
        distance="Dot",
        segment_kind="hnsw",
        page_cache_mb=CACHE_MB,
        progress=False,
        on_disk=on_disk,
    )
    return {
        "distance": "Dot (unit vectors)",
        "segment_kind": "hnsw",
        "m": 16,
        "ef_construct": 100,
        "vectors": "on_disk=True (records file, page cache)" if on_disk else "in RAM",
        "codes": "SQ8 in RAM, rescore max(4k, 32) on f32",
        "page_cache_mb": CACHE_MB,
        "search_knob": "hnsw_ef",
    }


class FaissSearcher(Searcher):
    sweep: ClassVar[Sweep] = tuple({"nprobe": p} for p in (4, 8, 16, 32, 64, 128, 256))

    def __init__(self, directory: Path, threads: int) -> None:
        import faiss

        faiss.omp_set_num_threads(threads)
        self.index = faiss.read_index(str(directory / "ivf.index"))
        if hasattr(self.index, "qb"):
            self.index.qb = 4  # RaBitQ: 4-bit queries, as SagittaDB's codes use

    def batch(self, queries, k, setting):
        self.index.nprobe = setting["nprobe"]
        _, ids = self.index.search(queries, k)
        return ids

    def one(self, query, k, setting):
        self.index.nprobe = setting["nprobe"]
        _, ids = self.index.search(query[None, :], k)
        return ids[0].tolist()


def build_faiss(base: np.ndarray, directory: Path, threads: int, codes: str) -> dict:
    import faiss

    faiss.omp_set_num_threads(threads)
    dim = base.shape[1]
    nlist = max(1, base.shape[0] // 1000)
    quantizer = faiss.IndexFlatL2(dim)
    if codes == "flat":
        index = faiss.IndexIVFFlat(quantizer, dim, nlist)
    else:
        index = faiss.IndexIVFRaBitQ(quantizer, dim, nlist)
    sample = np.random.default_rng(0).choice(
        base.shape[0], min(base.shape[0], 50 * nlist), replace=False
    )
    index.train(np.ascontiguousarray(base[np.sort(sample)]))
    for start in range(0, base.shape[0], 100_000):
        index.add(np.ascontiguousarray(base[start : start + 100_000]))
    on_disk = faiss.OnDiskInvertedLists(
        index.nlist, index.code_size, str(directory / "ivf.ivfdata")
    )
    lists = faiss.InvertedListsPtrVector()
    lists.push_back(index.invlists)
    on_disk.merge_from_multiple(lists.data(), lists.size(), False)
    index.replace_invlists(on_disk, True)
    on_disk.this.disown()
    faiss.write_index(index, str(directory / "ivf.index"))
    return {
        "index": f"IVF{nlist},{'Flat' if codes == 'flat' else 'RaBitQ'}",
        "inverted_lists": "OnDiskInvertedLists (mmap)",
        "metric": "l2 on unit vectors",
        "train_rows": int(sample.shape[0]),
    }


class LanceSearcher(Searcher):
    sweep: ClassVar[Sweep] = tuple(
        {"nprobes": p, "refine_factor": r}
        for p, r in ((20, 5), (40, 10), (40, 20), (40, 40), (80, 60), (80, 100))
    )

    def __init__(self, directory: Path, threads: int) -> None:
        import lancedb

        self.table = lancedb.connect(str(directory)).open_table("bench")
        self.threads = threads

    def one(self, query, k, setting):
        result = (
            self.table.search(query)
            .distance_type("l2")
            .limit(k)
            .nprobes(setting["nprobes"])
            .refine_factor(setting["refine_factor"])
            .select(["id"])
            .to_arrow()
        )
        return result["id"].to_pylist()

    def batch(self, queries, k, setting):
        return self.threaded_batch(queries, k, setting, self.threads)


def build_lancedb(base: np.ndarray, directory: Path, threads: int) -> dict:
    import lancedb
    import pyarrow as pa
    from lancedb.index import IvfPq

    dim = base.shape[1]
    schema = pa.schema(
        [pa.field("id", pa.int64()), pa.field("vector", pa.list_(pa.float32(), dim))]
    )

    def batches():
        for start in range(0, base.shape[0], 100_000):
            rows = np.ascontiguousarray(base[start : start + 100_000])
            ids = pa.array(np.arange(start, start + rows.shape[0], dtype=np.int64))
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(rows.reshape(-1)), dim)
            yield pa.RecordBatch.from_arrays([ids, vectors], schema=schema)

    table = lancedb.connect(str(directory)).create_table(
        "bench", data=pa.RecordBatchReader.from_batches(schema, batches())
    )
    partitions = max(1, base.shape[0] // 1000)
    sub_vectors = dim // 8
    table.create_index(
        "vector",
        config=IvfPq(
            distance_type="l2",
            num_partitions=partitions,
            num_sub_vectors=sub_vectors,
        ),
    )
    return {
        "index": "IVF_PQ",
        "num_partitions": partitions,
        "num_sub_vectors": sub_vectors,
        "metric": "l2 on unit vectors",
        "refine": "refine_factor reads full vectors from the table",
    }


class DiskannSearcher(Searcher):
    sweep: ClassVar[Sweep] = tuple(
        {"complexity": c} for c in (16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
    )

    def __init__(self, directory: Path, threads: int) -> None:
        import diskannpy

        self.threads = threads
        self.index = diskannpy.StaticDiskIndex(
            str(directory),
            num_threads=threads,
            num_nodes_to_cache=CACHE_MB * 1024 * 1024 // 4096,
            cache_mechanism=1,
            distance_metric="l2",
            vector_dtype=np.float32,
            dimensions=int(np.load(directory.parent / "dim.npy")),
        )

    def batch(self, queries, k, setting):
        ids, _ = self.index.batch_search(
            queries, k, setting["complexity"], self.threads, beam_width=4
        )
        return ids.astype(np.int64)

    def one(self, query, k, setting):
        ids, _ = self.index.search(query, k, setting["complexity"], beam_width=4)
        return ids.astype(np.int64).tolist()


def build_diskann(base: np.ndarray, directory: Path, threads: int) -> dict:
    import diskannpy

    np.save(directory.parent / "dim.npy", np.int64(base.shape[1]))
    # PQ codes in RAM at about the budget SagittaDB's codes take (~160 B a vector)
    budget_gb = base.shape[0] * 160 / 1e9
    diskannpy.build_disk_index(
        data=np.ascontiguousarray(base),
        distance_metric="l2",
        index_directory=str(directory),
        complexity=64,
        graph_degree=32,
        search_memory_maximum=budget_gb,
        build_memory_maximum=8.0,
        num_threads=threads,
    )
    return {
        "graph_degree": 32,
        "build_complexity": 64,
        "search_memory_maximum_gb": round(budget_gb, 3),
        "beam_width": 4,
        "nodes_cached": CACHE_MB * 1024 * 1024 // 4096,
        "metric": "l2 on unit vectors",
    }


class QdrantEdgeSearcher(Searcher):
    # rescoring reads `limit x oversampling` original vectors; with the default (1) only the
    # int8 top `limit` are rescored (recall 0.87 at ef 256 here, 0.91 with oversampling 2)
    sweep: ClassVar[Sweep] = (
        *({"ef": ef, "oversampling": 1.0} for ef in (16, 32, 64, 128, 256)),
        *({"ef": 256, "oversampling": o} for o in (2.0, 4.0, 8.0)),
        *({"ef": 512, "oversampling": o} for o in (4.0, 8.0, 16.0)),
        *({"ef": ef, "oversampling": 4.0} for ef in (1024, 2048)),
    )

    def __init__(self, directory: Path, threads: int) -> None:
        import qdrant_edge as qe

        self.qe = qe
        self.shard = qe.EdgeShard.load(str(directory / "shard"))
        self.threads = threads

    def one(self, query, k, setting):
        qe = self.qe
        hits = self.shard.search(
            qe.SearchRequest(
                query=qe.Query.Nearest(query.tolist()),
                limit=k,
                params=qe.SearchParams(
                    hnsw_ef=setting["ef"],
                    quantization=qe.QuantizationSearchParams(
                        rescore=True, oversampling=setting["oversampling"]
                    ),
                ),
                with_payload=False,
                with_vector=False,
            )
        )
        return [hit.id for hit in hits]

    def batch(self, queries, k, setting):
        return self.threaded_batch(queries, k, setting, self.threads)


def build_qdrant_edge(base: np.ndarray, directory: Path, threads: int) -> dict:
    import qdrant_edge as qe

    config = qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(
            size=base.shape[1], distance=qe.Distance.Cosine, on_disk=True
        ),
        hnsw_config=qe.HnswIndexConfig(
            m=16,
            ef_construct=100,
            full_scan_threshold=10_000,
            max_indexing_threads=threads,
        ),
        quantization_config=qe.ScalarQuantizationConfig(
            type=qe.ScalarType.Int8, always_ram=True
        ),
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
        max_search_threads=1,
    )
    shard = qe.EdgeShard.create(str(directory / "shard"), config)
    for start in range(0, base.shape[0], 1000):
        rows = base[start : start + 1000]
        shard.update(
            qe.UpdateOperation.upsert_points(
                [
                    qe.Point(id=start + i, vector=row.tolist())
                    for i, row in enumerate(rows)
                ]
            )
        )
    shard.optimize()
    shard.flush()
    shard.close()
    return {
        "m": 16,
        "ef_construct": 100,
        "vectors": "on_disk=True",
        "quantization": "scalar int8, always_ram, rescore=True",
    }


BUILDERS = {
    "sagitta-ivf-disk": build_sagitta,
    "sagitta-hnsw-disk": lambda b, d, t: build_sagitta_hnsw(b, d, t, on_disk=True),
    "sagitta-hnsw-ram": lambda b, d, t: build_sagitta_hnsw(b, d, t, on_disk=False),
    "faiss-ivf-flat-disk": lambda b, d, t: build_faiss(b, d, t, "flat"),
    "faiss-ivf-rabitq-disk": lambda b, d, t: build_faiss(b, d, t, "rabitq"),
    "lancedb-ivf-pq": build_lancedb,
    "diskann": build_diskann,
    "qdrant-edge-disk": build_qdrant_edge,
}
SEARCHERS = {
    "sagitta-ivf-disk": SagittaSearcher,
    "sagitta-hnsw-disk": SagittaHnswSearcher,
    "sagitta-hnsw-ram": SagittaHnswSearcher,
    "faiss-ivf-flat-disk": FaissSearcher,
    "faiss-ivf-rabitq-disk": FaissSearcher,
    "lancedb-ivf-pq": LanceSearcher,
    "diskann": DiskannSearcher,
    "qdrant-edge-disk": QdrantEdgeSearcher,
}
PACKAGES = {
    "sagitta-ivf-disk": "sagittadb",
    "sagitta-hnsw-disk": "sagittadb",
    "sagitta-hnsw-ram": "sagittadb",
    "faiss-ivf-flat-disk": "faiss-cpu",
    "faiss-ivf-rabitq-disk": "faiss-cpu",
    "lancedb-ivf-pq": "lancedb",
    "diskann": "diskannpy",
    "qdrant-edge-disk": "qdrant-edge-py",
}


# ---------------------------------------------------------------------------------------------
# Worker processes


def worker_build(spec: dict) -> dict:
    data = Path(spec["data"])
    directory = Path(spec["directory"])
    base = np.load(data / "base.npy", mmap_mode="r")
    started, cpu = time.perf_counter(), process_cpu_seconds()
    builder = BUILDERS[spec["engine"]]
    if spec["engine"] == "sagitta-ivf-disk":
        builder = functools.partial(builder, datatype=spec.get("datatype", "float32"))
    params = builder(base, directory, spec["threads"])
    return {
        "build_seconds": round(time.perf_counter() - started, 3),
        # CPU time of the build (its threads and any processes it waited for): unlike the
        # wall time, this barely moves when something else shares the machine
        "build_cpu_seconds": round(process_cpu_seconds() - cpu, 1),
        "spec_shape": spec["shape"],
        "index_params": params,
        "disk_bytes": directory_bytes(directory),
        "engine_version": package_version(PACKAGES[spec["engine"]]),
    }


def worker_search(spec: dict) -> dict:
    data = Path(spec["data"])
    directory = Path(spec["directory"])
    queries = np.load(data / "queries.npy")
    truth = np.load(data / "gt.npy")
    k, threads = spec["k"], spec["threads"]
    device = tuple(spec["device"])
    before = anonymous_rss()
    started = time.perf_counter()
    searcher = SEARCHERS[spec["engine"]](directory, threads)
    open_seconds = time.perf_counter() - started
    opened = anonymous_rss()
    searcher.batch(np.load(data / "warmup.npy"), k, searcher.sweep[0])
    runs = []
    for setting in searcher.sweep:
        reads0, bytes0 = disk_counters(device)
        started = time.perf_counter()
        found = searcher.batch(queries, k, setting)
        seconds = time.perf_counter() - started
        reads1, bytes1 = disk_counters(device)
        latencies = []
        for query in queries[: spec["latency_queries"]]:
            began = time.perf_counter()
            searcher.one(query, k, setting)
            latencies.append(time.perf_counter() - began)
        count = queries.shape[0]
        run = {
            "scenario": "read-only",
            "search_params": setting,
            "threads": threads,
            "concurrency": threads,
            "recall_at_k": round(recall_at_k(found, truth, k), 4),
            "qps": round(count / seconds, 1),
            "latency_ms": percentiles_ms(latencies),
            "disk_bytes_read_per_query": round((bytes1 - bytes0) / count, 1),
            "disk_reads_per_query": round((reads1 - reads0) / count, 2),
            "device_iops": round((reads1 - reads0) / seconds, 1),
        }
        runs.append(run)
        print(f"{spec['engine']} {setting}: {run}", flush=True)
        if run["recall_at_k"] >= spec["stop_recall"]:
            break
    report = getattr(searcher, "report", None)
    return {
        "runs": runs,
        "open_seconds": round(open_seconds, 3),
        "anonymous_rss_before_open": before,
        "anonymous_rss_after_open": opened,
        "memory_bytes": max(0, opened - before),
        "engine_report": report() if callable(report) else None,
    }


def worker_main(arguments: list[str]) -> int:
    phase, spec_path, out_path = arguments
    spec = json.loads(Path(spec_path).read_text())
    result = worker_build(spec) if phase == "build" else worker_search(spec)
    Path(out_path).write_text(json.dumps(result))
    sys.stdout.flush()
    sys.stderr.flush()
    # some peers' destructors crash at interpreter exit; the result is already written
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# Parent: data, cgroup, one engine after another


class MemoryLimit:
    """A cgroup v1 memory group the search processes start in (None: no limit)."""

    def __init__(self, limit_mb: int) -> None:
        self.path: Path | None = None
        if limit_mb <= 0:
            return
        self.path = CGROUP_ROOT / f"sagitta-bench-disk-{os.getpid()}"
        self.path.mkdir(exist_ok=True)
        (self.path / "memory.limit_in_bytes").write_text(str(limit_mb << 20))

    def reset_peak(self) -> None:
        if self.path is not None:
            (self.path / "memory.max_usage_in_bytes").write_text("0")

    def peak(self) -> int | None:
        if self.path is None:
            return None
        return int((self.path / "memory.max_usage_in_bytes").read_text())

    def enter(self) -> None:
        """Moves the calling process into the group (run in the child before exec)."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.rmdir()


def drop_caches() -> str:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3")
        return "dropped"
    except OSError as error:
        return f"not dropped: {error}"


def run_worker(
    python: str, phase: str, spec: dict, scratch: Path, timeout: float, limit=None
) -> tuple[dict | None, str | None]:
    spec_path = scratch / f"{spec['engine']}-{phase}-spec.json"
    out_path = scratch / f"{spec['engine']}-{phase}.json"
    spec_path.write_text(json.dumps(spec))
    out_path.unlink(missing_ok=True)
    command = [
        python,
        "-m",
        "bench.disk",
        "worker",
        phase,
        str(spec_path),
        str(out_path),
    ]
    log = scratch.parent / f"{spec['engine']}-{phase}.log"
    try:
        with open(log, "w") as output:
            completed = subprocess.run(
                command,
                cwd=REPO,
                timeout=timeout,
                preexec_fn=limit.enter if limit is not None else None,
                stdout=output,
                stderr=output,
                check=False,
            )
    except subprocess.TimeoutExpired:
        return None, f"{phase} did not finish within {timeout:.0f} s"
    if completed.returncode != 0 or not out_path.exists():
        killed = completed.returncode in (-9, 137)
        reason = " (killed: out of memory under the limit?)" if killed else ""
        return (
            None,
            f"{phase} exited with status {completed.returncode}{reason}; see {log.name}",
        )
    return json.loads(out_path.read_text()), None


def engine_python(engine: str, arguments) -> str:
    if engine == "diskann":
        return str(REPO / arguments.diskann_python)
    return sys.executable


def prepare_data(arguments, data: Path) -> dict:
    """The synthetic data set in ``data``: written chunk by chunk and its ground truth
    taken in one pass over the file, so 10M x 768 (30 GB, more than this machine's RAM)
    is prepared like 1M."""
    from bench import datasets

    data.mkdir(parents=True, exist_ok=True)
    marker = data / "dataset.json"
    wanted = {"n": arguments.n, "dim": arguments.dim, "queries": arguments.queries}
    if marker.exists() and json.loads(marker.read_text()).get("shape") == wanted:
        return json.loads(marker.read_text())
    name, params = datasets.synthetic_to_files(
        data, arguments.n, arguments.queries + WARMUP_QUERIES, arguments.dim
    )
    drawn = np.load(data / "queries.npy")
    np.save(data / "queries.npy", drawn[: arguments.queries])
    np.save(data / "warmup.npy", drawn[arguments.queries :])
    base = np.load(data / "base.npy", mmap_mode="r")
    truth = datasets.exact_search_streamed(
        base, drawn[: arguments.queries], arguments.k, "cosine"
    )
    np.save(data / "gt.npy", truth)
    info = {"shape": wanted, "name": name, "metric": "cosine", "params": params}
    marker.write_text(json.dumps(info))
    return info


def reusable_build(scratch: Path, spec: dict) -> dict | None:
    """The earlier build of this engine on the same data, kept by ``--keep-indexes``."""
    recorded = scratch / f"{spec['engine']}-build.json"
    if not recorded.exists():
        return None
    built = json.loads(recorded.read_text())
    return built if built.get("spec_shape") == spec["shape"] else None


def run_engine(arguments, engine: str, data: Path, limit: MemoryLimit) -> dict:
    directory = Path(arguments.workdir) / "engines" / engine / "index"
    scratch = directory.parent
    spec = {
        "engine": engine,
        "shape": {"n": arguments.n, "dim": arguments.dim, "queries": arguments.queries},
        "data": str(data),
        "directory": str(directory),
        "threads": arguments.threads,
        "k": arguments.k,
        "latency_queries": arguments.latency_queries,
        "stop_recall": arguments.stop_recall,
        "datatype": arguments.datatype,
        "device": list(device_of(Path(arguments.workdir))),
    }
    python = engine_python(engine, arguments)
    if not Path(python).exists():
        return {"engine": engine, "skipped": f"no interpreter at {python}"}
    built = reusable_build(scratch, spec) if arguments.reuse_builds else None
    if built is None:
        shutil.rmtree(scratch, ignore_errors=True)
        directory.mkdir(parents=True)
        print(f"{engine}: building", file=sys.stderr, flush=True)
        built, failure = run_worker(
            python, "build", spec, scratch, arguments.build_timeout
        )
        if built is None:
            return {"engine": engine, "skipped": failure}
    else:
        print(f"{engine}: reusing the build kept in {scratch}", file=sys.stderr)
    if arguments.build_only:
        return {"engine": engine, "skipped": "--build-only", "build": built}
    caches = (
        drop_caches() if arguments.drop_caches else "not dropped (--no-drop-caches)"
    )
    limit.reset_peak()
    print(f"{engine}: searching ({caches})", file=sys.stderr, flush=True)
    searched, failure = run_worker(
        python, "search", spec, scratch, arguments.search_timeout, limit
    )
    if searched is None:
        return {"engine": engine, "skipped": failure, "build": built}
    n = arguments.n
    result = {
        "engine": engine,
        "engine_version": built["engine_version"],
        "index_params": built["index_params"],
        "build_seconds": built["build_seconds"],
        "build_cpu_seconds": built.get("build_cpu_seconds"),
        "upload_seconds": None,
        "memory_bytes": searched["memory_bytes"],
        "disk_bytes_written": built["disk_bytes"],
        "runs": searched["runs"],
        "ram_bytes_per_vector": round(searched["memory_bytes"] / n, 1),
        "ram_fraction_of_f32": round(
            searched["memory_bytes"] / (n * arguments.dim * 4), 4
        ),
        "cgroup_peak_bytes": limit.peak(),
        "caches": caches,
        "open_seconds": searched["open_seconds"],
        "engine_report": searched["engine_report"],
    }
    if not arguments.keep_indexes:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def summary(results: list[dict], fio: dict | None) -> dict:
    from bench import report

    best = {}
    for result in results:
        if "runs" not in result:
            continue
        entry = {}
        for floor in (0.95, 0.99):
            run = report.best_run_at(result["runs"], floor)
            entry[f"{floor:.2f}"] = (
                None
                if run is None
                else {
                    "qps": run["qps"],
                    "search_params": run["search_params"],
                    "latency_ms": run["latency_ms"],
                    "disk_bytes_read_per_query": run["disk_bytes_read_per_query"],
                    "disk_reads_per_query": run["disk_reads_per_query"],
                    "device_iops": run["device_iops"],
                }
            )
        entry["max_recall"] = max(run["recall_at_k"] for run in result["runs"])
        entry["build_seconds"] = result["build_seconds"]
        entry["build_cpu_seconds"] = result.get("build_cpu_seconds")
        entry["ram_bytes_per_vector"] = result["ram_bytes_per_vector"]
        best[result["engine"]] = entry
    return {
        "best_at_recall": best,
        "sagitta_qps_over_peer": qps_ratios(best, "sagitta-ivf-disk"),
        "sagitta_hnsw_disk_qps_over_peer": qps_ratios(best, "sagitta-hnsw-disk"),
        "fio_random_read_iops": fio,
        "note": "ratio = SagittaDB's best QPS / the peer's at the same recall floor; null = "
        "one side did not reach it",
    }


def qps_ratios(best: dict, ours_name: str) -> dict:
    """``ours_name``'s best QPS over each other engine's at each recall floor."""
    ratios: dict = {}
    ours = best.get(ours_name, {})
    for peer, entry in best.items():
        if peer == ours_name:
            continue
        for floor in ("0.95", "0.99"):
            mine, theirs = ours.get(floor), entry.get(floor)
            ratios.setdefault(peer, {})[floor] = (
                round(mine["qps"] / theirs["qps"], 3) if mine and theirs else None
            )
    return ratios


def fio_iops() -> dict | None:
    """fio's 4 KiB random-read IOPS by queue depth from ``bench/results/fio-baseline.json``."""
    path = REPO / "bench" / "results" / "fio-baseline.json"
    if not path.exists():
        return None
    rows = json.loads(path.read_text()).get("results", [])
    out = {
        str(row["iodepth"]): row["iops"]
        for row in rows
        if row.get("engine") == "fio" and row.get("scenario") == "randread-4k"
    }
    return out or None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "worker":
        return worker_main(argv[1:])
    from bench import report

    parser = argparse.ArgumentParser(
        prog="python -m bench.disk", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--memory-limit-mb", type=int, default=1024)
    parser.add_argument(
        "--datatype",
        choices=("float32", "float16"),
        default="float32",
        help="SagittaDB's vectors.datatype: float16 halves its records file",
    )
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--latency-queries", type=int, default=200)
    parser.add_argument("--stop-recall", type=float, default=0.99)
    parser.add_argument("--build-timeout", type=float, default=3600)
    parser.add_argument("--search-timeout", type=float, default=1200)
    parser.add_argument("--diskann-python", default=".venv-diskann/bin/python")
    parser.add_argument("--keep-indexes", action="store_true")
    parser.add_argument(
        "--reuse-builds",
        action="store_true",
        help="search an index kept by an earlier --keep-indexes run on the same data",
    )
    parser.add_argument(
        "--build-only",
        action="store_true",
        help="build (and keep) the indexes without searching them",
    )
    parser.add_argument(
        "--drop-caches",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="drop the kernel's caches before each engine's search (needs root)",
    )
    parser.add_argument("--out", required=True)
    arguments = parser.parse_args(argv)
    arguments.keep_indexes |= arguments.build_only
    engines = [name.strip() for name in arguments.engines.split(",") if name.strip()]
    unknown = sorted(set(engines) - set(ENGINES))
    if unknown:
        parser.error(f"unknown engines {unknown}; known: {', '.join(ENGINES)}")
    started_at = report.utc_now()
    data = Path(arguments.workdir) / "data"
    info = prepare_data(arguments, data)
    limit = MemoryLimit(arguments.memory_limit_mb)
    results, skipped = [], []

    def document() -> dict:
        return report.build_document(
            suite="disk-peers",
            command=report.repo_relative_text(
                shlex.join([sys.executable, "-m", "bench.disk", *argv])
            ),
            started_at=started_at,
            dataset={
                "name": info["name"],
                "n": arguments.n,
                "dim": arguments.dim,
                "metric": info["metric"],
                "queries": arguments.queries,
                "k": arguments.k,
                "params": info["params"],
            },
            results=results,
            extra={
                "memory_limit_mb": arguments.memory_limit_mb,
                "build_limit": "builds run without the memory limit (every engine alike)",
                "warmup_queries": WARMUP_QUERIES,
                "skipped": skipped,
                "disk_summary": summary(results, fio_iops()),
            },
        )

    try:
        for engine in engines:
            outcome = run_engine(arguments, engine, data, limit)
            if "skipped" in outcome:
                print(f"{engine}: skipped: {outcome['skipped']}", file=sys.stderr)
                skipped.append(outcome)
            else:
                results.append(outcome)
            # written after every engine: a run cut short keeps what it measured
            if report.invalid(document()):
                return 2
            report.write_json(document(), arguments.out)
    finally:
        limit.remove()
    final = document()
    print(json.dumps(final["disk_summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
