"""The real qdrant-client (REST mode) against `sagitta serve`.

Every search result is checked against a brute-force numpy reference: an exact search
(`params.exact`) must equal it, the default (HNSW) search must overlap it almost fully.
"""

from __future__ import annotations

import datetime
import math
import threading
import time
import uuid
import warnings

import numpy as np
import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.common.version_check import get_server_version
from qdrant_client.http.exceptions import UnexpectedResponse
from qdrant_client.qdrant_remote import QdrantRemote

DIM = 8
N_INT = 150
N_UUID = 100
KINDS = ["a", "b", "c"]
MAIN = "main"
START = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
BERLIN = (52.52, 13.405)
PARIS = (48.857, 2.352)
# `opt` is missing, null, empty, a value or a list, by i % 5 (for is_empty / is_null).
OPTIONAL_VALUES = [None, "null", "empty", "v", "list"]


@pytest.fixture(scope="module")
def client(server):
    client = QdrantClient(url=server.url, prefer_grpc=False, timeout=30)
    yield client
    client.close()


def normalized(matrix: np.ndarray) -> np.ndarray:
    return matrix / np.linalg.norm(matrix, axis=-1, keepdims=True)


class Data:
    """The points of the main collection, kept by the test for the reference answers."""

    def __init__(self, seed: int = 7) -> None:
        rng = np.random.default_rng(seed)
        self.vectors = rng.standard_normal((N_INT + N_UUID, DIM)).astype(np.float32)
        self.ids: list[int | str] = list(range(1, N_INT + 1))
        self.ids += [
            str(uuid.UUID(int=int(rng.integers(1 << 62)) << 64 | i))
            for i in range(N_UUID)
        ]
        self.payloads = [self.payload(i, rng) for i in range(len(self.ids))]
        self.unit = normalized(self.vectors)
        self.queries = rng.standard_normal((12, DIM)).astype(np.float32)

    @staticmethod
    def payload(i: int, rng) -> dict:
        city = BERLIN if i % 2 == 0 else PARIS
        payload = {
            "kind": KINDS[i % 3],
            "n": i,
            "meta": {"kind": "x" if i % 4 == 0 else "y", "rank": i % 10},
            "text": f"point {i}",
            # RFC 3339, one hour apart.
            "when": (START + datetime.timedelta(hours=i)).strftime(
                "%Y-%m-%dT%H:%M:%SZ"
            ),
            # Within ~5 km of the city centre (6 decimals: floats with all 17 digits
            # have their own test, test_payload_floats_round_trip_exactly).
            "loc": {
                "lat": round(city[0] + float(rng.uniform(-0.03, 0.03)), 6),
                "lon": round(city[1] + float(rng.uniform(-0.03, 0.03)), 6),
            },
        }
        optional = OPTIONAL_VALUES[i % 5]
        if optional is not None:
            payload["opt"] = {"null": None, "empty": [], "v": "v", "list": ["v", "w"]}[
                optional
            ]
        return payload

    def reference(
        self, query: np.ndarray, k: int, mask=None
    ) -> list[tuple[int | str, float]]:
        scores = self.unit @ (query / np.linalg.norm(query))
        candidates = np.arange(len(self.ids)) if mask is None else np.flatnonzero(mask)
        order = candidates[np.argsort(-scores[candidates], kind="stable")][:k]
        return [(self.ids[i], float(scores[i])) for i in order]

    def mask(self, predicate) -> np.ndarray:
        return np.array(
            [predicate(i, p) for i, p in zip(self.ids, self.payloads, strict=True)],
            dtype=bool,
        )

    def index_of(self, point_id) -> int:
        return self.ids.index(point_id)


@pytest.fixture(scope="module")
def data(client) -> Data:
    """The main collection: u64 ids in the list form, UUID ids in the batch form."""
    data = Data()
    client.create_collection(
        MAIN,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    list_points = [
        models.PointStruct(
            id=data.ids[i], vector=data.vectors[i].tolist(), payload=data.payloads[i]
        )
        for i in range(N_INT)
    ]
    for start in range(0, N_INT, 50):
        result = client.upsert(MAIN, points=list_points[start : start + 50], wait=True)
        assert result.status == models.UpdateStatus.COMPLETED
    batch = models.Batch(
        ids=data.ids[N_INT:],
        vectors=data.vectors[N_INT:].tolist(),
        payloads=data.payloads[N_INT:],
    )
    result = client.upsert(MAIN, points=batch, wait=True)
    assert result.status == models.UpdateStatus.COMPLETED
    return data


def haversine_m(loc: dict, center: tuple[float, float]) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (loc["lat"], loc["lon"], *center))
    a = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6_371_000 * math.asin(math.sqrt(a))


def hits(response) -> list[tuple[int | str, float]]:
    return [(point.id, point.score) for point in response.points]


def assert_exact(got, expected) -> None:
    assert [i for i, _ in got] == [i for i, _ in expected]
    np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-4)


# ---------------------------------------------------------------------------------------


def test_server_version_is_compatible_without_warning(server):
    assert get_server_version(server.url, {}, None, 5) == "1.18.0"
    before = set(threading.enumerate())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # The check the client runs in a background thread, run here synchronously ...
        QdrantRemote._check_compatibility(server.url, {}, None, 5)
        # ... and the real one, waited for.
        client = QdrantClient(url=server.url, prefer_grpc=False)
        for thread in set(threading.enumerate()) - before:
            thread.join(timeout=10)
        client.close()
    messages = [str(w.message) for w in caught]
    assert not [m for m in messages if "compatib" in m or "server version" in m], (
        messages
    )


def test_info(client):
    info = client.info()
    assert info.version == "1.18.0"
    assert info.title


def test_collection_info(client, data):
    assert client.collection_exists(MAIN)
    assert not client.collection_exists("no-such-collection")
    info = client.get_collection(MAIN)
    assert info.status in (
        models.CollectionStatus.GREEN,
        models.CollectionStatus.YELLOW,
    )
    assert info.points_count == len(data.ids)
    assert info.config.params.vectors.size == DIM
    assert info.config.params.vectors.distance == models.Distance.COSINE
    names = [c.name for c in client.get_collections().collections]
    assert MAIN in names


def test_second_create_is_409_already_exists(client, data):
    with pytest.raises(UnexpectedResponse) as error:
        client.create_collection(
            MAIN,
            vectors_config=models.VectorParams(
                size=DIM, distance=models.Distance.COSINE
            ),
        )
    assert error.value.status_code == 409
    assert "already exists" in str(error.value)
    assert client.count(MAIN).count == len(data.ids)


def test_retrieve_both_id_kinds_with_vectors_and_payloads(client, data):
    wanted = [data.ids[0], data.ids[N_INT - 1], data.ids[N_INT], data.ids[-1]]
    records = client.retrieve(
        MAIN, ids=[*wanted, 999_999], with_vectors=True, with_payload=True
    )
    by_id = {r.id: r for r in records}
    assert set(by_id) == set(wanted)
    for point_id in wanted:
        i = data.index_of(point_id)
        assert by_id[point_id].payload == data.payloads[i]
        np.testing.assert_allclose(
            normalized(np.array(by_id[point_id].vector)), data.unit[i], atol=1e-5
        )
    bare = client.retrieve(MAIN, ids=[data.ids[3]])
    assert bare[0].vector is None
    assert bare[0].payload == data.payloads[3]


def test_exact_query_equals_brute_force(client, data):
    for query in data.queries:
        response = client.query_points(
            MAIN,
            query=query.tolist(),
            limit=10,
            search_params=models.SearchParams(exact=True),
        )
        assert_exact(hits(response), data.reference(query, 10))


def test_default_query_has_high_overlap(client, data):
    overlaps = []
    for query in data.queries:
        response = client.query_points(MAIN, query=query.tolist(), limit=10)
        got = [i for i, _ in hits(response)]
        assert len(got) == 10
        scores = [s for _, s in hits(response)]
        assert scores == sorted(scores, reverse=True)
        expected = {i for i, _ in data.reference(query, 10)}
        overlaps.append(len(expected.intersection(got)) / 10)
    assert np.mean(overlaps) >= 0.9, overlaps
    # The default search sends with_payload=true: payloads come back whole.
    top = client.query_points(MAIN, query=data.queries[0].tolist(), limit=3).points
    for point in top:
        assert point.payload == data.payloads[data.index_of(point.id)]


FILTERS = {
    "match value": (
        models.Filter(
            must=[models.FieldCondition(key="kind", match=models.MatchValue(value="a"))]
        ),
        lambda i, p: p["kind"] == "a",
    ),
    "match any": (
        models.Filter(
            must=[
                models.FieldCondition(key="kind", match=models.MatchAny(any=["a", "c"]))
            ]
        ),
        lambda i, p: p["kind"] in ("a", "c"),
    ),
    "range": (
        models.Filter(
            must=[models.FieldCondition(key="n", range=models.Range(gte=40, lt=170))]
        ),
        lambda i, p: 40 <= p["n"] < 170,
    ),
    "must_not": (
        models.Filter(
            must_not=[
                models.FieldCondition(key="kind", match=models.MatchValue(value="b"))
            ]
        ),
        lambda i, p: p["kind"] != "b",
    ),
    "nested key": (
        models.Filter(
            must=[
                models.FieldCondition(
                    key="meta.kind", match=models.MatchValue(value="x")
                )
            ]
        ),
        lambda i, p: p["meta"]["kind"] == "x",
    ),
    "should": (
        models.Filter(
            should=[
                models.FieldCondition(
                    key="meta.rank", match=models.MatchValue(value=3)
                ),
                models.FieldCondition(key="kind", match=models.MatchValue(value="c")),
            ]
        ),
        lambda i, p: p["meta"]["rank"] == 3 or p["kind"] == "c",
    ),
    "match except": (
        models.Filter(
            must=[
                models.FieldCondition(
                    key="kind", match=models.MatchExcept(**{"except": ["a"]})
                )
            ]
        ),
        lambda i, p: p["kind"] != "a",
    ),
    "match text": (
        # No full-text index: a substring match, as in Qdrant.
        models.Filter(
            must=[
                models.FieldCondition(
                    key="text", match=models.MatchText(text="point 1")
                )
            ]
        ),
        lambda i, p: "point 1" in p["text"],
    ),
    "is_empty": (
        models.Filter(
            must=[models.IsEmptyCondition(is_empty=models.PayloadField(key="opt"))]
        ),
        lambda i, p: p.get("opt") in (None, []),
    ),
    "is_null": (
        models.Filter(
            must=[models.IsNullCondition(is_null=models.PayloadField(key="opt"))]
        ),
        lambda i, p: "opt" in p and p["opt"] is None,
    ),
    "datetime range": (
        models.Filter(
            must=[
                models.FieldCondition(
                    key="when",
                    range=models.DatetimeRange(
                        gte=START + datetime.timedelta(hours=30),
                        lt=START + datetime.timedelta(hours=180),
                    ),
                )
            ]
        ),
        lambda i, p: 30 <= p["n"] < 180,
    ),
    "geo_radius": (
        models.Filter(
            must=[
                models.FieldCondition(
                    key="loc",
                    geo_radius=models.GeoRadius(
                        center=models.GeoPoint(lat=BERLIN[0], lon=BERLIN[1]),
                        radius=50_000.0,
                    ),
                )
            ]
        ),
        lambda i, p: haversine_m(p["loc"], BERLIN) <= 50_000,
    ),
    "has_vector": (
        models.Filter(
            must=[
                models.HasVectorCondition(has_vector=""),
                models.FieldCondition(key="kind", match=models.MatchValue(value="b")),
            ]
        ),
        lambda i, p: p["kind"] == "b",
    ),
    "nested filter": (
        models.Filter(
            must_not=[
                models.Filter(
                    must=[
                        models.FieldCondition(
                            key="kind", match=models.MatchValue(value="a")
                        ),
                        models.FieldCondition(
                            key="meta.rank", range=models.Range(lte=4)
                        ),
                    ]
                )
            ]
        ),
        lambda i, p: not (p["kind"] == "a" and p["meta"]["rank"] <= 4),
    ),
    "combined": (
        models.Filter(
            must=[
                models.FieldCondition(
                    key="kind", match=models.MatchAny(any=["a", "b"])
                ),
                models.FieldCondition(key="n", range=models.Range(gt=20)),
            ],
            must_not=[
                models.FieldCondition(
                    key="meta.kind", match=models.MatchValue(value="x")
                )
            ],
        ),
        lambda i, p: (
            p["kind"] in ("a", "b") and p["n"] > 20 and p["meta"]["kind"] != "x"
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_filtered_query_equals_brute_force(client, data, name):
    query_filter, predicate = FILTERS[name]
    mask = data.mask(predicate)
    assert 0 < mask.sum() < len(data.ids)
    overlaps = []
    for query in data.queries[:6]:
        expected = data.reference(query, 10, mask)
        exact = client.query_points(
            MAIN,
            query=query.tolist(),
            query_filter=query_filter,
            limit=10,
            search_params=models.SearchParams(exact=True),
        )
        assert_exact(hits(exact), expected)
        default = client.query_points(
            MAIN, query=query.tolist(), query_filter=query_filter, limit=10
        )
        got = [i for i, _ in hits(default)]
        assert all(mask[data.index_of(i)] for i in got), (
            "a result does not match the filter"
        )
        overlaps.append(len({i for i, _ in expected}.intersection(got)) / len(expected))
    assert np.mean(overlaps) >= 0.9, overlaps
    assert client.count(MAIN, count_filter=query_filter, exact=True).count == int(
        mask.sum()
    )


def test_has_id_filter(client, data):
    chosen = [data.ids[5], data.ids[77], data.ids[N_INT + 3], data.ids[N_INT + 50]]
    query_filter = models.Filter(must=[models.HasIdCondition(has_id=chosen)])
    response = client.query_points(
        MAIN, query=data.queries[0].tolist(), query_filter=query_filter, limit=10
    )
    mask = data.mask(lambda i, p: i in chosen)
    assert_exact(hits(response), data.reference(data.queries[0], 10, mask))
    assert client.count(MAIN, count_filter=query_filter).count == len(chosen)


def test_query_by_point_id_and_offset(client, data):
    for i in (4, N_INT + 9):
        response = client.query_points(
            MAIN,
            query=data.ids[i],
            limit=5,
            search_params=models.SearchParams(exact=True),
        )
        # The query point itself is left out, as in Qdrant.
        assert_exact(hits(response), data.reference(data.vectors[i], 6)[1:])
    query = data.queries[3]
    page = client.query_points(
        MAIN,
        query=query.tolist(),
        limit=5,
        offset=5,
        search_params=models.SearchParams(exact=True),
    )
    assert_exact(hits(page), data.reference(query, 10)[5:])


def test_score_threshold(client, data):
    query = data.queries[1]
    reference = data.reference(query, len(data.ids))
    threshold = reference[7][1] - 1e-3  # between the 8th and the 9th score
    assert reference[8][1] < threshold
    response = client.query_points(
        MAIN,
        query=query.tolist(),
        limit=50,
        score_threshold=threshold,
        search_params=models.SearchParams(exact=True),
    )
    assert_exact(hits(response), reference[:8])


def test_payload_selectors_and_vectors(client, data):
    query = data.queries[2].tolist()
    response = client.query_points(
        MAIN, query=query, limit=5, with_payload=["kind", "meta.rank"]
    )
    for point in response.points:
        full = data.payloads[data.index_of(point.id)]
        assert point.payload == {
            "kind": full["kind"],
            "meta": {"rank": full["meta"]["rank"]},
        }
        assert point.vector is None
    excluded = client.query_points(
        MAIN,
        query=query,
        limit=5,
        with_payload=models.PayloadSelectorExclude(
            exclude=["text", "meta", "when", "loc", "opt"]
        ),
    )
    for point in excluded.points:
        full = data.payloads[data.index_of(point.id)]
        assert point.payload == {"kind": full["kind"], "n": full["n"]}
    bare = client.query_points(
        MAIN, query=query, limit=5, with_payload=False, with_vectors=True
    )
    for point in bare.points:
        assert not point.payload
        i = data.index_of(point.id)
        np.testing.assert_allclose(
            normalized(np.array(point.vector)), data.unit[i], atol=1e-5
        )
        assert point.score == pytest.approx(
            float(data.unit[i] @ normalized(data.queries[2])), abs=1e-4
        )


def test_query_batch_points(client, data):
    kind_a = FILTERS["match value"][0]
    requests = [
        models.QueryRequest(
            query=q.tolist(), limit=7, params=models.SearchParams(exact=True)
        )
        for q in data.queries[:4]
    ]
    requests.append(
        models.QueryRequest(
            query=data.queries[4].tolist(),
            filter=kind_a,
            limit=5,
            params=models.SearchParams(exact=True),
            with_payload=True,
        )
    )
    responses = client.query_batch_points(MAIN, requests=requests)
    assert len(responses) == 5
    for query, response in zip(data.queries[:4], responses[:4], strict=True):
        assert_exact(hits(response), data.reference(query, 7))
    mask = data.mask(FILTERS["match value"][1])
    assert_exact(hits(responses[4]), data.reference(data.queries[4], 5, mask))
    assert all(p.payload["kind"] == "a" for p in responses[4].points)


def test_scroll_visits_every_point_once(client, data):
    seen = []
    offset = None
    pages = 0
    while True:
        records, offset = client.scroll(
            MAIN, limit=40, offset=offset, with_payload=True
        )
        pages += 1
        assert len(records) <= 40
        for record in records:
            assert record.payload == data.payloads[data.index_of(record.id)]
        seen.extend(r.id for r in records)
        if offset is None:
            break
        assert pages < 100, "scroll does not end"
    assert len(seen) == len(set(seen)) == len(data.ids)
    assert set(seen) == set(data.ids)
    assert pages >= len(data.ids) // 40

    # Scrolling with a filter pages through exactly the matching points.
    query_filter, predicate = FILTERS["range"]
    seen = []
    offset = None
    while True:
        records, offset = client.scroll(
            MAIN, scroll_filter=query_filter, limit=40, offset=offset, with_vectors=True
        )
        for record in records:
            i = data.index_of(record.id)
            np.testing.assert_allclose(
                normalized(np.array(record.vector)), data.unit[i], atol=1e-5
            )
        seen.extend(r.id for r in records)
        if offset is None:
            break
    mask = data.mask(predicate)
    assert sorted(map(str, seen)) == sorted(
        str(data.ids[i]) for i in np.flatnonzero(mask)
    )
    assert len(seen) == len(set(seen))


def test_count(client, data):
    assert client.count(MAIN).count == len(data.ids)
    assert client.count(MAIN, exact=False).count == len(data.ids)
    query_filter, predicate = FILTERS["nested key"]
    assert client.count(MAIN, count_filter=query_filter).count == int(
        data.mask(predicate).sum()
    )


# Writes go to their own collections, so the reference of `data` stays true.


def make_collection(client, name: str, count: int, seed: int):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    client.create_collection(
        name,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    points = [
        models.PointStruct(
            id=i,
            vector=vectors[i].tolist(),
            payload={
                "group": i % 5,
                "tag": "even" if i % 2 == 0 else "odd",
                "keep": True,
            },
        )
        for i in range(count)
    ]
    client.upsert(name, points=points, wait=True)
    return vectors


def test_payload_floats_round_trip_exactly(client):
    name = "floats"
    client.create_collection(
        name, vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT)
    )
    values = {
        "lon": 13.404098654867873,
        "sum": 0.1 + 0.2,
        "third": 1 / 3,
        "pi": math.pi,
        "tiny": 5e-324,
        "huge": 1.7976931348623157e308,
        "subnormal": 2.2250738585072014e-309,
        "int_max": 2**63 - 1,
        "u64_max": 2**64 - 1,
        "int_min": -(2**63),
        "nested": [{"x": 2.718281828459045}, 123456789.12345679],
    }
    client.upsert(
        name, points=[models.PointStruct(id=1, vector=[1.0, 0.0], payload=values)]
    )
    assert client.retrieve(name, ids=[1])[0].payload == values
    assert client.scroll(name)[0][0].payload == values
    assert client.delete_collection(name)


def test_delete_by_filter_and_by_ids(client):
    name = "deletes"
    make_collection(client, name, 100, seed=1)
    group_two = models.Filter(
        must=[models.FieldCondition(key="group", match=models.MatchValue(value=2))]
    )
    assert client.count(name, count_filter=group_two).count == 20
    result = client.delete(
        name, points_selector=models.FilterSelector(filter=group_two), wait=True
    )
    assert result.status == models.UpdateStatus.COMPLETED
    assert client.count(name, count_filter=group_two).count == 0
    assert client.count(name).count == 80
    assert client.retrieve(name, ids=[2, 7, 12]) == []
    client.delete(
        name, points_selector=models.PointIdsList(points=[0, 1, 3, 2]), wait=True
    )
    assert client.count(name).count == 77
    assert [r.id for r in client.retrieve(name, ids=[0, 1, 3, 4])] == [4]
    # Deleted points never come back from a search either.
    response = client.query_points(
        name,
        query=[1.0] * DIM,
        limit=100,
        search_params=models.SearchParams(exact=True),
    )
    got = {p.id for p in response.points}
    assert len(got) == 77
    assert not got.intersection({0, 1, 2, 3, 7, 12})
    assert client.delete_collection(name)


def test_payload_updates(client):
    name = "payloads"
    make_collection(client, name, 20, seed=2)

    client.set_payload(
        name, payload={"color": "red", "group": 9}, points=[1, 2], wait=True
    )
    record = client.retrieve(name, ids=[1])[0]
    assert record.payload == {"group": 9, "tag": "odd", "keep": True, "color": "red"}

    odd = models.Filter(
        must=[models.FieldCondition(key="tag", match=models.MatchValue(value="odd"))]
    )
    client.set_payload(name, payload={"parity": 1}, points=odd, wait=True)
    assert (
        client.count(
            name,
            count_filter=models.Filter(
                must=[
                    models.FieldCondition(
                        key="parity", match=models.MatchValue(value=1)
                    )
                ]
            ),
        ).count
        == 10
    )

    client.overwrite_payload(name, payload={"only": "this"}, points=[3], wait=True)
    assert client.retrieve(name, ids=[3])[0].payload == {"only": "this"}

    client.delete_payload(name, keys=["color", "parity"], points=[1], wait=True)
    assert client.retrieve(name, ids=[1])[0].payload == {
        "group": 9,
        "tag": "odd",
        "keep": True,
    }

    client.clear_payload(
        name, points_selector=models.PointIdsList(points=[4, 5]), wait=True
    )
    for record in client.retrieve(name, ids=[4, 5]):
        assert record.payload == {}
    # Vectors are untouched by payload updates.
    assert len(client.retrieve(name, ids=[4], with_vectors=True)[0].vector) == DIM
    assert client.count(name).count == 20
    assert client.delete_collection(name)


def test_conditional_upserts(client):
    name = "conditional"
    make_collection(client, name, 4, seed=5)
    vector = [1.0] * DIM

    def payload(point_id):
        return client.retrieve(name, ids=[point_id])[0].payload

    # insert_only: point 1 keeps its payload, point 10 is inserted.
    client.upsert(
        name,
        points=[
            models.PointStruct(id=1, vector=vector, payload={"v": "new"}),
            models.PointStruct(id=10, vector=vector, payload={"v": "new"}),
        ],
        update_mode=models.UpdateMode.INSERT_ONLY,
        wait=True,
    )
    assert payload(1)["tag"] == "odd"
    assert payload(10) == {"v": "new"}
    # update_only: point 2 is replaced, point 11 is not inserted.
    client.upsert(
        name,
        points=[
            models.PointStruct(id=2, vector=vector, payload={"v": "upd"}),
            models.PointStruct(id=11, vector=vector, payload={"v": "upd"}),
        ],
        update_mode=models.UpdateMode.UPDATE_ONLY,
        wait=True,
    )
    assert payload(2) == {"v": "upd"}
    assert client.retrieve(name, ids=[11]) == []
    # update_filter: only existing points it matches are replaced; new ones inserted.
    client.upsert(
        name,
        points=models.Batch(
            ids=[0, 3, 12],
            vectors=[vector, vector, vector],
            payloads=[{"v": "f"}, {"v": "f"}, {"v": "f"}],
        ),
        update_filter=models.Filter(
            must=[
                models.FieldCondition(key="tag", match=models.MatchValue(value="even"))
            ]
        ),
        wait=True,
    )
    assert payload(0) == {"v": "f"}
    assert payload(3)["tag"] == "odd"
    assert payload(12) == {"v": "f"}
    assert client.count(name).count == 6
    assert client.delete_collection(name)


def test_query_by_id_with_lookup_from(client):
    source, target = "lookup-source", "lookup-target"
    vectors = make_collection(client, target, 30, seed=6)
    client.create_collection(
        source,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT),
    )
    probe = np.random.default_rng(9).standard_normal(DIM).astype(np.float32)
    client.upsert(
        source, points=[models.PointStruct(id=3, vector=probe.tolist())], wait=True
    )
    response = client.query_points(
        target,
        query=3,
        lookup_from=models.LookupLocation(collection=source),
        limit=5,
        search_params=models.SearchParams(exact=True),
    )
    scores = normalized(vectors) @ normalized(probe)
    expected = [int(i) for i in np.argsort(-scores)[:5]]
    # Point 3 of the target is not the query point, so it may be among the results.
    assert [point.id for point in response.points] == expected
    with pytest.raises(UnexpectedResponse) as refused:
        client.query_points(
            target, query=3, lookup_from=models.LookupLocation(collection="absent")
        )
    assert refused.value.status_code == 404
    assert client.delete_collection(source)
    assert client.delete_collection(target)


def test_array_payload_selectors(client):
    name = "selectors"
    client.create_collection(
        name,
        vectors_config=models.VectorParams(size=2, distance=models.Distance.DOT),
    )
    client.upsert(
        name,
        points=[
            models.PointStruct(
                id=1,
                vector=[1.0, 0.0],
                payload={"objs": [{"n": 1, "m": 2}, {"n": 3, "m": 4}], "k": 5},
            )
        ],
        wait=True,
    )
    included = client.retrieve(name, ids=[1], with_payload=["objs[].n"])[0]
    assert included.payload == {"objs": [{"n": 1}, {"n": 3}]}
    excluded = client.retrieve(
        name, ids=[1], with_payload=models.PayloadSelectorExclude(exclude=["objs[].n"])
    )[0]
    assert excluded.payload == {"objs": [{"m": 2}, {"m": 4}], "k": 5}
    assert client.delete_collection(name)


def test_payload_indexes(client):
    name = "indexed"
    make_collection(client, name, 60, seed=3)
    result = client.create_payload_index(
        name, field_name="tag", field_schema=models.PayloadSchemaType.KEYWORD, wait=True
    )
    assert result.status in (
        models.UpdateStatus.COMPLETED,
        models.UpdateStatus.ACKNOWLEDGED,
    )
    client.create_payload_index(
        name,
        field_name="group",
        field_schema=models.PayloadSchemaType.INTEGER,
        wait=True,
    )
    schema = client.get_collection(name).payload_schema
    assert schema["tag"].data_type == models.PayloadSchemaType.KEYWORD
    assert schema["group"].data_type == models.PayloadSchemaType.INTEGER
    client.create_payload_index(
        name,
        field_name="tenant",
        field_schema=models.KeywordIndexParams(
            type=models.KeywordIndexType.KEYWORD, is_tenant=True
        ),
        wait=True,
    )
    assert client.get_collection(name).payload_schema["tenant"].data_type == "keyword"
    client.delete_payload_index(name, field_name="tenant", wait=True)
    assert "tenant" not in client.get_collection(name).payload_schema
    indexed_filter = models.Filter(
        must=[
            models.FieldCondition(key="tag", match=models.MatchValue(value="even")),
            models.FieldCondition(key="group", range=models.Range(gte=1, lte=3)),
        ]
    )
    expected = [i for i in range(60) if i % 2 == 0 and 1 <= i % 5 <= 3]
    assert client.count(name, count_filter=indexed_filter).count == len(expected)
    response = client.query_points(
        name, query=[0.5] * DIM, query_filter=indexed_filter, limit=60
    )
    assert sorted(p.id for p in response.points) == expected
    assert client.delete_collection(name)


def test_upload_points_and_upload_collection(client):
    name = "uploads"
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((300, DIM)).astype(np.float32)
    client.create_collection(
        name,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    client.upload_points(
        name,
        points=(
            models.PointStruct(id=i, vector=vectors[i].tolist(), payload={"i": i})
            for i in range(150)
        ),
        batch_size=32,
        wait=True,
    )
    ids = [str(uuid.UUID(int=i + 1)) for i in range(150)]
    client.upload_collection(
        name,
        vectors=vectors[150:],
        payload=({"i": 150 + i} for i in range(150)),
        ids=ids,
        batch_size=40,
        wait=True,
    )
    assert client.count(name).count == 300
    records = client.retrieve(name, ids=[0, 149, ids[0], ids[-1]], with_vectors=True)
    by_payload = {r.payload["i"]: r for r in records}
    assert sorted(by_payload) == [0, 149, 150, 299]
    for i, record in by_payload.items():
        np.testing.assert_allclose(
            normalized(np.array(record.vector)), normalized(vectors[i]), atol=1e-5
        )
    assert client.delete_collection(name)


def test_vectors_on_disk_answer_as_local_mode(client):
    """`VectorParams(on_disk=True)`: once sealed, the HNSW segments keep their rows in
    records files; the answers and the stored vectors agree with qdrant-client's local
    mode holding the same points."""
    name = "rows-on-disk"
    count = 2500
    rng = np.random.default_rng(31)
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    params = models.VectorParams(
        size=DIM, distance=models.Distance.COSINE, on_disk=True
    )
    local = QdrantClient(":memory:")
    for target in (client, local):
        target.create_collection(name, vectors_config=params)
        target.upload_collection(
            name,
            vectors=vectors,
            payload=({"i": i} for i in range(count)),
            ids=list(range(count)),
            batch_size=500,
            wait=True,
        )
    assert client.get_collection(name).config.params.vectors.on_disk is True
    deadline = time.monotonic() + 60
    while True:
        info = client.get_collection(name)
        if (
            info.indexed_vectors_count == count
            and info.status == models.CollectionStatus.GREEN
        ):
            break
        assert time.monotonic() < deadline, f"not sealed after 60 s: {info}"
        time.sleep(0.1)
    overlaps = []
    for query in rng.standard_normal((12, DIM)):
        reference = local.query_points(name, query=query.tolist(), limit=10)
        exact = client.query_points(
            name,
            query=query.tolist(),
            limit=10,
            search_params=models.SearchParams(exact=True),
        )
        assert_exact(hits(exact), hits(reference))
        default = client.query_points(name, query=query.tolist(), limit=10)
        expected = {i for i, _ in hits(reference)}
        overlaps.append(len(expected.intersection(i for i, _ in hits(default))) / 10)
    assert np.mean(overlaps) >= 0.9, overlaps
    ids = [0, 1234, count - 1]
    got = client.retrieve(name, ids=ids, with_vectors=True, with_payload=True)
    kept = local.retrieve(name, ids=ids, with_vectors=True, with_payload=True)
    for ours, theirs in zip(
        sorted(got, key=lambda r: r.id), sorted(kept, key=lambda r: r.id), strict=True
    ):
        assert ours.payload == theirs.payload
        np.testing.assert_allclose(ours.vector, theirs.vector, atol=1e-6)
    assert client.delete_collection(name)
    local.close()


def test_update_collection_optimizers(client):
    name = "tuned"
    client.create_collection(
        name,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.EUCLID),
        hnsw_config=models.HnswConfigDiff(m=16, ef_construct=100, payload_m=16),
        optimizers_config=models.OptimizersConfigDiff(default_segment_number=2),
        quantization_config=models.ScalarQuantization(
            scalar=models.ScalarQuantizationConfig(
                type=models.ScalarType.INT8, quantile=0.99, always_ram=True
            )
        ),
    )
    assert client.update_collection(
        name, optimizers_config=models.OptimizersConfigDiff(indexing_threshold=0)
    )
    assert client.get_collection(name).config.optimizer_config.indexing_threshold == 0
    assert client.update_collection(
        name, optimizers_config=models.OptimizersConfigDiff(indexing_threshold=100)
    )
    assert client.get_collection(name).config.optimizer_config.indexing_threshold == 100
    assert client.delete_collection(name)


def test_delete_collection(client):
    name = "short-lived"
    client.create_collection(
        name, vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT)
    )
    assert client.collection_exists(name)
    assert client.delete_collection(name) is True
    assert not client.collection_exists(name)
    assert client.delete_collection(name) is False
    assert name not in [c.name for c in client.get_collections().collections]
    with pytest.raises(UnexpectedResponse) as error:
        client.get_collection(name)
    assert error.value.status_code == 404
