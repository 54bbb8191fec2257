"""The slow-filter benchmark end to end on a tiny budget: it runs, every count and every
scrolled id list equals qdrant-client local mode's, and the document is valid. Timings are
recorded, never asserted.

Needs the server binary (``cargo build --release -p sagitta-cli``); a missing one fails the
test, as in python/tests/server_process.py.
"""

import json
import os
import random

import pytest
from qdrant_client import models
from qdrant_client.local.payload_filters import check_filter

from bench.filters import (
    DEFAULT_BINARY,
    HEAVY_POOL,
    Filters,
    conditions_in,
    depth_of,
    heavy_filter,
    load_oracle_module,
    main,
    make_points,
    pages_for,
    strict_local_mode,
)
from bench.report import validate


def test_filter_shapes():
    generator = Filters(random.Random(3), 100)
    for _ in range(20):
        filter_json = generator.fuzz()
        assert 30 <= conditions_in(filter_json) <= 100
        assert 4 <= depth_of(filter_json) <= 5
    assert conditions_in(heavy_filter()) == 900
    # In the heavy filter only each group's last condition holds for any point.
    points = make_points(300, 12)
    with strict_local_mode(load_oracle_module()):
        for key, kind, body in HEAVY_POOL:
            condition = {"must": [{"key": key, kind: body}]}
            parsed = models.Filter.model_validate(condition)
            assert not any(
                check_filter(parsed, p["payload"], p["id"], {}) for p in points
            ), condition
    assert (
        conditions_in({"must": {"nested": {"key": "o", "filter": {"should": [{}]}}}})
        == 2
    )
    assert [pages_for(m) for m in (0, 1, 10, 11)] == [1, 1, 1, 2]


def test_filters_tiny_run(tmp_path):
    if not DEFAULT_BINARY.is_file() or not os.access(DEFAULT_BINARY, os.X_OK):
        pytest.fail(
            f"{DEFAULT_BINARY} is missing: cargo build --release -p sagitta-cli",
            pytrace=False,
        )
    out = tmp_path / "filters.json"
    argv = [
        "--points",
        "300",
        "--filters",
        "5",
        "--repeats",
        "1",
        "--local-scroll-budget",
        "0.05",
        "--workdir",
        str(tmp_path / "work"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert validate(doc) == []
    assert doc["suite"] == "filters-slow"
    assert doc["dataset"]["n"] == 300 and doc["dataset"]["queries"] == 7
    assert doc["summary"]["mismatches"] == 0
    assert doc["server_panics"] == 0
    records = doc["per_filter"]
    assert [(r["case"], r["index"]) for r in records] == [
        *[("fuzz", i) for i in range(5)],
        ("heavy", 0),
        ("no-filter", 0),
    ]
    for record in records:
        assert record["mismatches"] == []
        # Every count equals local mode's, and the scroll paged through all of them.
        assert (
            record["sagitta"]["count"] == record["local"]["count"] == record["matched"]
        )
        assert record["sagitta"]["scroll_pages"] == pages_for(record["matched"])
    heavy = records[5]
    assert heavy["conditions"] == 900 and heavy["matched"] == 300
    assert records[6]["matched"] == 300
    assert [run["scenario"] for run in doc["results"][0]["runs"]] == [
        f"{what}-{case}"
        for case in ("fuzz", "heavy", "no-filter")
        for what in ("count", "scroll")
    ]
    assert {result["engine"] for result in doc["results"]} == {
        "sagitta-server",
        "qdrant-client-local",
    }
    # The data directory is removed unless --keep.
    assert not any((tmp_path / "work").iterdir())
