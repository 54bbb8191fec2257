"""Named vectors through qdrant-client, with its local mode (`QdrantClient(":memory:")`) as
the oracle: a collection with three dense vectors of different sizes and distances, points
that lack some of them, written in both upsert forms; then per vector name, exact search
(with and without a filter, by vector and by point id), retrieve and scroll with every
`with_vectors` form, `update_vectors` and `delete_vectors`, and the errors for a vector
name the collection does not have. Both backends must give the same ids, scores and
vectors.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from oracle_checks import REFUSED, remote_client
from qdrant_client import QdrantClient, models

COLLECTION = "named"
SIZES = {"text": 5, "image": 7, "code": 3}
DISTANCES = {
    "text": models.Distance.COSINE,
    "image": models.Distance.DOT,
    "code": models.Distance.EUCLID,
}
TOLERANCE = 1e-4


@pytest.fixture()
def named_clients(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    remote = remote_client(server, api)
    oracle = QdrantClient(":memory:")
    for client in (remote, oracle):
        if client.collection_exists(COLLECTION):
            client.delete_collection(COLLECTION)
        client.create_collection(
            COLLECTION,
            vectors_config={
                name: models.VectorParams(size=size, distance=DISTANCES[name])
                for name, size in SIZES.items()
            },
        )
    yield remote, oracle
    remote.delete_collection(COLLECTION)
    remote.close()
    oracle.close()


def _vector(rng: random.Random, name: str) -> list[float]:
    # small integers: exact sums, so scores agree to the last bit
    return [float(rng.randint(-3, 3)) or 1.0 for _ in range(SIZES[name])]


def _points(rng: random.Random, count: int) -> list[models.PointStruct]:
    points = []
    for point_id in range(count):
        vectors: dict[str, models.Vector] = {
            name: _vector(rng, name)
            for name in SIZES
            if not (name == "image" and point_id % 4 == 0)
            and not (name == "text" and point_id % 5 == 0)
        }
        payload = {"group": point_id % 3, "name": f"p{point_id}"}
        points.append(models.PointStruct(id=point_id, vector=vectors, payload=payload))
    return points


def _same_vectors(got: object, expected: object) -> bool:
    assert isinstance(got, dict) and isinstance(expected, dict), (got, expected)
    if set(got) != set(expected):
        return False
    return all(
        all(abs(a - b) <= TOLERANCE for a, b in zip(got[k], expected[k], strict=True))
        for k in got
    )


def _records(client: QdrantClient, ids: list[int], with_vectors: bool | list[str]):
    records = client.retrieve(
        COLLECTION, ids, with_vectors=with_vectors, with_payload=True
    )
    return sorted(records, key=lambda record: record.id)


def _check_records(
    remote: QdrantClient,
    oracle: QdrantClient,
    ids: list[int],
    with_vectors: bool | list[str],
) -> None:
    got = _records(remote, ids, with_vectors)
    expected = _records(oracle, ids, with_vectors)
    assert [r.id for r in got] == [r.id for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        assert mine.payload == theirs.payload
        if theirs.vector is None or theirs.vector == {}:
            assert mine.vector in (None, {}), (with_vectors, mine)
        else:
            assert _same_vectors(mine.vector, theirs.vector), (
                with_vectors,
                mine.vector,
                theirs.vector,
            )


def _check_search(
    remote: QdrantClient,
    oracle: QdrantClient,
    using: str,
    query: list[float] | int,
    query_filter: models.Filter | None,
) -> None:
    answers = [
        client.query_points(
            COLLECTION,
            query=query,
            using=using,
            query_filter=query_filter,
            limit=6,
            with_payload=True,
            with_vectors=[using],
            search_params=models.SearchParams(exact=True),
        ).points
        for client in (remote, oracle)
    ]
    got, expected = answers
    assert [round(p.score, 3) for p in got] == [round(p.score, 3) for p in expected]
    # ties may be broken either way: compare ids by score
    by_score: dict[float, set] = {}
    for point in expected:
        by_score.setdefault(round(point.score, 3), set()).add(point.id)
    for point in got:
        assert point.id in by_score[round(point.score, 3)], (using, point, expected)
        assert isinstance(point.vector, dict) and set(point.vector) == {using}


def test_named_vectors_match_qdrant_local_mode(named_clients) -> None:
    remote, oracle = named_clients
    rng = random.Random(16)
    points = _points(rng, 40)
    for client in (remote, oracle):
        client.upsert(COLLECTION, points[:30], wait=True)
        # the batch form: a map of vector name to one vector per id
        batch_ids = list(range(30, 40))
        client.upsert(
            COLLECTION,
            models.Batch(
                ids=list[models.ExtendedPointId](batch_ids),
                vectors={
                    name: [_vector(random.Random(i), name) for i in batch_ids]
                    for name in ("text", "code")
                },
                payloads=[{"group": i % 3} for i in batch_ids],
            ),
            wait=True,
        )
    info = remote.get_collection(COLLECTION)
    vectors = info.config.params.vectors
    assert isinstance(vectors, dict)
    assert {name: v.size for name, v in vectors.items()} == SIZES
    assert remote.count(COLLECTION).count == oracle.count(COLLECTION).count == 40

    ids = list(range(40))
    for with_vectors in (True, False, ["text"], ["image", "code"]):
        _check_records(remote, oracle, ids, with_vectors)
    group = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=1))]
    )
    for using in SIZES:
        for query_filter in (None, group):
            _check_search(remote, oracle, using, _vector(rng, using), query_filter)
        # by point id: a point having that vector (and left out of its own results)
        with_it = next(
            index
            for index, p in enumerate(points[:30])
            if isinstance(p.vector, dict) and using in p.vector
        )
        _check_search(remote, oracle, using, with_it, None)

    # scroll shows only the vectors asked for
    page, _ = remote.scroll(COLLECTION, limit=40, with_vectors=["code"])
    assert all(set(record.vector or {}) <= {"code"} for record in page)

    # update_vectors replaces the given vector, keeps the others and the payload
    for client in (remote, oracle):
        client.update_vectors(
            COLLECTION,
            points=[
                models.PointVectors(id=0, vector={"image": [1.0] * 7}),
                models.PointVectors(id=3, vector={"text": [2.0] * 5}),
            ],
            wait=True,
        )
        client.delete_vectors(COLLECTION, vectors=["code"], points=[1, 2, 3], wait=True)
    _check_records(remote, oracle, ids, True)
    # the same through /points/batch, in order with an upsert
    for client in (remote, oracle):
        client.batch_update_points(
            COLLECTION,
            update_operations=[
                models.UpdateVectorsOperation(
                    update_vectors=models.UpdateVectors(
                        points=[
                            models.PointVectors(id=5, vector={"code": [3.0, 2.0, 1.0]})
                        ]
                    )
                ),
                models.DeleteVectorsOperation(
                    delete_vectors=models.DeleteVectors(
                        points=[6, 7], vector=["text", "image"]
                    )
                ),
            ],
            wait=True,
        )
    _check_records(remote, oracle, ids, True)
    for using in SIZES:
        _check_search(remote, oracle, using, _vector(rng, using), None)

    # a name the collection does not have is refused, by both
    for client in (remote, oracle):
        with pytest.raises((*REFUSED, ValueError)):
            client.query_points(COLLECTION, query=[1.0] * 5, using="audio", limit=3)
        with pytest.raises((*REFUSED, ValueError)):
            client.upsert(
                COLLECTION,
                [models.PointStruct(id=99, vector={"audio": [1.0]})],
                wait=True,
            )
    assert remote.count(COLLECTION).count == 40
    # a vector of the wrong size names the vector
    with pytest.raises(REFUSED, match="expected dim: 5, got 2"):
        remote.upsert(
            COLLECTION, [models.PointStruct(id=98, vector={"text": [1.0, 2.0]})]
        )


def test_a_named_collection_survives_a_restart_with_its_vectors(server) -> None:
    remote = QdrantClient(url=server.url, prefer_grpc=False, timeout=30)
    name = "named_restart"
    if remote.collection_exists(name):
        remote.delete_collection(name)
    remote.create_collection(
        name,
        vectors_config={
            "a": models.VectorParams(size=2, distance=models.Distance.DOT),
            "b": models.VectorParams(size=3, distance=models.Distance.EUCLID),
        },
    )
    remote.upsert(
        name,
        [
            models.PointStruct(id=1, vector={"a": [1.0, 2.0]}),
            models.PointStruct(id=2, vector={"b": [1.0, 2.0, 3.0]}),
            models.PointStruct(id=3, vector={"a": [0.5, 0.5], "b": [0.0, 0.0, 1.0]}),
        ],
        wait=True,
    )
    remote.close()
    server.stop()
    server.start()
    remote = QdrantClient(url=server.url, prefer_grpc=False, timeout=30)
    records = {
        r.id: r.vector for r in remote.retrieve(name, [1, 2, 3], with_vectors=True)
    }
    assert records == {
        1: {"a": [1.0, 2.0]},
        2: {"b": [1.0, 2.0, 3.0]},
        3: {"a": [0.5, 0.5], "b": [0.0, 0.0, 1.0]},
    }
    hits = remote.query_points(name, query=[1.0, 2.0, 3.0], using="b", limit=5).points
    assert [hit.id for hit in hits] == [2, 3]
    remote.delete_collection(name)
    remote.close()
