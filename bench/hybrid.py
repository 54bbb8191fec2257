"""Sparse-vector search and fused hybrid queries (dense + sparse, RRF): SagittaDB's embedded
Python API against qdrant-edge (Qdrant's embedded shard, ``qdrant-edge-py``), one after
another in one process on the same data, with the same threads, queries and query order.

    python -m bench.hybrid --out bench/results/hybrid-debian-minilm.json
    python -m bench.hybrid --n 20000 --queries 200 --engines sagitta,qdrant-edge

Data: debian-minilm (``--dataset-path``, default ``../shared/datasets/debian-minilm``): the
dense vectors are ``base.npy`` / ``queries.npy`` (float16, normalized as float32 by
``bench.datasets.load_debian_minilm``); the texts are ``texts.jsonl``, one JSON string per
line, 101,000 lines: line ``i < 100,000`` is base row ``i`` and line ``100,000 + j`` is query
``j`` (checked by re-embedding lines 0, 1, 100,000, 100,001 and 100,999 with
``rag.embed.Embedder``: cosine 1.0 with their rows; a query line against the base row of the
same number: 0.16-0.24). ``--n`` keeps the first N base rows (and their texts), ``--queries``
the first Q queries. Sparse vectors come from ``rag.sparse``: documents carry BM25's
term-frequency weights and the IDF is applied by the database (sparse vector "bm25" with
modifier IDF); a query has weight 1 per distinct term.

Per engine, two scenarios, each a single-thread loop of one-query calls from Python
(``--warmup`` unrecorded queries first, limit ``k`` = 10), QPS = queries / summed call time,
latency p50/p95/p99 per call:

- ``sparse``: sparse search on "bm25".
- ``hybrid``: a dense prefetch (HNSW, ``hnsw_ef`` = ``--ef``) and a sparse prefetch, each of
  ``--candidates`` (C) points, fused by RRF, top 10.

Quality is measured against an exact oracle computed here (numpy), so speed is compared at a
known quality:

- sparse: score(doc) = sum over shared terms of query weight * idf(term) * doc value, with
  Qdrant's idf(term) = ln(1 + (N - df + 0.5) / (df + 0.5)), N = documents with a non-empty
  sparse vector, df = documents containing the term (checked against qdrant-edge on a
  hand-made example: empty vectors do not count in N).
- dense: exact cosine top-C (``bench.datasets.exact_search`` on the unit vectors).
- hybrid: RRF of the exact dense top-C and the exact sparse top-C with Qdrant's formula,
  score = sum of 1 / (k_rrf + rank), rank from 0, k_rrf = 2 (Qdrant's default, and what
  qdrant-client's local mode and our server use), top 10.

``recall_at_k`` is the mean |engine's top 10 ∩ exact top 10| / 10 (bench-schema's
definition). BM25 scores tie often (documents of equal length sharing the same query terms)
and RRF scores tie by construction (rank r in one list only scores the same in either), so
which of several equal documents fills the 10th place is arbitrary; ``recall_at_k_ties``
also counts a hit whose exact score equals (to 1e-5 relative) the exact 10th score, and is
the measure of quality that ignores tie-breaking. Each engine's sparse hit scores are checked
against the oracle's (``score_check``: the largest relative difference).

Build (``build_seconds``): SagittaDB ``import_collection(sparse_vectors=..., sparse=...)``
(``--sagitta-load import``, the default: one HNSW segment and inverted index per shard) or
``create_collection`` and ``upsert(..., sparse=...)`` per ``--batch`` points
(``--sagitta-load upsert``: the write path, sealed by the optimizer), then
``wait_until_indexed()``;
qdrant-edge ``update(upsert_points)``
per ``--batch`` points (Point objects made from the numpy rows per batch inside the timing, as
``bench.ingest`` does), then ``optimize()`` and ``flush()``. Both: HNSW m 16, ef_construct 100
with SQ8 (SagittaDB's fixed parameters; qdrant-edge scalar int8 with rescoring at search,
``--qdrant-quantization none`` for none).

Threads: ``--threads`` (2) goes to qdrant-edge ``max_search_threads`` and
``max_indexing_threads`` and to ``OMP_NUM_THREADS`` / ``RAYON_NUM_THREADS`` (as
``bench.ingest``); SagittaDB has no search-thread knob (its own pool).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench import datasets, report
from bench.ingest_common import package_version, percentiles_ms

ENGINES = ("sagitta", "qdrant-edge")
SCENARIOS = ("sparse", "hybrid")
K = 10
RRF_K = 2
SPARSE_NAME = "bm25"
TIE_RELATIVE = 1e-5
THREAD_ENV = ("OMP_NUM_THREADS", "RAYON_NUM_THREADS")
RESULT_NAMES = {"sagitta": "sagitta-embedded", "qdrant-edge": "qdrant-edge"}
SUMMARY_NOTE = (
    "ratio = sagitta-embedded / qdrant-edge in the same run: qps > 1 and p99 < 1 mean "
    "SagittaDB is faster; compare them together with each engine's recall_at_k(_ties)"
)


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class HybridData:
    """Dense unit vectors and sparse vectors (``{"indices", "values"}``) of the documents
    (base rows 0..n-1, ids = row numbers) and the queries, in the same order."""

    name: str
    base: np.ndarray
    queries: np.ndarray
    doc_sparse: list[dict]
    query_sparse: list[dict]
    source: dict

    @property
    def n(self) -> int:
        return int(self.base.shape[0])

    @property
    def nq(self) -> int:
        return int(self.queries.shape[0])

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])


def read_texts(path: Path, base_rows: int, query_rows: int) -> tuple[list, list]:
    """(base texts, query texts) of ``texts.jsonl``: line i < ``base_rows`` is base row i,
    the next ``query_rows`` lines are the queries (the file must have exactly that many)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    if len(lines) != base_rows + query_rows:
        raise ValueError(
            f"{path}: {len(lines)} lines, expected {base_rows} base + {query_rows} queries"
        )
    texts = [json.loads(line) for line in lines]
    return texts[:base_rows], texts[base_rows:]


def load_data(path: str | Path, n: int | None, queries: int | None) -> HybridData:
    from rag.sparse import encode_document, encode_query

    directory = Path(path)
    dataset = datasets.load_debian_minilm(directory)
    base_texts, query_texts = read_texts(
        directory / "texts.jsonl", dataset.n, dataset.nq
    )
    n = dataset.n if not n else min(n, dataset.n)
    nq = dataset.nq if not queries else min(queries, dataset.nq)
    return HybridData(
        name=dataset.name,
        base=dataset.base[:n],
        queries=dataset.queries[:nq],
        doc_sparse=[encode_document(text).as_dict() for text in base_texts[:n]],
        query_sparse=[encode_query(text).as_dict() for text in query_texts[:nq]],
        source={**dataset.extra, "texts": "texts.jsonl", "sparse": "rag.sparse"},
    )


# ---------------------------------------------------------------------------------------------
# Exact oracle


class SparseOracle:
    """Exact sparse scores with Qdrant's IDF modifier, from an inverted index in numpy."""

    def __init__(self, docs: Sequence[dict]) -> None:
        self.n = len(docs)
        lengths = np.array([len(doc["indices"]) for doc in docs], dtype=np.int64)
        terms = np.fromiter(
            (t for doc in docs for t in doc["indices"]),
            dtype=np.int64,
            count=int(lengths.sum()),
        )
        values = np.fromiter(
            (v for doc in docs for v in doc["values"]),
            dtype=np.float64,
            count=int(lengths.sum()),
        )
        rows = np.repeat(np.arange(self.n, dtype=np.int64), lengths)
        order = np.argsort(terms, kind="stable")
        terms, values, rows = terms[order], values[order], rows[order]
        unique, starts, counts = np.unique(terms, return_index=True, return_counts=True)
        # documents having a (non-empty) sparse vector: Qdrant's N
        self.documents = int(np.count_nonzero(lengths))
        self.postings = {
            int(term): (rows[s : s + c], values[s : s + c])
            for term, s, c in zip(unique, starts, counts, strict=True)
        }
        self.docs = docs

    def idf(self, term: int) -> float:
        postings = self.postings.get(int(term))
        df = 0 if postings is None else len(postings[0])
        return math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))

    def scores(self, query: dict) -> np.ndarray:
        """Every document's exact score (n,), 0 where no term is shared."""
        out = np.zeros(self.n, dtype=np.float64)
        for term, weight in zip(query["indices"], query["values"], strict=True):
            postings = self.postings.get(int(term))
            if postings is not None:
                out[postings[0]] += weight * self.idf(term) * postings[1]
        return out

    def score(self, doc: int, query: dict) -> float:
        weights = dict(zip(query["indices"], query["values"], strict=True))
        entry = self.docs[doc]
        return sum(
            weights[t] * self.idf(t) * v
            for t, v in zip(entry["indices"], entry["values"], strict=True)
            if t in weights
        )

    def top(self, query: dict, limit: int) -> tuple[list[int], list[float]]:
        """The exact top ``limit`` (ids, scores) among documents sharing a term with the
        query, best first (equal scores by id)."""
        scores = self.scores(query)
        touched = np.flatnonzero(scores > 0.0)
        return top_of(touched, scores[touched], limit)


def top_of(ids: np.ndarray, scores: np.ndarray, limit: int) -> tuple[list, list]:
    order = np.lexsort((ids, -scores))[:limit]
    return [int(i) for i in ids[order]], [float(s) for s in scores[order]]


def rrf(lists: Sequence[Sequence[int]], k: int = RRF_K) -> dict[int, float]:
    """Qdrant's reciprocal rank fusion: id -> sum over lists of 1 / (k + rank), rank from 0."""
    fused: dict[int, float] = {}
    for ranked in lists:
        for rank, point in enumerate(ranked):
            fused[point] = fused.get(point, 0.0) + 1.0 / (k + rank)
    return fused


def ranked(scores: dict[int, float], limit: int) -> tuple[list[int], list[float]]:
    """The top ``limit`` of an id -> score map, best first (equal scores by id)."""
    ids = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    return top_of(ids, values, limit)


@dataclass
class Truth:
    """One query's exact top k: its ids and scores, and every candidate's exact score (ids
    absent score 0), for the tie-aware overlap."""

    ids: list[int]
    scores: list[float]
    score_of: Callable[[int], float]


def overlap(found: Sequence[int], truth: Truth, k: int = K) -> tuple[int, int, int]:
    """(hits in the exact top k, hits also counting ties of the k-th score, denominator)."""
    exact = set(truth.ids[:k])
    strict = sum(1 for point in found[:k] if point in exact)
    if not truth.ids:
        return 0, 0, 0
    floor = truth.scores[min(k, len(truth.ids)) - 1]
    tied = sum(
        1
        for point in found[:k]
        if point in exact or truth.score_of(point) >= floor - TIE_RELATIVE * abs(floor)
    )
    return strict, tied, min(k, len(truth.ids))


def exact_truths(
    data: HybridData, candidates: int, k: int = K
) -> tuple[SparseOracle, list[Truth], list[Truth], dict]:
    """The oracle, the exact sparse and hybrid truth per query, and facts for the record."""
    start = time.perf_counter()
    oracle = SparseOracle(data.doc_sparse)
    depth = max(k, candidates)
    dense = datasets.exact_search(data.base, data.queries, candidates, "cosine")
    sparse_truths, hybrid_truths = [], []
    ties = {"sparse": 0, "hybrid": 0}
    for i, query in enumerate(data.query_sparse):
        all_scores = oracle.scores(query)
        touched = np.flatnonzero(all_scores > 0.0)
        ids, scores = top_of(touched, all_scores[touched], depth)
        sparse_truths.append(
            Truth(ids[:k], scores[:k], lambda p, s=all_scores: float(s[p]))
        )
        fused = rrf([dense[i].tolist(), ids[:candidates]])
        fused_ids, fused_scores = ranked(fused, k)
        hybrid_truths.append(
            Truth(fused_ids, fused_scores, lambda p, f=fused: f.get(p, 0.0))
        )
        for name, truth, pool in (
            ("sparse", sparse_truths[-1], scores),
            ("hybrid", hybrid_truths[-1], sorted(fused.values(), reverse=True)),
        ):
            if len(pool) > k and math.isclose(
                pool[k], truth.scores[-1], rel_tol=TIE_RELATIVE
            ):
                ties[name] += 1
    facts = {
        "documents_with_sparse_vector": oracle.documents,
        "distinct_terms": len(oracle.postings),
        "mean_terms_per_document": round(
            sum(len(d["indices"]) for d in data.doc_sparse) / max(1, data.n), 2
        ),
        "mean_terms_per_query": round(
            sum(len(q["indices"]) for q in data.query_sparse) / max(1, data.nq), 2
        ),
        "idf": "ln(1 + (N - df + 0.5) / (df + 0.5)), N = documents with a sparse vector",
        "rrf": f"sum of 1 / ({RRF_K} + rank), rank from 0, over exact dense top-C and "
        "exact sparse top-C",
        "queries_with_tie_at_kth": ties,
        "seconds": round(time.perf_counter() - start, 2),
    }
    return oracle, sparse_truths, hybrid_truths, facts


# ---------------------------------------------------------------------------------------------
# Engines: build, then search(query row) -> [(id, score), ...] best first


@dataclass
class Built:
    engine: str
    version: str
    index_params: dict
    build_seconds: float
    sparse: Callable[[int], list]  # query number -> [(id, score)]
    hybrid: Callable[[int], list]
    close: Callable[[], None]
    extra: dict


def build_sagitta(data: HybridData, root: Path, args: argparse.Namespace) -> Built:
    import sagittadb

    database = sagittadb.open(root / "db")
    ids = np.arange(data.n, dtype=np.uint64)
    config = {SPARSE_NAME: {"modifier": "idf"}}
    start = time.perf_counter()
    if args.sagitta_load == "import":
        collection = database.import_collection(
            "hybrid",
            ids,
            data.base,
            distance="Cosine",
            sparse_vectors=config,
            sparse={SPARSE_NAME: data.doc_sparse},
            progress=False,
        )
        method = "Database.import_collection (dense + sparse), wait_until_indexed()"
    else:
        collection = database.create_collection(
            "hybrid", data.dim, distance="Cosine", sparse_vectors=config
        )
        for first in range(0, data.n, args.batch):
            last = min(first + args.batch, data.n)
            collection.upsert(
                ids[first:last],
                data.base[first:last],
                sparse={SPARSE_NAME: data.doc_sparse[first:last]},
            )
        method = (
            f"create_collection + upsert(wait=True) per {args.batch} points, "
            "wait_until_indexed()"
        )
    collection.wait_until_indexed(timeout=3600)
    build_seconds = time.perf_counter() - start
    status = collection.status()
    queries, sparse_queries = data.queries, data.query_sparse
    limit, candidates, ef = K, args.candidates, args.ef

    def sparse(i: int) -> list:
        hits = collection.search_sparse(
            SPARSE_NAME, sparse_queries[i], limit=limit, with_payload=False
        )
        return [(hit["id"], hit["score"]) for hit in hits]

    def hybrid(i: int) -> list:
        hits = collection.hybrid_search(
            queries[i],
            sparse_queries[i],
            using=SPARSE_NAME,
            limit=limit,
            candidates=candidates,
            fusion="rrf",
            with_payload=False,
            hnsw_ef=ef,
        )
        return [(hit["id"], hit["score"]) for hit in hits]

    def close() -> None:
        nonlocal collection, database
        collection = database = None

    keys = ("segments_count", "points_count", "indexed_vectors_count", "disk_bytes")
    return Built(
        engine=RESULT_NAMES["sagitta"],
        version=package_version("sagittadb"),
        index_params={
            "dense": {"m": 16, "ef_construct": 100, "quantization": "sq8"},
            "sparse": {"name": SPARSE_NAME, "modifier": "idf"},
            "method": method,
        },
        build_seconds=build_seconds,
        sparse=sparse,
        hybrid=hybrid,
        close=close,
        extra={
            "status": {key: status[key] for key in keys if key in status},
            "threads_setting": "no search-thread knob (own pool); "
            + ", ".join(f"{v}={os.environ.get(v)}" for v in THREAD_ENV),
        },
    )


def build_qdrant_edge(data: HybridData, root: Path, args: argparse.Namespace) -> Built:
    import qdrant_edge as qe

    sq8 = args.qdrant_quantization == "sq8"
    config = qe.EdgeConfig(
        vectors=qe.EdgeVectorParams(size=data.dim, distance=qe.Distance.Cosine),
        sparse_vectors={
            SPARSE_NAME: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)
        },
        hnsw_config=qe.HnswIndexConfig(
            m=16,
            ef_construct=100,
            full_scan_threshold=10_000,  # KB, Qdrant's default
            max_indexing_threads=args.threads,
        ),
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8)
        if sq8
        else None,
        # index every non-empty segment (as bench.ingest_peers)
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
        max_search_threads=args.threads,
    )
    shard = qe.EdgeShard.create(str(root / "shard"), config)
    start = time.perf_counter()
    for first in range(0, data.n, args.batch):
        rows = data.base[first : first + args.batch]
        points = [
            qe.Point(
                id=first + i,
                vector={
                    "": row.tolist(),
                    SPARSE_NAME: qe.SparseVector(
                        data.doc_sparse[first + i]["indices"],
                        data.doc_sparse[first + i]["values"],
                    ),
                },
            )
            for i, row in enumerate(rows)
        ]
        shard.update(qe.UpdateOperation.upsert_points(points))
    upload_seconds = time.perf_counter() - start
    optimized = shard.optimize()
    shard.flush()
    build_seconds = time.perf_counter() - start
    if shard.count(qe.CountRequest(exact=True)) != data.n:
        raise RuntimeError("qdrant-edge: not every point was stored")
    info = shard.info()
    dense_params = qe.SearchParams(
        hnsw_ef=args.ef,
        quantization=qe.QuantizationSearchParams(rescore=True) if sq8 else None,
    )
    # requests made before the timing (one per query), so only the call is timed
    sparse_requests = []
    hybrid_requests = []
    for row, query in zip(data.queries, data.query_sparse, strict=True):
        vector = qe.SparseVector(query["indices"], query["values"])
        sparse_requests.append(
            qe.QueryRequest(
                limit=K,
                query=qe.Query.Nearest(vector, using=SPARSE_NAME),
                with_payload=False,
                with_vector=False,
            )
        )
        hybrid_requests.append(
            qe.QueryRequest(
                limit=K,
                prefetches=[
                    qe.Prefetch(
                        limit=args.candidates,
                        query=qe.Query.Nearest(row.tolist()),
                        params=dense_params,
                    ),
                    qe.Prefetch(
                        limit=args.candidates,
                        query=qe.Query.Nearest(vector, using=SPARSE_NAME),
                    ),
                ],
                query=qe.Fusion.Rrf(k=RRF_K),
                with_payload=False,
                with_vector=False,
            )
        )

    def sparse(i: int) -> list:
        return [(hit.id, hit.score) for hit in shard.query(sparse_requests[i])]

    def hybrid(i: int) -> list:
        return [(hit.id, hit.score) for hit in shard.query(hybrid_requests[i])]

    return Built(
        engine=RESULT_NAMES["qdrant-edge"],
        version=package_version("qdrant-edge-py"),
        index_params={
            "dense": {
                "m": 16,
                "ef_construct": 100,
                "quantization": "scalar int8, rescore=True at search"
                if sq8
                else "none",
                "full_scan_threshold_kb": 10_000,
                "indexing_threshold_kb": 1,
            },
            "sparse": {"name": SPARSE_NAME, "modifier": "Modifier.Idf"},
            "batch": args.batch,
            "method": "update(upsert_points) per batch, optimize(), flush()",
        },
        build_seconds=build_seconds,
        sparse=sparse,
        hybrid=hybrid,
        close=shard.close,
        extra={
            "upload_seconds": round(upload_seconds, 3),
            "optimize_returned": bool(optimized),
            "shard_info": {
                "segments": info.segments_count,
                "points": info.points_count,
                "indexed_vectors": info.indexed_vectors_count,
            },
            "threads_setting": f"EdgeConfig.max_search_threads={args.threads}, "
            f"HnswIndexConfig.max_indexing_threads={args.threads}",
            "requests": "QueryRequest(query=Query.Nearest(SparseVector, using='bm25')); "
            "hybrid: QueryRequest(prefetches=[Prefetch(C, Query.Nearest(dense), "
            "params=SearchParams(hnsw_ef)), Prefetch(C, Query.Nearest(SparseVector, "
            f"using='bm25'))], query=Fusion.Rrf(k={RRF_K}))",
        },
    )


BUILDERS = {"sagitta": build_sagitta, "qdrant-edge": build_qdrant_edge}


# ---------------------------------------------------------------------------------------------
# Measurement


def measure(
    search: Callable[[int], list],
    truths: list[Truth],
    *,
    scenario: str,
    search_params: dict,
    warmup: int,
    oracle: SparseOracle | None = None,
    queries: Sequence[dict] = (),
) -> dict:
    """One call per query on this thread, in query order, after ``warmup`` unrecorded calls;
    overlap with the exact top k; with ``oracle``, every hit's score checked against it."""
    for i in range(min(warmup, len(truths))):
        search(i)
    latencies = []
    results = []
    for i in range(len(truths)):
        start = time.perf_counter()
        hits = search(i)
        latencies.append(time.perf_counter() - start)
        results.append(hits)
    strict = tied = total = 0
    short = 0
    for hits, truth in zip(results, truths, strict=True):
        found = [int(point) for point, _ in hits]
        s, t, d = overlap(found, truth)
        strict, tied, total = strict + s, tied + t, total + d
        short += len(found) < min(K, len(truth.ids))
    run = {
        "scenario": scenario,
        "search_params": {"limit": K, **search_params},
        "threads": 1,
        "concurrency": 1,
        "recall_at_k": round(strict / total, 5) if total else 0.0,
        "recall_at_k_ties": round(tied / total, 5) if total else 0.0,
        "qps": round(len(latencies) / sum(latencies), 2),
        "latency_ms": percentiles_ms(latencies),
        "disk_bytes_read_per_query": None,
        "queries_short_of_k": short,
        "latency_method": f"single-query loop from Python, 1 thread, {warmup} warm-up "
        "queries",
    }
    if oracle is not None:
        run["score_check"] = score_check(results, queries, oracle)
    return run


def score_check(results: list[list], queries: Sequence[dict], oracle) -> dict:
    """The largest relative difference between an engine's hit scores and the oracle's."""
    worst, worst_at, checked = 0.0, None, 0
    for i, (hits, query) in enumerate(zip(results, queries, strict=True)):
        for point, score in hits:
            exact = oracle.score(int(point), query)
            error = abs(float(score) - exact) / max(abs(exact), 1e-12)
            checked += 1
            if error > worst:
                worst, worst_at = error, {"query": i, "id": int(point)}
    return {
        "hits_checked": checked,
        "max_relative_error": float(f"{worst:.3g}"),
        "worst": worst_at,
    }


def run_engine(
    name: str,
    data: HybridData,
    truths: dict,
    oracle: SparseOracle,
    args: argparse.Namespace,
    workdir: Path,
) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"hybrid-{name}-", dir=workdir))
    built = None
    try:
        built = BUILDERS[name](data, root, args)
        print(f"{built.engine}: built in {built.build_seconds:.2f} s", flush=True)
        runs = [
            measure(
                built.sparse,
                truths["sparse"],
                scenario="sparse",
                search_params={"using": SPARSE_NAME},
                warmup=args.warmup,
                oracle=oracle,
                queries=data.query_sparse,
            ),
            measure(
                built.hybrid,
                truths["hybrid"],
                scenario="hybrid",
                search_params={
                    "candidates": args.candidates,
                    "hnsw_ef": args.ef,
                    "fusion": "rrf",
                    "rrf_k": RRF_K,
                },
                warmup=args.warmup,
            ),
        ]
        for run in runs:
            print(run_line(built.engine, run), flush=True)
        return {
            "engine": built.engine,
            "engine_version": built.version,
            "index_params": built.index_params,
            "build_seconds": round(built.build_seconds, 3),
            "upload_seconds": built.extra.pop("upload_seconds", None),
            "memory_bytes": None,
            "disk_bytes_written": None,
            "runs": runs,
            **built.extra,
        }
    finally:
        if built is not None:
            built.close()
        shutil.rmtree(root, ignore_errors=True)


def run_line(engine: str, run: dict) -> str:
    latency = run["latency_ms"]
    check = run.get("score_check")
    scores = f", score max rel err {check['max_relative_error']:.2g}" if check else ""
    return (
        f"  {engine} {run['scenario']}: recall@{K} {run['recall_at_k']:.4f} "
        f"(ties {run['recall_at_k_ties']:.4f}), {run['qps']:,.0f} QPS, p50 "
        f"{latency['p50']:.3f} ms, p99 {latency['p99']:.3f} ms{scores}"
    )


def summary(results: list[dict]) -> dict:
    """Per scenario: each engine's recall, QPS and p99, and sagitta / qdrant-edge ratios."""
    by_engine = {result["engine"]: result for result in results}
    ours = by_engine.get(RESULT_NAMES["sagitta"])
    peer = by_engine.get(RESULT_NAMES["qdrant-edge"])
    out: dict = {}
    for scenario in SCENARIOS:
        entry: dict = {}
        for engine, result in by_engine.items():
            run = next(r for r in result["runs"] if r["scenario"] == scenario)
            entry[engine] = {
                "recall_at_k": run["recall_at_k"],
                "recall_at_k_ties": run["recall_at_k_ties"],
                "qps": run["qps"],
                "p99_ms": run["latency_ms"]["p99"],
            }
        if ours is not None and peer is not None:
            a, b = entry[ours["engine"]], entry[peer["engine"]]
            entry["qps_ratio"] = round(a["qps"] / b["qps"], 3) if b["qps"] else None
            entry["p99_ratio"] = (
                round(a["p99_ms"] / b["p99_ms"], 3) if b["p99_ms"] else None
            )
        out[scenario] = entry
    out["note"] = SUMMARY_NOTE
    return out


# ---------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.hybrid", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--dataset-path",
        default=datasets.DEBIAN_MINILM_PATH,
        help="debian-minilm directory (base.npy, queries.npy, texts.jsonl)",
    )
    parser.add_argument("--n", type=int, help="the first N base points (default all)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--engines", help=f"comma list (default: {','.join(ENGINES)})")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--candidates", type=int, default=20, help="hybrid: points per prefetch (C)"
    )
    parser.add_argument("--ef", type=int, default=64, help="hybrid: dense hnsw_ef")
    parser.add_argument(
        "--batch",
        type=int,
        default=1000,
        help="points per upsert (qdrant-edge; sagitta)",
    )
    parser.add_argument(
        "--sagitta-load",
        choices=["import", "upsert"],
        default="import",
        help="SagittaDB's load: bulk import, or upserts sealed by the optimizer",
    )
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--qdrant-quantization", choices=["sq8", "none"], default="sq8")
    parser.add_argument(
        "--strict", action="store_true", help="fail on a missing engine"
    )
    parser.add_argument(
        "--workdir", help="where the databases are written (default: a temporary dir)"
    )
    parser.add_argument("--out", help="result JSON")
    return parser


def missing(name: str) -> str | None:
    """Why engine ``name`` cannot run here, or None."""
    if name == "sagitta":
        return None  # the project's own package: always there
    try:
        import qdrant_edge  # noqa: F401
    except ImportError:
        return "qdrant_edge not installed (scripts/setup-bench.sh)"
    return None


def select_engines(text: str | None, strict: bool) -> tuple[list[str], dict]:
    names = [n.strip() for n in (text or ",".join(ENGINES)).split(",") if n.strip()]
    for name in names:
        if name not in ENGINES:
            raise SystemExit(f"unknown engine {name!r}; known: {', '.join(ENGINES)}")
    selected, skipped = [], {}
    for name in dict.fromkeys(names):
        why = missing(name)
        if why is None:
            selected.append(name)
        elif strict:
            raise SystemExit(f"{name}: {why}")
        else:
            skipped[name] = why
            print(f"skipping {name}: {why}")
    return selected, skipped


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    started_at = report.utc_now()
    for variable in THREAD_ENV:
        os.environ[variable] = str(args.threads)
    engines, skipped = select_engines(args.engines, args.strict)
    start = time.perf_counter()
    data = load_data(args.dataset_path, args.n, args.queries)
    print(
        f"dataset {data.name}: n={data.n} dim={data.dim} queries={data.nq}; texts "
        f"encoded in {time.perf_counter() - start:.1f} s",
        flush=True,
    )
    oracle, sparse_truths, hybrid_truths, oracle_facts = exact_truths(
        data, args.candidates
    )
    print(f"exact oracle: {oracle_facts}", flush=True)
    truths = {"sparse": sparse_truths, "hybrid": hybrid_truths}
    own_workdir = args.workdir is None
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="bench-hybrid-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        results = [
            run_engine(name, data, truths, oracle, args, workdir) for name in engines
        ]
    finally:
        if own_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    extra = {
        "summary": summary(results),
        "oracle": oracle_facts,
        "thread_env": {v: os.environ[v] for v in THREAD_ENV},
        "python": sys.version.split()[0],
    }
    if skipped:
        extra["skipped_engines"] = skipped
    document = report.build_document(
        suite="hybrid-sparse",
        command=report.repo_relative_text("python -m bench.hybrid " + shlex.join(argv)),
        started_at=started_at,
        dataset={
            "name": data.name,
            "n": data.n,
            "dim": data.dim,
            "metric": "cosine",
            "queries": data.nq,
            "k": K,
            "source": data.source,
            "sparse_vectors": {SPARSE_NAME: "rag.sparse BM25 tf, modifier idf"},
        },
        results=results,
        extra=extra,
    )
    if report.invalid(document):
        return 2
    print(json.dumps(document["summary"]))
    if args.out:
        report.write_json(document, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
