"""Results name no machine's absolute paths: paths into the repository or beside it are
recorded relative to the repository."""

from __future__ import annotations

import os
from pathlib import Path

from bench import report

ROOT = Path(report.__file__).resolve().parent.parent


def test_paths_in_and_beside_the_repository_become_relative() -> None:
    assert report.repo_relative(
        ROOT / "target" / "release" / "sagitta"
    ) == os.path.join("target", "release", "sagitta")
    beside = ROOT.parent / "shared" / "datasets" / "debian-minilm"
    assert report.repo_relative(beside) == os.path.join(
        "..", "shared", "datasets", "debian-minilm"
    )
    assert report.repo_relative("/elsewhere/data") == "/elsewhere/data"


def test_command_lines_name_no_absolute_path_into_the_repository() -> None:
    command = (
        f"{ROOT}/target/release/sagitta serve --data {ROOT.parent}/shared/x --port 1"
    )
    relative = report.repo_relative_text(command)
    assert relative == "target/release/sagitta serve --data ../shared/x --port 1"
    assert str(ROOT.parent) not in relative
    assert report.repo_relative_text("sagitta serve --data /elsewhere") == (
        "sagitta serve --data /elsewhere"
    )


def test_an_invalid_document_is_reported_and_a_valid_one_is_not(capsys) -> None:
    assert report.invalid({"schema": "sagitta-bench/1"})
    assert "missing 'suite'" in capsys.readouterr().err
    document = report.build_document(
        suite="t",
        command="python -m bench t",
        started_at="2026-11-24T00:00:00Z",
        dataset={"name": "d", "n": 1, "dim": 1, "metric": "l2", "queries": 1, "k": 1},
        results=[],
    )
    assert not report.invalid(document)
    assert capsys.readouterr().err == ""
