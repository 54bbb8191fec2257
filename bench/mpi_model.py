"""``python bench/mpi_model.py RESULT.json [RESULT.json ...]``: project scale-out QPS,
parallel efficiency and rank 0's merge CPU per query to more ranks, for the binomial tree
and for a plain gather to rank 0, from what ``mpi_bench`` measured (issue 18).

Inputs taken from the measurements (suite ``mpi-scaleout``, one file per rank count):
- ``search_us(n)``: one rank's search time per query over ``n`` points, fitted as a power
  law ``c * n ** p`` (least squares in log-log) through the runs where each rank had a
  core of its own (ranks <= cores). A graph search grows slowly with its points (p well
  below 1), which is why splitting the points over ranks that each search every query
  shortens a query only a little: QPS(R) / QPS(1) is about ``R ** p``.
- ``merge_us``: rank 0's decode-and-merge CPU per query per partial list it merged
  (``rank0_merge_us_per_query`` over the lists it merged: log2 R for the tree, R - 1 for
  the gather).
- the message sizes: a query goes down (``dim`` f32 values) and ``k`` hits of 13 bytes
  (id kind, id, score) come up, plus a header per message.

Assumptions (not measured here: one machine has no network between ranks), stated so a
reader can change them: a message costs ``ALPHA_US`` plus its bytes over ``BANDWIDTH``
(an InfiniBand HDR-class link); each rank has one core and its own share of the points
(``n / R``); batches go one at a time (no pipelining), as ``mpi_bench`` runs them; a tree
level's messages travel in parallel, while a gather's R - 1 answers queue at rank 0's link
and CPU.
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

ALPHA_US = 2.0
BANDWIDTH_BYTES_PER_US = 10_000.0  # 10 GB/s
HIT_BYTES = 13
MESSAGE_HEADER_BYTES = 32


@dataclass(frozen=True)
class Fitted:
    n: int
    dim: int
    k: int
    batch: int
    c_us: float
    p: float
    merge_us: float

    def search_us(self, points: float) -> float:
        return self.c_us * max(points, 1.0) ** self.p


def depth(ranks: int) -> int:
    return max(ranks - 1, 0).bit_length()


def lists_merged_by_root(ranks: int, tree: bool) -> int:
    return depth(ranks) if tree else ranks - 1


def predict(model: Fitted, ranks: int, tree: bool) -> dict[str, float]:
    """Per batch of ``model.batch`` queries: seconds spent, QPS, efficiency, root CPU."""
    b = model.batch
    down = MESSAGE_HEADER_BYTES + b * model.dim * 4
    up = MESSAGE_HEADER_BYTES + b * model.k * HIT_BYTES
    send = lambda size: ALPHA_US + size / BANDWIDTH_BYTES_PER_US  # noqa: E731
    search = b * model.search_us(model.n / ranks)
    broadcast = depth(ranks) * send(down)
    merges = lists_merged_by_root(ranks, tree)
    if tree:
        reduce = depth(ranks) * (send(up) + b * model.merge_us)
    else:
        reduce = (ranks - 1) * (up / BANDWIDTH_BYTES_PER_US + b * model.merge_us) + (
            ALPHA_US if ranks > 1 else 0.0
        )
    batch_us = search + broadcast + reduce
    qps = b / batch_us * 1e6
    one = b / (b * model.search_us(model.n)) * 1e6
    return {
        "ranks": ranks,
        "qps": qps,
        "parallel_efficiency": qps / (ranks * one),
        "root_merge_us_per_query": merges * model.merge_us,
        "batch_ms": batch_us / 1e3,
    }


def fit(documents: list[dict]) -> Fitted:
    runs = []
    merge_per_list = []
    for document in documents:
        cores = document["machine"]["cores"]
        for result in document["results"]:
            run = result["runs"][0]
            ranks = result["ranks"]
            batch = run["search_params"]["batch"]
            if ranks <= cores:
                share = document["dataset"]["n"] / ranks
                runs.append(
                    (share, run["slowest_rank_search_ms_per_batch"] * 1e3 / batch)
                )
            merged = lists_merged_by_root(ranks, result["engine"].endswith("tree"))
            if merged:
                merge_per_list.append(run["rank0_merge_us_per_query"] / merged)
    if len({share for share, _ in runs}) < 2:
        raise SystemExit("need runs at two point counts per rank (e.g. 1 and 2 ranks)")
    xs = [math.log(share) for share, _ in runs]
    ys = [math.log(us) for _, us in runs]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    b = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sum(
        (x - mean_x) ** 2 for x in xs
    )
    first = documents[0]
    return Fitted(
        n=first["dataset"]["n"],
        dim=first["dataset"]["dim"],
        k=first["dataset"]["k"],
        batch=first["results"][0]["runs"][0]["search_params"]["batch"],
        c_us=math.exp(mean_y - b * mean_x),
        p=b,
        merge_us=sum(merge_per_list) / max(len(merge_per_list), 1),
    )


def report(paths: list[Path]) -> dict:
    documents = [json.loads(path.read_text()) for path in paths]
    model = fit(documents)
    measured = []
    base = None
    for document in sorted(documents, key=lambda d: d["results"][0]["ranks"]):
        for result in document["results"]:
            run = result["runs"][0]
            ranks = result["ranks"]
            tree = result["engine"].endswith("tree")
            if ranks == 1 and tree:
                base = run["qps"]
            measured.append(
                {
                    "ranks": ranks,
                    "mode": "tree" if tree else "gather",
                    "qps": run["qps"],
                    "predicted_qps": predict(model, ranks, tree)["qps"],
                    "root_merge_us_per_query": run["rank0_merge_us_per_query"],
                    "cores": document["machine"]["cores"],
                }
            )
    for row in measured:
        row["parallel_efficiency"] = (
            row["qps"] / (row["ranks"] * base) if base else None
        )
    projected = [
        {"mode": mode, **predict(model, ranks, mode == "tree")}
        for mode in ("tree", "gather")
        for ranks in (1, 2, 4, 16, 64, 256)
    ]
    return {
        "assumptions": {
            "alpha_us": ALPHA_US,
            "bandwidth_bytes_per_us": BANDWIDTH_BYTES_PER_US,
            "one_core_per_rank": True,
            "batches_in_flight": 1,
        },
        "fitted": model.__dict__,
        "measured": measured,
        "projected": projected,
    }


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit(__doc__)
    print(json.dumps(report([Path(arg) for arg in argv]), indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
