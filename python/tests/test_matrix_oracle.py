"""Distance matrices (`search_matrix_pairs` / `search_matrix_offsets`) through
qdrant-client, with its local mode (`QdrantClient(":memory:")`) as the oracle. The sample
is random, so each request asks for at least as many samples as points pass its filter:
then both sides sample every one of them and must give the same pairs, offsets and scores
(for dense vectors of each distance, and a sparse vector). Fewer than two samples give an
empty matrix; points without the vector are never sampled; bad requests are refused
naming the field.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from oracle_checks import close, paired_clients, refusal
from qdrant_client import QdrantClient, models

UNNAMED = "matrix-unnamed"
NAMED = "matrix-named"
DIM = 6


def _create(client: QdrantClient) -> None:
    rng = random.Random(5)
    client.create_collection(
        UNNAMED,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    client.create_collection(
        NAMED,
        vectors_config={
            "dot": models.VectorParams(size=DIM, distance=models.Distance.DOT),
            "l2": models.VectorParams(size=DIM, distance=models.Distance.EUCLID),
        },
        sparse_vectors_config={"words": models.SparseVectorParams()},
    )

    def dense() -> list[float]:
        return [rng.uniform(-1, 1) for _ in range(DIM)]

    def sparse() -> models.SparseVector:
        indices = rng.sample(range(20), 4)
        return models.SparseVector(
            indices=indices, values=[rng.random() for _ in indices]
        )

    unnamed = [
        models.PointStruct(id=i, vector=dense(), payload={"group": i % 3})
        for i in range(30)
    ]
    named = [
        models.PointStruct(
            id=i,
            vector={"dot": dense(), "l2": dense(), "words": sparse()},
            payload={"group": i % 3},
        )
        for i in range(30)
    ]
    client.upsert(UNNAMED, unnamed, wait=True)
    client.upsert(NAMED, named, wait=True)


@pytest.fixture()
def matrix_clients(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    yield from paired_clients(server, api, _create, (UNNAMED, NAMED))


def _group(value: int) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=value))]
    )


def _same_pairs(
    got: models.SearchMatrixPairsResponse, expected: models.SearchMatrixPairsResponse
) -> None:
    assert len(got.pairs) == len(expected.pairs), (got, expected)
    for mine, theirs in zip(got.pairs, expected.pairs, strict=True):
        assert mine.a == theirs.a, (got, expected)
        assert close(mine.score, theirs.score), (mine, theirs)
        # a neighbour tied with another may come in either order
        tied = {
            p.b
            for p in expected.pairs
            if p.a == theirs.a and close(p.score, theirs.score)
        }
        assert mine.b in tied, (mine, expected)


CASES = [
    (UNNAMED, None, _group(0)),
    (NAMED, "dot", _group(1)),
    (NAMED, "l2", _group(2)),
    (NAMED, "words", _group(0)),
    (NAMED, "l2", None),
]


@pytest.mark.parametrize(("collection", "using", "query_filter"), CASES)
def test_matrices_agree_with_local_mode(
    matrix_clients: tuple[QdrantClient, QdrantClient],
    collection: str,
    using: str | None,
    query_filter: models.Filter | None,
) -> None:
    remote, oracle = matrix_clients
    for limit in (1, 3, 20):
        args = {
            "query_filter": query_filter,
            "using": using,
            "limit": limit,
            "sample": 30,
        }
        pairs = remote.search_matrix_pairs(collection, **args)
        _same_pairs(pairs, oracle.search_matrix_pairs(collection, **args))
        assert pairs.pairs, "the matrix has cells"
        offsets = remote.search_matrix_offsets(collection, **args)
        expected = oracle.search_matrix_offsets(collection, **args)
        assert offsets.ids == expected.ids
        assert offsets.offsets_row == expected.offsets_row
        assert len(offsets.scores) == len(expected.scores)
        for mine, theirs in zip(offsets.scores, expected.scores, strict=True):
            assert close(mine, theirs)
        # the offsets name the same cells as the pairs
        cells = [
            (offsets.ids[r], offsets.ids[c])
            for r, c in zip(offsets.offsets_row, offsets.offsets_col, strict=True)
        ]
        assert cells == [(p.a, p.b) for p in pairs.pairs]


def test_small_samples_and_bad_requests(
    server, matrix_clients: tuple[QdrantClient, QdrantClient]
) -> None:
    remote, oracle = matrix_clients
    one = models.Filter(must=[models.HasIdCondition(has_id=[3])])
    for client in (remote, oracle):
        assert client.search_matrix_pairs(UNNAMED, query_filter=one).pairs == []
        assert client.search_matrix_offsets(UNNAMED, query_filter=one).ids == []
    # a random sample of 5 among 30: 5 distinct sorted ids, each row its 2 nearest others
    sampled = remote.search_matrix_offsets(UNNAMED, sample=5, limit=2)
    assert len(sampled.ids) == 5 and sampled.ids == sorted(set(sampled.ids))
    assert sampled.offsets_row == [row for row in range(5) for _ in range(2)]
    assert all(
        r != c for r, c in zip(sampled.offsets_row, sampled.offsets_col, strict=True)
    )
    # points without the vector are never sampled (local mode fails on them: not compared)
    remote.delete_vectors(
        NAMED, vectors=["l2"], points=list(range(0, 30, 2)), wait=True
    )
    matrix = remote.search_matrix_offsets(NAMED, using="l2", sample=30, limit=3)
    assert matrix.ids == list(range(1, 30, 2))
    path = f"/collections/{NAMED}/points/search/matrix/pairs"
    assert "nope" in refusal(server.url, "POST", path, {"using": "nope"})
    assert "sample" in refusal(server.url, "POST", path, {"sample": 0})
    assert "limit" in refusal(server.url, "POST", path, {"limit": 100000})
