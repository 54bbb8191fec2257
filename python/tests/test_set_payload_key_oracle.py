"""`set_payload` with `key` through qdrant-client, with its local mode
(`QdrantClient(":memory:")`) as the oracle: random payloads (nested objects, arrays of
objects and of scalars, scalars where the path expects an object or an array) and random
paths (`a`, `a.b`, `a[0]`, `a[]`, `a[].b`, `a[1].b`), by id and by filter, directly and
inside `/points/batch`; after each step both backends hold the same payload for every
point.

Local mode sets the same payload object into every point it updates (a shared dict, so a
later merge into one point's shows in the others'); Qdrant's server keeps each point's
payload apart. The oracle is patched to set a copy for each point, as the server does.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

import pytest
from oracle_checks import remote_client
from qdrant_client import QdrantClient, models
from qdrant_client.local import local_collection
from qdrant_client.local.payload_value_setter import set_value_by_key

COLLECTION = "payload_key"
PATHS = ["a", "a.b", "a[0]", "a[]", "a[].b", "a[1].b", "c.d.e", "n[0].m"]


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(6 if depth < 2 else 3)
    if kind == 0:
        return rng.randint(0, 5)
    if kind == 1:
        return rng.choice(["x", "y"])
    if kind == 2:
        return None
    if kind == 3:
        return {k: _value(rng, depth + 1) for k in rng.sample(["a", "b", "m"], 2)}
    if kind == 4:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return [{"b": _value(rng, depth + 1)} for _ in range(rng.randint(1, 3))]


@pytest.fixture()
def _payload_copies() -> Iterator[None]:

    def set_a_copy(payload: dict[str, Any], keys: Any, value: Any) -> None:
        set_value_by_key(payload=payload, keys=keys, value=copy.deepcopy(value))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(local_collection, "set_value_by_key", set_a_copy)
        yield


@pytest.fixture()
def both(server, api, _payload_copies) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    remote = remote_client(server, api)
    oracle = QdrantClient(":memory:")
    for client in (remote, oracle):
        if client.collection_exists(COLLECTION):
            client.delete_collection(COLLECTION)
        client.create_collection(
            COLLECTION,
            vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT),
        )
    yield remote, oracle
    remote.delete_collection(COLLECTION)
    remote.close()
    oracle.close()


def _payloads(client: QdrantClient) -> dict[object, object]:
    records, _ = client.scroll(COLLECTION, limit=100, with_payload=True)
    return {record.id: record.payload for record in records}


def test_set_payload_at_a_key_matches_qdrant_local_mode(both) -> None:
    remote, oracle = both
    rng = random.Random(7)
    points = [
        models.PointStruct(
            id=i,
            vector=[1.0, float(i)],
            payload={"a": _value(rng), "n": [{"m": 1}, 2], "g": i % 2},
        )
        for i in range(12)
    ]
    for client in (remote, oracle):
        client.upsert(COLLECTION, points, wait=True)
    odd = models.Filter(
        must=[models.FieldCondition(key="g", match=models.MatchValue(value=1))]
    )
    for step in range(30):
        key = rng.choice(PATHS)
        payload = {rng.choice(["x", "b", "z"]): rng.randint(0, 9)}
        ids: list[models.ExtendedPointId] = list(
            rng.sample(range(12), rng.randint(1, 4))
        )
        for client in (remote, oracle):
            if step % 3 == 0:
                client.set_payload(COLLECTION, payload, points=odd, key=key, wait=True)
            elif step % 3 == 1:
                client.set_payload(COLLECTION, payload, points=ids, key=key, wait=True)
            else:
                client.batch_update_points(
                    COLLECTION,
                    [
                        models.SetPayloadOperation(
                            set_payload=models.SetPayload(
                                payload=payload, points=ids, key=key
                            )
                        )
                    ],
                    wait=True,
                )
        assert _payloads(remote) == _payloads(oracle), (step, key, payload)
