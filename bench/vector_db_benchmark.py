"""Qdrant's vector-db-benchmark, unchanged, against ``sagitta serve``: its ``qdrant`` engine
(gRPC) and its ``qdrant_native`` engine (REST), side by side on debian-minilm.

The suite is github.com/qdrant/vector-db-benchmark, a checkout outside this repository
(``--suite``; pinned to commit ``203ab7e``). Its own engine configurations run as they
are: ``qdrant-default`` (``experiments/configurations/qdrant-single-node.json``:
qdrant-client with ``prefer_grpc=True``) and ``qdrant-native-default``
(``qdrant-native-single-node.json``: plain REST through httpx). Both create the
collection ``benchmark`` with ``optimizers_config {"memmap_threshold": 10000000,
"max_optimization_threads": 0}``, upload with 16 processes in batches of 1,024 points
(``wait=false``; the REST client splits each batch into two requests of 512), then set
``max_optimization_threads`` to 100,000 and poll the collection every 5 s until it is green
twice in a row (so ``total_time`` holds at least 10 s of sleep beyond ``upload_time``), and
search every query once with 8 processes (after a 15 s pause for the pool to start), ``hnsw_ef``
128, ``limit`` = the width of the dataset's ``neighbors`` array. The gRPC client creates
the collection over REST (qdrant-client's ``recreate_collection`` without ``prefer_grpc``)
and does everything else over gRPC; both clients hard-code port 6333 (gRPC: 6334).

Steps:

1. convert debian-minilm (the first ``--n`` base vectors and ``--queries`` queries, float32,
   re-normalized) into an ann-benchmarks HDF5 file: ``train``, ``test`` (float32),
   ``neighbors`` (int32, exactly ``--k`` = 10 columns: the suite searches with ``limit`` = that
   width and scores precision@10 against it) and ``distances`` (float32 cosine distances
   ``1 - cos``), the neighbours being the exact top-10 on those float32 vectors;
2. copy the suite into a work directory and add, there only, the dataset's entry to
   ``datasets/datasets.json`` and the HDF5 file under ``datasets/``;
3. for each API (``--apis grpc,rest``): start a fresh ``sagitta serve`` (a copy of the binary,
   so a rebuild cannot swap it mid-run) on a fresh data directory on ports 6333/6334, run
   ``python run.py --engines <config> --datasets <name> --host localhost`` in the copy with
   ``DETAILED_RESULTS=1`` (the suite's own switch that keeps each query's latency in its
   result file, from which the median is taken; the mean, p95 and p99 are the suite's),
   read its ``results/*.json``, read the collection and the server's memory, stop the server;
4. write one bench-schema JSON: per API the suite's upload time, total load time (upload
   + enabling the optimizer + the wait for green), recall@10 (the suite's
   ``mean_precisions``), QPS (``rps``) and latencies in ms, the collection as the server
   reports it, the run's and the server log's tails. A run that fails is recorded as failed
   with its error and tails, no numbers, and the command exits 1.

    scripts/vector-db-benchmark.sh --suite ../vector-db-benchmark \\
        --out bench/results/vector-db-benchmark.json

``scripts/vector-db-benchmark.sh`` makes the suite's virtualenv (``.venv-vdb``) and runs
this module in it; this module imports only the standard library, numpy and h5py.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from bench import report
from bench.compat import git_head, start_server
from bench.datasets import DEBIAN_MINILM_PATH, Dataset, load_debian_minilm

REPO = Path(__file__).resolve().parents[1]
SUITE = "vector-db-benchmark"
SUITE_URL = "https://github.com/qdrant/vector-db-benchmark"
PINNED_COMMIT = "203ab7e"
ENGINE = "sagitta-server"
COLLECTION = "benchmark"  # the suite's QDRANT_COLLECTION_NAME default
PORT = 6333  # both Qdrant clients of the suite hard-code it (gRPC: 6334)
K = 10
# API -> (engine configuration in the suite, its engine, the client it drives)
APIS: dict[str, tuple[str, str, str]] = {
    "grpc": ("qdrant-default", "qdrant", "qdrant-client, prefer_grpc=True (port 6334)"),
    "rest": ("qdrant-native-default", "qdrant_native", "httpx, REST (port 6333)"),
}
# the suite's files whose content is recorded (hashed) as proof they ran unchanged
SUITE_FILES = (
    "run.py",
    "benchmark",
    "dataset_reader",
    "engine/base_client",
    "engine/clients/client_factory.py",
    "engine/clients/qdrant",
    "engine/clients/qdrant_native",
    "experiments/configurations/qdrant-single-node.json",
    "experiments/configurations/qdrant-native-single-node.json",
)


# ---------------------------------------------------------------------------------------------
# Dataset


def subset(dataset: Dataset, n: int, queries: int) -> Dataset:
    """The first ``n`` base vectors and the first ``queries`` queries (no ground truth: it
    is recomputed on the subset)."""
    if n <= 0 or n > dataset.n:
        raise SystemExit(f"--n must be in 1..{dataset.n}")
    if queries <= 0 or queries > dataset.nq:
        raise SystemExit(f"--queries must be in 1..{dataset.nq}")
    if n == dataset.n and queries == dataset.nq:
        return dataset
    return Dataset(
        dataset.name,
        dataset.base[:n],
        dataset.queries[:queries],
        dataset.metric,
        None,
        dataset.extra,
    )


def dataset_name(dataset: Dataset) -> str:
    """The name the dataset gets in the suite's ``datasets.json``."""
    return f"{dataset.name}-{dataset.n}-{dataset.nq}q-{dataset.dim}-angular"


def write_h5(dataset: Dataset, path: Path, k: int = K) -> dict:
    """``dataset`` as an ann-benchmarks HDF5 file (what the suite's ``AnnH5Reader`` reads):
    ``train`` and ``test`` float32, ``neighbors`` int32 with exactly ``k`` columns (the exact
    top-k rows of ``train`` per query, best first) and ``distances`` float32 (cosine
    distance ``1 - cos`` of each neighbour, ascending). Returns the entry for the suite's
    ``datasets.json``, ``path`` relative to its ``datasets/`` directory left to the caller."""
    import h5py

    if dataset.metric != "cosine":
        raise ValueError("only cosine datasets are converted (the suite's 'angular')")
    k = min(k, dataset.n)
    gt = dataset.ensure_gt(k)[:, :k]
    base = np.ascontiguousarray(dataset.base, dtype=np.float32)
    queries = np.ascontiguousarray(dataset.queries, dtype=np.float32)
    # cosine similarity of each query with each of its neighbours, in float64
    similarity = np.einsum(
        "qd,qkd->qk", queries.astype(np.float64), base[gt].astype(np.float64)
    )
    distances = (1.0 - similarity).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with h5py.File(tmp, "w") as f:
        f.attrs["distance"] = "angular"
        f.attrs["point_type"] = "float"
        f.attrs["dimension"] = dataset.dim
        f.create_dataset("train", data=base)
        f.create_dataset("test", data=queries)
        f.create_dataset("neighbors", data=gt.astype(np.int32))
        f.create_dataset("distances", data=distances)
    os.replace(tmp, path)
    return {
        "name": dataset_name(dataset),
        "vector_size": dataset.dim,
        "distance": "cosine",
        "type": "h5",
    }


# ---------------------------------------------------------------------------------------------
# The suite


def suite_commit(suite: Path, pinned: str = PINNED_COMMIT) -> str:
    """The suite's commit when it is a git checkout (it must be the pinned one), else the
    pinned commit, marked as taken on trust."""
    if not (suite / ".git").exists():
        return f"{pinned} (not a git checkout; the pinned commit)"
    commit = git_head(suite)
    if not commit.startswith(pinned):
        raise SystemExit(f"{suite} is at {commit}, not {pinned}")
    return commit


def suite_digest(suite: Path) -> str:
    """sha256 over the suite's files that take part in these runs (``SUITE_FILES``: paths and
    contents, ``*.py`` and ``*.json`` only), so two results can show they ran the same code."""
    digest = hashlib.sha256()
    for name in SUITE_FILES:
        root = suite / name
        files = [root] if root.is_file() else sorted(root.rglob("*"))
        for file in files:
            if file.is_file() and file.suffix in (".py", ".json"):
                digest.update(str(file.relative_to(suite)).encode() + b"\0")
                digest.update(file.read_bytes())
    return digest.hexdigest()


def engine_config(suite: Path, name: str) -> dict:
    """The suite's engine configuration ``name`` (as its ``read_engine_configs`` finds it)."""
    for file in sorted((suite / "experiments" / "configurations").glob("*.json")):
        for config in json.loads(file.read_text()):
            if config.get("name") == name:
                return config
    raise SystemExit(f"the suite has no engine configuration {name!r}")


def prepare_copy(suite: Path, copy: Path, dataset: Dataset, k: int = K) -> dict:
    """Copies the suite to ``copy`` and adds the dataset there (the HDF5 file under
    ``datasets/`` and its entry at the end of ``datasets/datasets.json``); nothing else in
    the copy differs from the suite. Returns the entry."""
    shutil.copytree(
        suite,
        copy,
        ignore=shutil.ignore_patterns(".git", "__pycache__", "results"),
    )
    name = dataset_name(dataset)
    relative = f"{name}/{name}.hdf5"
    entry = write_h5(dataset, copy / "datasets" / relative, k)
    entry["path"] = relative
    datasets_json = copy / "datasets" / "datasets.json"
    entries = json.loads(datasets_json.read_text())
    if any(existing.get("name") == name for existing in entries):
        raise SystemExit(f"the suite already has a dataset named {name!r}")
    entries.append(entry)
    datasets_json.write_text(json.dumps(entries, indent=2) + "\n")
    return entry


def suite_command(python: str, config: str, dataset: str) -> list[str]:
    return [
        python,
        "run.py",
        *("--engines", config),
        *("--datasets", dataset),
        *("--host", "localhost"),
    ]


def run_suite(
    command: list[str], cwd: Path, output: Path, timeout: float
) -> tuple[int | None, str | None]:
    """Runs ``command`` in ``cwd`` (its own process group, so its worker pools die with it)
    with output to ``output``. Returns (exit status, error): status None and an error when
    it ran past ``timeout`` seconds and was killed."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("QDRANT_", "SAGITTA_"))
    }
    env["DETAILED_RESULTS"] = (
        "1"  # the suite keeps per-query latencies (for the median)
    )
    env["PYTHONUNBUFFERED"] = "1"
    with open(output, "wb") as out:
        process = subprocess.Popen(
            command,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            return process.wait(timeout=timeout), None
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            return None, f"run.py ran past the {timeout:.0f} s timeout and was killed"


# ---------------------------------------------------------------------------------------------
# Results


class ResultError(Exception):
    """The suite's results directory lacks what a finished run writes."""


def parse_results(results_dir: Path, experiment: str, dataset: str) -> dict:
    """The suite's result files of ``experiment`` on ``dataset`` in ``results_dir``: the
    upload file (``<experiment>-<dataset>-upload-<time>.json``) and one search file per
    search configuration (``<experiment>-<dataset>-search-<i>-<time>.json``), the newest of
    each. Raises ``ResultError`` when one is missing or lacks a figure."""
    prefix = f"{experiment}-{dataset}-"
    uploads = sorted(results_dir.glob(f"{prefix}upload-*.json"))
    if not uploads:
        raise ResultError(f"no upload result {prefix}upload-*.json")
    upload = json.loads(uploads[-1].read_text())
    try:
        upload_results = upload["results"]
        load = {
            "file": uploads[-1].name,
            "params": upload.get("params", {}),
            "upload_time": float(upload_results["upload_time"]),
            "total_time": float(upload_results["total_time"]),
        }
    except (KeyError, TypeError, ValueError) as error:
        raise ResultError(f"{uploads[-1].name}: no {error}") from None

    by_id: dict[int, Path] = {}
    pattern = re.compile(re.escape(prefix) + r"search-(\d+)-.+\.json$")
    for file in sorted(results_dir.glob(f"{prefix}search-*.json")):
        match = pattern.match(file.name)
        if match:
            by_id[int(match.group(1))] = file  # sorted: the newest wins
    if not by_id:
        raise ResultError(f"no search result {prefix}search-*.json")
    searches = []
    for search_id, file in sorted(by_id.items()):
        document = json.loads(file.read_text())
        try:
            results = document["results"]
            params = document["params"]
            latencies = results.get("latencies")
            search = {
                "file": file.name,
                "search_id": search_id,
                "parallel": int(params.get("parallel", 1)),
                "config": params.get("config", {}),
                "rps": float(results["rps"]),
                "mean_precisions": float(results["mean_precisions"]),
                "mean_time": float(results["mean_time"]),
                "p95_time": float(results["p95_time"]),
                "p99_time": float(results["p99_time"]),
                "total_time": float(results["total_time"]),
                "p50_time": (
                    float(np.percentile(latencies, 50)) if latencies else None
                ),
                "queries": len(latencies) if latencies else None,
            }
        except (KeyError, TypeError, ValueError) as error:
            raise ResultError(f"{file.name}: no {error}") from None
        searches.append(search)
    return {"upload": load, "searches": searches}


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def api_result(outcome: dict) -> dict:
    """The bench-schema result of one API's successful run (``outcome["parsed"]`` from
    :func:`parse_results`, ``outcome["server"]`` what the server said after it)."""
    parsed, server = outcome["parsed"], outcome.get("server") or {}
    collection = server.get("collection") or {}
    config = collection.get("config") or {}
    hnsw = config.get("hnsw_config") or {}
    runs = []
    for search in parsed["searches"]:
        if search["p50_time"] is None:
            raise ResultError(
                f"{search['file']}: no per-query latencies (DETAILED_RESULTS=1 unset?)"
            )
        runs.append(
            {
                "scenario": "read-only",
                "search_params": search["config"],
                "threads": search["parallel"],
                "concurrency": search["parallel"],
                "recall_at_k": round(search["mean_precisions"], 6),
                "qps": round(search["rps"], 2),
                "latency_ms": {
                    "p50": ms(search["p50_time"]),
                    "p95": ms(search["p95_time"]),
                    "p99": ms(search["p99_time"]),
                    "avg": ms(search["mean_time"]),
                },
                "disk_bytes_read_per_query": None,
                "queries": search["queries"],
                "search_seconds": round(search["total_time"], 3),
                "suite_result_file": search["file"],
            }
        )
    upload = parsed["upload"]
    return {
        "engine": ENGINE,
        "engine_version": server.get("version", "unknown"),
        "api": outcome["api"],
        "suite_engine": outcome["suite_engine"],
        "engine_config": outcome["engine_config"],
        "client": outcome["client"],
        "index_params": {
            # the suite sends no HNSW or quantization settings: the server's defaults, as
            # its REST API reports them after the run
            "m": hnsw.get("m"),
            "ef_construct": hnsw.get("ef_construct"),
            "quantization": config.get("quantization_config"),
        },
        # upload + enabling the optimizer + the suite's wait for green (>= 10 s of sleep)
        "build_seconds": round(upload["total_time"], 3),
        "upload_seconds": round(upload["upload_time"], 3),
        "memory_bytes": server.get("memory_bytes"),
        "disk_bytes_written": server.get("disk_bytes_written"),
        "upload_params": upload["params"],
        "suite_upload_result_file": upload["file"],
        "runs": runs,
    }


def side_by_side(outcomes: list[dict]) -> list[dict]:
    """One line per API: what ran and its headline figures (None where it failed)."""
    lines = []
    for outcome in outcomes:
        result = outcome.get("result")
        run = result["runs"][0] if result and result["runs"] else None
        lines.append(
            {
                "api": outcome["api"],
                "engine_config": outcome["engine_config"],
                "status": outcome["status"],
                "recall_at_k": run["recall_at_k"] if run else None,
                "qps": run["qps"] if run else None,
                "p99_ms": run["latency_ms"]["p99"] if run else None,
                "upload_seconds": result["upload_seconds"] if result else None,
                "build_seconds": result["build_seconds"] if result else None,
                "points_count": (outcome.get("server") or {})
                .get("collection", {})
                .get("points_count"),
            }
        )
    return lines


def assemble(
    *,
    command: str,
    started_at: str,
    dataset: dict,
    outcomes: list[dict],
    extra: dict,
) -> tuple[dict, bool]:
    """The bench-schema document of all APIs' outcomes, and whether all of them succeeded.
    A failed API has no entry in ``results`` (no figures are made up for it); it is listed
    under ``apis`` with its error, and the document's ``status`` is ``failed``."""
    results = []
    for outcome in outcomes:
        if outcome["status"] == "ok":
            try:
                outcome["result"] = api_result(outcome)
            except ResultError as error:
                outcome["status"] = "failed"
                outcome["error"] = str(error)
        if outcome["status"] == "ok":
            results.append(outcome["result"])
    ok = bool(outcomes) and all(outcome["status"] == "ok" for outcome in outcomes)
    document = report.build_document(
        suite=SUITE,
        command=command,
        started_at=started_at,
        dataset=dataset,
        results=results,
        extra={
            "status": "ok" if ok else "failed",
            "side_by_side": side_by_side(outcomes),
            "apis": [
                {key: value for key, value in outcome.items() if key != "result"}
                for outcome in outcomes
            ],
            **extra,
        },
    )
    # both results are engine "sagitta-server": summarize them under their APIs
    document["summary"] = report.summarize(
        [{**result, "engine": f"{ENGINE}/{result['api']}"} for result in results]
    )
    return document, ok


# ---------------------------------------------------------------------------------------------
# Server


def http_json(url: str, timeout: float = 30) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` (connections left in TIME_WAIT by the previous
    server do not count: the server binds with SO_REUSEADDR too)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_state(base_url: str, pid: int) -> dict:
    """The collection as the server reports it, its version, memory and bytes written."""
    state: dict = {"memory_bytes": report.process_rss_bytes(pid)}
    try:
        telemetry = http_json(f"{base_url}/telemetry")["result"]
        state["version"] = str(telemetry.get("app", {}).get("version", "unknown"))
    except (OSError, ValueError, KeyError) as error:
        state["version"] = "unknown"
        state["telemetry_error"] = str(error)
    try:
        info = http_json(f"{base_url}/collections/{COLLECTION}")["result"]
        state["collection"] = {
            key: info.get(key)
            for key in (
                "status",
                "optimizer_status",
                "points_count",
                "indexed_vectors_count",
                "segments_count",
                "config",
            )
        }
    except (OSError, ValueError, KeyError) as error:
        state["collection_error"] = str(error)
    try:
        with urllib.request.urlopen(f"{base_url}/metrics", timeout=30) as response:
            metrics = response.read().decode()
        written = re.search(
            r"^sagitta_storage_written_bytes_total\s+(\d+)", metrics, re.MULTILINE
        )
        state["disk_bytes_written"] = int(written.group(1)) if written else None
    except OSError:
        state["disk_bytes_written"] = None
    return state


def stop(server: subprocess.Popen) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def read_log(path: Path) -> list[str]:
    """The lines of a log, paths into the repository (the suite's virtualenv, in
    warnings) written relative to it."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return report.repo_relative_text(text).splitlines()


def tail(path: Path, lines: int) -> list[str]:
    return read_log(path)[-lines:]


def error_lines(path: Path, limit: int = 40) -> list[str]:
    """The server log's WARN and ERROR lines (the first ``limit``)."""
    found = [line for line in read_log(path) if " WARN " in line or " ERROR " in line]
    return found[:limit]


def run_api(api: str, args, binary: Path, copy: Path, work: Path, name: str) -> dict:
    """One API's run on a fresh server; returns its outcome (``status`` ok or failed)."""
    config, suite_engine, client = APIS[api]
    api_dir = work / api
    api_dir.mkdir()
    log, out = api_dir / "server.log", api_dir / "run.out"
    cmd = suite_command(args.python, config, name)
    outcome: dict = {
        "api": api,
        "engine_config": config,
        "suite_engine": suite_engine,
        "client": client,
        "engine_config_json": engine_config(copy, config),
        "command": shlex.join(["python", *cmd[1:]]),
        "cwd": "the suite's copy (its run.py)",
        "env": {"DETAILED_RESULTS": "1"},
        "status": "failed",
    }
    base_url = f"http://127.0.0.1:{PORT}"
    if not port_free(PORT) or not port_free(PORT + 1):
        outcome["error"] = f"port {PORT} or {PORT + 1} is in use"
        return outcome
    try:
        server = start_server(
            binary, api_dir / "data", log, PORT, {"SAGITTA_LOG": "info"}
        )
    except SystemExit as error:
        outcome["error"] = f"the server did not start: {error}"
        outcome["server_log_tail"] = tail(log, 40)
        return outcome
    try:
        print(f"[{api}] + {outcome['command']}", flush=True)
        t0 = time.perf_counter()
        returncode, error = run_suite(cmd, copy, out, args.timeout)
        outcome["wall_seconds"] = round(time.perf_counter() - t0, 2)
        outcome["returncode"] = returncode
        outcome["server"] = server_state(base_url, server.pid)
        if error is None and returncode != 0:
            error = f"run.py exited {returncode}"
        if error is None:
            try:
                outcome["parsed"] = parse_results(copy / "results", config, name)
                outcome["status"] = "ok"
            except ResultError as problem:
                error = str(problem)
        if error is not None:
            outcome["error"] = error
    finally:
        stop(server)
    outcome["run_tail"] = [
        line for line in tail(out, 400) if "it/s]" not in line and "s/it]" not in line
    ][-30:]
    outcome["server_log_tail"] = tail(log, 40)
    outcome["server_log_warnings"] = error_lines(log)
    print(
        f"[{api}] {outcome['status']}"
        + (f": {outcome['error']}" if outcome.get("error") else ""),
        flush=True,
    )
    return outcome


def venv_versions(python: str) -> dict:
    """Versions of the suite's clients in the interpreter that runs it."""
    script = (
        "import importlib.metadata as m, json, sys\n"
        "names = ('qdrant-client', 'grpcio', 'httpx', 'h5py', 'numpy', 'typer')\n"
        "out = {'python': sys.version.split()[0]}\n"
        "for n in names:\n"
        "    try: out[n] = m.version(n)\n"
        "    except m.PackageNotFoundError: out[n] = None\n"
        "print(json.dumps(out))\n"
    )
    try:
        return json.loads(
            subprocess.run(
                [python, "-c", script], capture_output=True, text=True, check=True
            ).stdout
        )
    except (OSError, subprocess.CalledProcessError, ValueError):
        return {}


# ---------------------------------------------------------------------------------------------
# Main


def summary_text(document: dict) -> str:
    lines = []
    for line in document["side_by_side"]:
        if line["status"] != "ok":
            lines.append(f"{line['api']:>4} ({line['engine_config']}): FAILED")
            continue
        lines.append(
            f"{line['api']:>4} ({line['engine_config']}): recall@{document['dataset']['k']} "
            f"{line['recall_at_k']:.4f}, {line['qps']:.1f} QPS, p99 {line['p99_ms']} ms, "
            f"upload {line['upload_seconds']} s, load {line['build_seconds']} s"
        )
    for outcome in document["apis"]:
        if outcome.get("error"):
            lines.append(f"{outcome['api']}: {outcome['error']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--suite",
        type=Path,
        required=True,
        help="the vector-db-benchmark checkout (read only; copied)",
    )
    parser.add_argument("--dataset-path", default=DEBIAN_MINILM_PATH)
    parser.add_argument("--n", type=int, default=100_000, help="base vectors")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=K, help="neighbours per query")
    parser.add_argument("--binary", type=Path, default=REPO / "target/release/sagitta")
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that runs the suite (default: this one)",
    )
    parser.add_argument(
        "--apis",
        default="grpc,rest",
        help="comma-separated: grpc (qdrant-default), rest (qdrant-native-default)",
    )
    parser.add_argument(
        "--timeout", type=float, default=3600, help="seconds per API's run.py"
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="where the suite's copy, the dataset and server data go "
        "(default: a new temporary directory)",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the work directory (it is kept anyway when a run fails)",
    )
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench/results/vector-db-benchmark.json"
    )
    args = parser.parse_args(argv)
    apis = [api.strip() for api in args.apis.split(",") if api.strip()]
    unknown = [api for api in apis if api not in APIS]
    if unknown or not apis:
        parser.error(f"--apis: choose from {', '.join(APIS)}")
    command = report.repo_relative_text(
        shlex.join(
            [
                Path(sys.executable).name,
                "-m",
                "bench.vector_db_benchmark",
                *sys.argv[1:],
            ]
        )
    )
    started_at = report.utc_now()
    suite = args.suite.resolve()
    commit = suite_commit(suite)
    digest = suite_digest(suite)

    if args.work_dir is None:
        work = Path(tempfile.mkdtemp(prefix="vector-db-benchmark-"))
    else:
        work = args.work_dir.resolve()
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
    binary = work / "sagitta"
    shutil.copy2(args.binary, binary)

    t0 = time.perf_counter()
    dataset = subset(load_debian_minilm(args.dataset_path), args.n, args.queries)
    copy = work / "vector-db-benchmark"
    entry = prepare_copy(suite, copy, dataset, args.k)
    print(f"dataset: {entry} in {time.perf_counter() - t0:.1f} s", flush=True)

    outcomes = [run_api(api, args, binary, copy, work, entry["name"]) for api in apis]

    document, ok = assemble(
        command=command,
        started_at=started_at,
        dataset={
            **dataset.result_entry(min(args.k, dataset.n)),
            "path": report.repo_relative(args.dataset_path),
            "suite_name": entry["name"],
            "ground_truth": f"exact top-{min(args.k, dataset.n)} on float32 "
            "(re-normalized), cosine",
        },
        outcomes=outcomes,
        extra={
            "vector_db_benchmark": {
                "url": SUITE_URL,
                "commit": commit,
                "files_sha256": digest,
                "files_hashed": list(SUITE_FILES),
                "changes_in_copy": [
                    f"datasets/datasets.json: + {json.dumps(entry)}",
                    f"datasets/{entry['path']}: added",
                ],
                "python": venv_versions(args.python),
            },
            "server": {
                "binary": report.repo_relative(args.binary),
                "port": PORT,
                "grpc_port": PORT + 1,
                "note": "a fresh `sagitta serve` and data directory per API, "
                "SAGITTA_LOG=info",
            },
        },
    )
    if report.invalid(document):
        return 2
    report.write_json(document, args.out)
    print(summary_text(document))
    print(f"wrote {report.repo_relative(args.out)}")
    if ok and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work directory kept: {work}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
