"""Server load: SagittaDB's server driven by ``sagitta-load`` (Rust, tokio; one keep-alive
connection per client) over REST (hyper, HTTP/1.1) and/or gRPC (``--api rest,grpc``: tonic,
HTTP/2), like qdrant's vector-db-benchmark.

    python -m bench.load --dataset debian-minilm --concurrency 1,64,1024 --queries 20000 \\
        --out bench/results/load-debian-minilm.json
    python -m bench.load --n 20000 --queries 2000 --concurrency 1,64,1024 --out /tmp/l.json

Builds nothing: ``target/release/sagitta`` and ``target/release/sagitta-load`` must exist
(``cargo build --release -p sagitta-cli -p sagitta-load``). Steps:

1. The dataset (debian-minilm via ``bench.datasets.load_debian_minilm``: float32 unit
   vectors, exact top-k ground truth from ``Dataset.ensure_gt``, cached; or ``synth``) is
   written to a temporary directory as ``base.npy``, ``queries.npy`` and ``gt.npy``.
2. ``sagitta serve --data-dir TMP --port PORT`` starts on a free port (its RLIMIT_NOFILE
   soft limit raised to the hard limit so 1,024 connections fit); the script waits for
   ``GET /readyz``.
3. ``sagitta-load ... --upload --out OUT`` recreates the collection, uploads (batches of
   ``--upload-batch``, ``wait=false``), waits for green (or, with ``--load-by import``,
   ``sagitta import`` built the collection before the server started), then runs
   ``--queries`` searches
   at each ``--concurrency`` level and writes the result document.
4. The server's ``/telemetry`` ``result.app`` block and the fact that the server and the
   load generator shared this machine (and its cores) are added to the document; the
   server is stopped with SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np

from bench import datasets, report

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_BINARY = Path("target/release/sagitta")
LOAD_BINARY = Path("target/release/sagitta-load")
DEFAULT_DATASET_PATH = datasets.DEBIAN_MINILM_PATH
COLLECTION = "bench_load"
K = 10


def binary(relative: Path) -> Path:
    path = relative if relative.is_absolute() else REPO_ROOT / relative
    if not path.is_file() or not os.access(path, os.X_OK):
        raise SystemExit(
            f"{path} not found: build it first "
            "(cargo build --release -p sagitta-cli -p sagitta-load)"
        )
    return path


def load_dataset(args: argparse.Namespace) -> datasets.Dataset:
    """debian-minilm (first ``--n`` rows) or synth; exact top-K ground truth attached."""
    if args.dataset == "debian-minilm":
        dataset = datasets.load_debian_minilm(args.dataset_path or DEFAULT_DATASET_PATH)
        if args.n:
            dataset = datasets.Dataset(
                dataset.name,
                dataset.base[: args.n],
                dataset.queries,
                dataset.metric,
                None,
                dataset.extra,
            )
        dataset = dataset.subsample_queries(args.nq or 0)
    else:
        dataset = datasets.synthetic(args.n or 200_000, args.nq or 1000, args.dim)
    dataset.ensure_gt(K)
    return dataset


def write_npy_dir(dataset: datasets.Dataset, directory: Path) -> None:
    """``base.npy`` and ``queries.npy`` (float32), ``gt.npy`` (int64, nq x K)."""
    np.save(directory / "base.npy", np.ascontiguousarray(dataset.base, np.float32))
    np.save(
        directory / "queries.npy", np.ascontiguousarray(dataset.queries, np.float32)
    )
    np.save(directory / "gt.npy", np.ascontiguousarray(dataset.gt[:, :K], np.int64))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def raise_nofile() -> None:
    """Soft RLIMIT_NOFILE up to the hard limit, in this process and so in its children."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def http_get(url: str, timeout: float = 5.0) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def mpirun(ranks: int) -> list[str]:
    """``mpirun -n RANKS`` (none for 0 ranks: a plain process)."""
    if not ranks:
        return []
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    # every rank may use every core: mpirun binds each rank to one core by default
    return ["mpirun", "--oversubscribe", "--bind-to", "none", "-n", str(ranks)]


def import_collection(
    executable: Path, db: Path, data_dir: Path, shards: int, ranks: int = 0
) -> None:
    """``sagitta import`` of ``base.npy`` (ids = row numbers) into a new collection; with
    ``ranks``, scattered over the ranks of an MPI job (``import --mpi``)."""
    command = [
        *mpirun(ranks),
        str(executable),
        "import",
        "--data",
        str(db),
        "--collection",
        COLLECTION,
        "--distance",
        "cosine",
        "--shards",
        str(shards),
        str(data_dir / "base.npy"),
        *(["--mpi"] if ranks else []),
    ]
    print("$ " + shlex.join(command), flush=True)
    subprocess.run(command, check=True)


class Server:
    """``sagitta serve`` in a child process, logging to a file."""

    def __init__(
        self,
        data_dir: Path,
        log_path: Path,
        http_threads: int,
        executable: Path,
        ranks: int = 0,
    ) -> None:
        self.port = free_port()
        self.grpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        command = [
            *mpirun(ranks),
            str(executable),
            "serve",
            "--data-dir",
            str(data_dir),
            "--port",
            str(self.port),
            "--grpc-port",
            str(self.grpc_port),
            *(["--mpi"] if ranks else []),
        ]
        if http_threads:
            command += ["--http-threads", str(http_threads)]
        self.command = command
        raise_nofile()  # inherited by the server
        self.log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(
                    f"sagitta serve exited with {self.process.returncode}: "
                    f"{self.log_path.read_text(errors='replace')[-2000:]}"
                )
            try:
                if http_get(self.url + "/readyz", timeout=1.0)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"sagitta serve not ready after {timeout:.0f} s")

    def nofile_limit(self) -> int | None:
        try:
            for line in (
                Path(f"/proc/{self.process.pid}/limits").read_text().splitlines()
            ):
                if line.startswith("Max open files"):
                    return int(line.split()[3])
        except (OSError, ValueError, IndexError):
            pass
        return None

    def telemetry_app(self) -> dict | None:
        try:
            status, body = http_get(self.url + "/telemetry")
            if status == 200:
                return json.loads(body)["result"]["app"]
        except (OSError, ValueError, KeyError):
            pass
        return None

    def stop(self, timeout: float = 120.0) -> int | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        return self.process.returncode


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.load", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--dataset", default="debian-minilm", choices=["debian-minilm", "synth"]
    )
    parser.add_argument(
        "--dataset-path", help=f"debian-minilm directory ({DEFAULT_DATASET_PATH})"
    )
    parser.add_argument("--n", type=int, help="debian-minilm: first N; synth: N")
    parser.add_argument("--dim", type=int, default=768, help="synth: dimension")
    parser.add_argument(
        "--nq", type=int, help="query set size (default: all of the dataset's)"
    )
    parser.add_argument("--concurrency", default="1,64,1024")
    parser.add_argument(
        "--queries", type=int, default=20000, help="timed requests per level"
    )
    parser.add_argument("--hnsw-ef", type=int, help="params.hnsw_ef (server default)")
    parser.add_argument("--upload-batch", type=int, default=512)
    parser.add_argument(
        "--shards", type=int, default=1, help="shard_number of the collection"
    )
    parser.add_argument(
        "--load-by",
        choices=["upload", "import"],
        default="upload",
        help="upload: sagitta-load sends the points over REST (the seals race the "
        "upload, so the segment layout can differ between runs); import: `sagitta "
        "import` builds one segment per shard before the server starts (the same "
        "layout every time, for comparing two builds)",
    )
    parser.add_argument(
        "--server-binary",
        help=f"the sagitta binary to serve with (default {SERVER_BINARY}; e.g. an "
        "older build, for a before/after in one run)",
    )
    parser.add_argument("--upload-parallel", type=int, default=4)
    parser.add_argument(
        "--api",
        default="rest",
        help="sagitta-load --api: rest, grpc, or rest,grpc (both in one run: each uploads "
        "in turn, the timed phases alternate per concurrency level)",
    )
    parser.add_argument(
        "--loadgen-threads", type=int, default=0, help="tokio workers (0 = cores)"
    )
    parser.add_argument(
        "--server-http-threads", type=int, default=0, help="0 = server default"
    )
    parser.add_argument(
        "--baseline-readyz",
        action="store_true",
        help="also run each level against GET /readyz",
    )
    parser.add_argument(
        "--mpi-ranks",
        type=int,
        default=0,
        help="serve with `mpirun -n N sagitta serve --mpi` (the binary built with "
        "--features mpi; N ranks on this machine); the server CPU reported is then "
        "mpirun's, not the ranks'",
    )
    parser.add_argument("--workdir", help="where the temporary files go")
    parser.add_argument("--out", help="result JSON (bench/results/load-<dataset>.json)")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    load_binary = binary(LOAD_BINARY)
    server_binary = binary(Path(args.server_binary or SERVER_BINARY))
    started_at = report.utc_now()
    dataset = load_dataset(args)
    out = Path(args.out or f"bench/results/load-{dataset.name}.json")
    print(
        f"dataset {dataset.name}: n={dataset.n} dim={dataset.dim} queries={dataset.nq}"
    )
    with tempfile.TemporaryDirectory(prefix="sagitta-load-", dir=args.workdir) as tmp:
        tmp_path = Path(tmp)
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        write_npy_dir(dataset, data_dir)
        if args.load_by == "import":
            import_collection(
                server_binary, tmp_path / "db", data_dir, args.shards, args.mpi_ranks
            )
        server = Server(
            tmp_path / "db",
            tmp_path / "server.log",
            args.server_http_threads,
            server_binary,
            args.mpi_ranks,
        )
        try:
            server.wait_ready()
            raw_out = tmp_path / "load.json"
            command = [
                str(load_binary),
                "--url",
                server.url,
                "--collection",
                COLLECTION,
                "--data",
                str(data_dir),
                "--dataset-name",
                dataset.name,
                "--concurrency",
                args.concurrency,
                "--queries",
                str(args.queries),
                "--limit",
                str(K),
                "--upload-batch",
                str(args.upload_batch),
                "--shards",
                str(args.shards),
                "--upload-parallel",
                str(args.upload_parallel),
                "--threads",
                str(args.loadgen_threads),
                "--server-pid",
                str(server.process.pid),
                "--out",
                str(raw_out),
            ]
            if args.hnsw_ef:
                command += ["--hnsw-ef", str(args.hnsw_ef)]
            if args.api != "rest":
                grpc_url = f"http://127.0.0.1:{server.grpc_port}"
                command += ["--api", args.api, "--grpc-url", grpc_url]
            if args.load_by == "upload":
                command.append("--upload")
            if args.baseline_readyz:
                command.append("--baseline-readyz")
            print("$ " + shlex.join(command), flush=True)
            completed = subprocess.run(command, check=False)
            if completed.returncode != 0:
                log = server.log_path.read_text(errors="replace")[-2000:]
                raise SystemExit(
                    f"sagitta-load failed with {completed.returncode}; "
                    f"server log tail:\n{log}"
                )
            telemetry_app = server.telemetry_app()
            server_nofile = server.nofile_limit()
        finally:
            server_exit = server.stop()
        document = json.loads(raw_out.read_text())
    document["load_generator_command"] = report.repo_relative_text(document["command"])
    document["command"] = "python -m bench.load " + shlex.join(argv)
    document["started_at"] = started_at
    document["dataset"]["source"] = dataset.extra or None
    document["server_and_load_generator_same_machine"] = True
    document["topology"] = (
        "the server (sagitta serve) and the load generator (sagitta-load) ran on the same "
        f"machine and shared its {os.cpu_count()} cores over loopback TCP; the cores "
        "busy columns (cpu.*) show how they split them"
    )
    document["server"]["telemetry_app"] = telemetry_app
    document["server"]["command"] = report.repo_relative_text(
        shlex.join(server.command)
    )
    document["server"]["rlimit_nofile"] = server_nofile
    document["server"]["exit_code_after_sigterm"] = server_exit
    if report.invalid(document):
        return 2
    report.write_json(document, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
