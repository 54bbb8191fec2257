"""Multivectors (max_sim) and MMR re-ranking through qdrant-client, with its local mode
(`QdrantClient(":memory:")`) as the oracle. Two collections: a dense vector beside
three multivectors (Cosine, Dot, Euclid), and one unnamed multivector alone. Some
points lack the dense vector or lose it; points arrive in both upsert forms, are
rewritten through `update_vectors` and `delete_vectors`, deleted. Every multivector
search (plain, filtered, paged, by point id, batched) and every MMR query (dense and
multivector, several diversities) must give the oracle's ids and scores, and retrieve
its vectors. Bad multivectors are refused naming the field, as they are by Qdrant.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from oracle_checks import (
    paired_clients,
    refusal,
    same_has_vector,
    same_hits,
    same_recommendations,
    same_vectors,
)
from qdrant_client import QdrantClient, models

NAMED = "multi-named"
UNNAMED = "multi-unnamed"
MULTI = {
    "colbert": models.Distance.COSINE,
    "mdot": models.Distance.DOT,
    "ml2": models.Distance.EUCLID,
}
ROW = 4


def _multi_params(distance: models.Distance) -> models.VectorParams:
    return models.VectorParams(
        size=ROW,
        distance=distance,
        multivector_config=models.MultiVectorConfig(
            comparator=models.MultiVectorComparator.MAX_SIM
        ),
    )


def _create(client: QdrantClient) -> None:
    for name in (NAMED, UNNAMED):
        if client.collection_exists(name):
            client.delete_collection(name)
    vectors = {name: _multi_params(distance) for name, distance in MULTI.items()}
    vectors["dense"] = models.VectorParams(size=3, distance=models.Distance.COSINE)
    client.create_collection(NAMED, vectors_config=vectors)
    client.create_collection(UNNAMED, vectors_config=_multi_params(models.Distance.DOT))


@pytest.fixture()
def multi_clients(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    yield from paired_clients(server, api, _create, (NAMED, UNNAMED))


def _matrix(rng: random.Random) -> list[list[float]]:
    # three decimals: max_sim sums rarely tie, so ranks agree
    return [
        [round(rng.uniform(-1, 1), 3) for _ in range(ROW)]
        for _ in range(rng.randint(1, 4))
    ]


def _named_points(rng: random.Random, ids: range) -> list[models.PointStruct]:
    # every point has every multivector: local mode cannot score a multivector search
    # over points lacking one (the engine test covers them against brute force)
    points = []
    for point_id in ids:
        vector: dict[str, models.Vector] = {name: _matrix(rng) for name in MULTI}
        if point_id % 4:
            vector["dense"] = [round(rng.uniform(-1, 1), 3) for _ in range(3)]
        payload = {"group": point_id % 3}
        points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
    return points


def _check_records(
    remote: QdrantClient, oracle: QdrantClient, name: str, ids: list[int]
) -> None:
    got, expected = (
        sorted(client.retrieve(name, ids, with_vectors=True), key=lambda r: str(r.id))
        for client in (remote, oracle)
    )
    assert [r.id for r in got] == [r.id for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        same_vectors(mine.vector, theirs.vector)


def _check_queries(
    remote: QdrantClient,
    oracle: QdrantClient,
    name: str,
    using: str | None,
    rng: random.Random,
) -> None:
    group = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=1))]
    )
    for round_ in range(6):
        query = _matrix(rng)
        query_filter = group if round_ % 2 else None
        offset = 2 if round_ % 3 == 1 else None
        got, expected = (
            client.query_points(
                name,
                query=query,
                using=using,
                with_vectors=True,
                limit=6,
                query_filter=query_filter,
                offset=offset,
            ).points
            for client in (remote, oracle)
        )
        same_hits(got, expected)
        for mine, theirs in zip(got, expected, strict=True):
            if mine.id == theirs.id:
                same_vectors(mine.vector, theirs.vector)
    # by point id (the point itself left out), and a batch answered in order
    got, expected = (
        client.query_points(name, query=7, using=using, limit=5).points
        for client in (remote, oracle)
    )
    same_hits(got, expected)
    queries = [_matrix(rng) for _ in range(3)]
    got_batch, expected_batch = (
        client.query_batch_points(
            name, [models.QueryRequest(query=q, using=using, limit=4) for q in queries]
        )
        for client in (remote, oracle)
    )
    for mine, theirs in zip(got_batch, expected_batch, strict=True):
        same_hits(mine.points, theirs.points)


def _check_mmr(
    remote: QdrantClient, oracle: QdrantClient, using: str, query: object
) -> None:
    for diversity, candidates in ((None, None), (0.3, 25), (0.9, 40), (0.0, 15)):
        got, expected = (
            client.query_points(
                NAMED,
                query=models.NearestQuery(
                    nearest=query,  # type: ignore[arg-type]
                    mmr=models.Mmr(diversity=diversity, candidates_limit=candidates),
                ),
                using=using,
                limit=8,
            ).points
            for client in (remote, oracle)
        )
        # MMR keeps the search scores and changes the order: compare in order
        assert [p.id for p in got] == [p.id for p in expected], (
            using,
            diversity,
            got,
            expected,
        )
        same_hits(got, expected)


def test_named_multivectors_match_qdrant_local_mode(multi_clients) -> None:
    remote, oracle = multi_clients
    rng = random.Random(11)
    first = _named_points(rng, range(50))
    for client in (remote, oracle):
        client.upsert(NAMED, first, wait=True)
    # the batch form: one column per vector
    batch_ids = list(range(50, 70))
    columns: dict[str, list[object]] = {"dense": [], **{name: [] for name in MULTI}}
    for _ in batch_ids:
        columns["dense"].append([round(rng.uniform(-1, 1), 3) for _ in range(3)])
        for name in MULTI:
            columns[name].append(_matrix(rng))
    batch = models.Batch(
        ids=batch_ids, vectors=columns, payloads=[{"group": i % 3} for i in batch_ids]
    )  # type: ignore[arg-type]
    for client in (remote, oracle):
        client.upsert(NAMED, batch, wait=True)
        client.update_vectors(
            NAMED,
            [models.PointVectors(id=3, vector={"mdot": [[1.0, 0.5, -0.5, 0.25]]})],
            wait=True,
        )
        client.delete_vectors(NAMED, vectors=["dense"], points=[5, 6], wait=True)
        client.delete(
            NAMED, points_selector=models.PointIdsList(points=[10, 11]), wait=True
        )
    _check_records(remote, oracle, NAMED, [*range(0, 70, 3), 5, 6])
    same_has_vector(remote, oracle, NAMED, "dense")
    same_has_vector(remote, oracle, NAMED, "colbert")
    for using in MULTI:
        _check_queries(remote, oracle, NAMED, using, rng)
        _check_mmr(remote, oracle, using, _matrix(rng))
        same_recommendations(remote, oracle, NAMED, using)
    _check_mmr(remote, oracle, "dense", [0.3, -0.2, 0.9])


def test_unnamed_multivector_matches_qdrant_local_mode(multi_clients) -> None:
    remote, oracle = multi_clients
    rng = random.Random(12)
    points = [
        models.PointStruct(id=i, vector=_matrix(rng), payload={"group": i % 3})
        for i in range(40)
    ]
    for client in (remote, oracle):
        client.upsert(UNNAMED, points, wait=True)
        client.upsert(
            UNNAMED,
            models.Batch(
                ids=[40, 41],
                vectors=[_matrix(random.Random(1)), _matrix(random.Random(2))],
            ),
            wait=True,
        )  # type: ignore[arg-type]
    _check_records(remote, oracle, UNNAMED, [0, 1, 40, 41])
    _check_queries(remote, oracle, UNNAMED, None, rng)
    info = remote.get_collection(UNNAMED).config.params.vectors
    assert isinstance(info, models.VectorParams) and info.multivector_config is not None


@pytest.mark.parametrize(
    ("vector", "reason"),
    [
        ({"colbert": [[1.0, 2.0, 3.0, 4.0], [1.0]]}, "row 1 has 1 values"),
        ({"colbert": [[1.0, 2.0]]}, "expected dim: 4, got 2"),
        ({"colbert": [1.0, 2.0, 3.0, 4.0]}, "is a multivector"),
        ({"dense": [[1.0, 2.0, 3.0]]}, "a dense vector is expected"),
        ({"colbert": []}, "is a multivector"),
    ],
)
def test_bad_multivectors_are_refused_naming_the_field(
    server, multi_clients, vector: dict[str, object], reason: str
) -> None:
    remote, _ = multi_clients
    points = {"points": [{"id": 1, "vector": vector}]}
    path = f"/collections/{NAMED}/points?wait=true"
    assert reason in refusal(server.url, "PUT", path, points)
    assert remote.count(NAMED).count == 0
    query = {"query": [[1.0, 2.0]], "using": "colbert"}
    error = refusal(server.url, "POST", f"/collections/{NAMED}/points/query", query)
    assert "expected dim 4, got 2" in error
