"""The compatibility harness's own logic: which tests count as gRPC-only, and how a JUnit
report becomes outcomes and a pass rate."""

from pathlib import Path

from bench.compat import markdown, outcomes, rest_twin, summary, twins
from bench.compat_plugin import needs_grpc

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.test_qdrant_client" name="test_points_crud[False]" />
<testcase classname="tests.congruence_tests.test_search" name="test_search">
  <failure message="AssertionError: scores differ&#10;second line">trace</failure>
</testcase>
<testcase classname="tests.test_qdrant_client" name="test_aliases">
  <error message="qdrant_client.http.exceptions.UnexpectedResponse: 404">Raw response content:
b'{"status":{"error":"Not found: Collection `x` doesn't exist!"},"time":0.0}'</error>
</testcase>
<testcase classname="tests.test_qdrant_client" name="test_fastembed">
  <skipped message="fastembed is not installed" />
</testcase>
</testsuite></testsuites>
"""


def test_grpc_tests_are_recognised_by_parameter_or_name():
    assert needs_grpc("test_points_crud[True]", {"prefer_grpc": True})
    assert not needs_grpc("test_points_crud[False]", {"prefer_grpc": False})
    assert needs_grpc("test_grpc_options", {})
    assert needs_grpc("test_convert_grpc_payload[x]", {})
    # a parameter value that merely mentions grpc does not make the test gRPC-only
    assert not needs_grpc("test_search[grpc-like-id]", {})
    assert not needs_grpc("test_search", {})
    # a test without the parameter that builds a gRPC client in its own code
    helper = "local, http, grpc_client = init_clients(points)"
    assert needs_grpc("test_dense_query", {}, helper)
    assert not needs_grpc("test_dense_query", {}, "client = init_remote()")
    assert needs_grpc("test_client_close", {}, "QdrantClient(prefer_grpc=True)")
    # the parameter decides for the tests that have it, whatever their code says
    assert not needs_grpc("test_x[False]", {"prefer_grpc": False}, "prefer_grpc=True")


def test_junit_report_becomes_outcomes_and_a_pass_rate(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT, encoding="utf-8")
    cases = outcomes(report)
    assert cases["tests.test_qdrant_client::test_points_crud[False]"] == {
        "outcome": "passed"
    }
    failed = cases["tests.congruence_tests.test_search::test_search"]
    assert failed == {"outcome": "failed", "reason": "AssertionError: scores differ"}
    aliases = cases["tests.test_qdrant_client::test_aliases"]
    assert aliases["outcome"] == "error"
    assert aliases["reason"] == (
        "qdrant_client.http.exceptions.UnexpectedResponse: 404 | "
        "Not found: Collection `x` doesn't exist!"
    )
    assert cases["tests.test_qdrant_client::test_fastembed"]["outcome"] == "skipped"
    totals = summary(cases, ["tests/test_qdrant_client.py::test_points_crud[True]"])
    assert totals["counts"] == {"passed": 1, "failed": 1, "error": 1, "skipped": 1}
    assert totals["ran"] == 3
    assert totals["pass_rate"] == round(1 / 3, 4)
    assert totals["grpc_tests_left_out"] == 1


def test_markdown_lists_every_test_that_did_not_pass(tmp_path: Path):
    report = tmp_path / "junit.xml"
    report.write_text(REPORT, encoding="utf-8")
    cases = outcomes(report)
    left_out = ["tests/test_qdrant_client.py::test_points_crud[True]"]
    text = markdown(
        {
            "suite": "qdrant-client tests",
            "suite_commit": "abc",
            "tests": cases,
            "summary": summary(cases, left_out),
            "grpc_tests_left_out": left_out,
        }
    )
    assert "1 of 3 tests that need no gRPC pass" in text
    assert "`tests.congruence_tests.test_search::test_search`" in text
    assert "Not found: Collection `x` doesn't exist!" in text
    assert "test_points_crud[True]" in text
    assert "test_points_crud[False]" not in text.split("## Left out")[0]


def test_grpc_tests_are_paired_with_their_rest_twins():
    """The issue's measure: gRPC tests whose REST twin passes over REST, and how many of
    those pass over gRPC."""
    assert rest_twin("tests.t::test_a[1-True]") == "tests.t::test_a[1-False]"
    assert (
        rest_twin("tests.t::test_b[True-False-True]")
        == "tests.t::test_b[True-False-False]"
    )
    assert rest_twin("tests.t::test_client_init") is None
    assert rest_twin("tests.t::test_c[True-False]") is None
    grpc_cases = {
        "t::a[True]": {"outcome": "passed"},
        "t::b[True]": {"outcome": "failed"},
        "t::c[True]": {"outcome": "passed"},  # its twin failed over REST: not counted
        "t::d": {"outcome": "failed"},  # no twin
    }
    rest_cases = {
        "t::a[False]": {"outcome": "passed"},
        "t::b[False]": {"outcome": "passed"},
        "t::c[False]": {"outcome": "failed"},
    }
    pairs = twins(grpc_cases, rest_cases)
    assert pairs == {
        "rest_twin_passes": 2,
        "passes_over_grpc": 1,
        "share": 0.5,
        "failing_over_grpc": ["t::b[True]"],
    }
    text = markdown(
        {
            "suite": "qdrant-client tests",
            "api": "grpc",
            "suite_commit": "abc",
            "tests": grpc_cases,
            "summary": summary(grpc_cases, ["t::a[False]"]),
            "grpc_tests_left_out": ["t::a[False]"],
            "twins": pairs,
        }
    )
    assert "2 of 4 tests that make or compare with a gRPC client pass" in text
    assert "Of the 2 whose REST twin" in text and "1 pass over gRPC" in text
    assert text.split("## Left out: REST only (COMPATIBILITY.md)")[1].strip() == (
        "- `t::a[False]`"
    )
