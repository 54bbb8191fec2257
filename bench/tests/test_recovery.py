"""The kill -9 recovery benchmark end to end on a tiny budget: it runs, every restart finds
every acknowledged point, and the document is valid. Timings are recorded, never asserted.

Needs the server binary (``cargo build --release -p sagitta-cli``); a missing one fails the
test, as in python/tests/server_process.py.
"""

import json
import os

import pytest

from bench.recovery import DEFAULT_BINARY, main
from bench.report import validate


def test_recovery_tiny_run(tmp_path):
    if not DEFAULT_BINARY.is_file() or not os.access(DEFAULT_BINARY, os.X_OK):
        pytest.fail(
            f"{DEFAULT_BINARY} is missing: cargo build --release -p sagitta-cli",
            pytrace=False,
        )
    out = tmp_path / "recovery.json"
    argv = [
        "--points",
        "2000",
        "--repeats",
        "1",
        "--crashes",
        "2",
        "--max-burst",
        "2",
        "--max-delay",
        "0.3",
        "--check-queries",
        "5",
        # No dataset there: the benchmark generates its own vectors.
        "--dataset-path",
        str(tmp_path / "absent"),
        "--workdir",
        str(tmp_path / "work"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    doc = json.loads(out.read_text())
    assert validate(doc) == []
    assert doc["suite"] == "recovery-kill9"
    assert doc["dataset"]["name"] == "synth-384" and doc["dataset"]["dim"] == 384
    cases = [result["index_params"]["case"] for result in doc["results"]]
    assert cases == ["live-points-2000", "crashes-2"]
    live, crashes = doc["results"]
    assert [run["scenario"] for run in live["runs"]] == [
        "kill9-after-last-ack",
        "kill9-settled",
    ]
    assert [run["crash"] for run in crashes["runs"]] == [1, 2]
    for result in doc["results"]:
        for run in result["runs"]:
            # Ready means the exact count matched; the collection says the same.
            assert run["points_count_reported"] == run["points"] >= 2000
            assert run["time_to_ready_seconds"] >= run["readyz_seconds"] > 0
            assert run["data_bytes"] >= run["log_bytes"] > 0 or run["segments"] > 0
            assert run["read_files_seconds"] >= 0
            assert run["check_queries"] == 5
    # Work dirs are removed unless --keep.
    assert not any((tmp_path / "work").iterdir())
    rows = doc["summary"]["recovery"]
    assert {row["scenario"] for row in rows} == {
        "kill9-after-last-ack",
        "kill9-settled",
        "kill9-during-writes",
    }
