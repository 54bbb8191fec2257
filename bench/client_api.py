"""qdrant-client against `sagitta serve` over REST and over gRPC (`prefer_grpc=True`), in
one run on one server and the same data: upload rate, then search QPS, latency and recall.

    python -m bench.client_api --dataset debian-minilm --n 50000 --queries 2000 \\
        --threads 1,8 --out bench/results/client-api-debian-minilm.json

Builds nothing: ``target/release/sagitta`` must exist. Steps: the dataset (as in
``bench.load``) is loaded; ``sagitta serve`` starts on free REST and gRPC ports; for each
API a collection is made and every base vector upserted through qdrant-client in batches
of ``--batch`` with ``wait=true`` (timed: upload points per second); the gRPC-made
collection is dropped, and when the other is green both APIs search it: ``--queries``
requests (after ``--warmup``) at each ``--threads`` level, each thread with its own
client, top-10 with ``hnsw_ef``; recall against exact ground truth. The client is
Python: these rates are qdrant-client's, with the server and the client sharing the
machine's cores.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from qdrant_client import QdrantClient, models

from bench import load, report

APIS = ("rest", "grpc")


def client(server: load.Server, api: str) -> QdrantClient:
    return QdrantClient(
        url=server.url,
        grpc_port=server.grpc_port,
        prefer_grpc=api == "grpc",
        timeout=300,
    )


def upload(server: load.Server, api: str, base: np.ndarray, batch: int) -> float:
    """Seconds to create `api`'s collection and upsert every row of `base` (waited)."""
    remote = client(server, api)
    name = f"bench_{api}"
    started = time.perf_counter()
    remote.create_collection(
        name,
        vectors_config=models.VectorParams(
            size=base.shape[1], distance=models.Distance.COSINE
        ),
    )
    for start in range(0, len(base), batch):
        rows = base[start : start + batch]
        remote.upsert(
            name,
            models.Batch(
                ids=list(range(start, start + len(rows))), vectors=rows.tolist()
            ),
            wait=True,
        )
    seconds = time.perf_counter() - started
    remote.close()
    return seconds


def wait_green(server: load.Server, name: str, timeout: float = 1800.0) -> None:
    remote = client(server, "rest")
    deadline = time.monotonic() + timeout
    while remote.get_collection(name).status != models.CollectionStatus.GREEN:
        if time.monotonic() > deadline:
            raise SystemExit(f"{name} not green after {timeout:.0f} s")
        time.sleep(0.5)
    remote.close()


def search(
    server: load.Server,
    api: str,
    dataset,
    args: argparse.Namespace,
    threads: int,
) -> dict:
    """`args.queries` searches from `threads` threads (queries dealt round robin)."""
    params = models.SearchParams(hnsw_ef=args.hnsw_ef)
    queries = dataset.queries.tolist()
    latencies: list[list[float]] = [[] for _ in range(threads)]
    found: dict[int, list[int]] = {}

    def work(slot: int, count: int, timed: bool) -> None:
        remote = client(server, api)
        for at in range(slot, count, threads):
            q = at % len(queries)
            began = time.perf_counter()
            hits = remote.query_points(
                "bench_rest", query=queries[q], limit=load.K, search_params=params
            ).points
            if timed:
                latencies[slot].append(time.perf_counter() - began)
                found[q] = [int(hit.id) for hit in hits]
        remote.close()

    def run(count: int, timed: bool) -> float:
        workers = [
            threading.Thread(target=work, args=(slot, count, timed))
            for slot in range(threads)
        ]
        began = time.perf_counter()
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return time.perf_counter() - began

    run(args.warmup, timed=False)
    seconds = run(args.queries, timed=True)
    every = np.array([x for slot in latencies for x in slot]) * 1_000
    recall = np.mean(
        [
            len(set(ids) & set(dataset.gt[q, : load.K].tolist())) / load.K
            for q, ids in found.items()
        ]
    )
    return {
        "scenario": "read-only",
        "search_params": {"hnsw_ef": args.hnsw_ef},
        "threads": threads,
        "concurrency": threads,
        "recall_at_k": float(recall),
        "qps": args.queries / seconds,
        "latency_ms": {
            "p50": float(np.percentile(every, 50)),
            "p95": float(np.percentile(every, 95)),
            "p99": float(np.percentile(every, 99)),
        },
        "disk_bytes_read_per_query": None,
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.client_api", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--dataset", default="debian-minilm", choices=["debian-minilm", "synth"]
    )
    parser.add_argument("--dataset-path", help="debian-minilm directory")
    parser.add_argument("--n", type=int, help="debian-minilm: first N; synth: N")
    parser.add_argument("--dim", type=int, default=384, help="synth: dimension")
    parser.add_argument("--nq", type=int, help="query set size")
    parser.add_argument("--threads", default="1,8", help="client threads per level")
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--batch", type=int, default=256, help="points per upsert")
    parser.add_argument("--hnsw-ef", type=int, default=64)
    parser.add_argument("--workdir", help="where the temporary files go")
    parser.add_argument("--out", help="result JSON")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    started_at = report.utc_now()
    dataset = load.load_dataset(args)
    executable = load.binary(load.SERVER_BINARY)
    results = []
    with tempfile.TemporaryDirectory(prefix="sagitta-api-", dir=args.workdir) as tmp:
        server = load.Server(Path(tmp) / "db", Path(tmp) / "server.log", 0, executable)
        try:
            server.wait_ready()
            uploads = {
                api: upload(server, api, dataset.base, args.batch) for api in APIS
            }
            client(server, "rest").delete_collection("bench_grpc")
            wait_green(server, "bench_rest")
            for api in APIS:
                runs = [
                    search(server, api, dataset, args, int(threads))
                    for threads in args.threads.split(",")
                ]
                results.append(
                    {
                        "engine": f"sagitta-server-{api}",
                        "engine_version": "0.1.0",
                        "client": f"qdrant-client, prefer_grpc={api == 'grpc'}",
                        "index_params": {"m": 16, "ef_construct": 100},
                        # the upload (waited); the graph builds in the background
                        "build_seconds": uploads[api],
                        "upload_seconds": uploads[api],
                        "upload_points_per_second": dataset.n / uploads[api],
                        "memory_bytes": None,
                        "disk_bytes_written": None,
                        "runs": runs,
                    }
                )
        finally:
            server.stop()
    document = report.build_document(
        suite="client-api",
        command="python -m bench.client_api " + shlex.join(argv),
        started_at=started_at,
        dataset={
            "name": dataset.name,
            "n": dataset.n,
            "dim": dataset.dim,
            "metric": dataset.metric,
            "queries": args.queries,
            "k": load.K,
        },
        results=results,
        extra={
            "topology": "qdrant-client (Python) and sagitta serve on the same machine, "
            "sharing its cores over loopback TCP"
        },
    )
    if report.invalid(document):
        return 2
    out = Path(args.out or f"bench/results/client-api-{dataset.name}.json")
    report.write_json(document, out)
    for result in results:
        for run in result["runs"]:
            print(
                f"{result['engine']}: upload {result['upload_points_per_second']:,.0f} "
                f"points/s; {run['threads']} threads {run['qps']:,.0f} QPS, p50 "
                f"{run['latency_ms']['p50']:.2f} ms, recall {run['recall_at_k']:.4f}"
            )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
