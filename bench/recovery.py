"""Recovery after ``kill -9``: how long ``sagitta serve`` takes to be ready again, as a
function of the live points and of the crashes before it.

    python -m bench.recovery --points 10000,25000,50000 --crashes 10 \\
        --out bench/results/recovery.json
    python -m bench.recovery --points 2000 --crashes 2 --repeats 1 \\
        --out bench/results/recovery-small.json

Builds nothing: ``target/release/sagitta`` must exist (``cargo build --release -p
sagitta-cli``), or ``--binary`` names another build. One client (this process) talks to the
server over loopback HTTP; everything runs on this machine, the server's data in a fresh
temporary directory per case (``--workdir``).

**Time to ready** of one restart = from just before ``subprocess.Popen`` of ``sagitta serve``
to the moment ``GET /readyz`` has answered 200 *and* ``POST /collections/{c}/points/count``
(``exact: true``) has answered the expected count (every acknowledged point: writes use
``wait=true``, and a kill never lands while a request is in flight). The server opens the
database (loads segments, replays logs, checkpoints a seal that was cut short) before it
binds its port, and ``/readyz`` answers 200 as soon as it listens; so, instead of polling a
closed port, the client waits for the server's "listening on" line on stderr (a blocking
read, no CPU taken from the server), then polls ``/readyz`` and the count every 2 ms until
both hold. ``listening_seconds`` and ``readyz_seconds`` are the steps on the way.

Per restart the result also has, measured after the kill and before the restart (what
recovery has to read): ``log_bytes`` (sum of the ``wal-*.log`` files under the data
directory), ``data_bytes`` (all files), the file counts, and ``read_files_seconds``: the time
``cat`` takes to read every file of the data directory to ``/dev/null``. Nothing is dropped
from the page cache first (the files were just written, so both that read and the restart
read from memory): it is the floor "read the files once". After the restart: the
collection's ``segments_count`` and status, the same disk figures (a checkpoint may have
rewritten the logs), and a check search (``--check-queries`` single queries, limit 10,
default ef) whose recall@10 against the exact top 10 of the live points and latency are the
run's ``recall_at_k`` and ``latency_ms`` (first queries of a fresh process, while the
optimizer may still be re-indexing in the background). Before each kill: the collection's
status, ``optimizer_status`` and segment count, and the panics in that server's log (each
server process logs to its own file). Each case ends with ``final_state``: the last
server's collection once green (or after ``--green-timeout``) and its panics.

Cases (each a ``results`` entry, one ``runs`` entry per restart):

(a) ``live-points-N`` for each ``--points`` N, a fresh database: create the collection
    (1 shard, 384-d cosine), upload N points in batches of ``--batch`` (``wait=true``);
    ``kill -9`` right after the last acknowledgement (scenario ``kill9-after-last-ack``:
    seals may be running, the last buffer is in the log only), restart, wait until green
    (``green_seconds_after_ready``; null if not green within ``--green-timeout``); then
    ``--repeats`` times: ``kill -9`` the idle server (green, unless the wait timed out:
    ``status_before_kill`` says) and restart (scenario ``kill9-settled``: the cost of
    opening N live points).
(b) ``crashes-C`` on ``--crash-points`` points (default: the largest N), a fresh database:
    upload them, then ``--crashes`` times: wait a random 0..``--max-delay`` s (the
    optimizer seals and merges meanwhile), note the collection's status, ``kill -9``,
    restart and measure (scenario ``kill9-during-writes``), then write a burst of 1 to
    ``--max-burst`` batches (random) — each batch ``--new-fraction`` new points, the rest
    overwrites of random live points with their same vectors — before the next kill. So
    the live points stay near N while seals, merges and vacuums are cut short crash after
    crash: restart time should follow the live data, not the number of crashes. The random
    choices come from ``--seed``.

Vectors: debian-minilm (``--dataset-path``, real MiniLM embeddings, 384-d) when its
``base.npy`` is readable, else (or with ``--dataset synth``) the harness's seeded synthetic
generator at 384-d; rows are rounded to 6 decimals so the JSON the server parses holds
exactly the float32 values the exact ground truth is computed on. Id i always has row i.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from bench import datasets, report

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BINARY = REPO_ROOT / "target" / "release" / "sagitta"
# Without the dataset there (see datasets.DEBIAN_MINILM_PATH) the benchmark generates its
# vectors.
DEFAULT_DATASET_PATH = datasets.DEBIAN_MINILM_PATH
COLLECTION = "bench_recovery"
DIM = 384
K = 10
POLL_SECONDS = 0.002
READY_TIMEOUT = 600.0
LISTENING = re.compile(r"listening on (http://\S+?),")


def log(message: str) -> None:
    print(message, flush=True)


# ---------------------------------------------------------------------------------------------
# Data


def data_available(path: str) -> bool:
    base = Path(path) / "base.npy"
    return base.is_file() and os.access(base, os.R_OK)


def load_vectors(
    choice: str, path: str, rows: int, queries: int
) -> tuple[str, np.ndarray, np.ndarray, dict]:
    """(name, base, queries, source): float32 rows rounded to 6 decimals, ``rows`` of them
    at most (debian-minilm has 100,000), and unit-norm queries."""
    if choice == "auto":
        choice = "debian-minilm" if data_available(path) else "synth"
    if choice == "debian-minilm":
        dataset = datasets.load_debian_minilm(path)
        base = dataset.base[:rows]
        name, source = "debian-minilm", {"path": report.repo_relative(path)}
    else:
        dataset = datasets.synthetic(rows, max(queries, 1), DIM)
        base = dataset.base
        name, source = f"synth-{DIM}", dict(dataset.extra)
    if base.shape[1] != DIM:
        raise SystemExit(f"{name}: expected {DIM}-d rows, got {base.shape[1]}")
    base = np.round(base.astype(np.float64), 6).astype(np.float32)
    return name, base, datasets.normalize(dataset.queries[:queries]), source


def exact_top_k(unit_rows: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Row numbers of the exact top ``k`` by cosine (rows and queries unit norm)."""
    scores = queries @ unit_rows.T
    k = min(k, unit_rows.shape[0])
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1)
    return np.take_along_axis(top, order, axis=1)


# ---------------------------------------------------------------------------------------------
# HTTP


def request(
    method: str, url: str, body: dict | bytes | None = None, timeout: float = 120.0
) -> tuple[int, dict | None]:
    """(status, parsed JSON body or None)."""
    data = body if isinstance(body, bytes | None) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"} if data is not None else {}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, raw = error.code, error.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


# ---------------------------------------------------------------------------------------------
# The server


class Server:
    """``sagitta serve`` on a fresh port; its stderr is copied to ``log_path`` by a thread
    that also notes when the "listening on" line arrives."""

    def __init__(self, binary: Path, data_dir: Path, log_path: Path) -> None:
        # Port 0: the OS picks a free one, read back from the "listening on" line.
        self.command = [
            str(binary),
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            "0",
            # REST alone is measured: no gRPC listener to collide on 6334
            "--grpc-port",
            "0",
        ]
        self.log_path = log_path
        self.url = ""
        self.listening = threading.Event()
        self.listening_at: float | None = None
        self.spawned_at = time.perf_counter()
        self.process = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        self.reader = threading.Thread(target=self._copy_stderr, daemon=True)
        self.reader.start()

    def _copy_stderr(self) -> None:
        with open(self.log_path, "ab") as out:
            for line in self.process.stderr:
                if not self.listening.is_set():
                    found = LISTENING.search(line.decode(errors="replace"))
                    if found:
                        self.listening_at = time.perf_counter()
                        self.url = found.group(1)
                        self.listening.set()
                out.write(line)
                out.flush()

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-2000:]
        except OSError:
            return ""

    def panics(self) -> int:
        """Threads of this process that panicked ("thread '...' (id) panicked at" lines)."""
        try:
            return self.log_path.read_text(errors="replace").count(" panicked at ")
        except OSError:
            return 0

    def _check_alive(self) -> None:
        if self.process.poll() is not None:
            self.reader.join(5)
            raise SystemExit(
                f"sagitta serve exited with {self.process.returncode}: {self.log_tail()}"
            )

    def wait_ready(self, expected: int | None, timeout: float = READY_TIMEOUT) -> dict:
        """Seconds from spawn until listening, until ``/readyz`` answered 200 and until
        the collection counted ``expected`` points (None: no collection yet)."""
        deadline = self.spawned_at + timeout
        while not self.listening.wait(0.05):
            self._check_alive()
            if time.perf_counter() > deadline:
                raise SystemExit(f"sagitta serve not listening after {timeout:.0f} s")
        readyz_at = None
        last_count = None
        while True:
            try:
                if readyz_at is None:
                    if request("GET", self.url + "/readyz", timeout=5)[0] == 200:
                        readyz_at = time.perf_counter()
                        if expected is None:
                            break
                        continue
                else:
                    last_count = self.count()
                    if last_count == expected:
                        break
            except OSError:
                pass
            self._check_alive()
            if time.perf_counter() > deadline:
                raise SystemExit(
                    f"not ready after {timeout:.0f} s: readyz "
                    f"{'200' if readyz_at else 'not 200'}, count {last_count} of "
                    f"{expected} expected"
                )
            time.sleep(POLL_SECONDS)
        ready_at = time.perf_counter()
        return {
            "time_to_ready_seconds": round(ready_at - self.spawned_at, 4),
            "listening_seconds": round(self.listening_at - self.spawned_at, 4),
            "readyz_seconds": round(readyz_at - self.spawned_at, 4),
        }

    def count(self) -> int | None:
        status, body = request(
            "POST",
            f"{self.url}/collections/{COLLECTION}/points/count",
            {"exact": True},
            timeout=30,
        )
        return body["result"]["count"] if status == 200 else None

    def info(self) -> dict:
        status, body = request(
            "GET", f"{self.url}/collections/{COLLECTION}", timeout=30
        )
        if status != 200:
            raise SystemExit(f"collection info answered {status}: {body}")
        return body["result"]

    def wait_green(self, timeout: float) -> float | None:
        """Seconds until the collection is green; None if it was not after ``timeout``
        or turned red."""
        start = time.perf_counter()
        while (status := self.info()["status"]) != "green":
            # Red: a shard refuses writes until it is reopened; no green comes.
            if status == "red" or time.perf_counter() - start > timeout:
                return None
            time.sleep(0.05)
        return round(time.perf_counter() - start, 3)

    def kill9(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.reader.join(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(120)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.reader.join(10)


# ---------------------------------------------------------------------------------------------
# Disk


def disk_state(data_dir: Path) -> dict:
    """Bytes and files under ``data_dir``; ``wal-*.log`` files counted apart."""
    data_bytes = files = log_bytes = logs = 0
    for path in data_dir.rglob("*"):
        if not path.is_file():
            continue
        size = path.stat().st_size
        data_bytes += size
        files += 1
        if path.name.startswith("wal-") and path.name.endswith(".log"):
            log_bytes += size
            logs += 1
    return {
        "data_bytes": data_bytes,
        "files": files,
        "log_bytes": log_bytes,
        "log_files": logs,
    }


def read_files_seconds(data_dir: Path) -> float:
    """Wall time of ``cat`` reading every file under ``data_dir`` to /dev/null (page cache
    as it is: nothing dropped)."""
    paths = sorted(str(p) for p in data_dir.rglob("*") if p.is_file())
    start = time.perf_counter()
    if paths:
        subprocess.run(["cat", *paths], stdout=subprocess.DEVNULL, check=True)
    return round(time.perf_counter() - start, 4)


# ---------------------------------------------------------------------------------------------
# The client


class WriteRefused(Exception):
    """The server did not acknowledge an upsert."""


class Client:
    """Writes points whose id i always carries row i; ids are handed out from 0 up."""

    def __init__(self, base: np.ndarray, batch: int, rng: random.Random) -> None:
        self.base = base
        self.batch = batch
        self.rng = rng
        self.next_id = 0
        self.points_written = 0

    def upsert(self, url: str, ids: list[int]) -> None:
        vectors = self.base[ids].astype(np.float64).round(6).tolist()
        body = json.dumps(
            {
                "points": [
                    {"id": i, "vector": v} for i, v in zip(ids, vectors, strict=True)
                ]
            }
        ).encode()
        status, answer = request(
            "PUT", f"{url}/collections/{COLLECTION}/points?wait=true", body
        )
        if status != 200 or answer["result"]["status"] != "completed":
            raise WriteRefused(f"upsert answered {status}: {str(answer)[:500]}")
        self.points_written += len(ids)

    def create(self, url: str) -> None:
        status, answer = request(
            "PUT",
            f"{url}/collections/{COLLECTION}",
            {"vectors": {"size": DIM, "distance": "Cosine"}},
        )
        if status != 200:
            raise SystemExit(f"create collection answered {status}: {answer}")

    def fill(self, url: str, n: int) -> float:
        """New points until ``n`` are live; returns the seconds it took."""
        start = time.perf_counter()
        while self.next_id < n:
            stop = min(n, self.next_id + self.batch)
            self.upsert(url, list(range(self.next_id, stop)))
            self.next_id = stop
        return round(time.perf_counter() - start, 3)

    def burst(self, url: str, batches: int, new_fraction: float) -> dict:
        """``batches`` batches, each ``new_fraction`` new points (while rows last) and the
        rest overwrites of random live points."""
        new_total = 0
        for _ in range(batches):
            new = min(round(self.batch * new_fraction), len(self.base) - self.next_id)
            old = min(self.batch - new, self.next_id)
            ids = self.rng.sample(range(self.next_id), old)
            ids += range(self.next_id, self.next_id + new)
            self.upsert(url, ids)
            self.next_id += new
            new_total += new
        return {"batches": batches, "new_points": new_total}


# ---------------------------------------------------------------------------------------------
# One restart


class Restarter:
    def __init__(
        self,
        binary: Path,
        root: Path,
        base: np.ndarray,
        queries: np.ndarray,
    ) -> None:
        self.binary = binary
        self.data_dir = root / "data"
        self.root = root
        self.starts = 0
        self.unit_base = datasets.normalize(base)
        self.queries = queries
        self.server: Server | None = None

    def start(self) -> Server:
        self.starts += 1
        log_path = self.root / f"server-{self.starts}.log"
        self.server = Server(self.binary, self.data_dir, log_path)
        return self.server

    def state_before_kill(self) -> dict:
        """The running server's collection status, and the panics its log shows."""
        info = self.server.info()
        return {
            "status_before_kill": info["status"],
            "optimizer_status_before_kill": info["optimizer_status"],
            "segments_before_kill": info["segments_count"],
            "server_panics_before_kill": self.server.panics(),
        }

    def search_check(self, live: int) -> dict:
        """Single queries, limit K: recall@K against the exact top K of ids 0..live-1."""
        if len(self.queries) == 0:
            return {"latencies": [], "recall_at_k": 0.0, "wall_seconds": 0.0}
        gt = exact_top_k(self.unit_base[:live], self.queries, K)
        url = f"{self.server.url}/collections/{COLLECTION}/points/search"
        latencies, found = [], 0
        start = time.perf_counter()
        for query, truth in zip(self.queries, gt, strict=True):
            body = {"vector": query.astype(np.float64).tolist(), "limit": K}
            begin = time.perf_counter()
            status, answer = request("POST", url, body, timeout=60)
            latencies.append(time.perf_counter() - begin)
            if status != 200:
                raise SystemExit(f"search answered {status}: {str(answer)[:500]}")
            ids = {hit["id"] for hit in answer["result"]}
            found += len(ids & set(truth.tolist()))
        return {
            "latencies": latencies,
            "recall_at_k": found / (K * len(gt)),
            "wall_seconds": time.perf_counter() - start,
        }

    def crash_and_restart(self, expected: int, scenario: str, extra: dict) -> dict:
        """``kill -9`` the server, measure the files, restart it, time it to ready."""
        killed = self.state_before_kill()
        self.server.kill9()
        before = disk_state(self.data_dir)
        read_seconds = read_files_seconds(self.data_dir)
        server = self.start()
        ready = server.wait_ready(expected)
        info = server.info()
        after = disk_state(self.data_dir)
        check = self.search_check(expected)
        latencies = check["latencies"]
        run = {
            "scenario": scenario,
            "search_params": {"limit": K, "ef": None, "ef_knob": "server default"},
            "threads": 1,
            "concurrency": 1,
            "recall_at_k": round(check["recall_at_k"], 5),
            "qps": round(len(latencies) / check["wall_seconds"], 2)
            if latencies
            else 0.0,
            "latency_ms": percentiles_ms(latencies),
            "disk_bytes_read_per_query": None,
            **ready,
            "points": expected,
            "points_count_reported": info["points_count"],
            "segments": info["segments_count"],
            "status_at_ready": info["status"],
            "optimizer_status_at_ready": info["optimizer_status"],
            **killed,
            "log_bytes": before["log_bytes"],
            "log_files": before["log_files"],
            "data_bytes": before["data_bytes"],
            "files": before["files"],
            "read_files_seconds": read_seconds,
            "disk_after_ready": after,
            "check_queries": len(latencies),
            "latency_method": "single POST /points/search requests from Python "
            "(urllib, one connection each) right after ready",
            **extra,
        }
        log(
            f"  {scenario}: {expected:,} points, ready in "
            f"{ready['time_to_ready_seconds']:.3f} s (listening "
            f"{ready['listening_seconds']:.3f} s), {run['segments']} segments, "
            f"{before['log_files']} logs {before['log_bytes'] / 2**20:.1f} MiB, data "
            f"{before['data_bytes'] / 2**20:.1f} MiB, cat {read_seconds:.3f} s, "
            f"recall@{K} {run['recall_at_k']:.3f}; before the kill "
            f"{killed['status_before_kill']}, {killed['server_panics_before_kill']} panics"
        )
        return run


def percentiles_ms(seconds: list[float]) -> dict:
    if not seconds:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    p50, p95, p99 = np.percentile(np.asarray(seconds) * 1e3, [50, 95, 99])
    return {
        "p50": round(float(p50), 4),
        "p95": round(float(p95), 4),
        "p99": round(float(p99), 4),
    }


def index_params(case: str, batch: int) -> dict:
    return {
        "case": case,
        "shards": 1,
        "segments": "hnsw m=16 ef_construct=100 sq8 (fixed in the engine)",
        "optimizer": "engine defaults: seal at 20,000 points or 0.5 s idle, merge past "
        "max_segments = 8 per shard, vacuum at >= 1,000 and >= 20% deleted",
        "upload_batch": batch,
        "wait": True,
    }


def result_entry(
    case: str, batch: int, version: str, upload: float, runs: list
) -> dict:
    return {
        "engine": "sagitta-server",
        "engine_version": version,
        "index_params": index_params(case, batch),
        "build_seconds": upload,
        "upload_seconds": upload,
        "memory_bytes": None,
        "disk_bytes_written": None,
        "runs": runs,
    }


def final_state(restarter: Restarter, green_seconds: float | None) -> dict:
    """The last server's collection after the case (and its green wait)."""
    info = restarter.server.info()
    state = {
        "green_seconds": green_seconds,
        "status": info["status"],
        "optimizer_status": info["optimizer_status"],
        "points_count": info["points_count"],
        "indexed_vectors_count": info["indexed_vectors_count"],
        "segments": info["segments_count"],
        "server_panics": restarter.server.panics(),
        "disk": disk_state(restarter.data_dir),
    }
    log(
        f"  end: {state['status']} (green after {green_seconds} s), "
        f"optimizer {state['optimizer_status']}, {state['segments']} segments, "
        f"{state['indexed_vectors_count']:,} of {state['points_count']:,} indexed, "
        f"{state['server_panics']} panics in the last server's log"
    )
    return state


def case_live_points(
    args: argparse.Namespace,
    n: int,
    binary: Path,
    base: np.ndarray,
    queries: np.ndarray,
    version: str,
) -> dict:
    log(f"(a) {n:,} live points")
    root = Path(tempfile.mkdtemp(prefix=f"recovery-{n}-", dir=args.workdir))
    restarter = Restarter(binary, root, base, queries)
    client = Client(base, args.batch, random.Random(args.seed))
    try:
        server = restarter.start()
        server.wait_ready(None)
        client.create(server.url)
        upload = client.fill(server.url, n)
        log(f"  uploaded {n:,} points in {upload:.2f} s")
        runs = [restarter.crash_and_restart(n, "kill9-after-last-ack", {"crash": 1})]
        runs[-1]["green_seconds_after_ready"] = restarter.server.wait_green(
            args.green_timeout
        )
        for repeat in range(args.repeats):
            runs.append(
                restarter.crash_and_restart(n, "kill9-settled", {"crash": repeat + 2})
            )
            runs[-1]["green_seconds_after_ready"] = restarter.server.wait_green(
                args.green_timeout
            )
        final = final_state(restarter, runs[-1]["green_seconds_after_ready"])
        restarter.server.stop()
    finally:
        if restarter.server is not None and restarter.server.process.poll() is None:
            restarter.server.kill9()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    entry = result_entry(f"live-points-{n}", args.batch, version, upload, runs)
    entry["final_state"] = final
    return entry


def case_crashes(
    args: argparse.Namespace,
    n: int,
    binary: Path,
    base: np.ndarray,
    queries: np.ndarray,
    version: str,
) -> dict:
    log(f"(b) {args.crashes} crashes, {n:,} points to start with")
    root = Path(tempfile.mkdtemp(prefix="recovery-crashes-", dir=args.workdir))
    rng = random.Random(args.seed)
    restarter = Restarter(binary, root, base, queries)
    client = Client(base, args.batch, rng)
    runs = []
    aborted = None
    try:
        server = restarter.start()
        server.wait_ready(None)
        client.create(server.url)
        upload = client.fill(server.url, n)
        log(f"  uploaded {n:,} points in {upload:.2f} s")
        burst = {"batches": 0, "new_points": n, "fill": True}
        for crash in range(1, args.crashes + 1):
            delay = rng.uniform(0.0, args.max_delay)
            time.sleep(delay)
            extra = {
                "crash": crash,
                "writes_before_kill": burst,
                "delay_before_kill_seconds": round(delay, 3),
            }
            runs.append(
                restarter.crash_and_restart(
                    client.next_id, "kill9-during-writes", extra
                )
            )
            if crash < args.crashes:
                batches = rng.randint(1, args.max_burst)
                try:
                    burst = client.burst(
                        restarter.server.url, batches, args.new_fraction
                    )
                except WriteRefused as refused:
                    aborted = f"after restart {crash}: {refused}"
                    log(f"  ABORTED {aborted}")
                    break
        green = restarter.server.wait_green(args.green_timeout)
        final = final_state(restarter, green)
        restarter.server.stop()
    finally:
        if restarter.server is not None and restarter.server.process.poll() is None:
            restarter.server.kill9()
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    entry = result_entry(f"crashes-{args.crashes}", args.batch, version, upload, runs)
    entry["points_written"] = client.points_written
    entry["aborted"] = aborted
    entry["final_state"] = final
    return entry


# ---------------------------------------------------------------------------------------------
# Summary


def summarize(results: list[dict]) -> list[dict]:
    """One row per case and scenario: time to ready median / max and the disk figures."""
    rows = []
    for result in results:
        scenarios: dict[str, list[dict]] = {}
        for run in result["runs"]:
            scenarios.setdefault(run["scenario"], []).append(run)
        for scenario, runs in scenarios.items():
            ready = [run["time_to_ready_seconds"] for run in runs]
            read = [run["read_files_seconds"] for run in runs]
            rows.append(
                {
                    "case": result["index_params"]["case"],
                    "scenario": scenario,
                    "restarts": len(runs),
                    "points": [
                        min(r["points"] for r in runs),
                        max(r["points"] for r in runs),
                    ],
                    "time_to_ready_seconds": {
                        "median": round(float(np.median(ready)), 4),
                        "max": round(max(ready), 4),
                        "first": ready[0],
                        "last": ready[-1],
                    },
                    "segments_max": max(run["segments"] for run in runs),
                    "log_bytes_max": max(run["log_bytes"] for run in runs),
                    "log_files_max": max(run["log_files"] for run in runs),
                    "data_bytes_max": max(run["data_bytes"] for run in runs),
                    "read_files_seconds_median": round(float(np.median(read)), 4),
                    "status_before_kill": {
                        status: sum(r["status_before_kill"] == status for r in runs)
                        for status in sorted({r["status_before_kill"] for r in runs})
                    },
                    "server_panics_before_kill_max": max(
                        r["server_panics_before_kill"] for r in runs
                    ),
                    "ready_over_read_files_median": round(
                        float(np.median(np.asarray(ready) / np.maximum(read, 1e-6))), 2
                    ),
                }
            )
    return rows


def format_summary(rows: list[dict]) -> str:
    header = (
        f"{'case':<20} {'scenario':<22} {'n':>3} {'points':>15} {'ready med/max s':>16} "
        f"{'seg':>4} {'logs MiB':>9} {'data MiB':>9} {'cat s':>7}"
    )
    lines = [header]
    for row in rows:
        lo, hi = row["points"]
        points = f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"
        ready = row["time_to_ready_seconds"]
        lines.append(
            f"{row['case']:<20} {row['scenario']:<22} {row['restarts']:>3} {points:>15} "
            f"{ready['median']:>7.3f}/{ready['max']:<8.3f} {row['segments_max']:>4} "
            f"{row['log_bytes_max'] / 2**20:>9.1f} {row['data_bytes_max'] / 2**20:>9.1f} "
            f"{row['read_files_seconds_median']:>7.3f}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Command line


def parse_points(text: str) -> list[int]:
    points = [int(x) for x in text.split(",") if x.strip()]
    if not points or min(points) <= 0:
        raise SystemExit("--points: positive counts, comma separated")
    return points


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.recovery", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--points", default="10000,25000,50000", help="case (a) sizes")
    parser.add_argument(
        "--repeats", type=int, default=5, help="settled restarts per size"
    )
    parser.add_argument(
        "--crashes", type=int, default=10, help="case (b) crashes (0: skip)"
    )
    parser.add_argument(
        "--crash-points", type=int, help="case (b) starting points (largest --points)"
    )
    parser.add_argument(
        "--max-burst", type=int, default=40, help="batches between kills"
    )
    parser.add_argument("--new-fraction", type=float, default=0.02)
    parser.add_argument(
        "--max-delay", type=float, default=2.0, help="seconds before a kill"
    )
    parser.add_argument(
        "--green-timeout",
        type=float,
        default=120.0,
        help="longest wait for a green collection (then recorded as null)",
    )
    parser.add_argument("--batch", type=int, default=1000, help="points per upsert")
    parser.add_argument(
        "--check-queries", type=int, default=50, help="searches after each restart"
    )
    parser.add_argument(
        "--dataset", default="auto", choices=["auto", "debian-minilm", "synth"]
    )
    parser.add_argument("--dataset-path", default=DEFAULT_DATASET_PATH)
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--binary", default=str(DEFAULT_BINARY))
    parser.add_argument("--workdir", help="where the data directories go (a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--note", help="free text kept in the result (e.g. the build)")
    parser.add_argument("--out", default="bench/results/recovery.json")
    return parser


def binary_version(binary: Path) -> str:
    try:
        out = subprocess.run(
            [str(binary), "--version"],
            check=False,
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return out.split()[-1] if out else "unknown"


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    points = parse_points(args.points)
    binary = Path(args.binary)
    if not binary.is_file() or not os.access(binary, os.X_OK):
        raise SystemExit(
            f"{binary} not found: build it first (cargo build --release -p sagitta-cli)"
        )
    crash_points = args.crash_points or max(points)
    started_at = report.utc_now()
    new_rows = args.crashes * args.max_burst * round(args.batch * args.new_fraction)
    rows = max(max(points), crash_points + new_rows)
    name, base, queries, source = load_vectors(
        args.dataset, args.dataset_path, rows, args.check_queries
    )
    version = binary_version(binary)
    log(f"{name}: {len(base):,} rows x {DIM}, {len(queries)} check queries; {binary}")
    if args.workdir:
        Path(args.workdir).mkdir(parents=True, exist_ok=True)
    results = [
        case_live_points(args, n, binary, base, queries, version) for n in points
    ]
    if args.crashes > 0:
        if crash_points > len(base):
            raise SystemExit(f"--crash-points {crash_points} > {len(base)} rows")
        results.append(case_crashes(args, crash_points, binary, base, queries, version))
    summary = summarize(results)
    document = report.build_document(
        suite="recovery-kill9",
        command="python -m bench.recovery " + shlex.join(argv),
        started_at=started_at,
        dataset={
            "name": name,
            "n": len(base),
            "dim": DIM,
            "metric": "cosine",
            "queries": len(queries),
            "k": K,
            "source": source,
            "rounding": "rows rounded to 6 decimals (what the server parses)",
        },
        results=results,
        extra={
            "summary": {
                "recovery": summary,
                "note": "per case and scenario: time to ready median / max over its "
                "restarts, and the largest segment count, log and data bytes seen",
            },
            "binary": report.repo_relative(binary),
            "binary_version": version,
            "note": args.note,
            "time_to_ready": "spawn of `sagitta serve` until GET /readyz answered 200 and "
            "POST /points/count (exact) answered the expected count",
            "read_files": "cat of every file under the data directory to /dev/null, after "
            "the kill and before the restart; page cache not dropped (files just written)",
            "load_average_at_end": list(os.getloadavg()),
        },
    )
    if report.invalid(document):
        return 2
    log(format_summary(summary))
    out = report.write_json(document, args.out)
    log(f"wrote {out}")
    aborted = [r["aborted"] for r in results if r.get("aborted")]
    if aborted:
        log("ABORTED: " + "; ".join(aborted))
    return 1 if aborted else 0


if __name__ == "__main__":
    sys.exit(main())
