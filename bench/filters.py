"""Slow filters (issue 12 §5): count and paged scroll with large random filters, `sagitta serve`
against qdrant-client's local mode, which is also the oracle for every answer.

    python -m bench.filters --out bench/results/filters.json
    python -m bench.filters --points 300 --filters 5 --out bench/results/filters-small.json

An outside fuzzer found one valid filter (random nested must / should / must_not over missing
keys and arrays) that took 11 s on a 3,000-point collection. Two causes were fixed in the
engine: evaluating a filter is linear in its size (a work counter bounds it), and ``scroll``
no longer evaluates the filter over every point on every page before applying the offset (so
paging through N matches cost N / limit counts). This benchmark keeps both in view.

Builds nothing: ``target/release/sagitta`` must exist (``cargo build --release -p
sagitta-cli``), or ``--binary`` names another build. The server runs on a fresh data
directory in a temporary directory (``--workdir``); this process is its only client (one
connection at a time, loopback HTTP).

**Data.** Collection ``f`` (8-d Dot vectors, 1 shard) with ``--points`` points, ids 1..N,
uploaded in batches of 500 with ``wait=true``; the same points go into
``QdrantClient(":memory:")``. Payloads come from ``--seed``: keys ``a`` (mostly ints), ``b``
(strings), ``c`` (anything: scalars, arrays, arrays of arrays, objects, ``[]``, ``[null]``,
``{}``), ``obj`` (``x``, ``y``), ``arr`` (numbers, sometimes a null or a string),
``objs`` (objects with ``n``, ``m``), ``arrs`` (arrays of arrays of ints) and ``tags``
(strings); each key is missing from some points, null in others, and values mix ints,
floats (never integral), strings and bools.

**Filters.** (a) ``fuzz``: ``--filters`` random filters (from ``--seed``) of must / should /
must_not / min_should nested 4-5 levels deep with 30-100 conditions each (every condition
object counts, sub-filters and ``nested`` ones included, as the server counts them), over
present and missing keys and array paths (``arr[]``, ``arr[0]``, ``objs[].n``,
``arrs[][]``, ``c[].a``): match value / any / except / text, numeric range, is_null,
is_empty, has_id, and ``nested`` over ``objs`` and ``c`` (``values_count`` is not
evaluated by SagittaDB, so never generated). (b) ``heavy``: one 900-condition filter, a must
of 60 should-groups of 14 conditions over array keys, each group's last condition
(``is_empty`` of a missing key) the only one that holds for any point: every point is
checked against all 840 leaf conditions, every point passes, and scrolling it takes N / 10
pages. (c) ``no-filter``: count and scroll without a filter, the cost of the HTTP round
trips and the paging alone.

**Measured, per filter and engine.** ``count``: wall time of one exact count (for the
server, the HTTP request from this process), the median of ``--repeats`` calls (fewer once
they have taken 0.5 s). ``scroll``: wall time of paging through every match with limit 10
(ids only, no payload, no vectors), following ``next_page_offset`` until it is null, and
the pages it took (and, for the server, the time of its first page, and ``empty_count_ms``:
the same count on a second collection with no points, what sending and parsing the filter
costs). Local mode computes the
filter over every point on every page of its ``scroll``, so its paging is quadratic: it
stops once it has taken ``--local-scroll-budget`` seconds for one filter, and the full
scroll is estimated as the pages needed x the mean time of the pages it took
(``scroll_complete: false``; its ids come from one more ``scroll`` with a limit above N).
The server's paging is never cut short. Per case: median / p99 / max of each, the ratio
sagitta / local of the medians, the slowest filter, and two ratios for the server's
paging: ``scroll_over_count`` (scroll time / count time) and ``scroll_over_linear``
(scroll time / (count + pages x first page)): about 1 when a page costs its own request and
matches, pages x count / (count + pages x first page) when every page evaluates the filter
over every point.

**Checked.** Each filter's count and the full list of ids the server's paging returned, in
order, must equal local mode's (its paging's ids, finished by one ``scroll`` when cut short),
and the server's pages must be ceil(count / 10) (one for no match); an HTTP error from the
server is a mismatch too. Local mode is made strict where Python's equality is not
Qdrant's (``True`` is not ``1``, ``match.except`` never matches a null, ``nested`` only
looks at the objects of an array): the differential test
``python/tests/test_qdrant_oracle.py`` does the same, and this module imports its oracle
functions instead of keeping a second copy (local-mode times include them). Mismatches are
listed in the result (``per_filter``; ``notable_filters`` keeps those filters whole, with the
slowest ones) and make the exit status 1, as a panic in the server's log does.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench import report
from bench.recovery import DEFAULT_BINARY, REPO_ROOT, Server, binary_version, request

COLLECTION = "f"
EMPTY = "empty"
DIM = 8
PAGE = 10
UPLOAD_BATCH = 500
REPEAT_SECONDS = 0.5
SUMMARY_NOTE = (
    "per filter, in ms: count = median of up to --repeats exact counts; scroll = paging "
    "through every match with limit 10 (local mode: estimated from its first pages when "
    "cut short, local_scrolls_estimated); sagitta_over_local_median = ratio of the "
    "medians; scroll_over_count = the server's scroll / its count; scroll_over_linear = "
    "its scroll / (count + pages x its first page), about 1 when paging is linear (_paged: "
    "over the filters whose scroll took more than one page); empty_count_ms = the same "
    "count on a collection without points (sending and parsing the filter)"
)
ORACLE_TEST = REPO_ROOT / "python" / "tests" / "test_qdrant_oracle.py"
SAGITTA = "sagitta-server"
LOCAL = "qdrant-client-local"


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------
# Payloads

WORDS = ["x", "y", "x y", "hello world", "", "zz"]
INTS = list(range(-3, 4))
FLOATS = [-1.5, -0.5, 0.5, 1.5, 2.5]


class Payloads:
    """Random payloads of the keys above, drawn from one ``random.Random``."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def scalar(self) -> Any:
        r = self.rng.random()
        if r < 0.35:
            return self.rng.choice(INTS)
        if r < 0.55:
            return self.rng.choice(FLOATS)
        if r < 0.75:
            return self.rng.choice(WORDS)
        if r < 0.9:
            return self.rng.random() < 0.5
        return None

    def some(self, make: Callable[[], Any], most: int) -> list:
        return [make() for _ in range(self.rng.randint(0, most))]

    def deep(self, depth: int) -> Any:
        """Anything: scalars, arrays, arrays of arrays, objects, and the edge shapes."""
        r = self.rng.random()
        if depth == 0 or r < 0.35:
            return self.scalar()
        if r < 0.45:
            return self.rng.choice([[], [None], [[]], {}, [{}], None])
        if r < 0.75:
            return self.some(lambda: self.deep(depth - 1), 3)
        return {
            key: self.deep(depth - 1)
            for key in ("a", "b", "x")
            if self.rng.random() < 0.6
        }

    def number(self) -> Any:
        r = self.rng.random()
        if r < 0.6:
            return self.rng.choice(INTS)
        if r < 0.9:
            return self.rng.choice(FLOATS)
        return self.rng.choice([None, "x", True])

    def element(self) -> dict:
        """An object of ``objs``."""
        obj: dict = {}
        if self.rng.random() < 0.8:
            obj["n"] = self.rng.choice(
                [self.rng.choice(INTS), self.rng.choice(FLOATS), None, [1, 2]]
            )
        if self.rng.random() < 0.7:
            obj["m"] = self.rng.choice([self.rng.choice(WORDS), True, False])
        return obj

    def payload(self) -> dict:
        rng, p = self.rng, {}
        if rng.random() < 0.8:
            r = rng.random()
            p["a"] = (
                rng.choice(INTS)
                if r < 0.6
                else self.scalar()
                if r < 0.85
                else self.some(lambda: rng.choice(INTS), 3)
            )
        if rng.random() < 0.75:
            r = rng.random()
            p["b"] = (
                rng.choice(WORDS)
                if r < 0.5
                else self.some(lambda: rng.choice(WORDS), 3)
                if r < 0.75
                else self.scalar()
            )
        if rng.random() < 0.6:
            p["c"] = self.deep(3)
        if rng.random() < 0.7:
            r = rng.random()
            if r < 0.1:
                p["obj"] = None
            elif r < 0.2:
                p["obj"] = {}
            else:
                obj = {}
                if rng.random() < 0.8:
                    obj["x"] = (
                        self.scalar()
                        if rng.random() < 0.7
                        else self.some(self.scalar, 3)
                    )
                if rng.random() < 0.6:
                    obj["y"] = rng.choice([rng.choice(WORDS), rng.choice(INTS)])
                p["obj"] = obj
        if rng.random() < 0.75:
            p["arr"] = [] if rng.random() < 0.1 else self.some(self.number, 5)
        if rng.random() < 0.65:
            r = rng.random()
            p["objs"] = (
                []
                if r < 0.08
                else [{}]
                if r < 0.14
                else [self.element() for _ in range(rng.randint(1, 4))]
            )
        if rng.random() < 0.5:
            p["arrs"] = rng.choice(
                [
                    [[]],
                    [[None]],
                    self.some(lambda: self.some(lambda: rng.choice(INTS), 3), 3),
                    self.some(lambda: self.some(lambda: rng.choice(INTS), 3), 3),
                ]
            )
        if rng.random() < 0.5:
            p["tags"] = self.some(lambda: rng.choice(WORDS), 3)
        if rng.random() < 0.05:
            p["a"] = None
        return p


def make_points(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    payloads = Payloads(rng)
    return [
        {
            "id": i,
            "vector": [rng.choice(INTS) * 0.5 for _ in range(DIM)],
            "payload": payloads.payload(),
        }
        for i in range(1, n + 1)
    ]


# ---------------------------------------------------------------------------------------------
# Filters, as the JSON a client sends

PATHS = [
    *["a"] * 3,
    *["b"] * 2,
    "c",
    "c[]",
    "c.x",
    "c[].a",
    "obj.x",
    "obj.y",
    "obj",
    "obj.z",
    *["arr", "arr[]"] * 2,
    "arr[0]",
    "arr[1]",
    *["objs[].n"] * 2,
    "objs[].m",
    "objs[0].n",
    "objs",
    "arrs",
    "arrs[]",
    "arrs[][]",
    "arrs[0][1]",
    "tags",
    "tags[]",
    "d",
    "missing.deep",
]
NESTED_KEYS = ["objs", "objs", "c"]
NESTED_PATHS = ["n", "n", "m", "n[]", "a", "x", "missing"]
BOUNDS = [-2, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3]
RANGE_OPS = ["gt", "gte", "lt", "lte"]
CLAUSES = ["must", "should", "must_not", "min_should"]
CLAUSE_SIZES = {"must": 3, "should": 6, "must_not": 4, "min_should": 5}


def clause_items(filter_json: dict) -> list[dict | None]:
    """One entry per element of the filter's clauses: the filter the element holds (a
    ``nested`` condition's, or the element itself when it is a sub-filter), else None."""
    found: list[dict | None] = []
    for name in CLAUSES:
        clause = filter_json.get(name)
        if clause is None:
            continue
        items = clause["conditions"] if name == "min_should" else clause
        for item in items if isinstance(items, list) else [items]:
            if "nested" in item:
                found.append(item["nested"]["filter"])
            elif any(key in item for key in CLAUSES):
                found.append(item)
            else:
                found.append(None)
    return found


def conditions_in(filter_json: dict) -> int:
    """Condition objects in a filter, as the server counts them: every element of a clause
    (a sub-filter and a ``nested`` one too) and, inside, theirs."""
    return sum(
        1 + (conditions_in(inner) if inner is not None else 0)
        for inner in clause_items(filter_json)
    )


def depth_of(filter_json: dict) -> int:
    """Filter levels: 1 for a filter of leaf conditions only."""
    inner_depths = [
        depth_of(inner) for inner in clause_items(filter_json) if inner is not None
    ]
    return max(inner_depths, default=0) + 1


class Filters:
    """Random filters in the fuzzer's pattern, drawn from one ``random.Random``."""

    def __init__(self, rng: random.Random, n_points: int) -> None:
        self.rng = rng
        self.n_points = n_points

    def values(self, words: bool) -> list:
        pool = WORDS if words else INTS
        return self.rng.sample(pool, self.rng.randint(1, 3))

    def leaf(self, paths: list[str]) -> dict:
        rng = self.rng
        key = rng.choice(paths)
        r = rng.random()
        if r < 0.22:
            value = rng.choice(
                [
                    rng.choice(INTS),
                    rng.choice(INTS),
                    rng.choice(WORDS),
                    rng.random() < 0.5,
                ]
            )
            return {"key": key, "match": {"value": value}}
        if r < 0.36:
            return {"key": key, "match": {"any": self.values(rng.random() < 0.3)}}
        if r < 0.46:
            return {"key": key, "match": {"except": self.values(rng.random() < 0.3)}}
        if r < 0.50:
            return {
                "key": key,
                "match": {"text": rng.choice(["x", "hello", "o w", ""])},
            }
        if r < 0.72:
            ops = rng.sample(RANGE_OPS, rng.randint(1, 2))
            return {"key": key, "range": {op: rng.choice(BOUNDS) for op in ops}}
        if r < 0.83:
            return {"is_empty": {"key": key}}
        if r < 0.94:
            return {"is_null": {"key": key}}
        ids = rng.sample(range(1, self.n_points + 3), rng.randint(1, 3))
        return {"has_id": ids}

    def condition(self, depth: int, paths: list[str]) -> dict:
        r = self.rng.random()
        if depth > 1 and r < 0.3:
            return self.filter(depth - 1, paths)
        if depth > 1 and r < 0.38:
            return {
                "nested": {
                    "key": self.rng.choice(NESTED_KEYS),
                    "filter": self.filter(min(depth - 1, 2), NESTED_PATHS),
                }
            }
        return self.leaf(paths)

    def filter(self, depth: int, paths: list[str] = PATHS, top: bool = False) -> dict:
        """A filter at most ``depth`` levels deep: some of must (1-3 conditions), should
        (1-6), must_not (1-4) and min_should (1-5, min_count 0-2); the top level has at
        least two. Rarely a clause is an empty list (an empty should matches nothing) or one
        bare condition."""
        rng = self.rng
        names = [name for name in CLAUSES if rng.random() < 0.55]
        while len(names) < (2 if top else 1):
            names.append(rng.choice([n for n in CLAUSES if n not in names]))
        built: dict = {}
        for name in CLAUSES:
            if name not in names:
                continue
            size = rng.randint(1, CLAUSE_SIZES[name]) if rng.random() < 0.99 else 0
            items = [self.condition(depth, paths) for _ in range(size)]
            if name == "min_should":
                built[name] = {"conditions": items, "min_count": rng.randint(0, 2)}
            elif size == 1 and rng.random() < 0.2:
                built[name] = items[0]
            else:
                built[name] = items
        return built

    def fuzz(self, low: int = 30, high: int = 100) -> dict:
        """A filter 4-5 levels deep with ``low``..``high`` conditions."""
        while True:
            depth = self.rng.choice([4, 5])
            candidate = self.filter(depth, top=True)
            if low <= conditions_in(candidate) <= high and depth_of(candidate) >= 4:
                return candidate


HEAVY_GROUPS = 60
HEAVY_GROUP_SIZE = 14
# Conditions over array keys that hold for no point make_points makes (no value reaches
# them); a group's last condition holds for every point, so each point is checked against
# all 840 leaf conditions.
HEAVY_POOL = [
    ("arr[]", "match", {"any": [7, 8, 9]}),
    ("arr", "range", {"gt": 3.5}),
    ("arr[0]", "match", {"value": 9}),
    ("objs[].n", "range", {"lt": -3.5}),
    ("objs[].n", "match", {"any": [5, 6]}),
    ("objs[].m", "match", {"value": "nope"}),
    ("arrs[][]", "match", {"value": 9}),
    ("arrs[]", "range", {"gte": 4}),
    ("tags[]", "match", {"any": ["nope", "never"]}),
    ("c[]", "match", {"text": "qqq"}),
    ("c[].a", "range", {"lt": -9}),
    ("obj.x", "match", {"any": [8, 9]}),
    ("missing[]", "match", {"value": 1}),
]


def heavy_filter(groups: int = HEAVY_GROUPS, size: int = HEAVY_GROUP_SIZE) -> dict:
    """A must of ``groups`` should-groups of ``size`` conditions: groups x (size + 1)
    conditions (900 by default)."""
    must = []
    for g in range(groups):
        should = []
        for i in range(size - 1):
            key, kind, body = HEAVY_POOL[(g + i) % len(HEAVY_POOL)]
            should.append({"key": key, kind: body})
        should.append({"is_empty": {"key": f"absent{g}"}})
        must.append({"should": should})
    return {"must": must}


# ---------------------------------------------------------------------------------------------
# Local mode, strict where Python's equality is not Qdrant's


def load_oracle_module():
    """``python/tests/test_qdrant_oracle.py``, imported by path (it is no package): its
    strict checks and ``oracle_filter`` are the oracle's semantics."""
    spec = importlib.util.spec_from_file_location("_sagitta_oracle", ORACLE_TEST)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {ORACLE_TEST}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def strict_local_mode(oracle) -> Iterator[None]:
    """Local mode's checks replaced by the differential test's strict ones, for the run."""
    from qdrant_client.local import payload_filters

    saved = {
        name: getattr(payload_filters, name)
        for name in ("check_match", "check_range", "check_nested_filter")
    }
    payload_filters.check_match = oracle._strict_match
    payload_filters.check_range = oracle._strict_range
    payload_filters.check_nested_filter = oracle._strict_nested
    try:
        yield
    finally:
        for name, function in saved.items():
            setattr(payload_filters, name, function)


class Local:
    """The same collection in ``QdrantClient(":memory:")``."""

    def __init__(self, oracle, points: list[dict]) -> None:
        from qdrant_client import QdrantClient, models

        self.oracle = oracle
        self.client = QdrantClient(":memory:")
        self.client.create_collection(
            COLLECTION,
            vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT),
        )
        start = time.perf_counter()
        for i in range(0, len(points), UPLOAD_BATCH):
            self.client.upsert(
                COLLECTION,
                points=[
                    models.PointStruct(
                        id=p["id"], vector=p["vector"], payload=p["payload"]
                    )
                    for p in points[i : i + UPLOAD_BATCH]
                ],
                wait=True,
            )
        self.upload_seconds = round(time.perf_counter() - start, 3)
        self.n_points = len(points)

    def version(self) -> str:
        from importlib.metadata import version

        return version("qdrant-client")

    def parse(self, filter_json: dict | None):
        return None if filter_json is None else self.oracle.oracle_filter(filter_json)

    def count(self, parsed) -> int:
        return self.client.count(COLLECTION, count_filter=parsed, exact=True).count

    def all_ids(self, parsed, start: Any = None) -> list:
        """The ids passing ``parsed`` from ``start`` on, from one page."""
        records, _ = self.client.scroll(
            COLLECTION,
            scroll_filter=parsed,
            limit=self.n_points + 1,
            offset=start,
            with_payload=False,
        )
        return [r.id for r in records]

    def scroll(self, parsed, budget: float) -> tuple[list, int, Any]:
        """(ids, pages, next offset): paging with limit 10 until the end (next offset
        None) or ``budget`` s."""
        ids: list = []
        pages, offset = 0, None
        start = time.perf_counter()
        while True:
            records, offset = self.client.scroll(
                COLLECTION,
                scroll_filter=parsed,
                limit=PAGE,
                offset=offset,
                with_payload=False,
            )
            pages += 1
            ids += [r.id for r in records]
            if offset is None or time.perf_counter() - start > budget:
                return ids, pages, offset

    def close(self) -> None:
        self.client.close()


# ---------------------------------------------------------------------------------------------
# The server


class ServerError(Exception):
    """The server did not answer 200."""


class Remote:
    def __init__(self, server: Server, name: str = COLLECTION) -> None:
        self.url = f"{server.url}/collections/{name}"

    def create(self) -> None:
        status, answer = request(
            "PUT",
            self.url,
            {"vectors": {"size": DIM, "distance": "Dot"}, "shard_number": 1},
        )
        if status != 200:
            raise SystemExit(f"create collection answered {status}: {answer}")

    def upload(self, points: list[dict]) -> float:
        start = time.perf_counter()
        for i in range(0, len(points), UPLOAD_BATCH):
            body = json.dumps({"points": points[i : i + UPLOAD_BATCH]}).encode()
            status, answer = request("PUT", f"{self.url}/points?wait=true", body)
            if status != 200 or answer["result"]["status"] != "completed":
                raise SystemExit(f"upsert answered {status}: {str(answer)[:500]}")
        return round(time.perf_counter() - start, 3)

    def call(self, path: str, body: dict) -> dict:
        status, answer = request("POST", f"{self.url}/points/{path}", body, timeout=600)
        if status != 200:
            raise ServerError(f"{path} answered HTTP {status}: {str(answer)[:300]}")
        return answer["result"]

    def count(self, filter_json: dict | None) -> int:
        body: dict = {"exact": True}
        if filter_json is not None:
            body["filter"] = filter_json
        return self.call("count", body)["count"]

    def scroll(self, filter_json: dict | None) -> tuple[list, int, float]:
        """(ids, pages, seconds of the first page): paging with limit 10 to the end."""
        ids: list = []
        pages, offset = 0, None
        start = time.perf_counter()
        first = 0.0
        while True:
            body: dict = {"limit": PAGE, "with_payload": False, "with_vector": False}
            if filter_json is not None:
                body["filter"] = filter_json
            if offset is not None:
                body["offset"] = offset
            page = self.call("scroll", body)
            pages += 1
            if pages == 1:
                first = time.perf_counter() - start
            ids += [p["id"] for p in page["points"]]
            offset = page["next_page_offset"]
            if offset is None:
                return ids, pages, first


# ---------------------------------------------------------------------------------------------
# One filter on both engines


def timed(call: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = call()
    return value, time.perf_counter() - start


def median_of(call: Callable[[], Any], repeats: int) -> tuple[Any, float]:
    """The value of the last call and the median wall time of ``repeats`` calls (fewer once
    the calls have taken ``REPEAT_SECONDS``: a slow call is its own average)."""
    times, value = [], None
    while len(times) < max(1, repeats) and sum(times) < REPEAT_SECONDS:
        value, seconds = timed(call)
        times.append(seconds)
    return value, float(np.median(times))


def pages_for(matches: int) -> int:
    """Pages of limit 10 until ``next_page_offset`` is null (one page for no match)."""
    return max(1, -(-matches // PAGE))


def measure_local(parsed, local: Local, args: argparse.Namespace) -> tuple[dict, list]:
    """Local mode's figures for one filter, and its ids (the oracle's)."""
    count, count_s = median_of(lambda: local.count(parsed), args.repeats)
    (ids, pages, rest), scroll_s = timed(
        lambda: local.scroll(parsed, args.local_scroll_budget)
    )
    figures = {
        "count": count,
        "count_ms": round(count_s * 1e3, 3),
        "scroll_ms": round(scroll_s * 1e3, 3),
        "scroll_pages": pages,
        "scroll_complete": rest is None,
    }
    if rest is not None:
        # Every page of local mode's scroll computes the filter over every point: the
        # pages left cost what the pages taken did, each.
        figures["scroll_measured_ms"] = figures["scroll_ms"]
        figures["scroll_ms"] = round(scroll_s * 1e3 * pages_for(count) / pages, 3)
        ids = ids + local.all_ids(parsed, rest)
    return figures, ids


def measure(
    case: str,
    index: int,
    filter_json: dict | None,
    remote: tuple[Remote, Remote],
    local: Local,
    args: argparse.Namespace,
) -> dict:
    """Both engines' count and scroll of one filter, and every disagreement."""
    record: dict = {
        "case": case,
        "index": index,
        "conditions": 0 if filter_json is None else conditions_in(filter_json),
        "depth": 0 if filter_json is None else depth_of(filter_json),
        "filter_bytes": len(json.dumps(filter_json)) if filter_json else 0,
        "mismatches": [],
    }
    problems = record["mismatches"]
    record["local"], expected_ids = measure_local(local.parse(filter_json), local, args)
    expected = record["matched"] = record["local"]["count"]
    if len(expected_ids) != expected:
        problems.append(f"local mode: count {expected}, scroll {len(expected_ids)} ids")
    try:
        full, empty = remote
        got, count_s = median_of(lambda: full.count(filter_json), args.repeats)
        (got_ids, pages, first_s), scroll_s = timed(lambda: full.scroll(filter_json))
        _, request_s = median_of(lambda: empty.count(filter_json), args.repeats)
    except ServerError as error:
        problems.append(f"server: {error}")
        record["sagitta"] = None
        return record
    if got != expected:
        problems.append(f"count: server {got}, local mode {expected}")
    if got_ids != expected_ids:
        missing = sorted(set(expected_ids) - set(got_ids))[:10]
        extra = sorted(set(got_ids) - set(expected_ids))[:10]
        problems.append(
            f"scroll ids: server {len(got_ids)} ({len(set(got_ids))} distinct), local "
            f"mode {len(expected_ids)}; missing {missing}, extra {extra}"
        )
    if pages != pages_for(got):
        problems.append(f"server: {pages} pages for {got} matches")
    record["sagitta"] = {
        "count": got,
        "count_ms": round(count_s * 1e3, 3),
        "scroll_ms": round(scroll_s * 1e3, 3),
        "scroll_pages": pages,
        "first_page_ms": round(first_s * 1e3, 3),
        # The same count on a collection without points: sending and parsing the filter.
        "empty_count_ms": round(request_s * 1e3, 3),
        "scroll_over_count": round(scroll_s / max(count_s, 1e-9), 2),
        # Linear paging costs about one count plus, per page, what the first page cost
        # (the request, parsing the filter, the matches of one page): about 1. Paging that
        # evaluates the filter over every point on every page costs pages x count.
        "scroll_over_linear": round(scroll_s / (count_s + pages * first_s), 2),
    }
    return record


# ---------------------------------------------------------------------------------------------
# Results


def stats_ms(values: list[float]) -> dict:
    if not values:
        return {"median": None, "p99": None, "max": None}
    median, p99 = np.percentile(values, [50, 99])
    return {
        "median": round(float(median), 3),
        "p99": round(float(p99), 3),
        "max": round(float(max(values)), 3),
    }


def brief(record: dict) -> dict:
    """A filter's figures in a summary."""
    ours = record["sagitta"]
    return {
        "index": record["index"],
        "conditions": record["conditions"],
        "matched": record["matched"],
        "count_ms": ours["count_ms"],
        "scroll_ms": ours["scroll_ms"],
        "scroll_pages": ours["scroll_pages"],
        "local_count_ms": record["local"]["count_ms"],
        "local_scroll_ms": record["local"]["scroll_ms"],
    }


def spread(values: list[float]) -> dict:
    return {
        "median": round(float(np.median(values)), 2) if values else None,
        "max": max(values, default=None),
    }


def case_summary(case: str, records: list[dict]) -> dict:
    served = [r for r in records if r["sagitta"] is not None]
    ours = {
        what: stats_ms([r["sagitta"][f"{what}_ms"] for r in served])
        for what in ("count", "scroll")
    }
    theirs = {
        what: stats_ms([r["local"][f"{what}_ms"] for r in records])
        for what in ("count", "scroll")
    }

    def ratio(what: str) -> float | None:
        a, b = ours[what]["median"], theirs[what]["median"]
        return round(a / b, 3) if a is not None and b else None

    def slowest(what: str) -> dict | None:
        worst = max(served, key=lambda r: r["sagitta"][f"{what}_ms"], default=None)
        return None if worst is None else brief(worst)

    paged = [r for r in served if r["sagitta"]["scroll_pages"] > 1]
    return {
        "case": case,
        "filters": len(records),
        "conditions": [
            min(r["conditions"] for r in records),
            max(r["conditions"] for r in records),
        ],
        "matched": [
            min(r["matched"] for r in records),
            max(r["matched"] for r in records),
        ],
        "filters_matching_none": sum(r["matched"] == 0 for r in records),
        "pages_max": max((r["sagitta"]["scroll_pages"] for r in served), default=0),
        SAGITTA: ours,
        LOCAL: theirs,
        "local_scrolls_estimated": sum(
            not r["local"]["scroll_complete"] for r in records
        ),
        "empty_count_ms_sagitta": stats_ms(
            [r["sagitta"]["empty_count_ms"] for r in served]
        ),
        "sagitta_over_local_median": {
            "count": ratio("count"),
            "scroll": ratio("scroll"),
        },
        "sagitta_over_local_count_per_filter": spread(
            [
                round(r["sagitta"]["count_ms"] / max(r["local"]["count_ms"], 1e-6), 4)
                for r in served
            ]
        ),
        "scroll_over_count_sagitta": spread(
            [r["sagitta"]["scroll_over_count"] for r in served]
        ),
        "scroll_over_count_sagitta_paged": spread(
            [r["sagitta"]["scroll_over_count"] for r in paged]
        ),
        "scroll_over_linear_sagitta_paged": spread(
            [r["sagitta"]["scroll_over_linear"] for r in paged]
        ),
        "slowest_count": slowest("count"),
        "slowest_scroll": slowest("scroll"),
        "mismatches": sum(len(r["mismatches"]) for r in records),
        "server_errors": sum(r["sagitta"] is None for r in records),
    }


def run_entry(case: str, what: str, records: list[dict], engine: str) -> dict:
    """One ``runs`` entry of the schema: ``latency_ms`` are per filter (one count, or one
    full scroll); ``recall_at_k`` the share of filters whose answers equal the oracle's."""
    key = "sagitta" if engine == SAGITTA else "local"
    kept = [r for r in records if r[key] is not None]
    ms = [r[key][f"{what}_ms"] for r in kept]
    agree = sum(not r["mismatches"] for r in records) / max(len(records), 1)
    p50, p95, p99 = np.percentile(ms, [50, 95, 99]) if ms else (0.0, 0.0, 0.0)
    run = {
        "scenario": f"{what}-{case}",
        "search_params": {"limit": PAGE} if what == "scroll" else {"exact": True},
        "threads": 1,
        "concurrency": 1,
        "recall_at_k": round(agree, 4),
        "qps": round(len(ms) / max(sum(ms) / 1e3, 1e-9), 2),
        "latency_ms": {
            "p50": round(float(p50), 3),
            "p95": round(float(p95), 3),
            "p99": round(float(p99), 3),
        },
        "disk_bytes_read_per_query": None,
        "filters": len(records),
        "max_ms": round(max(ms), 3) if ms else None,
    }
    if what == "scroll" and engine == LOCAL:
        run["estimated"] = sum(not r["local"]["scroll_complete"] for r in records)
    return run


def notable(records: list[dict], filters: dict[tuple, dict | None]) -> list[dict]:
    """Filters worth keeping whole: any with a mismatch, the slowest for the server in each
    case (count and scroll), and any whose server count took longer than local mode's."""
    picked: dict[tuple, str] = {}
    for r in records:
        key = (r["case"], r["index"])
        if r["mismatches"]:
            picked[key] = "mismatch"
        elif (
            r["sagitta"]
            and filters[key] is not None
            and r["sagitta"]["count_ms"] > r["local"]["count_ms"]
        ):
            picked.setdefault(key, "server count slower than local mode")
    for case in dict.fromkeys(r["case"] for r in records):
        served = [r for r in records if r["case"] == case and r["sagitta"]]
        for what in ("scroll", "count"):
            if served and filters[(case, served[0]["index"])] is not None:
                worst = max(served, key=lambda r: r["sagitta"][f"{what}_ms"])
                picked.setdefault((case, worst["index"]), f"slowest server {what}")
    return [
        {
            "case": case,
            "index": index,
            "why": why,
            "filter": "heavy_filter() in bench/filters.py"
            if case == "heavy"
            else filters[(case, index)],
        }
        for (case, index), why in picked.items()
    ]


def format_summary(rows: list[dict]) -> str:
    def ms(stats: dict) -> str:
        return "/".join("-" if v is None else f"{v:.2f}" for v in stats.values())

    header = (
        f"{'case':<10} {'engine':<20} {'count med/p99/max ms':>26} "
        f"{'scroll med/p99/max ms':>30}"
    )
    lines = [header]
    for row in rows:
        for engine in (SAGITTA, LOCAL):
            lines.append(
                f"{row['case']:<10} {engine:<20} {ms(row[engine]['count']):>26} "
                f"{ms(row[engine]['scroll']):>30}"
            )
        ratio = row["sagitta_over_local_median"]
        lines.append(
            f"{'':<10} sagitta/local (medians) count {ratio['count']}, scroll "
            f"{ratio['scroll']}; server scroll/count {row['scroll_over_count_sagitta']}, "
            f"paged scroll/linear {row['scroll_over_linear_sagitta_paged']}; local scrolls "
            f"estimated {row['local_scrolls_estimated']}; mismatches {row['mismatches']}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.filters", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--points", type=int, default=3000)
    parser.add_argument("--filters", type=int, default=50, help="random fuzz filters")
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument(
        "--repeats", type=int, default=3, help="count calls per filter (median kept)"
    )
    parser.add_argument(
        "--local-scroll-budget",
        type=float,
        default=0.5,
        help="seconds of local-mode paging per filter before it is cut short",
    )
    parser.add_argument(
        "--no-heavy", action="store_true", help="skip the 900-condition filter"
    )
    parser.add_argument("--binary", default=str(DEFAULT_BINARY))
    parser.add_argument("--workdir", help="where the data directory goes (a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--note", help="free text kept in the result (e.g. the build)")
    parser.add_argument("--out", default="bench/results/filters.json")
    return parser


def binary_info(binary: Path) -> dict:
    stat = binary.stat()
    return {
        "version": binary_version(binary),
        "modified_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stat.st_mtime)),
        "bytes": stat.st_size,
    }


def run_cases(
    args: argparse.Namespace,
    binary: Path,
    points: list[dict],
    cases: list[tuple[str, list]],
) -> tuple[list[dict], dict]:
    """Loads both engines and measures every filter: (records, facts about the run)."""
    oracle = load_oracle_module()
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="filters-", dir=args.workdir))
    server = None
    records: list[dict] = []
    try:
        with strict_local_mode(oracle):
            local = Local(oracle, points)
            log(f"{len(points):,} points in local mode in {local.upload_seconds:.2f} s")
            server = Server(binary, root / "data", root / "server.log")
            server.wait_ready(None)
            remote = (Remote(server), Remote(server, EMPTY))
            for collection in remote:
                collection.create()
            upload = remote[0].upload(points)
            log(f"{len(points):,} points uploaded to {binary} in {upload:.2f} s")
            for case, filters in cases:
                for index, filter_json in enumerate(filters):
                    record = measure(case, index, filter_json, remote, local, args)
                    records.append(record)
                    log(describe(record))
            local.close()
        panics = server.panics()
        server.stop()
    finally:
        if server is not None and server.process.poll() is None:
            server.kill9()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    facts = {
        "upload_seconds": upload,
        "local_upload_seconds": local.upload_seconds,
        "local_version": local.version(),
        "server_panics": panics,
    }
    return records, facts


def describe(record: dict) -> str:
    ours, theirs = record["sagitta"] or {}, record["local"]
    estimated = "" if theirs["scroll_complete"] else " (estimated)"
    return (
        f"  {record['case']} {record['index']}: {record['conditions']} conditions, depth "
        f"{record['depth']}, {record['matched']} match; server count "
        f"{ours.get('count_ms')} ms, scroll {ours.get('scroll_ms')} ms "
        f"({ours.get('scroll_pages')} pages); local count {theirs['count_ms']} ms, "
        f"scroll {theirs['scroll_ms']} ms{estimated}"
        + (f"; MISMATCH {record['mismatches']}" if record["mismatches"] else "")
    )


def result_entry(
    engine: str, version: str, seconds: float, records: list[dict], cases: list
) -> dict:
    return {
        "engine": engine,
        "engine_version": version,
        "index_params": {"shards": 1, "page_limit": PAGE, "upload_batch": UPLOAD_BATCH},
        "build_seconds": seconds,
        "upload_seconds": seconds,
        "memory_bytes": None,
        "disk_bytes_written": None,
        "runs": [
            run_entry(case, what, [r for r in records if r["case"] == case], engine)
            for case, _ in cases
            for what in ("count", "scroll")
        ],
    }


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if args.points < 1 or args.filters < 0:
        raise SystemExit("--points must be positive and --filters not negative")
    binary = Path(args.binary)
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise SystemExit(
            f"{binary} not found: build it first (cargo build --release -p sagitta-cli)"
        )
    started_at = report.utc_now()
    points = make_points(args.points, args.seed)
    generator = Filters(random.Random(args.seed + 1), args.points)
    cases: list[tuple[str, list]] = [
        ("fuzz", [generator.fuzz() for _ in range(args.filters)])
    ]
    if not args.no_heavy:
        cases.append(("heavy", [heavy_filter()]))
    cases.append(("no-filter", [None]))
    records, facts = run_cases(args, binary, points, cases)
    summary = [
        case_summary(case, [r for r in records if r["case"] == case])
        for case, _ in cases
    ]
    by_key = {(case, i): f for case, filters in cases for i, f in enumerate(filters)}
    no_filter = next(r for r in records if r["case"] == "no-filter")["sagitta"]
    version = binary_info(binary)
    mismatches = sum(len(r["mismatches"]) for r in records)
    document = report.build_document(
        suite="filters-slow",
        command="python -m bench.filters " + shlex.join(argv),
        started_at=started_at,
        dataset={
            "name": f"filter-payloads-seed{args.seed}",
            "n": args.points,
            "dim": DIM,
            "metric": "dot",
            "queries": sum(len(filters) for _, filters in cases),
            "k": PAGE,
            "generator": "bench/filters.py: make_points(n, seed), Filters(random.Random("
            "seed + 1)).fuzz() per filter, heavy_filter()",
        },
        results=[
            result_entry(
                SAGITTA, version["version"], facts["upload_seconds"], records, cases
            ),
            result_entry(
                LOCAL,
                facts["local_version"],
                facts["local_upload_seconds"],
                records,
                cases,
            ),
        ],
        extra={
            "summary": {
                "filters": summary,
                "mismatches": mismatches,
                "no_filter_page_ms": None
                if no_filter is None
                else round(no_filter["scroll_ms"] / no_filter["scroll_pages"], 3),
                "note": SUMMARY_NOTE,
            },
            "binary": report.repo_relative(binary),
            "binary_info": version,
            "server_panics": facts["server_panics"],
            "note": args.note,
            "repeats": args.repeats,
            "local_scroll_budget_seconds": args.local_scroll_budget,
            "oracle": "qdrant-client local mode with the strict checks of "
            "python/tests/test_qdrant_oracle.py",
            "per_filter": records,
            "notable_filters": notable(records, by_key),
            "load_average_at_end": list(os.getloadavg()),
        },
    )
    if report.invalid(document):
        return 2
    log(format_summary(summary))
    out = report.write_json(document, args.out)
    log(f"wrote {out}; {mismatches} mismatches, {facts['server_panics']} server panics")
    return 1 if mismatches or facts["server_panics"] else 0


if __name__ == "__main__":
    sys.exit(main())
