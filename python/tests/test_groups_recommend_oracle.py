"""Grouped search and recommendations through qdrant-client, with its local mode
(`QdrantClient(":memory:")`) as the oracle: `query_points_groups` and `search_groups`
(group values that are strings, integers and arrays of them, points without the field,
`group_size`, `limit`, a filter, `with_lookup` from a second collection), and
`query_points` with `RecommendQuery` (the average-vector, best-score and sum-of-scores
strategies: positive and negative examples as point ids and as vectors, `lookup_from`
another collection, a filter and a score threshold). Both backends
must give the same groups, hits and scores (exact search; random float vectors, so no
two scores tie and the order of groups and hits is well defined).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import httpx
import pytest
from oracle_checks import REFUSED, remote_client
from qdrant_client import QdrantClient, models

COLLECTION = "grouped"
LOOKUP = "grouped_lookup"
DIM = 4
EXACT = models.SearchParams(exact=True)


@pytest.fixture()
def both(server, api) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    remote = remote_client(server, api)
    oracle = QdrantClient(":memory:")
    rng = random.Random(20)
    points = []
    for point_id in range(60):
        payload: dict[str, object] = {"n": point_id}
        kind = point_id % 5
        if kind == 0:
            payload["g"] = rng.choice(["red", "green", "blue"])
        elif kind == 1:
            payload["g"] = rng.randint(1, 4)
        elif kind == 2:
            payload["g"] = [rng.randint(1, 4), rng.choice(["red", "blue"])]
        elif kind == 3:
            payload["other"] = 1  # no group value: never grouped
        else:
            payload["g"] = rng.randint(1, 2)
        vector = [rng.uniform(-1.0, 1.0) for _ in range(DIM)]
        points.append(models.PointStruct(id=point_id, vector=vector, payload=payload))
    lookups = [
        models.PointStruct(id=i, vector=[1.0] * DIM, payload={"title": f"group {i}"})
        for i in range(1, 5)
    ]
    for client in (remote, oracle):
        for name in (COLLECTION, LOOKUP):
            if client.collection_exists(name):
                client.delete_collection(name)
            client.create_collection(
                name,
                vectors_config=models.VectorParams(
                    size=DIM, distance=models.Distance.DOT
                ),
            )
        client.upsert(COLLECTION, points, wait=True)
        client.upsert(LOOKUP, lookups, wait=True)
    yield remote, oracle
    for name in (COLLECTION, LOOKUP):
        remote.delete_collection(name)
    remote.close()
    oracle.close()


def server_url(client: QdrantClient) -> str:
    return client.init_options["url"]


def _same_hits(
    got: list[models.ScoredPoint], expected: list[models.ScoredPoint]
) -> None:
    assert [p.id for p in got] == [p.id for p in expected], (got, expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert abs(mine.score - theirs.score) <= 1e-4, (mine, theirs)


def _groups_of(result: models.GroupsResult) -> list[tuple[object, list[object]]]:
    return [(g.id, [h.id for h in g.hits]) for g in result.groups]


def _same_groups(got: models.GroupsResult, expected: models.GroupsResult) -> None:
    """The same groups with the same hits, ordered by their best hit. A point whose field
    holds several new values opens several groups at once; local mode orders those by a
    Python set (string hashes vary per process), so among groups opened by the same point
    either order is right, and a `limit` falling between them may keep either."""
    mine, theirs = _groups_of(got), _groups_of(expected)
    assert [hits[0] for _, hits in mine] == [hits[0] for _, hits in theirs], (
        mine,
        theirs,
    )
    expected_hits = dict(theirs)
    for group_id, hits in mine:
        if group_id in expected_hits:
            assert hits == expected_hits[group_id], (group_id, mine, theirs)
    last_opener = theirs[-1][1][0] if theirs else None
    differing = {g for g, _ in mine} ^ {g for g, _ in theirs}
    openers = dict(mine) | dict(theirs)
    assert all(openers[g][0] == last_opener for g in differing), (mine, theirs)


def test_grouped_search_matches_qdrant_local_mode(both) -> None:
    remote, oracle = both
    rng = random.Random(3)
    only_some = models.Filter(
        must_not=[models.FieldCondition(key="n", range=models.Range(gte=40))]
    )
    for round_ in range(12):
        query = [rng.uniform(-1.0, 1.0) for _ in range(DIM)]
        limit = rng.choice([1, 2, 3, 10])
        group_size = rng.choice([1, 2, 3])
        query_filter = only_some if round_ % 3 == 0 else None
        answers = [
            client.query_points_groups(
                COLLECTION,
                group_by="g",
                query=query,
                query_filter=query_filter,
                limit=limit,
                group_size=group_size,
                search_params=EXACT,
                with_payload=True,
            )
            for client in (remote, oracle)
        ]
        got, expected = answers
        # the same groups, in the same order, with the same hits
        _same_groups(got, expected)
    # the pre-1.16 endpoint (qdrant-client no longer sends it): the same groups
    body = {
        "vector": [1.0, 0.0, -1.0, 2.0],
        "group_by": "g",
        "limit": 4,
        "group_size": 2,
        "params": {"exact": True},
    }
    reply = httpx.post(
        f"{server_url(remote)}/collections/{COLLECTION}/points/search/groups", json=body
    )
    assert reply.status_code == 200, reply.text
    legacy = models.GroupsResult.model_validate(reply.json()["result"])
    expected = oracle.query_points_groups(
        COLLECTION,
        group_by="g",
        query=body["vector"],
        limit=4,
        group_size=2,
        search_params=EXACT,
    )
    _same_groups(legacy, expected)
    with_lookup = [
        client.query_points_groups(
            COLLECTION,
            group_by="g",
            query=[1.0, 1.0, 1.0, 1.0],
            limit=10,
            group_size=1,
            search_params=EXACT,
            with_lookup=models.WithLookup(collection=LOOKUP, with_payload=True),
        )
        for client in (remote, oracle)
    ]
    lookups = [
        {g.id: (g.lookup.payload if g.lookup else None) for g in result.groups}
        for result in with_lookup
    ]
    assert lookups[0] == lookups[1]
    assert any(payload is not None for payload in lookups[0].values())
    with pytest.raises(REFUSED, match="group_size"):
        remote.query_points_groups(
            COLLECTION, group_by="g", query=[1.0] * DIM, group_size=0
        )


def test_recommendations_match_qdrant_local_mode(both) -> None:
    remote, oracle = both
    cases = [
        models.RecommendInput(positive=[1, 2]),
        models.RecommendInput(positive=[5], negative=[7, 9]),
        models.RecommendInput(positive=[[1.0, 0.0, 2.0, 1.0]], negative=[3]),
        models.RecommendInput(
            positive=[10], strategy=models.RecommendStrategy.AVERAGE_VECTOR
        ),
        # scored against every example (a scan): best_score and sum_scores, with
        # positives only, negatives only, and both
        models.RecommendInput(
            positive=[1, 2], negative=[3], strategy=models.RecommendStrategy.BEST_SCORE
        ),
        models.RecommendInput(
            negative=[4, [0.5, 0.5, 0.5, 0.5]],
            strategy=models.RecommendStrategy.BEST_SCORE,
        ),
        models.RecommendInput(
            positive=[6, 8], negative=[11], strategy=models.RecommendStrategy.SUM_SCORES
        ),
        models.RecommendInput(
            positive=[[1.0, -1.0, 0.5, 0.0]],
            strategy=models.RecommendStrategy.SUM_SCORES,
        ),
    ]
    for recommend in cases:
        answers = [
            client.query_points(
                COLLECTION,
                query=models.RecommendQuery(recommend=recommend),
                limit=8,
                search_params=EXACT,
            ).points
            for client in (remote, oracle)
        ]
        _same_hits(*answers)
        examples = [*(recommend.positive or []), *(recommend.negative or [])]
        mentioned = {example for example in examples if isinstance(example, int)}
        assert not any(
            point.id in mentioned for point in answers[0] if isinstance(point.id, int)
        )
    # examples from another collection: nothing is left out of this one's results
    answers = [
        client.query_points(
            COLLECTION,
            query=models.RecommendQuery(recommend=models.RecommendInput(positive=[2])),
            lookup_from=models.LookupLocation(collection=LOOKUP),
            limit=5,
            search_params=EXACT,
        ).points
        for client in (remote, oracle)
    ]
    _same_hits(*answers)
    # a filter and a score threshold apply to scored recommendations too
    group = models.Filter(
        must=[models.FieldCondition(key="n", range=models.Range(lt=30))]
    )
    answers = [
        client.query_points(
            COLLECTION,
            query=models.RecommendQuery(
                recommend=models.RecommendInput(
                    positive=[1],
                    negative=[2],
                    strategy=models.RecommendStrategy.BEST_SCORE,
                )
            ),
            query_filter=group,
            score_threshold=0.0,
            limit=20,
        ).points
        for client in (remote, oracle)
    ]
    _same_hits(*answers)
    with pytest.raises(REFUSED, match="no examples"):
        remote.query_points(
            COLLECTION,
            query=models.RecommendQuery(recommend=models.RecommendInput(negative=[1])),
        )
