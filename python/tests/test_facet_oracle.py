"""`POST /collections/{c}/facet` through qdrant-client's `facet`, with its local mode as
the oracle: keyword, integer and bool fields (indexed, as Qdrant's server requires),
values held once, several times or in arrays, some points without the field, with and
without a filter and at several limits; the hits (value, count, order) must be equal.
Without an index the server refuses, naming the field, where local mode would count.

Each field holds values of its index's type only: local mode knows no index types, so it
would count a string "3" under an integer field (the server counts the index's type), and
it matches `1` for `true` in the filter (Python's equality)."""

from __future__ import annotations

import random

import pytest
from conftest import recreate
from oracle_checks import REFUSED, refused_as
from qdrant_client import models

COLLECTION = "facet_oracle"
WORDS = ["red", "blue", "green", "Red", "blue "]


def _payload(rng: random.Random) -> dict:
    payload: dict = {}
    if rng.random() < 0.8:
        payload["colour"] = rng.choice(
            [rng.choice(WORDS), rng.sample(WORDS, rng.randint(0, 3)), ["red", "red"]]
        )
    if rng.random() < 0.8:
        payload["n"] = rng.choice([rng.randint(-2, 3), [rng.randint(0, 2), 5], []])
    if rng.random() < 0.7:
        payload["flag"] = rng.choice([True, False, [True, False]])
    return payload


@pytest.mark.parametrize("seed", range(3))
def test_facets_match_local_mode(clients, seed):
    remote, local = clients
    rng = random.Random(seed)
    points = [
        models.PointStruct(id=i, vector=[1.0, float(i % 7)], payload=_payload(rng))
        for i in range(60)
    ]
    for client in (remote, local):
        recreate(client, COLLECTION, 2, "Dot")
        for field, schema in [
            ("colour", models.PayloadSchemaType.KEYWORD),
            ("n", models.PayloadSchemaType.INTEGER),
            ("flag", models.PayloadSchemaType.BOOL),
        ]:
            client.create_payload_index(COLLECTION, field, schema, wait=True)
        client.upsert(COLLECTION, points, wait=True)
    filters = [
        None,
        models.Filter(
            must=[
                models.FieldCondition(key="flag", match=models.MatchValue(value=True))
            ]
        ),
        models.Filter(must_not=[models.HasIdCondition(has_id=list(range(0, 60, 3)))]),
    ]
    for key in ["colour", "n", "flag"]:
        for facet_filter in filters:
            for limit in [1, 3, 10, 100]:
                got, expected = (
                    client.facet(
                        COLLECTION, key, facet_filter=facet_filter, limit=limit
                    )
                    for client in (remote, local)
                )
                assert [(h.value, h.count) for h in got.hits] == [
                    (h.value, h.count) for h in expected.hits
                ], f"seed {seed} {key} {facet_filter} {limit}"
    with pytest.raises(REFUSED) as refused:
        remote.facet(COLLECTION, "unindexed")
    status, message = refused_as(refused.value)
    assert status == 400
    assert "unindexed" in message
