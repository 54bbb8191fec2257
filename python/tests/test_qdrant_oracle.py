"""Differential test: qdrant-client's local mode (`QdrantClient(":memory:")`) is the oracle
for `sagitta serve`'s filters, payload selectors and exact search.

Every Hypothesis example builds one small collection (10-30 points, 2-4-d vectors of small
integers, Dot or Euclid) with random payloads (nested objects, arrays of arrays, nulls,
empty arrays, missing keys, ints / floats / strings / bools, datetime strings, geo points;
keys from a small alphabet so that filters hit them) in both backends, then asks both the
same questions and compares the answers:

* `count` (exact) with a random filter;
* `scroll` with that filter: the ids, and the payloads under a random `with_payload` (true,
  a list of keys, `include` or `exclude`, with dotted and array paths);
* exact search (`params.exact`) with that filter: the scores must be the oracle's top
  scores, and every id returned must pass the filter with the score returned (so ties may
  be broken either way).

Filters use every condition SagittaDB supports (must / should / must_not / min_should,
match value / any / except / text, numeric and datetime range, geo_radius, has_id,
has_vector, is_empty, is_null, nested filters up to depth 3, dotted keys and array paths
`a[]`, `a[0]`, `a[].b`, `a[0][1]`). A 400 from SagittaDB where the oracle answers is a
mismatch too.

Where local mode leans on Python's operators rather than Qdrant's typed comparison, the
oracle follows Qdrant's server (`_strict_oracle`; its condition checker compares a payload
value with a match by JSON type): `True == 1` and `1.0 == 1` hold in Python but a bool is
not the integer 1 for `match` or `range`; `match.text` only looks at strings (Python's `in`
would look into lists and dicts, or raise on a number); and `match.except` never matches a
null (Python's `None not in [...]` holds).

`SAGITTA_ORACLE_EXAMPLES` (default 60) sets the number of examples, `SAGITTA_ORACLE_SEED`
a seed (without it the run is derandomized: the same examples every time).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse
from qdrant_client.local import payload_filters

EXAMPLES = int(os.environ.get("SAGITTA_ORACLE_EXAMPLES", "60"))
SEED = os.environ.get("SAGITTA_ORACLE_SEED")
COLLECTION = "oracle"
SCORE_TOLERANCE = 1e-4

# ---------------------------------------------------------------------------------------
# The oracle, made strict where Python's equality is not Qdrant's


def _same(value: Any, expected: Any) -> bool:
    """Qdrant's typed equality: a bool is not an int, a float is not an int."""
    return type(value) is type(expected) and value == expected


def _strict_match(condition: models.Match, value: Any) -> bool:
    if isinstance(condition, models.MatchValue):
        return _same(value, condition.value)
    if isinstance(condition, models.MatchAny):
        return any(_same(value, item) for item in condition.any)
    if isinstance(condition, models.MatchExcept):
        # Python's `None not in [...]` holds; Qdrant's server counts a null as no value.
        return value is not None and not any(
            _same(value, item) for item in condition.except_
        )
    if isinstance(condition, models.MatchText):
        return isinstance(value, str) and condition.text in value
    raise AssertionError(f"the test generates no {condition!r}")


def _strict_range(condition: models.Range, value: Any) -> bool:
    return not isinstance(value, bool) and _original_range(condition, value)


_original_range = payload_filters.check_range


@pytest.fixture(scope="module")
def _strict_oracle() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(payload_filters, "check_match", _strict_match)
        patch.setattr(payload_filters, "check_range", _strict_range)
        yield


@pytest.fixture(scope="module")
def oracle(_strict_oracle) -> Iterator[QdrantClient]:
    client = QdrantClient(":memory:")
    yield client
    client.close()


@pytest.fixture(scope="module")
def remote(server) -> Iterator[QdrantClient]:
    client = QdrantClient(url=server.url, prefer_grpc=False, timeout=30)
    yield client
    client.close()


# ---------------------------------------------------------------------------------------
# Payloads

KEYS = ["a", "b", "c"]
TOP_KEYS = [*KEYS, "d"]
INTS = st.integers(-3, 3)
# Never integral: whether 2.0 matches the integer 2 is not this test's question.
FLOATS = st.sampled_from([-2.5, -0.5, 0.5, 1.5, 2.25])
WORDS = ["x", "y", "xy", "hello world", ""]
DATES = [
    "2024-01-02",
    "2024-01-02T03:04:05Z",
    "2024-01-02 10:00:00",
    "2024-01-02T12:00:00+01:00",
    "2024-01-01T23:59:59.5Z",
]
# A small grid of places (Berlin, a point ~2 km away, Paris, the origin), and radii that
# are nowhere near a distance between two of them (see test_geo_radii_are_unambiguous).
LATITUDES = [52.5, 52.52, 48.85, 0.0]
LONGITUDES = [13.4, 13.41, 2.35, 0.0]
RADII = [1_000.0, 5_000.0, 300_000.0, 2_000_000.0]

GEO_POINTS = st.builds(
    lambda lat, lon: {"lat": lat, "lon": lon},
    st.sampled_from(LATITUDES),
    st.sampled_from(LONGITUDES),
)
SCALARS = st.one_of(
    INTS, FLOATS, st.sampled_from(WORDS + DATES), st.booleans(), st.none()
)
# The shapes the edge cases live in, more often than the recursion would draw them.
EDGE_VALUES = st.sampled_from([[], [None], [[]], [[None]], {}, [{}], None])
VALUES = st.recursive(
    st.one_of(SCALARS, GEO_POINTS, EDGE_VALUES),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
    ),
    max_leaves=8,
)
# "k.v" is one key with a dot in it: filters name it quoted ('"k.v"').
PAYLOADS = st.dictionaries(st.sampled_from([*TOP_KEYS, "k.v"]), VALUES, max_size=4)

# ---------------------------------------------------------------------------------------
# Filters, as the JSON a client sends

SUFFIXES = ["", "", "", "", "[]", "[]", "[0]", "[1]", "[][]", "[0][1]", "[][0]"]


def _paths(first_keys: list[str]) -> st.SearchStrategy[str]:
    """Key paths: one to three keys (the first from `first_keys`), each with a suffix."""
    return (
        st.sampled_from([1, 1, 1, 2, 2, 3])
        .flatmap(
            lambda n: st.tuples(
                st.sampled_from(first_keys),
                st.lists(st.sampled_from(TOP_KEYS), min_size=n - 1, max_size=n - 1),
                st.lists(st.sampled_from(SUFFIXES), min_size=n, max_size=n),
            )
        )
        .map(
            lambda parts: ".".join(
                key + suffix
                for key, suffix in zip([parts[0], *parts[1]], parts[2], strict=True)
            )
        )
    )


PATHS = _paths([*TOP_KEYS, '"k.v"'])

MATCH_VALUES = st.one_of(INTS, st.sampled_from(WORDS + DATES[:2]), st.booleans())
MATCH_LISTS = st.one_of(
    st.lists(INTS, max_size=3, unique=True),
    st.lists(st.sampled_from(WORDS), max_size=3, unique=True),
)
RANGE_OPS = ["gt", "gte", "lt", "lte"]
NUMBER_BOUNDS = st.sampled_from([-2, -1, -0.5, 0, 0.5, 1, 1.5, 2.25, 3])
DATE_BOUNDS = st.sampled_from(
    [
        "2024-01-02",
        "2024-01-02T03:04:05Z",
        "2024-01-02T10:00:00Z",
        "2024-01-02T11:00:00Z",
        "2024-01-03T00:00:00Z",
    ]
)


def _leaf_conditions(n_points: int) -> st.SearchStrategy[dict]:
    def field(kind: str, bodies: st.SearchStrategy) -> st.SearchStrategy[dict]:
        return st.tuples(PATHS, bodies).map(lambda kb: {"key": kb[0], kind: kb[1]})

    return st.one_of(
        field("match", MATCH_VALUES.map(lambda v: {"value": v})),
        field("match", MATCH_LISTS.map(lambda v: {"any": v})),
        field("match", MATCH_LISTS.map(lambda v: {"except": v})),
        field(
            "match",
            st.sampled_from(["x", "y", "hello", "o w", ""]).map(lambda t: {"text": t}),
        ),
        field(
            "range",
            st.dictionaries(st.sampled_from(RANGE_OPS), NUMBER_BOUNDS, max_size=2),
        ),
        field(
            "range",
            st.dictionaries(
                st.sampled_from(RANGE_OPS), DATE_BOUNDS, min_size=1, max_size=2
            ),
        ),
        field(
            "geo_radius",
            st.builds(
                lambda lat, lon, radius: {
                    "center": {"lat": lat, "lon": lon},
                    "radius": radius,
                },
                st.sampled_from(LATITUDES),
                st.sampled_from(LONGITUDES),
                st.sampled_from(RADII),
            ),
        ),
        st.lists(st.integers(1, n_points + 2), max_size=3, unique=True).map(
            lambda ids: {"has_id": ids}
        ),
        st.just({"has_vector": ""}),
        PATHS.map(lambda key: {"is_empty": {"key": key}}),
        PATHS.map(lambda key: {"is_null": {"key": key}}),
    )


def _filters(n_points: int, depth: int) -> st.SearchStrategy[dict]:
    condition = _leaf_conditions(n_points)
    if depth > 0:
        condition = st.one_of(condition, condition, _filters(n_points, depth - 1))
    clause = st.one_of(st.lists(condition, max_size=3), condition)
    return st.fixed_dictionaries(
        {},
        optional={
            "must": clause,
            "should": clause,
            "must_not": clause,
            "min_should": st.fixed_dictionaries(
                {
                    "conditions": st.lists(condition, max_size=3),
                    "min_count": st.integers(0, 3),
                }
            ),
        },
    )


# No quoted key: local mode splits a selector at every dot.
SELECTOR_PATHS = st.lists(_paths(TOP_KEYS), min_size=1, max_size=3, unique=True)
SELECTORS = st.one_of(
    st.just(True),
    SELECTOR_PATHS,
    SELECTOR_PATHS.map(lambda keys: {"include": keys}),
    SELECTOR_PATHS.map(lambda keys: {"exclude": keys}),
)


@st.composite
def scenarios(draw) -> dict:
    n_points = draw(st.integers(10, 30))
    dim = draw(st.integers(2, 4))
    vector = st.lists(st.integers(-3, 3).map(float), min_size=dim, max_size=dim)
    points = [
        {"id": i, "vector": draw(vector), "payload": draw(PAYLOADS)}
        for i in range(1, n_points + 1)
    ]
    queries = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "filter": _filters(n_points, depth=3),
                    "with_payload": SELECTORS,
                    "vector": vector,
                    "limit": st.integers(5, 10),
                }
            ),
            min_size=1,
            max_size=3,
        )
    )
    return {
        "distance": draw(st.sampled_from(["Dot", "Euclid"])),
        "dim": dim,
        "points": points,
        "queries": queries,
    }


# ---------------------------------------------------------------------------------------
# Running one scenario on both backends


def _canonical(value: Any) -> str:
    """JSON with sorted keys: 1, 1.0 and true stay apart, unlike Python's ==."""
    return json.dumps(value, sort_keys=True)


def _selector(with_payload: Any) -> Any:
    if isinstance(with_payload, dict):
        if "include" in with_payload:
            return models.PayloadSelectorInclude(include=with_payload["include"])
        return models.PayloadSelectorExclude(exclude=with_payload["exclude"])
    return with_payload


def _wire(filter_model: models.Filter) -> str:
    """The filter as qdrant-client sends it."""
    return json.dumps(
        filter_model.model_dump(
            mode="json", by_alias=True, exclude_unset=True, exclude_none=True
        )
    )


def load(client: QdrantClient, scenario: dict) -> None:
    """A fresh collection `COLLECTION` holding the scenario's points."""
    if client.collection_exists(COLLECTION):
        client.delete_collection(COLLECTION)
    client.create_collection(
        COLLECTION,
        vectors_config=models.VectorParams(
            size=scenario["dim"], distance=models.Distance(scenario["distance"])
        ),
    )
    client.upsert(
        COLLECTION,
        points=[
            models.PointStruct(id=p["id"], vector=p["vector"], payload=p["payload"])
            for p in scenario["points"]
        ],
        wait=True,
    )


class _Query:
    """One query of a scenario asked of both backends; collects the differences."""

    def __init__(self, scenario: dict, query: dict) -> None:
        self.scenario = scenario
        self.query = query
        self.filter = models.Filter.model_validate(query["filter"])
        self.mismatches: list[str] = []

    def describe(self, what: str, request: str, expected: Any, got: Any) -> str:
        payloads = "\n".join(
            f"    {p['id']}: {json.dumps(p['payload'])}"
            for p in self.scenario["points"]
        )
        return (
            f"{what} differs from qdrant-client local mode\n"
            f"  request: {request}\n"
            f"  filter: {_wire(self.filter)}\n"
            f"  expected (local mode): {expected}\n"
            f"  got (SagittaDB):       {got}\n"
            f"  distance {self.scenario['distance']}, payloads by id:\n{payloads}"
        )

    def check(self, what: str, request: str, expected: Any, got: Any) -> None:
        if _canonical(expected) != _canonical(got):
            self.mismatches.append(self.describe(what, request, expected, got))

    def remote(self, what: str, request: str, call: Callable[[], Any]) -> Any:
        """Runs a SagittaDB call; a refusal is a mismatch (the oracle answered)."""
        try:
            return call()
        except UnexpectedResponse as error:
            body = error.content.decode(errors="replace")
            self.mismatches.append(
                self.describe(
                    what, request, "an answer", f"HTTP {error.status_code}: {body}"
                )
            )
            return None


def compare(oracle: QdrantClient, remote: QdrantClient, scenario: dict) -> list[str]:
    """Every difference between the two backends on `scenario` (both already loaded)."""
    mismatches: list[str] = []
    for query in scenario["queries"]:
        mismatches += _compare_query(oracle, remote, _Query(scenario, query))
    return mismatches


def _compare_query(oracle: QdrantClient, remote: QdrantClient, q: _Query) -> list[str]:
    n_points = len(q.scenario["points"])
    with_payload = _selector(q.query["with_payload"])

    # count
    expected_count = oracle.count(COLLECTION, count_filter=q.filter, exact=True).count
    got = q.remote(
        "count",
        "count(exact=True)",
        lambda: remote.count(COLLECTION, count_filter=q.filter, exact=True),
    )
    if got is not None:
        q.check("count", "count(exact=True)", expected_count, got.count)

    # scroll: the ids, then the payloads (under the selector) of the ids both returned
    scroll = {
        "scroll_filter": q.filter,
        "limit": n_points + 5,
        "with_payload": with_payload,
    }
    request = f"scroll(limit={n_points + 5}, with_payload={json.dumps(q.query['with_payload'])})"
    expected_records, _ = oracle.scroll(COLLECTION, **scroll)
    got = q.remote("scroll", request, lambda: remote.scroll(COLLECTION, **scroll))
    if got is not None:
        got_records, _ = got
        q.check(
            "scroll ids",
            request,
            [r.id for r in expected_records],
            [r.id for r in got_records],
        )
        got_payloads = {r.id: r.payload for r in got_records}
        expected_payloads = {
            r.id: r.payload for r in expected_records if r.id in got_payloads
        }
        q.check(
            "scroll payloads",
            request,
            expected_payloads,
            {i: got_payloads[i] for i in expected_payloads},
        )

    # exact search with the filter: the oracle ranks every passing point
    search = {
        "query": q.query["vector"],
        "query_filter": q.filter,
        "search_params": models.SearchParams(exact=True),
        "with_payload": False,
    }
    limit = q.query["limit"]
    request = f"query_points(query={q.query['vector']}, limit={limit}, exact)"
    ranking = oracle.query_points(COLLECTION, limit=n_points, **search).points
    got = q.remote(
        "exact search",
        request,
        lambda: remote.query_points(COLLECTION, limit=limit, **search),
    )
    if got is not None:
        problem = _search_problem(ranking, got.points, limit)
        if problem:
            q.mismatches.append(
                q.describe(
                    f"exact search ({problem})",
                    request,
                    [(p.id, p.score) for p in ranking[:limit]],
                    [(p.id, p.score) for p in got.points],
                )
            )
    return q.mismatches


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=SCORE_TOLERANCE, abs_tol=SCORE_TOLERANCE)


def _search_problem(ranking: list, got: list, limit: int) -> str | None:
    """Why `got` is not a valid top-`limit` of the oracle's full filtered `ranking`."""
    if len(got) != min(limit, len(ranking)):
        return f"{len(got)} hits, expected {min(limit, len(ranking))}"
    true_score = {p.id: p.score for p in ranking}
    ids = [p.id for p in got]
    if len(set(ids)) != len(ids):
        return "an id twice"
    for hit, best in zip(got, ranking):
        if hit.id not in true_score:
            return f"id {hit.id} does not pass the filter"
        if not _close(hit.score, true_score[hit.id]):
            return f"id {hit.id} scored {hit.score}, expected {true_score[hit.id]}"
        if not _close(hit.score, best.score):
            return "scores are not the top scores, in order"
    return None


# ---------------------------------------------------------------------------------------
# The tests


def test_geo_radii_are_unambiguous():
    """No grid place lies within 0.1% of a radius from another: the two haversines agree."""
    places = [(lat, lon) for lat in LATITUDES for lon in LONGITUDES]
    for a in places:
        for b in places:
            d = payload_filters.geo_distance(lon1=a[1], lat1=a[0], lon2=b[1], lat2=b[0])
            for radius in RADII:
                assert abs(d - radius) > radius * 1e-3, (a, b, radius, d)


def test_filters_payloads_and_search_match_qdrant_local_mode(oracle, remote):
    tried = 0

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=SEED is None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=True,
    )
    @given(scenarios())
    def check(scenario: dict) -> None:
        nonlocal tried
        tried += 1
        load(oracle, scenario)
        load(remote, scenario)
        mismatches = compare(oracle, remote, scenario)
        assert not mismatches, "\n\n".join(mismatches)

    if SEED is not None:
        check = hypothesis_seed(int(SEED))(check)
    check()
    print(f"test_qdrant_oracle: {tried} examples tried, no mismatch")
