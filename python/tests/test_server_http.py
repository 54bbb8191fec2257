"""Raw REST against `sagitta serve`, as vector-db-benchmark's `qdrant_native` engine talks
to Qdrant, and every way a request can be refused.

Refusals are checked for their status, Qdrant's error envelope (`{"status": {"error":
".."}, "time": ..}`), a message naming what was wrong, and for storing nothing.
"""

from __future__ import annotations

import json
import time

import httpx
import numpy as np
import pytest
from server_process import running_server

DIM = 32
N_POINTS = 6000
UPLOAD_BATCH = 512
BENCH = "benchmark"
GREEN_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def ok(response: httpx.Response):
    """The `result` of a success envelope."""
    assert response.status_code == 200, f"{response.status_code}: {response.text}"
    body = response.json()
    assert body["status"] == "ok", body
    assert isinstance(body["time"], (float, int)), body
    return body["result"]


def refused(response: httpx.Response, status: int, *fragments: str) -> str:
    """Checks an error envelope with `status` whose message contains every fragment."""
    assert response.status_code == status, (
        f"expected {status}, got {response.status_code}: {response.text}"
    )
    body = response.json()
    assert set(body) >= {"status", "time"}, body
    assert isinstance(body["status"], dict) and isinstance(
        body["status"]["error"], str
    ), body
    message = body["status"]["error"]
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    return message


def count(http: httpx.Client, collection: str, headers=None) -> int:
    return ok(
        http.post(
            f"/collections/{collection}/points/count",
            json={"exact": True},
            headers=headers,
        )
    )["count"]


def brute_force(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit.T
    return np.argsort(-scores, axis=1)[:, :k]


# ---------------------------------------------------------------------------------------
# The qdrant_native benchmark flow


@pytest.fixture(scope="module")
def bench(http):
    """Configure, upload and wait for green, as `qdrant_native` does; returns the vectors."""
    deleted = http.delete(f"/collections/{BENCH}")
    assert deleted.status_code in (200, 404), deleted.text
    ok(
        http.put(
            f"/collections/{BENCH}",
            json={
                "vectors": {"size": DIM, "distance": "Cosine", "on_disk": False},
                "optimizers_config": {
                    "max_optimization_threads": 0,
                    "default_segment_number": 2,
                    "memmap_threshold": 10000000,
                },
                "hnsw_config": {"m": 16, "ef_construct": 128},
                "quantization_config": {
                    "scalar": {"type": "int8", "quantile": 0.99, "always_ram": True}
                },
                "on_disk_payload": False,
            },
        )
    )
    index = ok(
        http.put(
            f"/collections/{BENCH}/index",
            json={"field_name": "bucket", "field_schema": "integer"},
        )
    )
    assert set(index) == {"operation_id", "status"}
    rng = np.random.default_rng(20)
    vectors = rng.standard_normal((N_POINTS, DIM)).astype(np.float32)
    for start in range(0, N_POINTS, UPLOAD_BATCH):
        stop = min(start + UPLOAD_BATCH, N_POINTS)
        points = [
            {"id": i, "vector": vectors[i].tolist(), "payload": {"bucket": i % 10}}
            for i in range(start, stop)
        ]
        result = ok(
            http.put(
                f"/collections/{BENCH}/points",
                params={"wait": "false"},
                json={"points": points},
            )
        )
        assert result["status"] in ("acknowledged", "completed")
        assert isinstance(result["operation_id"], int)
    info = ok(http.get(f"/collections/{BENCH}"))
    assert info["config"]["optimizer_config"]["max_optimization_threads"] == 0
    ok(
        http.patch(
            f"/collections/{BENCH}",
            json={"optimizers_config": {"max_optimization_threads": 100000}},
        )
    )
    info = ok(http.get(f"/collections/{BENCH}"))
    assert info["config"]["optimizer_config"]["max_optimization_threads"] == 100000
    deadline = time.monotonic() + GREEN_TIMEOUT_S
    while True:
        info = ok(http.get(f"/collections/{BENCH}"))
        if info["status"] == "green":
            break
        assert info["status"] in ("yellow", "grey"), info
        assert time.monotonic() < deadline, (
            f"not green after {GREEN_TIMEOUT_S} s: {info}"
        )
        time.sleep(0.1)
    return vectors


def test_collection_info_after_upload(http, bench):
    info = ok(http.get(f"/collections/{BENCH}"))
    assert info["status"] == "green"
    assert info["optimizer_status"] == "ok"
    assert info["points_count"] == N_POINTS
    assert info["indexed_vectors_count"] == N_POINTS
    assert info["segments_count"] >= 1
    params = info["config"]["params"]
    assert params["vectors"] == {"size": DIM, "distance": "Cosine"}
    for key in (
        "shard_number",
        "replication_factor",
        "write_consistency_factor",
        "on_disk_payload",
    ):
        assert key in params
    assert {"m", "ef_construct", "full_scan_threshold"} <= set(
        info["config"]["hnsw_config"]
    )
    assert {
        "default_segment_number",
        "flush_interval_sec",
        "max_optimization_threads",
    } <= set(info["config"]["optimizer_config"])
    assert info["payload_schema"]["bucket"]["data_type"] == "integer"
    assert count(http, BENCH) == N_POINTS
    assert ok(http.get(f"/collections/{BENCH}/exists")) == {"exists": True}
    assert ok(http.get("/collections/nothing-here/exists")) == {"exists": False}
    assert {"name": BENCH} in ok(http.get("/collections"))["collections"]


def precision(found: list[list[int]], expected: np.ndarray) -> float:
    k = expected.shape[1]
    return float(
        np.mean(
            [
                len(set(f) & set(e.tolist())) / k
                for f, e in zip(found, expected, strict=True)
            ]
        )
    )


def test_query_raw_list_with_hnsw_ef(http, bench):
    rng = np.random.default_rng(21)
    queries = rng.standard_normal((50, DIM)).astype(np.float32)
    expected = brute_force(bench, queries, 10)
    found = []
    for query in queries:
        result = ok(
            http.post(
                f"/collections/{BENCH}/points/query",
                json={
                    "query": query.tolist(),
                    "limit": 10,
                    "params": {
                        "hnsw_ef": 128,
                        "quantization": {
                            "ignore": False,
                            "rescore": True,
                            "oversampling": 2.0,
                        },
                    },
                    "with_payload": False,
                },
            )
        )
        points = result["points"]
        assert len(points) == 10
        for point in points:
            assert set(point) >= {"id", "version", "score"}
            assert isinstance(point["version"], int)
            assert not point.get("payload")
        scores = [p["score"] for p in points]
        assert scores == sorted(scores, reverse=True)
        found.append([p["id"] for p in points])
    assert precision(found, expected) >= 0.9


def test_query_with_filter_and_exact(http, bench):
    rng = np.random.default_rng(22)
    query = rng.standard_normal(DIM).astype(np.float32)
    result = ok(
        http.post(
            f"/collections/{BENCH}/points/query",
            json={
                "query": {"nearest": query.tolist()},
                "using": "",
                "limit": 10,
                "filter": {"must": [{"key": "bucket", "match": {"value": 3}}]},
                "params": {"exact": True},
                "with_payload": True,
            },
        )
    )
    keep = np.flatnonzero(np.arange(N_POINTS) % 10 == 3)
    expected = keep[brute_force(bench[keep], query[None, :], 10)[0]]
    assert [p["id"] for p in result["points"]] == expected.tolist()
    assert all(p["payload"] == {"bucket": 3} for p in result["points"])


def test_pre_1_16_search_and_search_batch(http, bench):
    rng = np.random.default_rng(23)
    queries = rng.standard_normal((20, DIM)).astype(np.float32)
    expected = brute_force(bench, queries, 10)
    found = []
    for query in queries:
        hits = ok(
            http.post(
                f"/collections/{BENCH}/points/search",
                json={
                    "vector": query.tolist(),
                    "limit": 10,
                    "params": {"hnsw_ef": 128},
                },
            )
        )
        found.append([hit["id"] for hit in hits])
        assert all(set(hit) >= {"id", "version", "score"} for hit in hits)
    assert precision(found, expected) >= 0.9
    batch = ok(
        http.post(
            f"/collections/{BENCH}/points/search/batch",
            json={
                "searches": [
                    {"vector": q.tolist(), "limit": 10, "params": {"hnsw_ef": 128}}
                    for q in queries[:5]
                ]
                + [
                    {
                        "vector": {"name": "", "vector": queries[5].tolist()},
                        "limit": 3,
                        "params": {"exact": True},
                    }
                ]
            },
        )
    )
    assert len(batch) == 6
    assert (
        precision([[h["id"] for h in hits] for hits in batch[:5]], expected[:5]) >= 0.9
    )
    assert [h["id"] for h in batch[5]] == expected[5, :3].tolist()
    query_batch = ok(
        http.post(
            f"/collections/{BENCH}/points/query/batch",
            json={
                "searches": [
                    {"query": q.tolist(), "limit": 10, "params": {"exact": True}}
                    for q in queries[:3]
                ]
            },
        )
    )
    assert [[p["id"] for p in r["points"]] for r in query_batch] == expected[
        :3
    ].tolist()


def test_service_endpoints(http, bench):
    root = http.get("/")
    assert root.status_code == 200
    assert root.json()["version"] == "1.18.0"
    assert set(root.json()) >= {"title", "version", "commit"}
    for probe in ("/readyz", "/healthz", "/livez"):
        assert http.get(probe).status_code == 200
    metrics = http.get("/metrics")
    assert metrics.status_code == 200
    assert "sagitta_http_requests_total{" in metrics.text
    assert (
        f'sagitta_collection_points{{collection="{BENCH}"}} {N_POINTS}' in metrics.text
    )
    telemetry = ok(http.get("/telemetry", params={"details_level": 10}))
    assert isinstance(telemetry["app"]["simd"], str) and telemetry["app"]["simd"]
    refused(http.get("/no/such/endpoint"), 404, "/no/such/endpoint")


# ---------------------------------------------------------------------------------------
# Refusals on the default server

SMALL = "small"


@pytest.fixture(scope="module")
def small(http):
    """A 4-d collection holding 3 points; every refused request must leave it so."""
    ok(
        http.put(
            f"/collections/{SMALL}", json={"vectors": {"size": 4, "distance": "Dot"}}
        )
    )
    points = [
        {"id": i, "vector": [1.0, 0.0, 0.0, float(i)], "payload": {"a": i}}
        for i in range(3)
    ]
    ok(
        http.put(
            f"/collections/{SMALL}/points",
            params={"wait": "true"},
            json={"points": points},
        )
    )
    assert count(http, SMALL) == 3
    return SMALL


def upsert(http, body, collection=SMALL, **kwargs):
    return http.put(
        f"/collections/{collection}/points",
        params={"wait": "true"},
        **kwargs,
        json=body,
    )


def assert_unchanged(http):
    assert count(http, SMALL) == 3
    records = ok(
        http.post(
            f"/collections/{SMALL}/points",
            json={"ids": [0, 1, 2, 7, 8], "with_vector": True},
        )
    )
    assert sorted(r["id"] for r in records) == [0, 1, 2]
    for record in records:
        assert record["payload"] == {"a": record["id"]}
        assert record["vector"] == [1.0, 0.0, 0.0, float(record["id"])]


def test_malformed_json(http, small):
    response = http.put(
        f"/collections/{SMALL}/points",
        params={"wait": "true"},
        content=b'{"points": [{"id": 7, "vector": [1, 2, 3, 4]}',
        headers={"content-type": "application/json"},
    )
    refused(response, 400, "JSON")
    refused(
        http.post(
            f"/collections/{SMALL}/points/query",
            content=b"{not json}",
            headers={"content-type": "application/json"},
        ),
        400,
        "JSON",
    )
    assert_unchanged(http)


def test_wrong_vector_dimension(http, small):
    # The first point is fine: the whole request is refused, nothing is stored.
    body = {
        "points": [{"id": 7, "vector": [1, 2, 3, 4]}, {"id": 8, "vector": [1, 2, 3]}]
    }
    message = refused(upsert(http, body), 400, "dim")
    assert "4" in message and "3" in message, message
    refused(
        upsert(
            http, {"batch": {"ids": [7, 8], "vectors": [[1, 2, 3, 4], [1, 2, 3, 4, 5]]}}
        ),
        400,
        "dim",
    )
    refused(
        http.post(f"/collections/{SMALL}/points/query", json={"query": [1, 2, 3]}),
        400,
        "dim",
    )
    assert_unchanged(http)


def test_vector_value_overflowing_f32(http, small):
    # NaN is not JSON; 1e39 is valid JSON but overflows f32 to infinity.
    body = b'{"points": [{"id": 7, "vector": [1, 2, 3, 4]}, {"id": 8, "vector": [1, 1e39, 3, 4]}]}'
    refused(
        http.put(
            f"/collections/{SMALL}/points",
            params={"wait": "true"},
            content=body,
            headers={"content-type": "application/json"},
        ),
        400,
        "vector",
    )
    assert_unchanged(http)


def test_unknown_collection(http, small):
    refused(http.get("/collections/missing"), 404, "missing")
    refused(
        upsert(
            http, {"points": [{"id": 1, "vector": [1, 2, 3, 4]}]}, collection="missing"
        ),
        404,
        "missing",
    )
    refused(
        http.post("/collections/missing/points/query", json={"query": [1, 2, 3, 4]}),
        404,
        "missing",
    )
    refused(http.post("/collections/missing/points/count", json={}), 404, "missing")
    refused(http.post("/collections/missing/points/scroll", json={}), 404, "missing")
    refused(
        http.post("/collections/missing/points/delete", json={"points": [1]}),
        404,
        "missing",
    )
    assert ok(http.get("/collections/missing/exists")) == {"exists": False}


@pytest.mark.parametrize(
    ("bad_filter", "field"),
    [
        ({"must": [{"key": "a", "match": {}}]}, "filter.must[0].match"),
        ({"must": [{"key": "a", "range": {"gt": "x"}}]}, "filter.must[0].range.gt"),
        (
            {"should": [{"key": "a", "match": {"value": 1}}, {"nonsense": 1}]},
            "filter.should[1]",
        ),
        ({"must": [{"match": {"value": 1}}]}, "filter.must[0]"),
    ],
)
def test_bad_filter(http, small, bad_filter, field):
    refused(
        http.post(
            f"/collections/{SMALL}/points/query",
            json={"query": [1, 0, 0, 0], "filter": bad_filter},
        ),
        400,
        field,
    )
    refused(
        http.post(f"/collections/{SMALL}/points/count", json={"filter": bad_filter}),
        400,
        field,
    )
    refused(
        http.post(
            f"/collections/{SMALL}/points/delete",
            params={"wait": "true"},
            json={"filter": bad_filter},
        ),
        400,
        field,
    )
    assert_unchanged(http)


def test_payload_must_be_an_object(http, small):
    for payload in ([1, 2], "text", 5):
        body = {
            "points": [
                {"id": 7, "vector": [1, 2, 3, 4]},
                {"id": 8, "vector": [1, 2, 3, 4], "payload": payload},
            ]
        }
        refused(upsert(http, body), 400, "points[1].payload")
    refused(
        upsert(
            http, {"batch": {"ids": [7], "vectors": [[1, 2, 3, 4]], "payloads": [[1]]}}
        ),
        400,
        "batch.payloads[0]",
    )
    refused(
        http.post(
            f"/collections/{SMALL}/points/payload",
            params={"wait": "true"},
            json={"payload": [1], "points": [0]},
        ),
        400,
        "payload",
    )
    assert_unchanged(http)


def test_bad_ids(http, small):
    refused(
        upsert(http, {"points": [{"id": -1, "vector": [1, 2, 3, 4]}]}),
        400,
        "points[0].id",
    )
    refused(
        upsert(http, {"points": [{"id": "not-a-uuid", "vector": [1, 2, 3, 4]}]}),
        400,
        "points[0].id",
    )
    assert_unchanged(http)


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        (
            "PUT",
            "/collections/bad",
            {"vectors": {"size": 4, "distance": "Dot"}, "some_future_field": 1},
            "some_future_field",
        ),
        (
            "PUT",
            "/collections/bad",
            {"vectors": {"size": 4, "distance": "Dot"}, "hnsw_config": {"mm": 16}},
            "hnsw_config.mm",
        ),
        (
            "PUT",
            f"/collections/{SMALL}/points?wait=true",
            {"points": [{"id": 7, "vector": [1, 2, 3, 4], "paylod": {"a": 7}}]},
            "points[0].paylod",
        ),
        (
            "POST",
            f"/collections/{SMALL}/points/query",
            {"query": [1, 0, 0, 0], "params": {"hnsw_eff": 8}},
            "params.hnsw_eff",
        ),
        (
            "POST",
            f"/collections/{SMALL}/points/scroll",
            {"limit": 2, "with_payload": {"includ": ["a"]}},
            "with_payload",
        ),
        (
            "POST",
            f"/collections/{SMALL}/points/query",
            {"query": [1, 0, 0, 0], "shard_key": "tenant-1"},
            "shard_key",
        ),
    ],
)
def test_unknown_and_unserved_fields_are_refused_by_path(
    http, small, method, path, body, field
):
    refused(http.request(method, path, json=body), 400, field)
    assert_unchanged(http)
    assert ok(http.get("/collections/bad/exists")) == {"exists": False}


@pytest.mark.parametrize(
    "bad_uuid",
    ["+f9619ff8b86d011b42d00c04fc964ff", "+c56c793-69f3-4fbf-87e6-c4bf54c28c26"],
)
def test_signed_uuid_text_is_not_an_id(http, small, bad_uuid):
    refused(
        upsert(http, {"points": [{"id": bad_uuid, "vector": [1, 2, 3, 4]}]}),
        400,
        "points[0].id",
    )
    refused(
        http.post(f"/collections/{SMALL}/points", json={"ids": [bad_uuid]}),
        400,
        "ids[0]",
    )
    refused(http.get(f"/collections/{SMALL}/points/%2B1"), 400, "point id")
    assert_unchanged(http)


def test_duplicate_create_is_409(http, small):
    message = refused(
        http.put(
            f"/collections/{SMALL}", json={"vectors": {"size": 4, "distance": "Dot"}}
        ),
        409,
        "already exists",
    )
    assert SMALL in message
    assert_unchanged(http)


def test_bad_collection_config(http, small):
    refused(
        http.put(
            "/collections/bad", json={"vectors": {"size": 4, "distance": "Manhattan"}}
        ),
        400,
        "distance",
    )
    refused(
        http.put(
            "/collections/bad", json={"vectors": {"size": "four", "distance": "Dot"}}
        ),
        400,
        "vectors",
    )
    assert ok(http.get("/collections/bad/exists")) == {"exists": False}


# ---------------------------------------------------------------------------------------
# Limits, on a server started with small ones

LIMIT_BYTES = 4096
LIMIT_POINTS = 10
LIMIT_DEPTH = 8


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    flags = (
        f"--max-request-bytes={LIMIT_BYTES}",
        f"--max-batch-points={LIMIT_POINTS}",
        f"--max-json-depth={LIMIT_DEPTH}",
    )
    with (
        running_server(tmp_path_factory.mktemp("limited-data"), *flags) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        ok(
            client.put(
                "/collections/c", json={"vectors": {"size": 4, "distance": "Cosine"}}
            )
        )
        ok(
            client.put(
                "/collections/c/points",
                params={"wait": "true"},
                json={"points": [{"id": 1, "vector": [1, 2, 3, 4]}]},
            )
        )
        yield client


def test_body_over_max_request_bytes_is_413(limited):
    points = [
        {"id": i, "vector": [0.123456789] * 4, "payload": {"pad": "x" * 600}}
        for i in range(2, 10)
    ]
    body = json.dumps({"points": points}).encode()
    assert len(body) > LIMIT_BYTES
    refused(upsert(limited, None, collection="c", content=body), 413, str(LIMIT_BYTES))
    assert count(limited, "c") == 1
    # Just under the limit is fine.
    points = [{"id": i, "vector": [0.5] * 4} for i in range(2, 10)]
    assert len(json.dumps({"points": points})) < LIMIT_BYTES
    ok(upsert(limited, {"points": points}, collection="c"))
    assert count(limited, "c") == 9
    ok(
        limited.post(
            "/collections/c/points/delete",
            params={"wait": "true"},
            json={"points": list(range(2, 10))},
        )
    )


def test_more_points_than_max_batch_points_is_413(limited):
    too_many = LIMIT_POINTS + 1
    refused(
        upsert(
            limited,
            {"points": [{"id": i, "vector": [1, 2, 3, 4]} for i in range(too_many)]},
            collection="c",
        ),
        413,
        "points",
    )
    refused(
        upsert(
            limited,
            {
                "batch": {
                    "ids": list(range(too_many)),
                    "vectors": [[1, 2, 3, 4]] * too_many,
                }
            },
            collection="c",
        ),
        413,
        "batch.ids",
    )
    assert count(limited, "c") == 1
    ok(
        upsert(
            limited,
            {
                "points": [
                    {"id": i, "vector": [1, 2, 3, 4]} for i in range(LIMIT_POINTS)
                ]
            },
            collection="c",
        )
    )
    assert count(limited, "c") == LIMIT_POINTS
    ok(
        limited.post(
            "/collections/c/points/delete",
            params={"wait": "true"},
            json={"points": list(range(2, 10))},
        )
    )
    assert count(limited, "c") == 2
    ok(
        limited.post(
            "/collections/c/points/delete",
            params={"wait": "true"},
            json={"points": [0]},
        )
    )


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"n": value}
    return value


def test_json_deeper_than_max_json_depth_is_400(limited):
    # {points [ { payload <payload levels> : the body nests 3 levels plus the payload's.
    deepest_ok = nested(LIMIT_DEPTH - 3)
    too_deep = nested(LIMIT_DEPTH - 2)
    refused(
        upsert(
            limited,
            {"points": [{"id": 5, "vector": [1, 2, 3, 4], "payload": too_deep}]},
            collection="c",
        ),
        400,
        f"{LIMIT_DEPTH}",
    )
    assert count(limited, "c") == 1
    ok(
        upsert(
            limited,
            {"points": [{"id": 5, "vector": [1, 2, 3, 4], "payload": deepest_ok}]},
            collection="c",
        )
    )
    assert count(limited, "c") == 2
    refused(
        limited.post(
            "/collections/c/points/count",
            json={"filter": {"must": [{"must": [{"must": [{"must": [{}]}]}]}]}},
        ),
        400,
        "deeper",
    )
    ok(
        limited.post(
            "/collections/c/points/delete",
            params={"wait": "true"},
            json={"points": [5]},
        )
    )


# ---------------------------------------------------------------------------------------
# API keys

RW_KEY = "rw-secret-key"
RO_KEY = "ro-secret-key"


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    flags = ("--api-key", RW_KEY, "--read-only-api-key", RO_KEY)
    with (
        running_server(tmp_path_factory.mktemp("keyed-data"), *flags) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


RW = {"api-key": RW_KEY}
RO = {"api-key": RO_KEY}


def test_api_keys(keyed):
    # Probes need no key.
    for probe in ("/readyz", "/healthz", "/livez", "/"):
        assert keyed.get(probe).status_code == 200, probe
    # No key, or a wrong one: 401.
    refused(keyed.get("/collections"), 401, "API key")
    refused(keyed.get("/collections", headers={"api-key": "wrong"}), 401, "API key")
    refused(
        keyed.put("/collections/k", json={"vectors": {"size": 2, "distance": "Dot"}}),
        401,
        "API key",
    )
    # The read-write key writes, in either header form.
    ok(
        keyed.put(
            "/collections/k",
            json={"vectors": {"size": 2, "distance": "Dot"}},
            headers=RW,
        )
    )
    ok(
        keyed.put(
            "/collections/k/points",
            params={"wait": "true"},
            json={"points": [{"id": 1, "vector": [1, 0]}, {"id": 2, "vector": [0, 1]}]},
            headers={"Authorization": f"Bearer {RW_KEY}"},
        )
    )
    assert count(keyed, "k", headers=RW) == 2
    # The read-only key reads ...
    hits = ok(
        keyed.post(
            "/collections/k/points/query",
            json={"query": [1, 0], "limit": 1},
            headers=RO,
        )
    )
    assert [p["id"] for p in hits["points"]] == [1]
    assert count(keyed, "k", headers=RO) == 2
    assert ok(keyed.get("/collections/k", headers=RO))["points_count"] == 2
    assert (
        len(
            ok(keyed.post("/collections/k/points/scroll", json={}, headers=RO))[
                "points"
            ]
        )
        == 2
    )
    assert (
        len(ok(keyed.post("/collections/k/points", json={"ids": [1, 2]}, headers=RO)))
        == 2
    )
    ok(
        keyed.post(
            "/collections/k/points/search",
            json={"vector": [1, 0], "limit": 1},
            headers=RO,
        )
    )
    # ... but may not write.
    refused(
        keyed.put(
            "/collections/k/points",
            params={"wait": "true"},
            json={"points": [{"id": 3, "vector": [1, 1]}]},
            headers=RO,
        ),
        403,
        "read-only",
    )
    refused(
        keyed.post("/collections/k/points/delete", json={"points": [1]}, headers=RO),
        403,
        "read-only",
    )
    refused(
        keyed.post(
            "/collections/k/points/payload",
            json={"payload": {"x": 1}, "points": [1]},
            headers=RO,
        ),
        403,
    )
    refused(
        keyed.patch(
            "/collections/k",
            json={"optimizers_config": {"indexing_threshold": 0}},
            headers=RO,
        ),
        403,
    )
    refused(
        keyed.put(
            "/collections/k2",
            json={"vectors": {"size": 2, "distance": "Dot"}},
            headers=RO,
        ),
        403,
    )
    refused(keyed.delete("/collections/k", headers=RO), 403)
    refused(
        keyed.put(
            "/collections/k/index",
            json={"field_name": "x", "field_schema": "keyword"},
            headers=RO,
        ),
        403,
    )
    # Nothing the refused requests asked for happened.
    assert count(keyed, "k", headers=RW) == 2
    records = ok(
        keyed.post("/collections/k/points", json={"ids": [1, 2, 3]}, headers=RW)
    )
    assert sorted(r["id"] for r in records) == [1, 2]
    assert all(r["payload"] == {} for r in records)
    assert ok(keyed.get("/collections/k2/exists", headers=RW)) == {"exists": False}
    assert ok(keyed.get("/collections/k", headers=RW))["payload_schema"] == {}
    # Metrics need a key too.
    refused(keyed.get("/metrics"), 401)
    assert keyed.get("/metrics", headers=RO).status_code == 200
    ok(keyed.delete("/collections/k", headers=RW))
