"""One uniform interface over SagittaDB and its peers (hnswlib, FAISS, usearch, qdrant-edge).

Every engine gets the same float32 data (unit vectors for cosine), the same thread count, the
same k and the same graph parameters (M, ef_construction). Search results are int64 row
indices into the base array (-1 where an engine returned fewer than k results).

Memory (``memory_bytes``) is the engine's own accounting where it has one, otherwise a layout
formula; the method is stated in ``memory_method`` and the resident-set delta around the build
is always reported next to it by the runner.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import math
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

DEFAULT_EF_SWEEP = (16, 24, 32, 48, 64, 96, 128, 192, 256)
DEFAULT_NPROBE_SWEEP = (1, 2, 4, 8, 16, 32, 64)
# How many candidates an IVF index with refinement re-scores exactly: k_factor × k.
DEFAULT_KFACTOR_SWEEP = (2, 4, 8, 16)

SAGITTA_ENGINES = (
    "sagitta-flat",
    "sagitta-hnsw",
    "sagitta-hnsw-sq8",
    "sagitta-hnsw-sq8-b1",
    "sagitta-hnsw-sq8-b1walk",
    "sagitta-hnsw-sq8-lanes",
    "sagitta-hnsw-sq8-shuffled",
)
PEER_ENGINES = (
    "hnswlib",
    "faiss-hnsw",
    "faiss-ivf",
    "faiss-ivfpq-fs-refine",
    "faiss-ivf-rabitq",
    "usearch-f32",
    "usearch-i8",
    "usearch-i8-rerank",
    "qdrant-edge",
)
ALL_ENGINES = SAGITTA_ENGINES + PEER_ENGINES

_MODULES = {
    "sagitta-flat": "sagittadb",
    "sagitta-hnsw": "sagittadb",
    "sagitta-hnsw-sq8": "sagittadb",
    "sagitta-hnsw-sq8-b1": "sagittadb",
    "sagitta-hnsw-sq8-b1walk": "sagittadb",
    "sagitta-hnsw-sq8-lanes": "sagittadb",
    "sagitta-hnsw-sq8-shuffled": "sagittadb",
    "hnswlib": "hnswlib",
    "faiss-hnsw": "faiss",
    "faiss-ivf": "faiss",
    "faiss-ivfpq-fs-refine": "faiss",
    "faiss-ivf-rabitq": "faiss",
    "usearch-f32": "usearch.index",
    "usearch-i8": "usearch.index",
    "usearch-i8-rerank": "usearch.index",
    "qdrant-edge": "qdrant_edge",
}


def _package_version(distribution: str, module=None) -> str:
    version = getattr(module, "__version__", None)
    if version:
        return str(version)
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _as_int64_ids(ids: np.ndarray) -> np.ndarray:
    """uint64 ids (2**64-1 = missing) or int ids -> int64 with -1 for missing."""
    ids = np.asarray(ids)
    if ids.dtype == np.uint64:
        return ids.view(np.int64).copy()  # 2**64-1 wraps to -1
    return ids.astype(np.int64, copy=False)


class Engine:
    """Base class. Subclasses implement build / search / search_one / memory_bytes."""

    name = "engine"
    sweep_key: str | None = None  # the search parameter swept ("ef", "nprobe") or None
    memory_method = "rss-delta"
    # How `search(..., threads)` runs: False = the engine's own threads inside one batched
    # call; True = one query per call, `threads` Python threads each calling it.
    one_query_per_call = False
    # Where `work_per_query` gets its numbers, or why it has none.
    work_method = "none: the engine exposes no per-query counters"

    def __init__(self, name: str, params: dict) -> None:
        self.name = name
        self.params = dict(params)
        self.m = int(params.get("m", 16))
        self.ef_construction = int(params.get("ef_construction", 100))
        self.seed = int(params.get("seed", 42))
        self.extra: dict = {}

    @property
    def version(self) -> str:
        return "unknown"

    @property
    def index_params(self) -> dict:
        return {}

    def sweep(
        self,
        ef_sweep=DEFAULT_EF_SWEEP,
        nprobe_sweep=DEFAULT_NPROBE_SWEEP,
        kfactor_sweep=DEFAULT_KFACTOR_SWEEP,
    ) -> list[dict]:
        if self.sweep_key == "ef":
            return [{"ef": int(ef)} for ef in ef_sweep]
        if self.sweep_key == "nprobe":
            return [{"nprobe": int(p)} for p in nprobe_sweep]
        if self.sweep_key == "nprobe×k_factor":
            return [
                {"nprobe": int(p), "k_factor": int(f)}
                for p in nprobe_sweep
                for f in kfactor_sweep
            ]
        return [{}]

    def build(self, base: np.ndarray, metric: str, threads: int) -> None:
        raise NotImplementedError

    def search(
        self, queries: np.ndarray, k: int, search_params: dict, threads: int
    ) -> np.ndarray:
        raise NotImplementedError

    def search_one(self, query: np.ndarray, k: int, search_params: dict) -> np.ndarray:
        """One query on the calling thread (used for the latency loop)."""
        return self.search(query[None, :], k, search_params, 1)[0]

    def work_per_query(self, queries, k: int, search_params: dict) -> dict | None:
        """Mean work per query (distance evaluations, bytes read) where the engine can
        count it; None otherwise."""
        return None

    def memory_bytes(self) -> int | None:
        return None

    def close(self) -> None:
        """Drop the index so its memory can be freed before the next engine runs."""


# ---------------------------------------------------------------------------------------------
# hnswlib


class HnswlibEngine(Engine):
    sweep_key = "ef"
    memory_method = (
        "layout formula (hnswlib 0.8 hnswalg.h: level-0 block + upper links + locks)"
    )
    work_method = (
        "none: hnswlib's Python binding exposes no counters (hnswalg.h's "
        "metric_distance_computations and metric_hops are C++ members only)"
    )

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        import hnswlib

        self._hnswlib = hnswlib
        self.index = None
        self._n = 0
        self._dim = 0
        self._ef = None

    @property
    def version(self) -> str:
        return _package_version("hnswlib", self._hnswlib)

    @property
    def index_params(self) -> dict:
        return {"m": self.m, "ef_construct": self.ef_construction}

    def build(self, base, metric, threads):
        space = "l2" if metric == "l2" else "ip"  # cosine data arrives normalized
        n, dim = base.shape
        index = self._hnswlib.Index(space=space, dim=dim)
        index.init_index(
            max_elements=n,
            M=self.m,
            ef_construction=self.ef_construction,
            random_seed=self.seed,
        )
        index.set_num_threads(threads)
        index.add_items(base, np.arange(n), num_threads=threads)
        self.index, self._n, self._dim = index, n, dim
        self.extra["space"] = space

    def _set_ef(self, ef: int) -> None:
        if ef != self._ef:
            self.index.set_ef(ef)
            self._ef = ef

    def search(self, queries, k, search_params, threads):
        self._set_ef(search_params["ef"])
        labels, _ = self.index.knn_query(queries, k=k, num_threads=threads)
        return labels.astype(np.int64, copy=False)

    def search_one(self, query, k, search_params):
        self._set_ef(search_params["ef"])
        labels, _ = self.index.knn_query(query, k=k, num_threads=1)
        return labels[0].astype(np.int64, copy=False)

    def memory_bytes(self):
        n, m, dim = self._n, self.m, self._dim
        level0 = n * (2 * m * 4 + 4 + dim * 4 + 8)  # links + count + vector + label
        upper = n / (m - 1) * (m * 4 + 4)  # expected levels above 0: sum M^-l = 1/(M-1)
        per_element = n * (
            8 + 4 + 40 + 48
        )  # linklist pointer, level, mutex, label map entry
        return int(level0 + upper + per_element)

    def close(self):
        self.index = None


# ---------------------------------------------------------------------------------------------
# FAISS


class _FaissEngine(Engine):
    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        import faiss

        self._faiss = faiss
        self.index = None
        self._omp_threads = None

    @property
    def version(self) -> str:
        return _package_version("faiss-cpu", self._faiss)

    def _threads(self, threads: int) -> None:
        if threads != self._omp_threads:
            self._faiss.omp_set_num_threads(threads)
            self._omp_threads = threads

    def _metric(self, metric: str):
        return (
            self._faiss.METRIC_L2
            if metric == "l2"
            else self._faiss.METRIC_INNER_PRODUCT
        )

    def _search_params(self, search_params: dict):
        raise NotImplementedError

    def search(self, queries, k, search_params, threads):
        self._threads(threads)
        _, labels = self.index.search(
            queries, k, params=self._search_params(search_params)
        )
        return labels.astype(np.int64, copy=False)

    def search_one(self, query, k, search_params):
        self._threads(1)
        params = self._search_params(search_params)
        _, labels = self.index.search(query[None, :], k, params=params)
        return labels[0]

    def close(self):
        self.index = None


class FaissHnswEngine(_FaissEngine):
    sweep_key = "ef"
    memory_method = "layout (faiss: neighbors int32 + offsets + levels + flat codes)"
    work_method = (
        "faiss.cvar.hnsw_stats over one single-thread pass: distances = ndis, hops = "
        "nhops; bytes_read = distances × 4·dim (float32 rows); graph_bytes_read = hops × "
        "level-0 neighbor list (2·M int32), an upper bound for hops on upper levels"
    )

    @property
    def index_params(self) -> dict:
        return {"m": self.m, "ef_construct": self.ef_construction}

    def build(self, base, metric, threads):
        faiss = self._faiss
        self._threads(threads)
        index = faiss.IndexHNSWFlat(base.shape[1], self.m, self._metric(metric))
        index.hnsw.efConstruction = self.ef_construction
        index.add(base)
        self.index = index

    def _search_params(self, search_params):
        return self._faiss.SearchParametersHNSW(efSearch=int(search_params["ef"]))

    def work_per_query(self, queries, k, search_params):
        stats = self._faiss.cvar.hnsw_stats  # process-wide, summed over searches
        stats.reset()
        self.search(queries, k, search_params, 1)
        count = max(queries.shape[0], 1)
        distances, hops = stats.ndis / count, stats.nhops / count
        row_bytes = self.index.d * 4
        neighbor_list_bytes = self.index.hnsw.nb_neighbors(0) * 4
        return {
            "distances": round(distances, 1),
            "hops": round(hops, 1),
            "bytes_read": round(distances * row_bytes, 1),
            "graph_bytes_read": round(hops * neighbor_list_bytes, 1),
            "row_bytes": row_bytes,
            "neighbor_list_bytes": neighbor_list_bytes,
        }

    def memory_bytes(self):
        hnsw = self.index.hnsw
        graph = (
            hnsw.neighbors.size() * 4 + hnsw.offsets.size() * 8 + hnsw.levels.size() * 4
        )
        codes = self.index.ntotal * self.index.d * 4
        return int(graph + codes)


class FaissIvfEngine(_FaissEngine):
    sweep_key = "nprobe"
    memory_method = "layout (faiss: inverted lists codes + ids + coarse centroids)"

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        self.nlist = 0
        self.train_size = 0

    @property
    def index_params(self) -> dict:
        return {"nlist": self.nlist, "train_size": self.train_size}

    def _training_sample(self, base: np.ndarray) -> np.ndarray:
        """Sets nlist ≈ 4√n and returns up to 40 × nlist rows drawn with the seed."""
        n = base.shape[0]
        self.nlist = max(1, min(n, round(4 * math.sqrt(n))))
        self.train_size = min(n, 40 * self.nlist)
        rng = np.random.Generator(np.random.PCG64(self.seed))
        return base[np.sort(rng.choice(n, self.train_size, replace=False))]

    def build(self, base, metric, threads):
        faiss = self._faiss
        self._threads(threads)
        dim = base.shape[1]
        sample = self._training_sample(base)
        quantizer = faiss.IndexFlatL2(dim) if metric == "l2" else faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, self.nlist, self._metric(metric))
        index.cp.seed = self.seed
        index.train(sample)
        index.add(base)
        self.index, self._quantizer = index, quantizer

    def _search_params(self, search_params):
        return self._faiss.SearchParametersIVF(nprobe=int(search_params["nprobe"]))

    def memory_bytes(self):
        index = self.index
        return int(index.ntotal * (index.d * 4 + 8) + self.nlist * index.d * 4)

    def close(self):
        self.index = None
        self._quantizer = None


class _FaissIvfRefineEngine(FaissIvfEngine):
    """IVF over compressed codes whose best ``k_factor × k`` candidates are re-scored on
    the full float32 vectors (``IndexRefineFlat``), built with ``index_factory``: the
    configuration a FAISS user picks for recall ≥ 0.95 at small memory traffic. nlist ≈
    4√n, trained on up to 40 × nlist rows."""

    sweep_key = "nprobe×k_factor"
    factory = ""

    def _factory(self, dim: int) -> str:
        raise NotImplementedError

    def _ivf_params(self, nprobe: int):
        return self._faiss.SearchParametersIVF(nprobe=nprobe)

    @property
    def index_params(self) -> dict:
        return {**super().index_params, "factory": self.factory}

    def build(self, base, metric, threads):
        faiss = self._faiss
        self._threads(threads)
        n, dim = base.shape
        sample = self._training_sample(base)
        self.factory = self._factory(dim)
        index = faiss.index_factory(dim, self.factory, self._metric(metric))
        ivf = faiss.extract_index_ivf(index)
        ivf.cp.seed = self.seed
        index.train(sample)
        index.add(base)
        self.index, self._n, self._dim = index, n, dim

    def _search_params(self, search_params):
        return self._faiss.IndexRefineSearchParameters(
            k_factor=float(search_params["k_factor"]),
            base_index_params=self._ivf_params(int(search_params["nprobe"])),
        )

    def _code_bytes(self) -> int:
        ivf = self._faiss.extract_index_ivf(self.index)
        return int(ivf.code_size)

    def memory_bytes(self):
        n, dim = self._n, self._dim
        report = {
            "codes": n * self._code_bytes(),
            "ids": n * 8,
            "centroids": self.nlist * dim * 4,
            "refine_vectors": n * dim * 4,
        }
        self.extra["memory_report"] = report
        return int(sum(report.values()))


class FaissIvfPqFastScanRefineEngine(_FaissIvfRefineEngine):
    """``IVF{nlist},PQ{dim/4}x4fs,RFlat``: 4-bit PQ scanned with SIMD lookup tables
    (fast-scan), then exact refinement."""

    memory_method = (
        "layout (faiss: 4-bit PQ codes + ids + centroids + refine f32 vectors)"
    )

    def _factory(self, dim: int) -> str:
        return f"IVF{self.nlist},PQ{dim // 4}x4fs,RFlat"


class FaissIvfRabitqEngine(_FaissIvfRefineEngine):
    """``IVF{nlist},RaBitQ,RFlat``: 1-bit RaBitQ codes with an 8-bit quantized query
    (``qb``), then exact refinement."""

    memory_method = (
        "layout (faiss: RaBitQ codes + ids + centroids + refine f32 vectors)"
    )

    def _factory(self, dim: int) -> str:
        return f"IVF{self.nlist},RaBitQ,RFlat"

    def _ivf_params(self, nprobe: int):
        params = self._faiss.IVFRaBitQSearchParameters()
        params.nprobe = nprobe
        params.qb = 8
        return params


# ---------------------------------------------------------------------------------------------
# usearch


class UsearchEngine(Engine):
    sweep_key = "ef"
    memory_method = "engine-reported (usearch Index.memory_usage)"

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        import usearch.index

        self._usearch = usearch
        self._module = usearch.index
        self.dtype = params.get("dtype", "i8" if name.endswith("i8") else "f32")
        self.index = None

    @property
    def version(self) -> str:
        return _package_version("usearch", self._usearch)

    @property
    def index_params(self) -> dict:
        return {"m": self.m, "ef_construct": self.ef_construction, "dtype": self.dtype}

    def build(self, base, metric, threads):
        usearch_metric = {"cosine": "cos", "dot": "ip", "l2": "l2sq"}[metric]
        index = self._module.Index(
            ndim=base.shape[1],
            metric=usearch_metric,
            dtype=self.dtype,
            connectivity=self.m,
            expansion_add=self.ef_construction,
            expansion_search=64,
        )
        index.add(np.arange(base.shape[0], dtype=np.uint64), base, threads=threads)
        self.index = index
        self.extra["usearch_metric"] = usearch_metric
        self.extra["hardware_acceleration"] = str(index.hardware_acceleration)

    def _set_ef(self, ef: int) -> None:
        if self.index.expansion_search != ef:
            self.index.expansion_search = ef

    def search(self, queries, k, search_params, threads):
        self._set_ef(int(search_params["ef"]))
        matches = self.index.search(queries, k, threads=threads)
        keys = np.asarray(matches.keys).view(np.int64).copy()
        counts = np.asarray(matches.counts)
        keys[np.arange(k)[None, :] >= counts[:, None]] = -1
        return keys

    def search_one(self, query, k, search_params):
        self._set_ef(int(search_params["ef"]))
        matches = self.index.search(query, k, threads=1)
        return np.asarray(matches.keys).view(np.int64)

    def memory_bytes(self):
        return int(self.index.memory_usage)

    def close(self):
        self.index = None


class UsearchRerankEngine(UsearchEngine):
    """usearch's int8 graph returning its best ``max(4·k, 32)`` candidates (SagittaDB's
    re-scoring depth), re-scored on the float32 vectors with numpy: what a usearch user
    does for recall above what int8 distances reach. The re-scoring is part of the timed
    call."""

    memory_method = "engine-reported (usearch Index.memory_usage) + f32 rerank vectors"

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, {**params, "dtype": "i8"})
        self._base: np.ndarray | None = None
        self._metric = "cosine"

    @property
    def index_params(self) -> dict:
        return {**super().index_params, "rerank": "max(4k, 32)"}

    def build(self, base, metric, threads):
        super().build(base, metric, threads)
        self._base, self._metric = base, metric

    def _rerank(self, queries: np.ndarray, keys: np.ndarray, k: int) -> np.ndarray:
        base = self._base
        assert base is not None
        safe = np.where(keys < 0, 0, keys)
        rows = base[safe]
        if self._metric == "l2":
            scores = -np.square(rows - queries[:, None, :]).sum(axis=2)
        else:
            scores = np.einsum("qcd,qd->qc", rows, queries)
        scores[keys < 0] = -np.inf
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(keys, order, axis=1)

    def search(self, queries, k, search_params, threads):
        candidates = super().search(queries, max(4 * k, 32), search_params, threads)
        return self._rerank(queries, candidates, k)

    def search_one(self, query, k, search_params):
        self._set_ef(int(search_params["ef"]))
        matches = self.index.search(query, max(4 * k, 32), threads=1)
        keys = np.asarray(matches.keys).view(np.int64)[None, :]
        return self._rerank(query[None, :], keys, k)[0]

    def memory_bytes(self):
        base = self._base
        assert base is not None
        graph = int(self.index.memory_usage)
        vectors = int(base.shape[0] * base.shape[1] * 4)
        self.extra["memory_report"] = {
            "graph_and_codes": graph,
            "rerank_vectors": vectors,
        }
        return graph + vectors

    def close(self):
        super().close()
        self._base = None


# ---------------------------------------------------------------------------------------------
# qdrant-edge (qdrant-edge-py: Qdrant's shard embedded in this process)


class QdrantEdgeEngine(Engine):
    """An ``EdgeShard`` in a temporary directory (removed by ``close``): float32 vectors in
    RAM, HNSW with the same m / ef_construct built on ``threads`` indexing threads (points
    upserted 1,000 at a time, then ``optimize()``), searched with ``SearchParams.hnsw_ef``.

    Segments smaller than ``full_scan_threshold`` are searched exactly instead of through
    their graph; it is set to 1 KB so that small test sets search the graph too (at the
    benchmark's sizes Qdrant's default of 10,000 KB changes nothing: every segment is
    larger). The segment count is Qdrant's own choice (``default_segment_number`` auto) and
    is reported in ``engine_extra``; a search visits every segment.

    ``search`` takes one query per call, so ``threads`` are Python threads, each calling it
    over its share of the queries. The call holds the GIL (``bench scaling`` measures this:
    its ``gil_probe``), so those threads take turns instead of adding cores; what does use
    cores is the shard's search pool (``max_search_threads``), which runs one query's
    segments in parallel: ``search`` reopens the shard with a pool of ``threads`` threads
    when that changes, so that 1 thread means one core. ``search_one`` uses the pool as it
    is (the last ``threads``, at first the build's).
    """

    sweep_key = "ef"
    one_query_per_call = True
    memory_method = "rss-delta around build (qdrant-edge-py reports no memory)"
    work_method = "none: qdrant-edge-py exposes no per-search counters"
    full_scan_threshold_kb = 1
    upsert_batch = 1000

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        import qdrant_edge

        self._qdrant_edge = qdrant_edge
        self.shard = None
        self._directory: Path | None = None
        self._vector_params = None
        self._pool_threads = 0

    @property
    def version(self) -> str:
        return _package_version("qdrant-edge-py", self._qdrant_edge)

    @property
    def index_params(self) -> dict:
        return {
            "m": self.m,
            "ef_construct": self.ef_construction,
            "quantization": "none",
            "full_scan_threshold_kb": self.full_scan_threshold_kb,
            "indexing_threshold_kb": 1,
            "wal": False,
        }

    def build(self, base, metric, threads):
        qe = self._qdrant_edge
        distance = {
            "cosine": qe.Distance.Cosine,
            "dot": qe.Distance.Dot,
            "l2": qe.Distance.Euclid,
        }[metric]
        self._vector_params = qe.EdgeVectorParams(size=base.shape[1], distance=distance)
        config = qe.EdgeConfig(
            vectors=self._vector_params,
            hnsw_config=qe.HnswIndexConfig(
                m=self.m,
                ef_construct=self.ef_construction,
                full_scan_threshold=self.full_scan_threshold_kb,
                max_indexing_threads=threads,
            ),
            # index every segment, however small
            optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
            max_search_threads=threads,
            wal_enabled=False,
        )
        self._directory = Path(tempfile.mkdtemp(prefix="bench-qdrant-edge-"))
        shard = qe.EdgeShard.create(str(self._directory / "shard"), config)
        self.shard = shard
        n = base.shape[0]
        for first in range(0, n, self.upsert_batch):
            rows = base[first : first + self.upsert_batch]
            points = [qe.Point(id=first + i, vector=row) for i, row in enumerate(rows)]
            shard.update(qe.UpdateOperation.upsert_points(points))
        shard.optimize()
        shard.flush()  # no WAL: reopening (_use_pool) reads what flush wrote
        self._pool_threads = threads
        info = shard.info()
        if info.points_count != n or info.indexed_vectors_count < n:
            raise RuntimeError(f"qdrant-edge: not fully indexed after optimize: {info}")
        self.extra["segments"] = info.segments_count

    def _use_pool(self, threads: int) -> None:
        """Reopens the shard with a search pool of ``threads`` threads, if not that."""
        if threads == self._pool_threads:
            return
        qe = self._qdrant_edge
        assert self.shard is not None and self._directory is not None
        self.shard.close()
        self.shard = None
        config = qe.EdgeConfig(
            vectors=self._vector_params, max_search_threads=threads, wal_enabled=False
        )
        self.shard = qe.EdgeShard.load(str(self._directory / "shard"), config)
        self._pool_threads = threads

    def _request(self, query: np.ndarray, k: int, ef: int):
        qe = self._qdrant_edge
        return qe.SearchRequest(
            query=qe.Query.Nearest(query),
            limit=k,
            params=qe.SearchParams(hnsw_ef=ef),
            with_payload=False,
            with_vector=False,
        )

    def search_one(self, query, k, search_params):
        hits = self.shard.search(self._request(query, k, int(search_params["ef"])))
        ids = np.full(k, -1, dtype=np.int64)
        found = [hit.id for hit in hits[:k]]
        ids[: len(found)] = found
        return ids

    def search(self, queries, k, search_params, threads):
        self._use_pool(threads)
        ids = np.full((queries.shape[0], k), -1, dtype=np.int64)

        def search_rows(rows: np.ndarray) -> None:
            for row in rows:
                ids[row] = self.search_one(queries[row], k, search_params)

        if threads <= 1:
            search_rows(np.arange(queries.shape[0]))
            return ids
        shares = np.array_split(np.arange(queries.shape[0]), threads)
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(search_rows, shares))
        return ids

    def close(self):
        if self.shard is not None:
            self.shard.close()
            self.shard = None
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


# ---------------------------------------------------------------------------------------------
# SagittaDB (the `sagittadb` PyO3 package)


class _SagittaEngine(Engine):
    memory_method = "engine-reported (sagittadb memory_bytes())"

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        import sagittadb

        self._sagittadb = sagittadb
        self.index = None

    @property
    def version(self) -> str:
        return _package_version("sagittadb", self._sagittadb)

    def close(self):
        self.index = None


class SagittaFlatEngine(_SagittaEngine):
    sweep_key = None

    @property
    def index_params(self) -> dict:
        return {"index": "flat"}

    def build(self, base, metric, threads):
        index = self._sagittadb.FlatIndex(base.shape[1], metric=metric)
        index.add(base)
        self.index = index
        self._n, self._dim = base.shape

    def search(self, queries, k, search_params, threads):
        ids, _ = self.index.search(queries, k, threads=threads)
        return _as_int64_ids(ids)

    def search_one(self, query, k, search_params):
        ids, _ = self.index.search(query[None, :], k, threads=1)
        return _as_int64_ids(ids)[0]

    def memory_bytes(self):
        report = getattr(self.index, "memory_bytes", None)
        if callable(report):
            value = report()
            if isinstance(value, dict):
                self.extra["memory_report"] = {key: int(v) for key, v in value.items()}
                return int(value.get("total", sum(value.values())))
            return int(value)
        self.memory_method = (
            "layout (n * dim * 4 bytes of float32 vectors + 8-byte ids)"
        )
        return int(self._n * (self._dim * 4 + 8))


class SagittaHnswEngine(_SagittaEngine):
    sweep_key = "ef"
    work_method = (
        "sagittadb HnswIndex.search_stats (one thread): bytes_read = traversal rows × "
        "traversal_row_bytes (SQ8: the dim-byte code + its header; f32: 4·dim) + screened "
        "rows × screen_row_bytes + re-scored rows × 4·dim; adjacency lists not counted"
    )

    def __init__(self, name: str, params: dict) -> None:
        super().__init__(name, params)
        self.quantization = params.get(
            "quantization", "sq8" if "-sq8" in name else "none"
        )
        # issue 20's two search variants, measured beside the default: the 1-bit first
        # pass (coded after the build, inside the build time) and interleaved batches
        # and walking the graph on those 1-bit codes alone (-b1walk)
        self.bit_walk = name.endswith("-b1walk")
        self.first_pass = name.endswith("-b1")
        self.interleave = name.endswith("-lanes")
        # rows placed cluster by cluster either way; linked in that order (the default)
        # or in a seeded random one
        self.link_order = "shuffled" if name.endswith("-shuffled") else "clustered"

    @property
    def index_params(self) -> dict:
        return {
            "m": self.m,
            "ef_construct": self.ef_construction,
            "quantization": self.quantization,
            "first_pass": self.first_pass,
            "interleave": self.interleave,
            "link_order": self.link_order,
        }

    def build(self, base, metric, threads):
        index = self._sagittadb.HnswIndex(
            base.shape[1],
            metric=metric,
            m=self.m,
            ef_construction=self.ef_construction,
            quantization=self.quantization,
            capacity=base.shape[0],
            seed=self.seed,
        )
        index.add(base, threads=threads, link_order=self.link_order)
        if self.first_pass or self.bit_walk:
            index.enable_first_pass(threads=threads)
        self.index = index

    def search(self, queries, k, search_params, threads):
        ids, _ = self.index.search(
            queries,
            k,
            ef=int(search_params["ef"]),
            threads=threads,
            first_pass=self.first_pass,
            interleave=self.interleave,
            bit_walk=self.bit_walk,
        )
        return _as_int64_ids(ids)

    def search_one(self, query, k, search_params):
        ids, _ = self.index.search(
            query[None, :],
            k,
            ef=int(search_params["ef"]),
            threads=1,
            first_pass=self.first_pass,
            bit_walk=self.bit_walk,
        )
        return _as_int64_ids(ids)[0]

    def work_per_query(self, queries, k, search_params):
        stats = self.index.search_stats(
            queries,
            k,
            ef=int(search_params["ef"]),
            first_pass=self.first_pass,
            bit_walk=self.bit_walk,
        )
        return {key: round(float(value), 1) for key, value in stats.items()}

    def memory_bytes(self):
        report = {key: int(value) for key, value in self.index.memory_bytes().items()}
        self.extra["memory_report"] = report
        if self.quantization == "none":
            self.memory_method = (
                "engine-reported (sagittadb memory_bytes(): graph + vectors)"
            )
            return report.get("graph", 0) + report.get("vectors", 0)
        self.memory_method = (
            "engine-reported (sagittadb memory_bytes(): graph + codes + screen)"
        )
        return report.get("graph", 0) + report.get("codes", 0) + report.get("screen", 0)


_CLASSES = {
    "sagitta-flat": SagittaFlatEngine,
    "sagitta-hnsw": SagittaHnswEngine,
    "sagitta-hnsw-sq8": SagittaHnswEngine,
    "sagitta-hnsw-sq8-b1": SagittaHnswEngine,
    "sagitta-hnsw-sq8-b1walk": SagittaHnswEngine,
    "sagitta-hnsw-sq8-lanes": SagittaHnswEngine,
    "sagitta-hnsw-sq8-shuffled": SagittaHnswEngine,
    "hnswlib": HnswlibEngine,
    "faiss-hnsw": FaissHnswEngine,
    "faiss-ivf": FaissIvfEngine,
    "faiss-ivfpq-fs-refine": FaissIvfPqFastScanRefineEngine,
    "faiss-ivf-rabitq": FaissIvfRabitqEngine,
    "usearch-f32": UsearchEngine,
    "usearch-i8": UsearchEngine,
    "usearch-i8-rerank": UsearchRerankEngine,
    "qdrant-edge": QdrantEdgeEngine,
}


def engine_available(name: str) -> tuple[bool, str]:
    """Whether the engine's package imports; the reason when it does not."""
    if name not in _MODULES:
        return False, f"unknown engine {name!r}; known: {', '.join(ALL_ENGINES)}"
    try:
        importlib.import_module(_MODULES[name])
    except ImportError as error:
        return False, f"cannot import {_MODULES[name]}: {error}"
    return True, ""


def make_engine(name: str, params: dict) -> Engine:
    if name not in _CLASSES:
        raise ValueError(f"unknown engine {name!r}; known: {', '.join(ALL_ENGINES)}")
    return _CLASSES[name](name, params)
