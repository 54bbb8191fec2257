"""Qdrant's own client test suite against ``sagitta serve`` (issue 16).

Runs the REST variants of qdrant-client v1.18.0's ``tests/test_qdrant_client.py``,
``tests/test_async_qdrant_client.py`` and ``tests/congruence_tests/`` against a fresh
``sagitta serve`` on port 6333 (the port the suite hard-codes), and writes every test's
outcome, with the first line of each failure, to one JSON file.

Nothing is fetched at run time. The suite's sources are a checkout outside this
repository, pinned to the tag the issue names (``scripts/qdrant-compat.sh`` says how to
get it); this module checks the pin before running. The tests that need gRPC are left out
by ``bench/compat_plugin.py`` and listed in the JSON.

    python -m bench.compat --suite ../qdrant-client --python ../venv-compat/bin/python \\
        --out bench/results/qdrant-compat.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ElementTree
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PINNED_VERSION = "1.18.0"
PINNED_COMMIT = "326adefcc2158121dd0d04877e1a483b5aa2627b"
TARGETS = (
    "tests/test_qdrant_client.py",
    "tests/test_async_qdrant_client.py",
    "tests/congruence_tests",
)
PORT = 6333


def git_head(checkout: Path) -> str:
    """The commit ``checkout`` (a git working tree) is at; a clear error if git cannot say."""
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        raise SystemExit(f"{checkout}: cannot read its git commit ({error})") from None


def check_pin(suite: Path) -> str:
    """The suite's commit when it is a git checkout (it must be the pinned one), else
    ``unknown``; its pyproject must name the pinned version either way."""
    pyproject = (suite / "pyproject.toml").read_text(encoding="utf-8")
    if f'version = "{PINNED_VERSION}"' not in pyproject:
        raise SystemExit(
            f"{suite} is not qdrant-client {PINNED_VERSION} (pyproject.toml)"
        )
    if not (suite / ".git").exists():
        return "unknown (not a git checkout; pyproject says " + PINNED_VERSION + ")"
    commit = git_head(suite)
    if commit != PINNED_COMMIT:
        raise SystemExit(
            f"{suite} is at {commit}, not v{PINNED_VERSION} ({PINNED_COMMIT})"
        )
    return commit


def start_server(
    binary: Path,
    data_dir: Path,
    log: Path,
    port: int = PORT,
    env_extra: dict[str, str] | None = None,
) -> subprocess.Popen:
    """``sagitta serve`` on 127.0.0.1:``port``, ready to answer ``GET /collections``; the
    caller's ``SAGITTA_*`` settings are dropped, ``env_extra`` added."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAGITTA_")}
    env.update(env_extra or {})
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                str(binary),
                "serve",
                *("--data-dir", str(data_dir)),
                *("--host", "127.0.0.1", "--port", str(port)),
                # gRPC beside it, as Qdrant's 6333 / 6334
                *("--grpc-port", str(port + 1)),
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"sagitta serve exited ({process.returncode}); see {log}")
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/collections", timeout=2
            ):
                return process
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"sagitta serve did not answer on port {port}; see {log}")


def _reason(message: str) -> str:
    """The first line of a failure message, with the server's error text when the line
    only gives the HTTP status (qdrant-client puts the body on a later line)."""
    lines = message.strip().splitlines()
    reason = lines[0][:300] if lines else ""
    marker = '"error":"'
    at = message.find(marker)
    if at >= 0:
        error = message[at + len(marker) :].split('"}', 1)[0]
        # the body arrives as a Python bytes repr of JSON: quotes escaped once or twice
        error = error.replace("\\\\", "\\").replace('\\"', '"')
        reason = f"{reason} | {error[:300]}"
    return reason


def outcomes(junit_xml: Path) -> dict[str, dict]:
    """Each test case of a JUnit XML report: ``outcome`` (passed, failed, error, skipped)
    and, unless passed, ``reason`` (the first line of the message and the server's
    error text)."""
    cases: dict[str, dict] = {}
    for case in ElementTree.parse(junit_xml).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        result: dict = {"outcome": "passed"}
        for tag in ("failure", "error", "skipped"):
            found = case.find(tag)
            if found is not None:
                message = (found.get("message") or "") + "\n" + (found.text or "")
                result = {
                    "outcome": "failed" if tag == "failure" else tag,
                    "reason": _reason(message),
                }
                break
        cases[name] = result
    return cases


def summary(cases: dict[str, dict], deselected: list[str]) -> dict:
    counts: dict[str, int] = {}
    for case in cases.values():
        counts[case["outcome"]] = counts.get(case["outcome"], 0) + 1
    ran = sum(counts.get(key, 0) for key in ("passed", "failed", "error"))
    return {
        "counts": counts,
        "ran": ran,
        "pass_rate": round(counts.get("passed", 0) / ran, 4) if ran else None,
        "grpc_tests_left_out": len(deselected),
    }


def run(args: argparse.Namespace) -> dict:
    suite = Path(args.suite).resolve()
    commit = check_pin(suite)
    binary = Path(args.binary).resolve()
    with tempfile.TemporaryDirectory(prefix="sagitta-compat-") as scratch:
        work = Path(scratch)
        server = start_server(binary, work / "data", work / "server.log")
        try:
            env = dict(os.environ)
            env["PYTHONPATH"] = str(REPO / "bench")
            env["SAGITTA_COMPAT_DESELECTED"] = str(work / "deselected.json")
            env["SAGITTA_COMPAT_API"] = args.api
            # the suite runs in its own directory: a relative interpreter path is made
            # absolute (not resolved: a venv's python must keep its own path)
            python = args.python
            if os.sep in python:
                python = str(Path(python).absolute())
            command = [
                python,
                "-m",
                "pytest",
                *(args.targets or TARGETS),
                "-p",
                "compat_plugin",
                "-o",
                "addopts=",
                f"--timeout={args.timeout}",
                f"--junitxml={work / 'junit.xml'}",
                "-q",
                "-rN",
            ]
            started = time.monotonic()
            subprocess.run(command, cwd=suite, env=env, check=False)
            seconds = round(time.monotonic() - started, 1)
        finally:
            server.terminate()
            server.wait(timeout=30)
        cases = outcomes(work / "junit.xml")
        deselected = json.loads((work / "deselected.json").read_text(encoding="utf-8"))
    return {
        "suite": f"qdrant-client v{PINNED_VERSION} tests ({args.api.upper()} variants)",
        "api": args.api,
        "suite_commit": commit,
        "targets": list(args.targets or TARGETS),
        "seconds": seconds,
        "summary": summary(cases, deselected),
        "tests": cases,
        "grpc_tests_left_out": deselected,
    }


def rest_twin(name: str) -> str | None:
    """The REST variant of a gRPC test: the same test with its last parameter,
    ``prefer_grpc``, False (``test_x[1-True]`` -> ``test_x[1-False]``); None without one."""
    if not name.endswith("True]"):
        return None
    return name[: -len("True]")] + "False]"


def twins(cases: dict[str, dict], rest_cases: dict[str, dict]) -> dict:
    """The issue's measure: of the gRPC tests whose REST twin passes over REST, how many
    pass over gRPC (and which do not)."""
    paired = {
        name: twin
        for name in cases
        if (twin := rest_twin(name))
        and rest_cases.get(twin, {}).get("outcome") == "passed"
    }
    failing = sorted(n for n in paired if cases[n]["outcome"] != "passed")
    return {
        "rest_twin_passes": len(paired),
        "passes_over_grpc": len(paired) - len(failing),
        "share": round((len(paired) - len(failing)) / len(paired), 4)
        if paired
        else None,
        "failing_over_grpc": failing,
    }


def markdown(result: dict) -> str:
    """The run as COMPATIBILITY.md (REST) or COMPATIBILITY-grpc.md: the counts, then every
    test that did not pass, grouped by the server's (or the client's) reason, then the
    tests the run left out."""
    counts = result["summary"]["counts"]
    grpc = result.get("api") == "grpc"
    source = (
        f"Generated by `python -m bench.compat{' --api grpc' if grpc else ''}` from "
        f"{result['suite']} (commit `{result['suite_commit']}`), against `sagitta serve`. "
    )
    if grpc:
        pairs = result["twins"]
        head = (
            f"{counts.get('passed', 0)} of {result['summary']['ran']} tests that make or "
            "compare with a gRPC client pass (the server's gRPC API on port 6334). Of the "
            f"{pairs['rest_twin_passes']} whose REST twin (the same test with "
            "`prefer_grpc=False`) passes in COMPATIBILITY.md, "
            f"{pairs['passes_over_grpc']} pass over gRPC. The "
            f"{result['summary']['grpc_tests_left_out']} REST-only tests are in "
            "COMPATIBILITY.md and listed last."
        )
        left_out = "## Left out: REST only (COMPATIBILITY.md)"
    else:
        head = (
            f"{counts.get('passed', 0)} of {result['summary']['ran']} tests that need no "
            f"gRPC pass; {result['summary']['grpc_tests_left_out']} make or compare with a "
            "gRPC client: listed last, and run by `--api grpc` (COMPATIBILITY-grpc.md)."
        )
        left_out = "## Left out: they make or compare with a gRPC client"
    lines = [
        "# Compatibility with Qdrant's client test suite"
        + (" over gRPC" if grpc else ""),
        "",
        source + head,
        "",
        "## Not passing, by reason",
        "",
    ]
    by_reason: dict[str, list[str]] = {}
    for name, case in sorted(result["tests"].items()):
        if case["outcome"] in ("failed", "error"):
            reason = case.get("reason", "").split(" | ", 1)[-1]
            by_reason.setdefault(reason[:200].rstrip("\\"), []).append(name)
    for reason, names in sorted(by_reason.items(), key=lambda item: -len(item[1])):
        lines.append(f"- **{len(names)}** — {reason or '(no message)'}")
        lines.extend(f"  - `{name}`" for name in names)
    lines += ["", left_out, ""]
    lines.extend(f"- `{name}`" for name in result["grpc_tests_left_out"])
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--suite", required=True, help="qdrant-client checkout at v1.18.0"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the suite's interpreter"
    )
    parser.add_argument("--binary", default=str(REPO / "target/release/sagitta"))
    parser.add_argument("--timeout", type=int, default=300, help="seconds a test")
    parser.add_argument("--targets", nargs="*", help="test paths (default: the three)")
    parser.add_argument(
        "--api",
        choices=["rest", "grpc"],
        default="rest",
        help="the tests that need no gRPC (rest), or those that do (grpc: the server's "
        "gRPC API on port 6334)",
    )
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--rest-results",
        default=str(REPO / "bench/results/qdrant-compat.json"),
        help="--api grpc: the REST run's JSON, for the twins that pass over REST",
    )
    parser.add_argument("--markdown", help="also write the run as this Markdown file")
    parser.add_argument(
        "--from-json", help="no run: write --markdown from this earlier --out file"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text(encoding="utf-8"))
    else:
        result = run(args)
        if args.api == "grpc":
            rest = json.loads(Path(args.rest_results).read_text(encoding="utf-8"))
            result["twins"] = twins(result["tests"], rest["tests"])
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    if args.markdown:
        Path(args.markdown).write_text(markdown(result), encoding="utf-8")
    print(json.dumps(result["summary"]))


if __name__ == "__main__":
    main()
