"""VectorDBBench 2.0's ``qdrant_local`` client (or its ``qdrant_cloud`` client, over gRPC with
an API key), unchanged, against ``sagitta serve``.

The issue's acceptance run: VectorDBBench (PyPI ``vectordb-bench``, pinned in
``scripts/vectordbbench.sh``) with its ``qdrantlocal`` CLI command on a custom performance
case built from debian-minilm (100,000 × 384 cosine, 1,000 queries), m 16, ef_construct
100, hnsw_ef 64, k 10, concurrency 1/8/32. Its client's load flow is, per insert batch of
100 points: PATCH the collection with ``indexing_threshold=0``, upsert the batch with
``wait=true``, PATCH with ``indexing_threshold=100``; then it polls ``GET
/collections/{name}`` (sleeping 5 s after every poll, so "optimize" is never under 5 s)
until the status is green. Searches are ``POST /points/query`` with ``params {"exact":
false, "hnsw_ef": 64}`` and ``limit`` k.

``--client qdrantcloud`` runs VectorDBBench's ``qdrantcloud`` command instead, with ``--url``
and ``--api-key``: the server is started with that key (``SAGITTA_API_KEY``; a random one per
run unless ``--api-key`` is given), and the client, given a key, builds its ``QdrantClient``
with ``prefer_grpc=True`` (``QdrantConfig.to_dict`` in ``backend/clients/qdrant_cloud/config.py``),
so everything it sends goes over gRPC on port 6334: ``delete_collection``, ``create_collection``
(``QdrantCloudCollection``, ``hnsw_config {m: 16, payload_m: 16}``, ``default_segment_number``
0, no ``ef_construct``, no quantization), upserts of each insert batch of 100 with ``wait=true``
and a payload ``{"pk": id}``, ``get_collection`` every 5 s until green, and ``query_points``
with ``hnsw_ef`` 100 (its ``QdrantIndexConfig`` default: the ``qdrantcloud`` command has no
``--m``, ``--ef-construct`` or ``--hnsw-ef``). The harness's own REST calls (watcher, direct
recall, metrics) send the key too. The recorded JSON names the client and the API.

Steps:

1. convert the dataset into VectorDBBench's custom-dataset layout (``train.parquet``: id,
   emb; ``test.parquet``: id, emb; ``neighbors.parquet``: id, neighbors_id with the exact
   top-100 on the float32 vectors the engines see) in a directory outside the repository;
2. start ``sagitta serve`` (a copy of the binary, so a rebuild cannot swap it mid-run) on
   a fresh data directory, port 6333, logging at info;
3. run ``vectordbbench qdrantlocal`` with its results, log and dataset directories pointed
   at the work directory, while a watcher polls the collection every 0.5 s until all
   points are in and it is green (the server-side "searchable" and "green" times, which
   VectorDBBench's 5 s poll rounds up);
4. optionally re-measure recall@k against the server directly (same queries, same search
   params, and ``exact: true`` as a check of the ground truth);
5. write one bench-schema JSON: load (insert + optimize), recall, nDCG, QPS and latency per
   concurrency, the collection's final segment layout, request counts from ``/metrics``,
   the optimizer's seals/merges counted from the server's log, and the log's tail.

    .venv-vdbbench/bin/python -m bench.vdbbench --out bench/results/vectordbbench.json
    .venv-vdbbench/bin/python -m bench.vdbbench --client qdrantcloud \\
        --out bench/results/vectordbbench-cloud.json

``scripts/vectordbbench.sh`` makes the virtualenv and runs this.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from bench import report
from bench.compat import start_server
from bench.datasets import DEBIAN_MINILM_PATH, Dataset, load_debian_minilm

REPO = Path(__file__).resolve().parents[1]
SUITE = "vectordbbench-qdrant-local"
ENGINE = "sagitta-server"
COLLECTION = "QdrantLocalCollection"  # the qdrant_local client's hard-coded name
# VectorDBBench client -> what it is in the record: the suite name, the collection name it
# hard-codes, the API it speaks to the server and its index settings (None: not sent)
CLIENTS: dict[str, dict] = {
    "qdrantlocal": {
        "suite": SUITE,
        "collection": COLLECTION,
        "api": "rest",
        "transport": "REST (qdrant_local: QdrantClient(url=...), port 6333)",
        "defaults": {"m": 16, "ef_construct": 100, "hnsw_ef": 64},
    },
    "qdrantcloud": {
        "suite": "vectordbbench-qdrant-cloud",
        "collection": "QdrantCloudCollection",
        "api": "grpc",
        "transport": "gRPC (qdrant_cloud with an API key: QdrantClient(url=..., "
        "api_key=..., prefer_grpc=True), port 6334)",
        # fixed by its QdrantIndexConfig(); ef_construct is not sent (server default)
        "defaults": {"m": 16, "ef_construct": None, "hnsw_ef": 100},
    },
}
GT_WIDTH = 100  # neighbours per query in neighbors.parquet (VectorDBBench's default k)
OPTIMIZER_LINE = re.compile(
    r"sagitta::optimizer: collection `[^`]*` shard \d+: "
    r"(sealed the write buffer|merged segments|vacuumed segment)"
)


# ---------------------------------------------------------------------------------------------
# Dataset conversion


def convert(dataset: Dataset, out_dir: Path, gt_width: int = GT_WIDTH) -> dict:
    """Writes ``dataset`` as a VectorDBBench custom dataset (``CustomDataset`` in
    ``vectordb_bench/backend/dataset.py``: one ``train.parquet`` with ``id``/``emb``,
    ``test.parquet`` with ``id``/``emb``, ``neighbors.parquet`` with ``id``/``neighbors_id``,
    the query ids in the same order as ``test.parquet``). Ids are row numbers; vectors are
    float32 lists; the ground truth is exact on those vectors (``Dataset.ensure_gt``).
    Returns what the CLI's ``--custom-dataset-*`` options need."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    width = min(gt_width, dataset.n)
    gt = dataset.ensure_gt(width)[:, :width]
    out_dir.mkdir(parents=True, exist_ok=True)

    def rows(matrix: np.ndarray, dtype, arrow_type) -> pa.ListArray:
        """Each row of ``matrix`` as one list value."""
        matrix = np.ascontiguousarray(matrix, dtype=dtype)
        offsets = np.arange(0, matrix.size + 1, matrix.shape[1])
        flat = pa.array(matrix.reshape(-1), type=arrow_type)
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), flat)

    def vectors(ids: np.ndarray, matrix: np.ndarray) -> pa.Table:
        emb = rows(matrix, np.float32, pa.float32())
        return pa.table({"id": pa.array(ids, type=pa.int64()), "emb": emb})

    def neighbours(ids: np.ndarray, matrix: np.ndarray) -> pa.Table:
        lists = rows(matrix, np.int64, pa.int64())
        return pa.table({"id": pa.array(ids, type=pa.int64()), "neighbors_id": lists})

    query_ids = np.arange(dataset.nq, dtype=np.int64)
    for name, table in (
        ("train.parquet", vectors(np.arange(dataset.n, dtype=np.int64), dataset.base)),
        ("test.parquet", vectors(query_ids, dataset.queries)),
        ("neighbors.parquet", neighbours(query_ids, gt)),
    ):
        tmp = out_dir / (name + ".tmp")
        pq.write_table(table, tmp)
        os.replace(tmp, out_dir / name)
    return {
        "dir": str(out_dir),
        "size": dataset.n,
        "dim": dataset.dim,
        "queries": dataset.nq,
        "metric_type": {"cosine": "COSINE", "dot": "IP", "l2": "L2"}[dataset.metric],
        "file_count": 1,
        "gt_width": width,
    }


# ---------------------------------------------------------------------------------------------
# Server


def http_json(url: str, body: dict | None = None, timeout: float = 30) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        headers={"content-type": "application/json"} if data else {},
        method="POST" if data else "GET",
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def http_text(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()


class Watcher(threading.Thread):
    """Polls the collection every ``interval`` s from the first time it exists until all
    ``n`` points are in and it is green; records those moments (monotonic seconds)."""

    def __init__(
        self,
        base_url: str,
        n: int,
        interval: float = 0.5,
        collection: str = COLLECTION,
    ):
        super().__init__(daemon=True)
        self.url = f"{base_url}/collections/{collection}"
        self.n = n
        self.interval = interval
        self.created: float | None = None
        self.all_points: float | None = None
        self.green: float | None = None
        self.statuses: list[tuple[float, str, int, int | None]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                info = http_json(self.url, timeout=5)["result"]
            except (OSError, ValueError, KeyError):
                info = None
            now = time.monotonic()
            if info is not None:
                if self.created is None:
                    self.created = now
                points = info.get("points_count") or 0
                status = info.get("status", "")
                if not self.statuses or self.statuses[-1][1:3] != (status, points):
                    self.statuses.append(
                        (now, status, points, info.get("segments_count"))
                    )
                if points >= self.n and self.all_points is None:
                    self.all_points = now
                if points >= self.n and status == "green":
                    self.green = now
                    return
            self.stop.wait(self.interval)


def optimizer_counts(log_text: str) -> dict:
    counts = {"seals": 0, "merges": 0, "vacuums": 0}
    for match in OPTIMIZER_LINE.finditer(log_text):
        kind = match.group(1)
        key = (
            "seals"
            if kind.startswith("sealed")
            else "merges"
            if kind.startswith("merged")
            else "vacuums"
        )
        counts[key] += 1
    return counts


def request_counts(metrics_text: str) -> list[str]:
    """Prometheus lines counting requests per route (the ones VectorDBBench sent)."""
    return [
        line
        for line in metrics_text.splitlines()
        if line.startswith("sagitta_http_requests_total{")
        or (
            "requests" in line
            and not line.startswith("#")
            and "bucket" not in line
            and "route=" in line
        )
    ]


# ---------------------------------------------------------------------------------------------
# Direct recall check


def direct_recall(
    base_url: str,
    dataset: Dataset,
    k: int,
    search_params: dict,
    collection: str = COLLECTION,
) -> dict:
    """recall@k of ``POST /points/query`` with ``search_params`` over all queries, against
    the same exact ground truth VectorDBBench read."""
    gt = dataset.ensure_gt(k)[:, :k]
    found = np.full((dataset.nq, k), -1, dtype=np.int64)
    started = time.perf_counter()
    for i, query in enumerate(dataset.queries):
        points = http_json(
            f"{base_url}/collections/{collection}/points/query",
            {"query": query.tolist(), "limit": k, "params": search_params},
        )["result"]["points"]
        ids = [int(point["id"]) for point in points][:k]
        found[i, : len(ids)] = ids
    seconds = time.perf_counter() - started
    hits = sum(
        len(set(found[i]) & set(gt[i])) for i in range(dataset.nq)
    )  # ids < 0 never match
    return {
        "search_params": search_params,
        "recall_at_k": round(hits / (dataset.nq * k), 4),
        "queries": dataset.nq,
        "serial_seconds": round(seconds, 2),
    }


# ---------------------------------------------------------------------------------------------
# VectorDBBench run and result


def index_settings(client: str, m, ef_construct, hnsw_ef) -> dict:
    """m, ef_construct and hnsw_ef for ``client``: the given ones (None: its default). The
    ``qdrantcloud`` command cannot set them, so asking it for other values than it sends is
    an error (``ValueError``)."""
    defaults = CLIENTS[client]["defaults"]
    given = {"m": m, "ef_construct": ef_construct, "hnsw_ef": hnsw_ef}
    if client == "qdrantcloud":
        differ = [
            f"--{key.replace('_', '-')}"
            for key, value in given.items()
            if value is not None and value != defaults[key]
        ]
        if differ:
            raise ValueError(
                f"vectordbbench qdrantcloud has no option for {', '.join(differ)}: it "
                f"sends m {defaults['m']}, hnsw_ef {defaults['hnsw_ef']} and no "
                "ef_construct"
            )
        return dict(defaults)
    return {
        key: defaults[key] if value is None else value for key, value in given.items()
    }


def vdbbench_command(
    args, custom: dict, base_url: str, api_key: str | None = None
) -> list[str]:
    """The ``vectordbbench`` command line for ``args.client`` (``qdrantlocal``: with the
    index settings; ``qdrantcloud``: with ``--api-key`` and no index settings, as it has
    no options for them)."""
    if args.client == "qdrantcloud":
        if not api_key:
            raise ValueError("the qdrantcloud client needs an API key to speak gRPC")
        client_options = ["qdrantcloud", *("--url", base_url), *("--api-key", api_key)]
    else:
        client_options = [
            "qdrantlocal",
            *("--url", base_url),
            *("--m", str(args.m)),
            *("--ef-construct", str(args.ef_construct)),
            *("--hnsw-ef", str(args.hnsw_ef)),
        ]
    return [
        str(args.vdbbench),
        *client_options,
        *("--case-type", "PerformanceCustomDataset"),
        *("--custom-case-name", "debian-minilm"),
        *("--custom-dataset-name", "debian-minilm"),
        *("--custom-dataset-dir", custom["dir"]),
        *("--custom-dataset-size", str(custom["size"])),
        *("--custom-dataset-dim", str(custom["dim"])),
        *("--custom-dataset-metric-type", custom["metric_type"]),
        *("--custom-dataset-file-count", "1"),
        "--skip-custom-dataset-use-shuffled",
        "--custom-dataset-with-gt",
        *("--k", str(args.k)),
        *("--num-concurrency", args.concurrency),
        *("--concurrency-duration", str(args.duration)),
        *("--task-label", "sagitta"),
        *("--db-label", "sagitta-server"),
    ]


def redacted(cmd: list[str]) -> list[str]:
    """``cmd`` with the value of ``--api-key`` replaced (the key is not recorded)."""
    return [
        "<api-key>" if i > 0 and cmd[i - 1] == "--api-key" else part
        for i, part in enumerate(cmd)
    ]


def send_api_key(api_key: str) -> None:
    """Every ``urllib`` request of this process from now on carries ``api-key`` (the
    readiness poll of ``bench.compat.start_server`` included)."""
    opener = urllib.request.build_opener()
    opener.addheaders = [*opener.addheaders, ("api-key", api_key)]
    urllib.request.install_opener(opener)


def unauthenticated_status(url: str) -> int | None:
    """The HTTP status of ``GET url`` without the key (401 when the server enforces it)."""
    opener = urllib.request.build_opener()  # a fresh one: no api-key header
    try:
        with opener.open(url, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def client_config(python: Path, api_key: str, cwd: Path, env: dict) -> dict | None:
    """What VectorDBBench's qdrant_cloud ``QdrantConfig`` hands ``QdrantClient`` given the
    key (its ``to_dict()``, the key left out), asked of ``python`` (the one that runs
    VectorDBBench) in ``cwd`` with ``env`` (importing vectordb_bench opens its log file
    there); None when that fails."""
    script = (
        "import json, os\n"
        "from pydantic import SecretStr\n"
        "from vectordb_bench.backend.clients.qdrant_cloud.config import QdrantConfig\n"
        "config = QdrantConfig(url=SecretStr('http://127.0.0.1:6333'),\n"
        "    api_key=SecretStr(os.environ['VDB_API_KEY'])).to_dict()\n"
        "config.pop('api_key', None)\n"
        "print(json.dumps(config))\n"
    )
    try:
        completed = subprocess.run(
            [str(python), "-c", script],
            cwd=cwd,
            env={**env, "VDB_API_KEY": api_key},
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(completed.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.CalledProcessError, ValueError, IndexError):
        return None


def find_result(results_dir: Path) -> dict:
    files = sorted(results_dir.rglob("result_*.json"), key=lambda p: p.stat().st_mtime)
    if not files:
        raise SystemExit(f"VectorDBBench wrote no result under {results_dir}")
    document = json.loads(files[-1].read_text())
    return {"file": str(files[-1]), "document": document}


def metrics_of(result_document: dict) -> tuple[dict, dict]:
    cases = result_document.get("results") or []
    if not cases:
        raise SystemExit("VectorDBBench's result holds no case")
    case = cases[-1]
    return case["metrics"], case


def tail(path: Path, lines: int) -> list[str]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    return text.splitlines()[-lines:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--dataset-path", default=DEBIAN_MINILM_PATH)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "vdbbench-data" / "debian-minilm",
        help="where the VectorDBBench custom dataset is written (outside the repository)",
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "vdbbench-run",
        help="server data, VectorDBBench results and logs (emptied first)",
    )
    parser.add_argument("--binary", type=Path, default=REPO / "target/release/sagitta")
    parser.add_argument(
        "--vdbbench", type=Path, default=REPO / ".venv-vdbbench/bin/vectordbbench"
    )
    parser.add_argument("--port", type=int, default=6333)
    parser.add_argument(
        "--client",
        choices=tuple(CLIENTS),
        default="qdrantlocal",
        help="VectorDBBench's client: qdrantlocal (REST) or qdrantcloud (gRPC, with an "
        "API key)",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="with --client qdrantcloud: the server's key (default: a random one per run; "
        "never recorded)",
    )
    parser.add_argument(
        "--m", type=int, default=None, help="qdrantlocal: 16; qdrantcloud: 16, fixed"
    )
    parser.add_argument(
        "--ef-construct",
        type=int,
        default=None,
        help="qdrantlocal: 100; qdrantcloud: not sent (the server's default)",
    )
    parser.add_argument(
        "--hnsw-ef",
        type=int,
        default=None,
        help="qdrantlocal: 64; qdrantcloud: 100, fixed",
    )
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument(
        "--duration", type=int, default=30, help="seconds per concurrency level"
    )
    parser.add_argument(
        "--no-direct-recall",
        action="store_true",
        help="skip re-measuring recall against the server directly",
    )
    parser.add_argument(
        "--direct-ef",
        default="",
        help="more hnsw_ef values (comma-separated) for the direct recall check",
    )
    parser.add_argument("--convert-only", action="store_true")
    parser.add_argument(
        "--out", type=Path, default=REPO / "bench/results/vectordbbench.json"
    )
    args = parser.parse_args(argv)
    try:
        settings = index_settings(args.client, args.m, args.ef_construct, args.hnsw_ef)
    except ValueError as error:
        parser.error(str(error))
    args.m, args.ef_construct, args.hnsw_ef = (
        settings["m"],
        settings["ef_construct"],
        settings["hnsw_ef"],
    )
    client = CLIENTS[args.client]
    collection = client["collection"]
    api_key = None
    if args.client == "qdrantcloud":
        api_key = args.api_key or secrets.token_hex(16)
    elif args.api_key:
        parser.error("--api-key is for --client qdrantcloud")
    command = shlex.join(
        redacted([Path(sys.executable).name, "-m", "bench.vdbbench", *sys.argv[1:]])
    )
    started_at = report.utc_now()

    dataset = load_debian_minilm(args.dataset_path)
    t0 = time.perf_counter()
    custom = convert(dataset, args.data_dir.resolve())
    print(f"dataset: {custom} in {time.perf_counter() - t0:.1f} s", flush=True)
    if args.convert_only:
        return 0

    work = args.work_dir.resolve()
    if work.exists():
        shutil.rmtree(work)
    (work / "results").mkdir(parents=True)
    binary = work / "sagitta"
    shutil.copy2(args.binary, binary)
    server_log = work / "server.log"
    vdb_log = work / "vectordb_bench.log"
    base_url = f"http://127.0.0.1:{args.port}"
    server_env = {"SAGITTA_LOG": "info"}
    if api_key:
        server_env["SAGITTA_API_KEY"] = api_key
        send_api_key(api_key)  # the harness's own requests (readiness poll included)
    server = start_server(binary, work / "data", server_log, args.port, server_env)
    try:
        telemetry = http_json(f"{base_url}/telemetry")["result"]
        version = str(telemetry.get("app", {}).get("version", "unknown"))
        # with a key: proof that the server refuses requests without it
        without_key = (
            unauthenticated_status(f"{base_url}/collections") if api_key else None
        )
        watcher = Watcher(base_url, dataset.n, collection=collection)
        watcher.start()
        env = dict(os.environ)
        env.update(
            {
                "RESULTS_LOCAL_DIR": str(work / "results"),
                "LOG_FILE": str(vdb_log),
                "DATASET_LOCAL_DIR": str(work / "vdb-dataset-cache"),
            }
        )
        client_settings = (
            client_config(args.vdbbench.parent / "python", api_key, work, env)
            if api_key
            else None
        )
        cmd = vdbbench_command(args, custom, base_url, api_key)
        print("+ " + shlex.join(redacted(cmd)), flush=True)
        vdb_started = time.monotonic()
        completed = subprocess.run(
            cmd,
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=open(work / "vectordbbench.out", "wb"),  # noqa: SIM115
            stderr=subprocess.STDOUT,
            check=False,
        )
        watcher.stop.set()
        if completed.returncode != 0:
            print("\n".join(tail(work / "vectordbbench.out", 30)), file=sys.stderr)
            raise SystemExit(f"vectordbbench exited {completed.returncode}")
        found = find_result(work / "results")
        metrics, case = metrics_of(found["document"])

        info = http_json(f"{base_url}/collections/{collection}")["result"]
        metrics_text = http_text(f"{base_url}/metrics")
        memory = report.process_rss_bytes(server.pid)
        search_params = {"exact": False, "hnsw_ef": args.hnsw_ef}
        direct = None
        if not args.no_direct_recall:
            extra_ef = [int(ef) for ef in args.direct_ef.split(",") if ef.strip()]
            direct = [
                direct_recall(base_url, dataset, args.k, params, collection)
                for params in (
                    search_params,
                    *({"exact": False, "hnsw_ef": ef} for ef in extra_ef),
                    {"exact": True},
                )
            ]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()

    log_text = server_log.read_text(errors="replace")
    written = re.search(
        r"^sagitta_storage_written_bytes_total\s+(\d+)", metrics_text, re.MULTILINE
    )
    runs = []
    for i, concurrency in enumerate(metrics.get("conc_num_list") or []):
        runs.append(
            {
                "scenario": "read-only",
                "search_params": search_params,
                "threads": concurrency,
                "concurrency": concurrency,
                # VectorDBBench measures recall in its serial pass (one client, every
                # query once); the concurrent passes only count queries and time them.
                "recall_at_k": metrics["recall"],
                "qps": metrics["conc_qps_list"][i],
                "latency_ms": {
                    "p50": round(metrics["conc_latency_p50_list"][i] * 1000, 3),
                    "p95": round(metrics["conc_latency_p95_list"][i] * 1000, 3),
                    "p99": round(metrics["conc_latency_p99_list"][i] * 1000, 3),
                    "avg": round(metrics["conc_latency_avg_list"][i] * 1000, 3),
                },
                "disk_bytes_read_per_query": None,
            }
        )

    def since(moment: float | None) -> float | None:
        return None if moment is None else round(moment - vdb_started, 2)

    hnsw_config = info.get("config", {}).get("hnsw_config") or {}
    result = {
        "engine": ENGINE,
        "engine_version": version,
        "client": f"vectordbbench {args.client}",
        "api": client["api"],
        "index_params": {
            "m": args.m,
            # qdrantcloud sends none: the collection's, as the server reports it
            "ef_construct": args.ef_construct or hnsw_config.get("ef_construct"),
            # neither client asks for quantization: what the server reports it uses
            "quantization": info.get("config", {}).get("quantization_config"),
        },
        "build_seconds": metrics["load_duration"],
        "upload_seconds": metrics["insert_duration"],
        "insert_seconds": metrics["insert_duration"],
        "optimize_seconds": metrics["optimize_duration"],
        "memory_bytes": memory,
        "disk_bytes_written": int(written.group(1)) if written else None,
        "recall_at_k": metrics["recall"],
        "ndcg_at_k": metrics.get("ndcg"),
        "serial_latency_ms": {
            key: round(metrics[f"serial_latency_{key}"] * 1000, 3)
            for key in ("p50", "p95", "p99")
            if metrics.get(f"serial_latency_{key}") is not None
        },
        "runs": runs,
    }
    document = report.build_document(
        suite=client["suite"],
        command=command,
        started_at=started_at,
        dataset={
            "name": "debian-minilm",
            "n": dataset.n,
            "dim": dataset.dim,
            "metric": dataset.metric,
            "queries": dataset.nq,
            "k": args.k,
            "path": report.repo_relative(args.dataset_path),
            "vectordbbench_dir": custom["dir"],
            "ground_truth": f"exact top-{custom['gt_width']} on float32 (re-normalized)",
        },
        results=[result],
        extra={
            "vectordbbench": {
                "version": vdbbench_version(args.vdbbench),
                "client": args.client,
                "api": client["api"],
                "transport": client["transport"],
                "client_config": client_settings,
                "api_key": (
                    {
                        "server": "SAGITTA_API_KEY (random per run, not recorded)"
                        if not args.api_key
                        else "SAGITTA_API_KEY (given, not recorded)",
                        "rest_status_without_key": without_key,
                    }
                    if api_key
                    else None
                ),
                "command": report.repo_relative_text(shlex.join(redacted(cmd))),
                "concurrency_duration_s": args.duration,
                "result_file": found["file"],
                "metrics": metrics,
                "task_config": case.get("task_config"),
                "log_tail": tail(vdb_log, 25),
            },
            "server": {
                "binary": report.repo_relative(args.binary),
                "collection_name": collection,
                "collection": info,
                "segments_count": info.get("segments_count"),
                "optimizer_log": optimizer_counts(log_text),
                "log_tail": log_text.splitlines()[-40:],
                "requests": request_counts(metrics_text),
                "watcher": {
                    "note": "seconds since vectordbbench started, polled every 0.5 s",
                    "collection_created": since(watcher.created),
                    "all_points_in": since(watcher.all_points),
                    "green": since(watcher.green),
                    "server_side_to_green": (
                        None
                        if watcher.green is None or watcher.all_points is None
                        else round(watcher.green - watcher.all_points, 2)
                    ),
                    "statuses": [
                        [since(t), status, points, segments]
                        for t, status, points, segments in watcher.statuses[-20:]
                    ],
                },
            },
            "direct_recall": direct,
        },
    )
    if report.invalid(document):
        return 2
    report.write_json(document, args.out)
    print(summary_text(document))
    print(f"wrote {report.repo_relative(args.out)}")
    return 0


def vdbbench_version(executable: Path) -> str:
    python = executable.parent / "python"
    try:
        return subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.metadata as m; print(m.version('vectordb-bench'))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def summary_text(document: dict) -> str:
    result = document["results"][0]
    server = document["server"]
    lines = [
        f"load {result['build_seconds']} s (insert {result['insert_seconds']} s + "
        f"optimize {result['optimize_seconds']} s); server-side to green "
        f"{server['watcher']['server_side_to_green']} s",
        f"recall@{document['dataset']['k']} {result['recall_at_k']}, "
        f"ndcg {result['ndcg_at_k']}, serial p99 "
        f"{result['serial_latency_ms'].get('p99')} ms",
    ]
    lines += [
        f"concurrency {run['concurrency']:>3}: {run['qps']:8.1f} QPS, "
        f"p99 {run['latency_ms']['p99']} ms"
        for run in result["runs"]
    ]
    lines.append(
        f"segments {server['segments_count']}, optimizer {server['optimizer_log']}"
    )
    for check in document.get("direct_recall") or []:
        lines.append(f"direct {check['search_params']}: recall {check['recall_at_k']}")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
