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
match value / any / except / text / text_any, numeric and datetime range, geo_radius,
geo_bounding_box, geo_polygon (with holes), values_count,
has_id, has_vector, is_empty, is_null, `nested` over arrays of objects, filters nested up
to depth 3, dotted keys, quoted keys
(`"k.v"`) and array paths `a[]`, `a[0]`, `a[].b`, `a[0][1]`). A 400 from SagittaDB where
the oracle answers is a mismatch too.

Where local mode leans on Python's operators rather than Qdrant's typed comparison, the
oracle follows Qdrant's server (`_strict_oracle`; its condition checker compares a payload
value with a match by JSON type): `True == 1` and `1.0 == 1` hold in Python but a bool is
not the integer 1 for `match` or `range`; `match.text` only looks at strings (Python's `in`
would look into lists and dicts, or raise on a number); and `match.except` never matches a
null (Python's `None not in [...]` holds); a `nested` condition looks at the objects of the
array at its key only (local mode would also look at scalars, and at an object found
without an array); and `values_count` holds when one value's count meets every bound
(local mode lets each bound be met by a different value).

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
from oracle_checks import REFUSED, refused_as, remote_client
from qdrant_client import QdrantClient, models
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
    if isinstance(condition, models.MatchTextAny):
        words = condition.text_any.split()
        return isinstance(value, str) and any(word in value for word in words)
    raise AssertionError(f"the test generates no {condition!r}")


def _strict_range(condition: models.Range, value: Any) -> bool:
    return not isinstance(value, bool) and _original_range(condition, value)


_original_range = payload_filters.check_range


def _strict_nested(nested_filter: models.Filter, values: list[Any]) -> bool:
    """Qdrant checks a `nested` filter on the objects of the array only."""
    return any(
        payload_filters.check_filter(nested_filter, value, point_id=-1, has_vector={})
        for value in values
        if isinstance(value, dict)
    )


def _count(value: Any) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, list) else 1


def _strict_values_count(
    condition: models.ValuesCount, values: list[Any] | None
) -> bool:
    """Qdrant's server: some value at the key (as it is) has a count within every bound;
    local mode lets each bound be met by a different value."""
    if values is None:
        return False
    bounds = [
        (condition.lt, lambda count, x: count < x),
        (condition.gt, lambda count, x: count > x),
        (condition.gte, lambda count, x: count >= x),
        (condition.lte, lambda count, x: count <= x),
    ]
    return any(
        all(bound is None or holds(_count(value), bound) for bound, holds in bounds)
        for value in values
    )


def oracle_filter(filter_json: dict) -> models.Filter:
    """`filter_json` as the oracle is asked it: a `nested` key names the array's elements
    (`a` is `a[]`, as Qdrant's server reads it; local mode would also enter an object)."""

    def elements(node: Any) -> Any:
        if isinstance(node, list):
            return [elements(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {name: elements(value) for name, value in node.items()}
        nested = node.get("nested")
        if isinstance(nested, dict) and not nested["key"].endswith("[]"):
            node["nested"] = {**nested, "key": nested["key"] + "[]"}
        return node

    return models.Filter.model_validate(elements(filter_json))


@pytest.fixture(scope="module")
def _strict_oracle() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(payload_filters, "check_match", _strict_match)
        patch.setattr(payload_filters, "check_range", _strict_range)
        patch.setattr(payload_filters, "check_nested_filter", _strict_nested)
        patch.setattr(payload_filters, "check_values_count", _strict_values_count)
        yield


@pytest.fixture(scope="module")
def oracle(_strict_oracle) -> Iterator[QdrantClient]:
    client = QdrantClient(":memory:")
    yield client
    client.close()


@pytest.fixture(scope="module")
def remote(server, api) -> Iterator[QdrantClient]:
    client = remote_client(server, api)
    yield client
    client.close()


# ---------------------------------------------------------------------------------------
# Payloads

KEYS = ["a", "b", "c"]
TOP_KEYS = [*KEYS, "d"]
INTS = st.integers(-2, 2)
# Never integral: whether 2.0 matches the integer 2 is not this test's question.
FLOATS = st.sampled_from([-0.5, 0.5, 1.5])
WORDS = ["x", "y", "x y", "hello world", ""]
DATES = [
    "2024-01-02",
    "2024-01-02T03:04:05Z",
    "2024-01-02 10:00:00",
    "2024-01-02T12:00:00+01:00",
    "2024-01-01T23:59:59.5Z",
]
# A small grid of places (Berlin, a point ~700 m away, Paris, the origin), and radii that
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
SCALAR_LISTS = st.lists(SCALARS, max_size=3)
FLAT_OBJECTS = st.dictionaries(
    st.sampled_from(KEYS), st.one_of(SCALARS, SCALAR_LISTS), max_size=3
)
# The shapes the edge cases live in, more often than the recursion would draw them.
EDGE_VALUES = st.sampled_from([[], [None], [[]], [[None]], {}, [{}], None])
# Anything, nested up to a few levels.
DEEP_VALUES = st.recursive(
    st.one_of(SCALARS, GEO_POINTS, EDGE_VALUES),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.sampled_from(KEYS), children, max_size=3),
    ),
    max_leaves=8,
)
# Mostly the shapes filters are written for (so that most conditions hold for some points
# and not for others), sometimes anything.
VALUES = st.one_of(
    SCALARS,
    SCALARS,
    SCALAR_LISTS,
    SCALAR_LISTS,
    FLAT_OBJECTS,
    st.lists(FLAT_OBJECTS, min_size=1, max_size=3),  # for `nested` and `a[].b`
    st.lists(SCALAR_LISTS, max_size=3),
    GEO_POINTS,
    st.lists(GEO_POINTS, min_size=1, max_size=2),
    EDGE_VALUES,
    DEEP_VALUES,
)
# What one top-level key holds in one collection, mostly (a column of one shape, so that a
# condition on it holds for some points and not for others).
STRINGS = st.sampled_from(WORDS + DATES)
COLUMNS = [
    INTS,
    st.one_of(INTS, FLOATS),
    STRINGS,
    st.sampled_from(DATES),
    st.booleans(),
    st.lists(INTS, max_size=3),
    st.lists(STRINGS, max_size=3),
    FLAT_OBJECTS,
    st.lists(FLAT_OBJECTS, min_size=1, max_size=3),
    st.lists(st.lists(INTS, max_size=3), max_size=3),
    GEO_POINTS,
    st.lists(GEO_POINTS, min_size=1, max_size=2),
    VALUES,
]
# "k.v" is one key with a dot in it: filters name it quoted ('"k.v"').
PAYLOAD_KEYS = [*TOP_KEYS, "k.v"]


def _payloads(columns: list[int]) -> st.SearchStrategy[dict]:
    """Payloads whose keys (each one there or not) mostly hold their column's shape."""
    return st.fixed_dictionaries(
        {},
        optional={
            key: st.one_of(COLUMNS[column], COLUMNS[column], COLUMNS[column], VALUES)
            for key, column in zip(PAYLOAD_KEYS, columns, strict=True)
        },
    )


# ---------------------------------------------------------------------------------------
# Filters, as the JSON a client sends

SUFFIXES = [*[""] * 8, "[]", "[]", "[]", "[0]", "[1]", "[][]", "[0][1]", "[][0]"]


def _paths(first_keys: list[str]) -> st.SearchStrategy[str]:
    """Key paths: one to three keys (the first from `first_keys`), each with a suffix."""
    return (
        st.sampled_from([1, 1, 1, 1, 1, 1, 2, 2, 2, 3])
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
NUMBER_BOUNDS = st.sampled_from([-2, -1, -0.5, 0, 0.5, 1, 1.5, 2])
DATE_BOUNDS = st.sampled_from(
    [
        "2024-01-02",
        "2024-01-02T03:04:05Z",
        "2024-01-02T10:00:00Z",
        "2024-01-02T11:00:00Z",
        "2024-01-02T12:30:00+02:00",
        "2024-01-03T00:00:00Z",
    ]
)


# Box and polygon edges lie off the grid of LATITUDES x LONGITUDES, so no point is on an
# edge (where floating point, not semantics, would decide); some boxes cross the
# antimeridian (left edge east of the right one).
BOX_LATITUDES = [53.0, 52.51, 50.0, 1.0, -1.0]
BOX_LONGITUDES = [13.405, 14.0, 3.0, 1.0, -1.0, 179.0, -179.0]
BOXES = st.builds(
    lambda top, bottom, left, right: {
        "top_left": {"lat": top, "lon": left},
        "bottom_right": {"lat": bottom, "lon": right},
    },
    st.sampled_from(BOX_LATITUDES),
    st.sampled_from(BOX_LATITUDES),
    st.sampled_from(BOX_LONGITUDES),
    st.sampled_from(BOX_LONGITUDES),
)


def _ring(corners: list[tuple[float, float]]) -> dict:
    """A closed ring of (lat, lon) corners."""
    points = [{"lat": lat, "lon": lon} for lat, lon in corners]
    return {"points": [*points, points[0]]}


POLYGONS = st.sampled_from(
    [
        # around Berlin's two points, around all of Europe's, a triangle over Paris
        {"exterior": _ring([(52.0, 13.0), (53.0, 13.0), (53.0, 14.0), (52.0, 14.0)])},
        {"exterior": _ring([(40.0, 1.0), (60.0, 1.0), (60.0, 20.0), (40.0, 20.0)])},
        {"exterior": _ring([(48.0, 2.0), (50.0, 2.2), (48.1, 3.0)])},
        # Europe with a hole around Berlin's points
        {
            "exterior": _ring([(40.0, 1.0), (60.0, 1.0), (60.0, 20.0), (40.0, 20.0)]),
            "interiors": [
                _ring([(52.0, 13.0), (53.0, 13.0), (53.0, 14.0), (52.0, 14.0)])
            ],
        },
        # around (0, 0)
        {"exterior": _ring([(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)])},
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
            "match",
            st.sampled_from(["x y", "hello", "o w", "zz x", "zz", ""]).map(
                lambda t: {"text_any": t}
            ),
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
        field("geo_bounding_box", BOXES),
        field("geo_polygon", POLYGONS),
        field(
            "values_count",
            st.dictionaries(
                st.sampled_from(RANGE_OPS), st.integers(0, 3), min_size=1, max_size=2
            ),
        ),
        st.lists(st.integers(1, n_points + 2), max_size=3, unique=True).map(
            lambda ids: {"has_id": ids}
        ),
        st.just({"has_vector": ""}),
        PATHS.map(lambda key: {"is_empty": {"key": key}}),
        PATHS.map(lambda key: {"is_null": {"key": key}}),
    )


def _key(name: str) -> str:
    return f'"{name}"' if "." in name else name


def payload_nodes(payloads: list[dict]) -> list[tuple[str, Any]]:
    """Every value in `payloads` with key paths that reach it: arrays by `[]` and by `[i]`,
    and the elements of an array also by the array's own key (a field condition on a key
    holding an array looks at its elements)."""
    found: dict[str, tuple[str, Any]] = {}

    def add(path: str, value: Any) -> None:
        found.setdefault(f"{path} {json.dumps(value)}", (path, value))

    def walk(path: str, value: Any) -> None:
        add(path, value)
        if isinstance(value, dict):
            for name, child in value.items():
                walk(f"{path}.{_key(name)}", child)
        elif isinstance(value, list):
            for index, child in enumerate(value):
                add(path, child)
                walk(f"{path}[]", child)
                walk(f"{path}[{index}]", child)

    for payload in payloads:
        for name, value in payload.items():
            walk(_key(name), value)
    return list(found.values())


def _conditions_at(
    n_points: int, depth: int, path: str, value: Any
) -> st.SearchStrategy[dict]:
    """Conditions aimed at a value the payloads hold at `path`: its own value, a bound
    equal to it, a substring of it, its place, the objects of its array."""

    def field(kind: str, body: Any) -> dict:
        return {"key": path, kind: body}

    def ranges(bound: Any) -> list[dict]:
        return [field("range", {op: bound}) for op in RANGE_OPS]

    options = [
        st.sampled_from([{"is_empty": {"key": path}}, {"is_null": {"key": path}}])
    ]
    if isinstance(value, bool):
        options.append(st.just(field("match", {"value": value})))
    elif isinstance(value, int):
        others = st.lists(INTS, max_size=2)
        options += [
            st.just(field("match", {"value": value})),
            others.map(lambda xs: field("match", {"any": sorted({value, *xs})})),
            others.map(lambda xs: field("match", {"except": sorted({value, *xs})})),
            st.sampled_from(ranges(value)),
        ]
    elif isinstance(value, float):
        options.append(st.sampled_from(ranges(value)))
    elif isinstance(value, str):
        others = st.lists(st.sampled_from(WORDS), max_size=2)
        options += [
            st.just(field("match", {"value": value})),
            others.map(lambda xs: field("match", {"any": sorted({value, *xs})})),
            others.map(lambda xs: field("match", {"except": sorted({value, *xs})})),
            st.integers(0, len(value)).map(
                lambda n: field("match", {"text": value[n // 2 : n]})
            ),
            st.just(field("match", {"text_any": f"zz {value.split(' ')[0]}"})),
        ]
        if value in DATES:
            options.append(
                st.tuples(st.sampled_from(RANGE_OPS), DATE_BOUNDS).map(
                    lambda ob: field("range", {ob[0]: ob[1]})
                )
            )
            options.append(st.sampled_from(ranges(value)))
    elif isinstance(value, dict) and set(value) == {"lat", "lon"}:
        options.append(
            st.sampled_from(RADII).map(
                lambda r: field("geo_radius", {"center": value, "radius": r})
            )
        )
    elif isinstance(value, list) and depth > 0:
        objects = [item for item in value if isinstance(item, dict)]
        if objects:
            options.append(
                st.sampled_from(objects).flatmap(
                    lambda element: _filters(
                        n_points, depth - 1, payload_nodes([element])
                    ).map(lambda f: {"nested": {"key": path, "filter": f}})
                )
            )
    return st.one_of(options)


TOP_DEPTH = 3


def _filters(
    n_points: int, depth: int, nodes: list[tuple[str, Any]]
) -> st.SearchStrategy[dict]:
    """Filters of conditions: aimed at `nodes` (see payload_nodes), random, sub-filters and
    `nested` ones with random keys."""
    choices = [_leaf_conditions(n_points)]
    if nodes:
        aimed = st.sampled_from(nodes).flatmap(
            lambda node: _conditions_at(n_points, depth, *node)
        )
        choices += [aimed, aimed]
    if depth > 0:
        inner = _filters(n_points, depth - 1, nodes)
        nested = st.tuples(PATHS, inner).map(
            lambda kf: {"nested": {"key": kf[0], "filter": kf[1]}}
        )
        choices += [inner, nested]
    # By an index: one_of would flatten the leaf kinds in and weigh each like a choice.
    condition = st.integers(0, len(choices) - 1).flatmap(lambda i: choices[i])
    clauses = {
        "must": st.one_of(st.lists(condition, max_size=2), condition),
        "should": st.one_of(st.lists(condition, max_size=2), condition),
        "must_not": st.one_of(st.lists(condition, max_size=2), condition),
        "min_should": st.fixed_dictionaries(
            {
                "conditions": st.lists(condition, max_size=3),
                "min_count": st.integers(0, 2),
            }
        ),
    }
    if depth < TOP_DEPTH:
        return st.fixed_dictionaries({}, optional=clauses)
    # The whole filter has a clause with a condition (`{}` would only test scroll).
    return st.sampled_from(["must", "should", "must_not"]).flatmap(
        lambda first: st.fixed_dictionaries(
            {first: st.lists(condition, min_size=1, max_size=2)},
            optional={name: c for name, c in clauses.items() if name != first},
        )
    )


def _selectors(nodes: list[tuple[str, Any]]) -> st.SearchStrategy[Any]:
    """`with_payload`: true, or keys (random, or paths the payloads have) to include or
    exclude. No quoted key: local mode splits a selector at every dot."""
    paths = _paths(TOP_KEYS)
    existing = sorted({path for path, _ in nodes if '"' not in path})
    if existing:
        paths = st.one_of(paths, st.sampled_from(existing))
    keys = st.lists(paths, min_size=1, max_size=3, unique=True)
    return st.one_of(
        st.just(True),
        keys,
        keys.map(lambda k: {"include": k}),
        keys.map(lambda k: {"exclude": k}),
    )


@st.composite
def scenarios(draw) -> dict:
    n_points = draw(st.integers(10, 30))
    dim = draw(st.integers(2, 4))
    vector = st.lists(st.integers(-3, 3).map(float), min_size=dim, max_size=dim)
    columns = [draw(st.integers(0, len(COLUMNS) - 1)) for _ in PAYLOAD_KEYS]
    payloads = _payloads(columns)
    points = [
        {"id": i, "vector": draw(vector), "payload": draw(payloads)}
        for i in range(1, n_points + 1)
    ]
    nodes = payload_nodes([p["payload"] for p in points])
    queries = draw(
        st.lists(
            st.fixed_dictionaries(
                {
                    "filter": _filters(n_points, TOP_DEPTH, nodes),
                    "with_payload": _selectors(nodes),
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
        self.oracle_filter = oracle_filter(query["filter"])
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
        except REFUSED as error:
            status, body = refused_as(error)
            self.mismatches.append(
                self.describe(what, request, "an answer", f"HTTP {status}: {body}")
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
    expected_count = oracle.count(
        COLLECTION, count_filter=q.oracle_filter, exact=True
    ).count
    got = q.remote(
        "count",
        "count(exact=True)",
        lambda: remote.count(COLLECTION, count_filter=q.filter, exact=True),
    )
    if got is not None:
        q.check("count", "count(exact=True)", expected_count, got.count)

    # scroll: the ids, then the payloads (under the selector) of the ids both returned
    scroll = {"limit": n_points + 5, "with_payload": with_payload}
    request = f"scroll(limit={n_points + 5}, with_payload={json.dumps(q.query['with_payload'])})"
    expected_records, _ = oracle.scroll(
        COLLECTION, scroll_filter=q.oracle_filter, **scroll
    )
    got = q.remote(
        "scroll",
        request,
        lambda: remote.scroll(COLLECTION, scroll_filter=q.filter, **scroll),
    )
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
        "search_params": models.SearchParams(exact=True),
        "with_payload": False,
    }
    limit = q.query["limit"]
    request = f"query_points(query={q.query['vector']}, limit={limit}, exact)"
    ranking = oracle.query_points(
        COLLECTION, query_filter=q.oracle_filter, limit=n_points, **search
    ).points
    got = q.remote(
        "exact search",
        request,
        lambda: remote.query_points(
            COLLECTION, query_filter=q.filter, limit=limit, **search
        ),
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
    for hit, best in zip(got, ranking, strict=False):
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


def _without_empty_should(node: Any) -> Any:
    """`node` with every empty `should` list left out: gRPC's repeated fields cannot tell
    an empty list from none (Qdrant's server reads both as none, so `should: []` matches
    every point over gRPC and none over REST)."""
    if isinstance(node, list):
        return [_without_empty_should(item) for item in node]
    if isinstance(node, dict):
        return {
            key: _without_empty_should(value)
            for key, value in node.items()
            if not (key == "should" and value == [])
        }
    return node


def test_filters_payloads_and_search_match_qdrant_local_mode(oracle, remote, api):
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
        if api == "grpc":
            scenario = {
                **scenario,
                "queries": _without_empty_should(scenario["queries"]),
            }
        load(oracle, scenario)
        load(remote, scenario)
        mismatches = compare(oracle, remote, scenario)
        assert not mismatches, "\n\n".join(mismatches)

    if SEED is not None:
        check = hypothesis_seed(int(SEED))(check)
    check()
    print(f"test_qdrant_oracle: {tried} examples tried, no mismatch")
