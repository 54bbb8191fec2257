"""Writes acknowledged over gRPC survive SIGKILL, whatever state their points are in.

A writer sends, through qdrant-client with `prefer_grpc=True` and `wait=true`, a seeded
mix of every write kind the gRPC API takes: upsert, delete by ids, delete by filter, set
payload, overwrite payload, delete payload keys, clear payload. It keeps a model of every
field of every point; an operation enters the model once its answer has arrived. The
server is killed (SIGKILL: no flush) at seeded moments, once while a bulk load of 21,000
points (past the optimizer's seal threshold of 20,000) is being sealed, and restarted on
the same directory. After each restart every point is read back over REST (scroll with
vectors and payloads) and compared with the model; the operation in flight at the kill
may be there or not, whole (the collection has one shard).

The gRPC API answers each call through the REST route that does the same (its crash test
is test_server_crash.py); this test checks that no gRPC call is acknowledged before its
REST route has made it durable.
"""

from __future__ import annotations

import copy
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from qdrant_client import QdrantClient, models
from server_process import SagittaServer

SEED = 19_2026
DIM = 8
COLLECTION = "grpc_crash"
BULK_POINTS = 21_000  # past the optimizer's seal threshold (20,000 points)
BULK_BATCH = 1_000
KILLS = 5
GROUPS = 8

Model = dict[int, tuple[tuple[float, ...], dict]]
Operation = tuple[str, Callable[[QdrantClient], None], Callable[[Model], None]]


def vector(rng: random.Random) -> list[float]:
    # multiples of 1/64 come back bit-exact
    return [rng.randint(-64, 64) / 64 for _ in range(DIM)]


def payload(rng: random.Random) -> dict:
    return {
        "g": rng.randrange(GROUPS),
        "tag": rng.choice(["red", "blue"]),
        "v": rng.random(),
    }


def upsert(rng: random.Random, ids: list[int]) -> Operation:
    points = [(i, vector(rng), payload(rng)) for i in ids]

    def send(client: QdrantClient) -> None:
        structs = [models.PointStruct(id=i, vector=v, payload=p) for i, v, p in points]
        client.upsert(COLLECTION, structs, wait=True)

    def apply(model: Model) -> None:
        for i, v, p in points:
            model[i] = (tuple(v), dict(p))

    return ("upsert", send, apply)


def operation(rng: random.Random, model: Model, next_id: list[int]) -> Operation:
    """One seeded operation; payload changes name existing points only."""
    existing = sorted(model)
    kind = rng.choice(
        ["upsert", "upsert", "delete", "filter", "set", "overwrite", "keys", "clear"]
    )
    if kind == "upsert" or len(existing) < 10:
        fresh = [next_id[0] + k for k in range(rng.randint(1, 20))]
        next_id[0] += len(fresh)
        again = rng.sample(existing, min(len(existing), rng.randint(0, 5)))
        return upsert(rng, fresh + again)
    ids = rng.sample(existing, rng.randint(1, 10))
    selector = models.PointIdsList(points=ids)
    if kind == "delete":

        def remove(m: Model) -> None:
            for i in ids:
                m.pop(i, None)

        return (kind, lambda c: c.delete(COLLECTION, selector, wait=True), remove)
    if kind == "filter":
        group = rng.randrange(GROUPS)
        condition = models.FieldCondition(key="g", match=models.MatchValue(value=group))
        chosen = models.FilterSelector(filter=models.Filter(must=[condition]))

        def drop(m: Model) -> None:
            for i in [i for i, (_, p) in m.items() if p.get("g") == group]:
                del m[i]

        return (kind, lambda c: c.delete(COLLECTION, chosen, wait=True), drop)
    change = {"tag": rng.choice(["green", "cyan"]), "n": rng.randint(0, 99)}
    if kind == "set":
        send = lambda c: c.set_payload(COLLECTION, change, selector, wait=True)  # noqa: E731
        edit = lambda p: {**p, **change}  # noqa: E731
    elif kind == "overwrite":
        send = lambda c: c.overwrite_payload(COLLECTION, change, selector, wait=True)  # noqa: E731
        edit = lambda p: dict(change)  # noqa: E731
    elif kind == "keys":
        send = lambda c: c.delete_payload(COLLECTION, ["tag", "v"], selector, wait=True)  # noqa: E731
        edit = lambda p: {k: v for k, v in p.items() if k not in ("tag", "v")}  # noqa: E731
    else:
        send = lambda c: c.clear_payload(COLLECTION, selector, wait=True)  # noqa: E731
        edit = lambda p: {}  # noqa: E731

    def apply(m: Model) -> None:
        for i in ids:
            m[i] = (m[i][0], edit(m[i][1]))

    return (kind, send, apply)


class Writer(threading.Thread):
    """Sends operations until the server dies; `model` holds what was acknowledged and
    `in_flight` the operation whose answer never came."""

    def __init__(
        self, server: SagittaServer, rng: random.Random, model: Model, ids: list[int]
    ):
        super().__init__(daemon=True)
        self.client = grpc_client(server)
        self.rng, self.model, self.next_id = rng, model, ids
        self.in_flight: Operation | None = None
        self.done = 0
        self.error: grpc.RpcError | None = None

    def run(self) -> None:
        while True:
            op = operation(self.rng, self.model, self.next_id)
            self.in_flight = op
            try:
                op[1](self.client)
            except grpc.RpcError as error:  # the kill; anything else fails the test
                self.error = error
                return
            op[2](self.model)
            self.in_flight = None
            self.done += 1


def grpc_client(server: SagittaServer) -> QdrantClient:
    return QdrantClient(
        url=server.url,
        grpc_port=server.grpc_port,
        prefer_grpc=True,
        check_compatibility=False,
        timeout=60,
    )


def stored(server: SagittaServer) -> Model:
    client = QdrantClient(url=server.url, timeout=60, check_compatibility=False)
    points: Model = {}
    offset = None
    while True:
        records, offset = client.scroll(
            COLLECTION,
            limit=10_000,
            offset=offset,
            with_vectors=True,
            with_payload=True,
        )
        for r in records:
            assert isinstance(r.vector, list)
            points[int(r.id)] = (tuple(r.vector), dict(r.payload or {}))
        if offset is None:
            break
    client.close()
    return points


def check(
    server: SagittaServer, model: Model, in_flight: Operation | None, context: str
) -> Model:
    """The stored points equal the model, or the model with the operation in flight
    applied; returns the one that held."""
    got = stored(server)
    after = copy.deepcopy(model)
    if in_flight is not None:
        in_flight[2](after)
    if got == model:
        return model
    assert in_flight is not None and got == after, (
        f"{context}: {len(got)} points stored, model {len(model)}; "
        f"differing ids {sorted(set(got) ^ set(model))[:5]} / "
        f"{[i for i in model if i in got and got[i] != model[i]][:5]}"
    )
    return after


def test_acknowledged_grpc_writes_survive_kills(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    server = SagittaServer(tmp_path / "data")
    server.start()
    try:
        rest = QdrantClient(url=server.url, timeout=60, check_compatibility=False)
        rest.create_collection(
            COLLECTION,
            vectors_config=models.VectorParams(size=DIM, distance=models.Distance.DOT),
        )
        rest.close()
        model: Model = {}
        next_id = [1]
        for round_ in range(KILLS):
            writer = Writer(server, rng, model, next_id)
            if round_ == 2:
                # a bulk load through gRPC, then the kill while its seal may run
                bulk = list(range(next_id[0], next_id[0] + BULK_POINTS))
                next_id[0] += BULK_POINTS
                for start in range(0, BULK_POINTS, BULK_BATCH):
                    op = upsert(rng, bulk[start : start + BULK_BATCH])
                    op[1](writer.client)
                    op[2](model)
            writer.start()
            time.sleep(rng.uniform(0.3, 1.5))
            server.kill()
            writer.join(timeout=60)
            assert not writer.is_alive(), "the writer did not notice the kill"
            # the call in flight lost its connection: not a refusal by the server
            assert writer.error is not None
            assert writer.error.code() == grpc.StatusCode.UNAVAILABLE, writer.error
            writer.client.close()
            server.start()
            model = check(server, model, writer.in_flight, f"kill {round_ + 1}")
            assert writer.done > 0 or round_ == 2, (
                f"kill {round_ + 1}: nothing was written"
            )
        server.stop()
        server.start()
        assert stored(server) == model, "after a clean restart"
    finally:
        server.stop()
