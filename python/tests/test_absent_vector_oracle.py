"""Points without their vector in a collection with one unnamed vector, through
qdrant-client, with its local mode (`QdrantClient(":memory:")`) as the oracle: an upsert
with `vector={}`, `delete_vectors` of `""` by ids and by filter, `update_vectors` giving a
vector back, the same in `/points/batch`; then retrieve and scroll (the vector shows as
`{}`), searches (such points are never found), the points `has_vector` finds and those it
does not; and a query by the id of a point without a vector, refused.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from oracle_checks import REFUSED, paired_clients, same_has_vector, same_hits
from qdrant_client import QdrantClient, models

COLLECTION = "absent"
DIM = 4
POINTS = 30


def _create(client: QdrantClient) -> None:
    if client.collection_exists(COLLECTION):
        client.delete_collection(COLLECTION)
    client.create_collection(
        COLLECTION,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT),
    )


@pytest.fixture()
def clients(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    yield from paired_clients(server, api, _create, (COLLECTION,))


def _vector(rng: random.Random) -> list[float]:
    # small integers: exact sums, so scores agree to the last bit
    return [float(rng.randint(-3, 3)) or 1.0 for _ in range(DIM)]


def _check_records(remote: QdrantClient, oracle: QdrantClient) -> None:
    answers = [
        sorted(
            client.scroll(COLLECTION, limit=100, with_vectors=True)[0],
            key=lambda record: record.id,
        )
        for client in (remote, oracle)
    ]
    got, expected = answers
    assert [r.id for r in got] == [r.id for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.payload == theirs.payload, mine.id
        assert mine.vector == theirs.vector, (mine.id, mine.vector, theirs.vector)


def _check_search(
    remote: QdrantClient, oracle: QdrantClient, query: list[float]
) -> None:
    got, expected = (
        client.query_points(
            COLLECTION,
            query=query,
            limit=POINTS,
            search_params=models.SearchParams(exact=True),
        ).points
        for client in (remote, oracle)
    )
    same_hits(got, expected)


def test_points_without_their_vector_match_qdrant_local_mode(clients) -> None:
    remote, oracle = clients
    rng = random.Random(20)
    points = [
        models.PointStruct(
            id=point_id,
            vector={} if point_id % 6 == 0 else _vector(rng),
            payload={"group": point_id % 3},
        )
        for point_id in range(POINTS)
    ]
    for client in (remote, oracle):
        client.upsert(COLLECTION, points, wait=True)
    _check_records(remote, oracle)
    same_has_vector(remote, oracle, COLLECTION, "")
    has_vector = models.Filter(must=[models.HasVectorCondition(has_vector="")])
    assert remote.count(COLLECTION, count_filter=has_vector).count == 25
    query = _vector(rng)
    _check_search(remote, oracle, query)

    restored = _vector(rng)
    group_two = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=2))]
    )
    for client in (remote, oracle):
        client.delete_vectors(COLLECTION, vectors=[""], points=[1, 2], wait=True)
        client.delete_vectors(COLLECTION, vectors=[""], points=group_two, wait=True)
        client.update_vectors(
            COLLECTION, points=[models.PointVectors(id=0, vector=restored)], wait=True
        )
    _check_records(remote, oracle)
    same_has_vector(remote, oracle, COLLECTION, "")
    _check_search(remote, oracle, query)

    # the same kinds through /points/batch, in order
    for client in (remote, oracle):
        client.batch_update_points(
            COLLECTION,
            update_operations=[
                models.UpdateVectorsOperation(
                    update_vectors=models.UpdateVectors(
                        points=[models.PointVectors(id=2, vector=restored)]
                    )
                ),
                models.DeleteVectorsOperation(
                    delete_vectors=models.DeleteVectors(points=[3, 4], vector=[""])
                ),
                models.UpsertOperation(
                    upsert=models.PointsList(
                        points=[models.PointStruct(id=7, vector={}, payload={"new": 1})]
                    )
                ),
            ],
            wait=True,
        )
    _check_records(remote, oracle)
    same_has_vector(remote, oracle, COLLECTION, "")
    _check_search(remote, oracle, query)

    # a point without a vector cannot be the query (local mode answers from the
    # placeholder row it keeps for a deleted vector, so it is no oracle here)
    with pytest.raises(REFUSED, match="has no vector"):
        remote.query_points(COLLECTION, query=3, limit=3)
    # and a name other than "" is refused, naming it
    with pytest.raises(REFUSED, match="Not existing vector name error: text"):
        remote.delete_vectors(COLLECTION, vectors=["text"], points=[5], wait=True)
    # an empty list is a vector of the wrong size, not a point without one
    with pytest.raises(REFUSED, match="is empty"):
        remote.upsert(COLLECTION, [models.PointStruct(id=5, vector=[])], wait=True)
    assert remote.count(COLLECTION).count == POINTS
