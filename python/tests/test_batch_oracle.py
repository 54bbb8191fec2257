"""`POST /collections/{c}/points/batch` through qdrant-client's `batch_update_points`, with
its local mode (`QdrantClient(":memory:")`) as the oracle: random lists of upserts
(plain and with an `update_filter`), deletes, and set / overwrite / delete / clear payload
operations, by ids or by filter, applied in order; after each batch both hold the same
points with the same payloads and vectors.

Local mode's batch ignores an upsert's `update_mode` (its plain upsert honours it), so the
batches here use `update_filter` for conditional upserts; and a payload change naming a
missing id fails in both, differently (a 404 from the server, as Qdrant's; a KeyError in
local mode), so ids are drawn from the points that exist."""

from __future__ import annotations

import random

import pytest
from conftest import recreate
from qdrant_client import QdrantClient, models

COLLECTION = "batch_oracle"


def _selector(
    rng: random.Random, existing: list[int]
) -> models.PointIdsList | models.FilterSelector:
    # ids of points that exist (see the module docstring), or a filter
    if existing and rng.random() < 0.5:
        count = rng.randint(1, min(3, len(existing)))
        return models.PointIdsList(points=rng.sample(existing, count))
    colour = rng.choice(["red", "blue"])
    condition = models.FieldCondition(
        key="colour", match=models.MatchValue(value=colour)
    )
    return models.FilterSelector(filter=models.Filter(must=[condition]))


def _points(rng: random.Random) -> list[models.PointStruct]:
    return [
        models.PointStruct(
            id=i,
            vector=[float(rng.randint(-3, 3)), float(rng.randint(-3, 3)), 1.0],
            payload={"colour": rng.choice(["red", "blue"]), "n": rng.randint(0, 5)},
        )
        for i in rng.sample(range(12), rng.randint(1, 4))
    ]


def _operation(rng: random.Random, existing: list[int]):
    kind = rng.randrange(7)
    selector = _selector(rng, existing)
    ids = selector.points if isinstance(selector, models.PointIdsList) else None
    where = selector.filter if isinstance(selector, models.FilterSelector) else None
    payload = {rng.choice(["colour", "n", "tag"]): rng.choice(["red", "blue", 7])}
    if kind == 0:
        return models.UpsertOperation(upsert=models.PointsList(points=_points(rng)))
    if kind == 1:
        # an existing point is replaced only where it is red now
        red = models.FieldCondition(key="colour", match=models.MatchValue(value="red"))
        return models.UpsertOperation(
            upsert=models.PointsList(
                points=_points(rng), update_filter=models.Filter(must=[red])
            )
        )
    if kind == 2:
        return models.DeleteOperation(delete=selector)
    if kind == 3:
        return models.SetPayloadOperation(
            set_payload=models.SetPayload(payload=payload, points=ids, filter=where)
        )
    if kind == 4:
        return models.OverwritePayloadOperation(
            overwrite_payload=models.SetPayload(
                payload=payload, points=ids, filter=where
            )
        )
    if kind == 5:
        return models.DeletePayloadOperation(
            delete_payload=models.DeletePayload(
                keys=["n", "tag"], points=ids, filter=where
            )
        )
    return models.ClearPayloadOperation(clear_payload=selector)


def _state(client: QdrantClient) -> list[tuple]:
    records, _ = client.scroll(
        COLLECTION, limit=100, with_payload=True, with_vectors=True
    )
    return sorted(
        (r.id, sorted((r.payload or {}).items()), list(r.vector)) for r in records
    )


@pytest.mark.parametrize("seed", range(5))
def test_batches_match_local_mode(clients, seed):
    remote, local = clients
    rng = random.Random(seed)
    for client in (remote, local):
        recreate(client, COLLECTION, 3, "Euclid")
    for step in range(12):
        # one operation at a time decides on the points as they are then: ids chosen from
        # the local state before the batch may be deleted by an earlier operation of it
        existing = [point[0] for point in _state(local)]
        operations = [_operation(rng, existing)]
        if rng.random() < 0.5:
            operations.insert(
                0, models.UpsertOperation(upsert=models.PointsList(points=_points(rng)))
            )
        answers = [
            client.batch_update_points(COLLECTION, operations, wait=True)
            for client in (remote, local)
        ]
        assert len(answers[0]) == len(operations)
        assert all(a.status == models.UpdateStatus.COMPLETED for a in answers[0])
        assert _state(remote) == _state(local), f"seed {seed} step {step}: {operations}"
    assert _state(remote), "the sequence left some points to compare"
