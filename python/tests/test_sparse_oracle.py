"""Sparse vectors through qdrant-client, with its local mode (`QdrantClient(":memory:")`)
as the oracle. Two collections: the unnamed dense vector beside an IDF-weighted sparse
one, and sparse vectors alone (`vectors: {}`, a plain one and an IDF one). Points lack
some vectors, arrive in both upsert forms with unsorted indices, are rewritten through
`update_vectors` and `delete_vectors`, deleted; every sparse search (plain, filtered,
paged, thresholded, by point id, batched, the pre-1.16 search endpoint) must give the
oracle's ids and scores, and retrieve and scroll its vectors. Bad sparse input is
refused naming the field, as it is by Qdrant.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator

import pytest
from oracle_checks import (
    TOLERANCE,
    paired_clients,
    refusal,
    same_has_vector,
    same_hits,
    same_recommendations,
    same_vectors,
)
from qdrant_client import QdrantClient, models

HYBRID = "hybrid"
SPARSE_ONLY = "sparse-only"


def _create(client: QdrantClient) -> None:
    for name in (HYBRID, SPARSE_ONLY):
        if client.collection_exists(name):
            client.delete_collection(name)
    client.create_collection(
        HYBRID,
        vectors_config=models.VectorParams(size=3, distance=models.Distance.DOT),
        sparse_vectors_config={
            "text": models.SparseVectorParams(modifier=models.Modifier.IDF),
        },
    )
    client.create_collection(
        SPARSE_ONLY,
        vectors_config={},
        sparse_vectors_config={
            "words": models.SparseVectorParams(),
            "bm25": models.SparseVectorParams(modifier=models.Modifier.IDF),
        },
    )


@pytest.fixture()
def sparse_clients(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    yield from paired_clients(server, api, _create, (HYBRID, SPARSE_ONLY))


def _sparse(rng: random.Random, most: int = 8) -> models.SparseVector:
    indices = rng.sample(range(60), rng.randint(1, most))
    # two decimals: sums differ enough that ties are rare and scores agree closely
    values = [round(rng.uniform(0.1, 2.0), 2) for _ in indices]
    return models.SparseVector(indices=indices, values=values)


def _hybrid_points(rng: random.Random, ids: range) -> list[models.PointStruct]:
    points = []
    for point_id in ids:
        # three decimals: dense scores rarely tie, so fused ranks agree
        dense = [round(rng.uniform(-2, 2), 3) for _ in range(3)]
        vector: dict[str, models.Vector] = {"": dense}
        if point_id % 5:
            vector["text"] = _sparse(rng)
        payload = {"group": point_id % 3}
        points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
    return points


def _sparse_points(rng: random.Random, ids: range) -> list[models.PointStruct]:
    points = []
    for point_id in ids:
        vector: dict[str, models.Vector] = {}
        if point_id % 4:
            vector["words"] = _sparse(rng)
        if point_id % 7:
            vector["bm25"] = _sparse(rng, 5)
        points.append(
            models.PointStruct(
                id=point_id, vector=vector, payload={"group": point_id % 3}
            )
        )
    return points


def _check_records(
    remote: QdrantClient, oracle: QdrantClient, name: str, ids: list[int]
):
    for with_vectors in (True, False):
        got, expected = (
            sorted(
                client.retrieve(
                    name, ids, with_vectors=with_vectors, with_payload=True
                ),
                key=lambda record: str(record.id),
            )
            for client in (remote, oracle)
        )
        assert [r.id for r in got] == [r.id for r in expected]
        for mine, theirs in zip(got, expected, strict=True):
            assert mine.payload == theirs.payload
            same_vectors(mine.vector, theirs.vector)


def _check_queries(
    remote: QdrantClient,
    oracle: QdrantClient,
    name: str,
    using: str,
    rng: random.Random,
) -> None:
    group = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=1))]
    )
    for round_ in range(8):
        query = _sparse(rng, 12)
        query_filter = group if round_ % 2 else None
        offset = 3 if round_ % 3 == 1 else None
        threshold = 1.0 if round_ % 4 == 3 else None
        got, expected = (
            client.query_points(
                name,
                query=query,
                using=using,
                with_vectors=[using],
                limit=7,
                query_filter=query_filter,
                offset=offset,
                score_threshold=threshold,
            ).points
            for client in (remote, oracle)
        )
        same_hits(got, expected)
        for mine, theirs in zip(got, expected, strict=True):
            if mine.id == theirs.id:
                same_vectors(mine.vector, theirs.vector)
    # the pre-1.16 search endpoint with a named sparse vector
    query = _sparse(rng, 12)
    answer = remote.http.search_api.search_points(
        name,
        search_request=models.SearchRequest(
            vector=models.NamedSparseVector(name=using, vector=query), limit=5
        ),
    )
    assert answer.result is not None
    expected = oracle.query_points(name, query=query, using=using, limit=5).points
    same_hits(answer.result, expected)
    # a batch of queries, answered in order
    queries = [_sparse(rng, 10) for _ in range(3)]
    got, expected = (
        client.query_batch_points(
            name,
            [models.QueryRequest(query=q, using=using, limit=4) for q in queries],
        )
        for client in (remote, oracle)
    )
    for mine, theirs in zip(got, expected, strict=True):
        same_hits(mine.points, theirs.points)


def _idf_brute_force(
    records: list[models.Record], query: models.SparseVector, limit: int
) -> list[tuple[object, float]]:
    """Top `limit` (id, score) for an IDF-weighted query over `records`' "bm25" vectors:
    BM25's IDF, ln((n - df + 0.5) / (df + 0.5) + 1), over the live points."""
    vectors = {
        record.id: record.vector["bm25"]
        for record in records
        if isinstance(record.vector, dict) and "bm25" in record.vector
    }
    frequency: dict[int, int] = {}
    for vector in vectors.values():
        assert isinstance(vector, models.SparseVector)
        for index in vector.indices:
            frequency[index] = frequency.get(index, 0) + 1
    total = len(records)
    weights = {
        index: value
        * math.log(
            (total - frequency.get(index, 0) + 0.5) / (frequency.get(index, 0) + 0.5)
            + 1
        )
        for index, value in zip(query.indices, query.values, strict=True)
    }
    scored = []
    for point_id, vector in vectors.items():
        assert isinstance(vector, models.SparseVector)
        shared = [i for i in range(len(vector.indices)) if vector.indices[i] in weights]
        if shared:
            score = sum(weights[vector.indices[i]] * vector.values[i] for i in shared)
            scored.append((point_id, score))
    scored.sort(key=lambda hit: -hit[1])
    return scored[:limit]


def test_hybrid_collection_matches_qdrant_local_mode(sparse_clients) -> None:
    remote, oracle = sparse_clients
    rng = random.Random(20)
    points = _hybrid_points(rng, range(60))
    for client in (remote, oracle):
        client.upsert(HYBRID, points, wait=True)
    info = remote.get_collection(HYBRID)
    assert isinstance(info.config.params.vectors, models.VectorParams)
    sparse = info.config.params.sparse_vectors
    assert sparse is not None and set(sparse) == {"text"}, sparse
    assert sparse["text"].modifier == models.Modifier.IDF
    # over gRPC qdrant-client always fills `index`, with nothing set
    assert sparse["text"].index in (None, models.SparseIndexParams()), sparse
    _check_records(remote, oracle, HYBRID, list(range(60)))
    _check_queries(remote, oracle, HYBRID, "text", rng)
    # the dense vector is still searched as the unnamed one
    got, expected = (
        client.query_points(HYBRID, query=[1.0, 0.5, -1.0], limit=5).points
        for client in (remote, oracle)
    )
    same_hits(got, expected)
    # by point id: its sparse vector is the query, the point itself left out
    got, expected = (
        client.query_points(HYBRID, query=1, using="text", limit=5).points
        for client in (remote, oracle)
    )
    same_hits(got, expected)
    assert all(point.id != 1 for point in got)


def test_hybrid_queries_fuse_and_rescore_as_qdrant_local_mode(sparse_clients) -> None:
    """Prefetches (a dense and a sparse search) fused by RRF (default and chosen k) and
    DBSF, re-scored by an outer query, nested two deep, with offset and threshold."""
    remote, oracle = sparse_clients
    rng = random.Random(22)
    points = _hybrid_points(rng, range(80))
    for client in (remote, oracle):
        client.upsert(HYBRID, points, wait=True)
    group = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=2))]
    )
    for round_ in range(6):
        dense = [round(rng.uniform(-2, 2), 3) for _ in range(3)]
        sparse = _sparse(rng, 12)
        prefetch = [
            models.Prefetch(query=dense, limit=15),
            models.Prefetch(query=sparse, using="text", limit=12, filter=group),
        ]
        fusions: list[models.Query] = [
            models.FusionQuery(fusion=models.Fusion.RRF),
            models.FusionQuery(fusion=models.Fusion.DBSF),
            models.RrfQuery(rrf=models.Rrf(k=5)),
        ]
        for fusion in fusions:
            # every candidate (15 + 12 at most): fused scores per id must agree exactly,
            # whatever order ties take
            got, expected = (
                client.query_points(
                    HYBRID, prefetch=prefetch, query=fusion, limit=30, with_payload=True
                ).points
                for client in (remote, oracle)
            )
            theirs = {point.id: (point.score, point.payload) for point in expected}
            assert len(got) == len(theirs)
            for point in got:
                score, payload = theirs[point.id]
                assert abs(point.score - score) <= TOLERANCE, (point, score)
                assert point.payload == payload
            assert all(a.score >= b.score for a, b in itertools.pairwise(got))
            # a page of it: the same hits, from `offset` on
            page = remote.query_points(
                HYBRID, prefetch=prefetch, query=fusion, limit=5, offset=round_ % 3
            ).points
            assert [p.id for p in page] == [p.id for p in got[round_ % 3 :][:5]]
        # re-scoring: sparse candidates ranked by the dense query, and a nested fusion
        got, expected = (
            client.query_points(
                HYBRID,
                prefetch=models.Prefetch(query=sparse, using="text", limit=20),
                query=dense,
                limit=6,
            ).points
            for client in (remote, oracle)
        )
        same_hits(got, expected)
        nested = models.Prefetch(
            prefetch=prefetch,
            query=models.FusionQuery(fusion=models.Fusion.RRF),
            limit=10,
        )
        got = remote.query_points(
            HYBRID, prefetch=nested, query=sparse, using="text", limit=5
        ).points
        # the oracle step by step (its nested prefetches sometimes let in points outside
        # the fused candidates): the fusion, then the query among its points
        fused = oracle.query_points(
            HYBRID,
            prefetch=prefetch,
            query=models.FusionQuery(fusion=models.Fusion.RRF),
            limit=10,
        ).points
        among = models.Filter(
            must=[models.HasIdCondition(has_id=[p.id for p in fused])]
        )
        expected = oracle.query_points(
            HYBRID, query=sparse, using="text", query_filter=among, limit=5
        ).points
        same_hits(got, expected)


def test_sparse_only_collection_matches_qdrant_local_mode(
    server, sparse_clients
) -> None:
    remote, oracle = sparse_clients
    rng = random.Random(21)
    points = _sparse_points(rng, range(50))
    batch_ids = list(range(50, 60))
    words = [_sparse(rng) for _ in batch_ids]
    for client in (remote, oracle):
        client.upsert(SPARSE_ONLY, points, wait=True)
        client.upsert(
            SPARSE_ONLY,
            models.Batch(
                ids=list[models.ExtendedPointId](batch_ids),
                vectors={"words": list[models.Vector](words)},
                payloads=[{"group": i % 3} for i in batch_ids],
            ),
            wait=True,
        )
    info = remote.get_collection(SPARSE_ONLY)
    assert info.config.params.vectors == {}
    assert info.points_count == 60
    ids = list(range(60))
    _check_records(remote, oracle, SPARSE_ONLY, ids)
    for using in ("words", "bm25"):
        _check_queries(remote, oracle, SPARSE_ONLY, using, rng)
    same_recommendations(remote, oracle, SPARSE_ONLY, "words")
    same_has_vector(remote, oracle, SPARSE_ONLY, "words")
    # scoring strategies score raw weights: refused for an IDF vector, naming the field
    best = {"recommend": {"positive": [1], "strategy": "best_score"}}
    error = refusal(
        server.url,
        "POST",
        f"/collections/{SPARSE_ONLY}/points/query",
        {"query": best, "using": "bm25"},
    )
    assert "query.recommend.strategy" in error

    # rewrites: one vector replaced, one removed, points deleted — IDF follows the counts
    for client in (remote, oracle):
        client.update_vectors(
            SPARSE_ONLY,
            points=[
                models.PointVectors(id=1, vector={"bm25": _sparse(random.Random(1))}),
                models.PointVectors(id=2, vector={"words": _sparse(random.Random(2))}),
            ],
            wait=True,
        )
        client.delete_vectors(
            SPARSE_ONLY, vectors=["bm25"], points=[3, 5, 6], wait=True
        )
        client.delete(SPARSE_ONLY, points_selector=[10, 11, 12], wait=True)
    _check_records(remote, oracle, SPARSE_ONLY, ids)
    _check_queries(remote, oracle, SPARSE_ONLY, "words", rng)
    # local mode keeps the document frequencies of deleted points and vectors, so IDF
    # scores after deletes are checked against a brute force over the live points
    stored, _ = oracle.scroll(SPARSE_ONLY, limit=100, with_vectors=["bm25"])
    for _ in range(5):
        query = _sparse(rng, 12)
        got = remote.query_points(
            SPARSE_ONLY, query=query, using="bm25", limit=8
        ).points
        expected = _idf_brute_force(stored, query, 8)
        assert len(got) == len(expected)
        for point, (point_id, score) in zip(got, expected, strict=True):
            assert abs(point.score - score) <= TOLERANCE * max(1.0, score), (
                got,
                expected,
            )
            assert point.id == point_id or abs(point.score - score) <= TOLERANCE
    page, _ = remote.scroll(SPARSE_ONLY, limit=100, with_vectors=["bm25"])
    assert len(page) == 57
    assert all(set(record.vector or {}) <= {"bm25"} for record in page)


@pytest.mark.parametrize(
    ("vector", "reason"),
    [
        ({"text": {"indices": [1, 1], "values": [1.0, 2.0]}}, "index 1 is given twice"),
        ({"text": {"indices": [1, 2], "values": [1.0]}}, "2 indices and 1 values"),
        ({"text": [1.0, 2.0]}, "points[0].vector.text"),
        (
            {"nope": {"indices": [1], "values": [1.0]}},
            "Not existing vector name error: nope",
        ),
    ],
)
def test_bad_sparse_input_is_refused_naming_the_field(
    server, sparse_clients, vector: dict[str, object], reason: str
) -> None:
    remote, _ = sparse_clients
    points = {"points": [{"id": 1, "vector": vector}]}
    path = f"/collections/{HYBRID}/points?wait=true"
    assert reason in refusal(server.url, "PUT", path, points)
    assert remote.count(HYBRID).count == 0
    query = {"query": {"indices": [3, 3], "values": [1, 1]}, "using": "text"}
    error = refusal(server.url, "POST", f"/collections/{HYBRID}/points/query", query)
    assert "index 3 is given twice" in error
