"""Peer adapters of the ingestion benchmark (``bench.ingest``): qdrant-edge-py, LanceDB and
Chroma, embedded in this process. Each imports its package when it runs (they are pinned in
requirements-bench.txt; CI does not install them). What each measures and how "fully indexed"
is detected is described in ``bench.ingest``'s docstring and each result's ``index_method``.
Each searches its indexed data through ``IngestContext.indexed_runs`` with a function of ef,
so ``bench.pysweep`` can sweep ef on the same adapters.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import time
from functools import partial
from pathlib import Path

import numpy as np

from bench.ingest_common import (
    DiskMeter,
    IngestContext,
    K,
    make_result,
    package_version,
    wait_until,
)

# ---------------------------------------------------------------------------------------------
# qdrant-edge-py


def run_qdrant_edge(ctx: IngestContext) -> dict:
    """Qdrant's embedded shard: ``update(upsert_points)`` per batch, then ``optimize()``."""
    import qdrant_edge as qe

    quantization = ctx.options.get("qdrant_quantization", "sq8")
    config = qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=ctx.dim, distance=qe.Distance.Cosine),
        hnsw_config=qe.HnswIndexConfig(
            m=ctx.m,
            ef_construct=ctx.ef_construction,
            full_scan_threshold=10_000,  # KB, Qdrant's default
            max_indexing_threads=ctx.threads,
        ),
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8)
        if quantization == "sq8"
        else None,
        # Index every non-empty segment (default threshold 10,000 KB would leave small sets
        # unindexed, searched by brute force).
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
        max_search_threads=ctx.threads,
    )
    root = ctx.engine_dir("qdrant-edge")
    shard = None
    try:
        shard = qe.EdgeShard.create(str(root / "shard"), config)
        meter = DiskMeter()
        start = time.perf_counter()
        for first, rows in ctx.batches():
            points = [qe.Point(id=first + i, vector=row) for i, row in enumerate(rows)]
            shard.update(qe.UpdateOperation.upsert_points(points))
        searchable = time.perf_counter() - start
        assert shard.count(qe.CountRequest(exact=True)) == ctx.n

        def search_at(ef: int):
            params = qe.SearchParams(
                hnsw_ef=ef,
                quantization=qe.QuantizationSearchParams(rescore=True)
                if quantization == "sq8"
                else None,
            )

            def search(query):
                hits = shard.search(
                    qe.SearchRequest(
                        query=qe.Query.Nearest(query),
                        limit=K,
                        params=params,
                        with_payload=False,
                        with_vector=False,
                    )
                )
                return [hit.id for hit in hits]

            return search

        knob = {"ef_knob": "SearchParams.hnsw_ef"}
        if quantization == "sq8":
            knob["rescore"] = True
        info = shard.info()
        before = {
            "segments": info.segments_count,
            "points": info.points_count,
            "indexed_vectors": info.indexed_vectors_count,
        }
        plain_runs = ctx.unindexed_runs(
            search_at(ctx.ef),
            stage="before optimize (unindexed segments)",
            search_params={"ef": ctx.ef, **knob},
        )

        def fully_indexed() -> bool:
            now = shard.info()
            return now.indexed_vectors_count >= now.points_count >= ctx.n

        start = time.perf_counter()
        optimized = shard.optimize()
        optimize_seconds = time.perf_counter() - start
        shard.flush()
        wait_until(fully_indexed)
        indexing = time.perf_counter() - start
        io = meter.delta()
        info = shard.info()
        after = {
            "segments": info.segments_count,
            "points": info.points_count,
            "indexed_vectors": info.indexed_vectors_count,
        }
        indexed_runs = ctx.indexed_runs(
            search_at, stage="after optimize (HNSW)", search_params=knob
        )
        shard.close()
        shard = None
        return make_result(
            ctx,
            engine="qdrant-edge",
            version=package_version("qdrant-edge-py"),
            index_params={
                "m": ctx.m,
                "ef_construct": ctx.ef_construction,
                "quantization": "scalar int8 (defaults), rescore=True at search"
                if quantization == "sq8"
                else "none",
                "indexing_threshold_kb": 1,
                "full_scan_threshold_kb": 10_000,
                "default_segment_number": "auto",
                "batch": ctx.batch,
            },
            searchable_seconds=searchable,
            indexed_seconds=searchable + indexing,
            io=io,
            root=root,
            runs=[*plain_runs, *indexed_runs],
            index_method="EdgeShard.optimize() (blocking, no background optimizer) + flush(); "
            "info().indexed_vectors_count >= points_count",
            threads_setting=f"HnswIndexConfig.max_indexing_threads={ctx.threads}, "
            f"EdgeConfig.max_search_threads={ctx.threads}",
            optimize_seconds=round(optimize_seconds, 3),
            optimize_returned=bool(optimized),
            shard_info_before_optimize=before,
            shard_info_after_optimize=after,
        )
    finally:
        if shard is not None:
            shard.close()
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# LanceDB


def run_lancedb(ctx: IngestContext) -> dict:
    """``table.add`` per batch (searchable by flat scan), then ``create_index`` IVF_HNSW_SQ."""
    import lancedb
    import pyarrow as pa
    from lancedb.index import HnswSq

    root = ctx.engine_dir("lancedb")
    try:
        db = lancedb.connect(str(root))
        schema = pa.schema(
            [
                pa.field("id", pa.int64()),
                pa.field("vector", pa.list_(pa.float32(), ctx.dim)),
            ]
        )
        table = db.create_table("bench", schema=schema)
        meter = DiskMeter()
        start = time.perf_counter()
        for first, rows in ctx.batches():
            ids = pa.array(np.arange(first, first + len(rows), dtype=np.int64))
            vectors = pa.FixedSizeListArray.from_arrays(
                pa.array(np.ascontiguousarray(rows).reshape(-1)), ctx.dim
            )
            table.add(pa.Table.from_arrays([ids, vectors], schema=schema))
        searchable = time.perf_counter() - start
        assert table.count_rows() == ctx.n
        partitions = ctx.lance_partitions

        refine = ctx.options.get("lance_refine_factor")

        def search(query, ef=None):
            """Flat scan while ``ef`` is None, else the index at ``ef``."""
            builder = table.search(query).distance_type("cosine").limit(K)
            if ef is not None:
                builder = builder.nprobes(partitions).ef(ef)
            if ef is not None and refine:
                builder = builder.refine_factor(refine)
            return builder.select(["id", "_distance"]).to_arrow()["id"].to_pylist()

        flat_runs = ctx.unindexed_runs(
            search,
            stage="before create_index (flat scan)",
            search_params={"ef": None},
        )

        def fully_indexed() -> bool:
            names = [index.name for index in table.list_indices()]
            if not names:
                return False
            stats = table.index_stats(names[0])
            return (
                stats is not None
                and stats.num_unindexed_rows == 0
                and stats.num_indexed_rows >= ctx.n
            )

        start = time.perf_counter()
        table.create_index(
            "vector",
            config=HnswSq(
                distance_type="cosine",
                num_partitions=partitions,
                m=ctx.m,
                ef_construction=ctx.ef_construction,
            ),
        )
        wait_until(fully_indexed)
        indexing = time.perf_counter() - start
        io = meter.delta()
        index_name = next(iter(table.list_indices())).name
        stats = table.index_stats(index_name)
        indexed_runs = ctx.indexed_runs(
            lambda ef: partial(search, ef=ef),
            stage="after create_index (IVF_HNSW_SQ)",
            search_params={
                "ef_knob": "query.ef()",
                "nprobes": partitions,
                "refine_factor": refine,
            },
        )
        return make_result(
            ctx,
            engine="lancedb",
            version=package_version("lancedb"),
            index_params={
                "index_type": "IVF_HNSW_SQ",
                "num_partitions": partitions,
                "m": ctx.m,
                "ef_construct": ctx.ef_construction,
                "sq_bits": 8,
                "batch": ctx.batch,
            },
            searchable_seconds=searchable,
            indexed_seconds=searchable + indexing,
            io=io,
            root=root,
            runs=[*flat_runs, *indexed_runs],
            index_method="table.create_index('vector', config=HnswSq(...)) (synchronous); "
            "index_stats().num_unindexed_rows == 0",
            threads_setting=f"LANCE_CPU_THREADS={os.environ.get('LANCE_CPU_THREADS')}",
            index_stats={
                "index_type": stats.index_type,
                "num_indexed_rows": stats.num_indexed_rows,
                "num_unindexed_rows": stats.num_unindexed_rows,
                "distance_type": stats.distance_type,
            },
            table_versions=int(table.version),
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Chroma


def chroma_hnsw_elements(root: Path) -> int | None:
    """Elements in the persisted hnswlib header(s) of a Chroma directory (None if absent).

    Chroma's header.bin: int32 persist version, then hnswlib's size_t offsetLevel0,
    max_elements, cur_element_count (byte offset 20)."""
    total = None
    for header in root.glob("*/header.bin"):
        data = header.read_bytes()
        if len(data) >= 28:
            total = (total or 0) + struct.unpack_from("<Q", data, 20)[0]
    return total


class ChromaClient:
    """A persistent Chroma client on ``root`` whose collection "bench" is searched at a
    given ef. Changing ef: ``collection.modify()`` persists ``hnsw.ef_search``, but an index
    already loaded keeps searching with the old value (chromadb 1.5.9: recall and latency
    unchanged until the client is reopened), so the client is reopened and the index loads
    again, on the first (warm-up) query."""

    def __init__(self, root: Path, ef: int) -> None:
        self.root = root
        self.ef = ef
        self.collection = None
        self.reopened = 0
        self.client = self._open()

    def _open(self):
        import chromadb
        from chromadb.config import Settings

        return chromadb.PersistentClient(
            path=str(self.root), settings=Settings(anonymized_telemetry=False)
        )

    def search_at(self, ef: int):
        if ef != self.ef:
            self.collection.modify(configuration={"hnsw": {"ef_search": ef}})
            self.close()
            self.client = self._open()
            self.collection = self.client.get_collection("bench")
            self.ef = ef
            self.reopened += 1
        collection = self.collection

        def search(query):
            result = collection.query(
                query_embeddings=query[None, :], n_results=K, include=[]
            )
            return [int(i) for i in result["ids"][0]]

        return search

    def close(self) -> None:
        # Best effort: release the cached system (before the directory goes).
        with contextlib.suppress(Exception):
            self.client.clear_system_cache()


def run_chroma(ctx: IngestContext) -> dict:
    """``collection.add`` per batch; the HNSW (hnswlib) is built incrementally on insert."""
    root = ctx.engine_dir("chroma")
    chroma = None
    try:
        chroma = ChromaClient(root, ctx.ef)
        hnsw = {
            "space": "cosine",
            "max_neighbors": ctx.m,
            "ef_construction": ctx.ef_construction,
            "ef_search": ctx.ef,
            "num_threads": ctx.threads,
        }
        collection = chroma.client.create_collection(
            "bench", embedding_function=None, configuration={"hnsw": hnsw}
        )
        chroma.collection = collection
        meter = DiskMeter()
        start = time.perf_counter()
        for first, rows in ctx.batches():
            collection.add(
                ids=[str(first + i) for i in range(len(rows))], embeddings=rows
            )
        searchable = time.perf_counter() - start
        io = meter.delta()
        assert collection.count() == ctx.n
        elements = chroma_hnsw_elements(root)
        runs = ctx.indexed_runs(
            chroma.search_at,
            stage="after add (HNSW built on insert)",
            search_params={"ef_knob": "configuration hnsw.ef_search"},
        )
        configuration = chroma.collection.configuration.get("hnsw") or {}
        return make_result(
            ctx,
            engine="chroma",
            version=package_version("chromadb"),
            index_params={
                "index_type": "hnsw (hnswlib, f32)",
                "m": ctx.m,
                "ef_construct": ctx.ef_construction,
                "requested": hnsw,
                "reported": {
                    key: configuration.get(key) for key in sorted(configuration)
                },
                "batch": ctx.batch,
            },
            searchable_seconds=searchable,
            indexed_seconds=searchable,
            io=io,
            root=root,
            runs=runs,
            index_method="built during add(); persisted every sync_threshold points, so "
            "indexed == searchable",
            threads_setting=f"configuration hnsw.num_threads={ctx.threads}",
            hnsw_elements_persisted=elements,
            ef_search_method="collection.modify(configuration={'hnsw': {'ef_search': ef}}), "
            "then the client reopened (the loaded index keeps its ef otherwise)"
            if chroma.reopened
            else "configuration hnsw.ef_search at create_collection",
        )
    finally:
        if chroma is not None:
            chroma.close()
        shutil.rmtree(root, ignore_errors=True)
