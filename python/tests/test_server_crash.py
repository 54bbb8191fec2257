"""Acknowledged writes survive SIGKILL and restarts, whatever state their points are in.

Two writers, each on its own id range and its own payload `writer` value, perform with
`wait=true` a random mix of every write kind: upsert, delete by ids, delete by filter,
set payload (by ids or by filter), overwrite payload, delete payload keys, clear payload
and payload index creation. Each keeps a model of every field of every point of its
range; an operation enters the model once its 200 has arrived. A payload change naming a
point that does not exist (now and then one is named on purpose) must be refused with 404
and change nothing, as Qdrant's server refuses it.

1. Issue 12's reproduction: a bulk load of 21,000 points (64-d, one shard) passes the
   optimizer's seal threshold of 20,000 points; while that seal runs, small mixed writes
   (payload updates of the bulk-loaded points above all) go on one after another; the
   writes stop, the collection turns green, and the server is stopped with SIGTERM.
2. Eight more stops, each after a seeded number of mixed writes: SIGKILL after a pause
   of the writers long enough to start an idle seal (a little later, or at once, while
   it may run), at random, during a second 21,000-point bulk load's seal, and once
   SIGTERM under load.
3. A last pause, writes, green, and two SIGTERM restarts.

So points are written while in the write buffer, in its graph (its own or joined to a
segment's), in a buffer being sealed and in segments (being merged). After every restart
the collection is compared with the models: the exact count (and the collection info's),
every model id retrieved with its payload and vector (Dot distance and vectors of
multiples of 1/64, so they come back bit-exact), a scroll that finds no other point, the
payload indexes with their point counts, and filtered counts. The operation in flight at
a stop may or may not be there: the collection has one shard, so each writer's points
are as before it or as after it.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import numpy as np
from server_process import SagittaServer

SEED = 20240611
DIM = 64
COLLECTION = "crash"
WRITERS = 2
BULK_POINTS = 21_000  # past the optimizer's seal threshold (20,000 points)
BULK_BATCH = 1_000
ID_SPAN = 1_000_000  # writer w owns the ids [w * ID_SPAN, (w + 1) * ID_SPAN)
GROUPS = 64  # values of `g`: a delete by filter removes about 1/64 of a writer's points
TAGS = ("red", "green", "blue", "cyan")
INDEXES = {"g": "integer", "tag": "keyword", "v": "integer"}
PAYLOAD_KEYS = ("g", "tag", "nested", "v", "absent")
IDLE_PAUSE_S = 0.7  # longer than the optimizer's idle delay before a seal (0.5 s)
# Issue 12's reproduction (see the test): each writer's wait before each mixed write while
# the bulk's seal runs, so that the write buffer stays below the 1,000 points at which the
# indexer starts its graph until the seal has committed; then new points that take it past
# 1,000 but leave it under an eighth of the new segment (2,500 points).
SEAL_PACE_S = 0.2
FILL_POINTS = 1_200
# How each SIGKILL (or SIGTERM) after the first is timed, in this order.
PLANS = (
    "after idle seal",
    "random",
    "during idle seal",
    "bulk",
    "under load",
    "after idle seal",
    "during idle seal",
    "random",
)
# A bound for waits on the server's background work, so that a stuck server fails the
# test instead of hanging it (not a performance limit).
WAIT_LIMIT_S = 120.0

# A point as the model holds it: (vector, payload); the vector is a tuple of floats.
Point = tuple[tuple[float, ...], dict]
State = dict[int, Point]


def points_path() -> str:
    return f"/collections/{COLLECTION}/points"


@dataclass
class Operation:
    """One write request and what it does to its writer's points."""

    kind: str
    method: str
    path: str
    body: dict
    apply: Callable[[State], None]
    field: str | None = None  # of an index creation
    # 404: a payload change naming a point that does not exist is refused whole (as
    # Qdrant's server refuses it), and `apply` then changes nothing
    expected_status: int = 200

    def applied_to(self, state: State) -> State:
        after = dict(state)  # payload dicts are replaced, never changed in place
        self.apply(after)
        return after


def upsert_of(points: list[tuple[int, Point]]) -> Callable[[State], None]:
    def apply(state: State) -> None:
        for point_id, point in points:
            state[point_id] = point

    return apply


def delete_of(ids: list[int]) -> Callable[[State], None]:
    def apply(state: State) -> None:
        for point_id in ids:
            state.pop(point_id, None)

    return apply


def payload_change_of(ids: list[int], change) -> Callable[[State], None]:
    """`change(payload) -> new payload` on each of `ids`; nothing at all when one of them
    does not exist (the server refuses the request with 404)."""

    def apply(state: State) -> None:
        if any(point_id not in state for point_id in ids):
            return
        for point_id in ids:
            vector, payload = state[point_id]
            state[point_id] = (vector, change(payload))

    return apply


def by_ids(operation: Operation, ids: list[int], model: State) -> Operation:
    """`operation`, a payload change naming `ids`, expecting a 404 when one is absent."""
    if any(point_id not in model for point_id in ids):
        operation.expected_status = 404
    return operation


class Writer:
    """Performs writes on its own id range and keeps the model of that range."""

    def __init__(self, index: int) -> None:
        self.name = f"w{index}"
        self.base = index * ID_SPAN
        self.rng = random.Random(SEED + index)
        self.vectors = np.random.default_rng(SEED + index)
        self.model: State = {}
        self.indexes: set[str] = set()  # payload indexes it created (acknowledged)
        self.next_id = self.base
        self.version = 0
        self.bulk_left = 0
        self.bulk_loaded = threading.Event()
        self.in_flight: Operation | None = None
        self.counts: Counter = Counter()
        self.mixed = 0  # mixed (not bulk) operations acknowledged
        self.unexpected: list[str] = []

    # -- operations -----------------------------------------------------------------------

    def bulk(self, points: int) -> None:
        """Makes the next `points` writes bulk upserts of new points."""
        self.bulk_left = points
        self.bulk_loaded.clear()

    def owns(self, point_id: int) -> bool:
        return self.base <= point_id < self.base + ID_SPAN

    def new_vectors(self, count: int) -> list[tuple[float, ...]]:
        # Multiples of 1/64 in [-4, 4]: exact in f32 and in decimal, so bit-exact over JSON.
        rows = self.vectors.integers(-256, 257, size=(count, DIM)) / 64
        return [tuple(row) for row in rows.tolist()]

    def payload(self) -> dict:
        self.version += 1
        payload = {"writer": self.name, "v": self.version}
        if self.rng.random() < 0.9:
            payload["g"] = self.rng.randrange(GROUPS)
        if self.rng.random() < 0.5:
            payload["tag"] = self.rng.choice(TAGS)
        if self.rng.random() < 0.3:
            payload["nested"] = {
                "x": self.rng.randrange(10),
                "list": [self.version, None, [], "s", 0.5],
            }
        return payload

    def update(self) -> dict:
        """A payload update: some keys, never `writer`."""
        update = {k: v for k, v in self.payload().items() if k != "writer"}
        if self.rng.random() < 0.2:
            update["tag"] = None
        return update

    def existing(self, most: int) -> list[int]:
        """Up to `most` distinct ids of existing points, now and then an absent one."""
        ids = self.rng.sample(
            list(self.model), min(len(self.model), self.rng.randint(1, most))
        )
        if self.rng.random() < 0.1:
            ids.append(
                self.next_id + 10_000 + self.rng.randrange(1_000)
            )  # never written
        return ids

    def filter_of(self, key: str, value) -> dict:
        return {
            "must": [
                {"key": "writer", "match": {"value": self.name}},
                {"key": key, "match": {"value": value}},
            ]
        }

    def matching(self, key: str, value) -> list[int]:
        """The ids `filter_of(key, value)` selects in the model."""
        return [
            point_id
            for point_id, (_, payload) in self.model.items()
            if payload.get("writer") == self.name and payload.get(key) == value
        ]

    def upsert(self, ids: list[int], kind: str = "upsert") -> Operation:
        points = []
        for point_id, vector in zip(ids, self.new_vectors(len(ids)), strict=True):
            payload = self.payload() if self.rng.random() < 0.95 else {}
            points.append((point_id, (vector, payload)))
        body = {
            "points": [
                {"id": i, "vector": list(v), **({"payload": p} if p else {})}
                for i, (v, p) in points
            ]
        }
        return Operation(kind, "PUT", points_path(), body, upsert_of(points))

    def fresh_ids(self, count: int) -> list[int]:
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        return ids

    def next_operation(self) -> Operation:
        if self.bulk_left > 0:
            count = min(BULK_BATCH, self.bulk_left)
            self.bulk_left -= count
            return self.upsert(self.fresh_ids(count), kind="bulk upsert")
        roll = self.rng.random()
        if roll < 0.16 or len(self.model) < 100:
            count = self.rng.randint(1, 30)
            replaced = self.rng.sample(
                list(self.model), min(len(self.model), count // 2)
            )
            return self.upsert(replaced + self.fresh_ids(count - len(replaced)))
        if roll < 0.24:
            ids = self.existing(10)
            body = {"points": ids}
            return Operation(
                "delete", "POST", f"{points_path()}/delete", body, delete_of(ids)
            )
        if roll < 0.28:
            group = self.rng.randrange(GROUPS)
            ids = self.matching("g", group)
            body = {"filter": self.filter_of("g", group)}
            return Operation(
                "delete by filter",
                "POST",
                f"{points_path()}/delete",
                body,
                delete_of(ids),
            )
        if roll < 0.60:
            update = self.update()
            if self.rng.random() < 0.1:
                tag = self.rng.choice(TAGS)
                ids = self.matching("tag", tag)
                body = {"filter": self.filter_of("tag", tag), "payload": update}
                kind = "set payload by filter"
            else:
                ids = self.existing(20)
                body = {"points": ids, "payload": update}
                kind = "set payload"
            change = payload_change_of(ids, lambda p: {**p, **update})
            operation = Operation(
                kind, "POST", f"{points_path()}/payload", body, change
            )
            return by_ids(operation, ids, self.model)
        if roll < 0.72:
            payload = self.payload()
            if self.rng.random() < 0.15:
                del payload["writer"]
            ids = self.existing(20)
            body = {"points": ids, "payload": payload}
            change = payload_change_of(ids, lambda _: dict(payload))
            operation = Operation(
                "overwrite payload", "PUT", f"{points_path()}/payload", body, change
            )
            return by_ids(operation, ids, self.model)
        if roll < 0.86:
            keys = [k for k in PAYLOAD_KEYS if self.rng.random() < 0.5] or ["g"]
            ids = self.existing(20)
            body = {"points": ids, "keys": keys}
            change = payload_change_of(
                ids, lambda p: {k: v for k, v in p.items() if k not in keys}
            )
            operation = Operation(
                "delete payload keys",
                "POST",
                f"{points_path()}/payload/delete",
                body,
                change,
            )
            return by_ids(operation, ids, self.model)
        if roll < 0.98:
            ids = self.existing(5)
            body = {"points": ids}
            change = payload_change_of(ids, lambda _: {})
            operation = Operation(
                "clear payload", "POST", f"{points_path()}/payload/clear", body, change
            )
            return by_ids(operation, ids, self.model)
        field = self.rng.choice(sorted(INDEXES))
        body = {"field_name": field, "field_schema": INDEXES[field]}
        path = f"/collections/{COLLECTION}/index"
        return Operation("create index", "PUT", path, body, lambda _: None, field)

    # -- the thread -----------------------------------------------------------------------

    def run(self, url: str, writing: Writing) -> None:
        """Writes until `writing.stop` is set or a request fails (the server is gone);
        waits while `writing.gate` is clear, and `writing.pace` before each mixed write."""
        with httpx.Client(base_url=url, timeout=60) as client:
            while not writing.stop.is_set():
                if not writing.gate.wait(0.05):
                    continue
                if self.bulk_left == 0 and writing.pace > 0:
                    time.sleep(writing.pace)
                operation = self.next_operation()
                self.in_flight = operation
                try:
                    response = client.request(
                        operation.method,
                        operation.path,
                        params={"wait": "true"},
                        json=operation.body,
                    )
                except httpx.HTTPError:
                    return  # killed: the operation stays in flight
                if response.status_code != operation.expected_status:
                    self.unexpected.append(
                        f"{self.name}'s {operation.kind}: {response.status_code} "
                        f"{response.text}"
                    )
                    return
                self.acknowledge(operation)
                if self.bulk_left == 0:
                    self.bulk_loaded.set()

    def acknowledge(self, operation: Operation) -> None:
        operation.apply(self.model)
        if operation.field is not None:
            self.indexes.add(operation.field)
        self.counts[operation.kind] += 1
        if operation.kind != "bulk upsert":
            self.mixed += 1
        self.in_flight = None


class Writing:
    """The writers' threads against one server process."""

    def __init__(
        self, server: SagittaServer, writers: list[Writer], pace: float = 0.0
    ) -> None:
        self.server = server
        self.writers = writers
        self.gate = threading.Event()
        self.gate.set()
        self.stop = threading.Event()
        self.pace = pace  # seconds each writer waits before each mixed write
        self.threads = [
            threading.Thread(
                target=writer.run,
                args=(server.url, self),
                name=writer.name,
                daemon=True,
            )
            for writer in writers
        ]
        for thread in self.threads:
            thread.start()

    def idle_pause(self) -> None:
        """Stops writing long enough for the optimizer to start an idle seal."""
        self.gate.clear()
        time.sleep(IDLE_PAUSE_S)
        self.gate.set()

    def join(self) -> None:
        """Waits for the writers to end (after `finish`, or once the server is gone)."""
        self.gate.set()
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), f"writer {thread.name} hangs"
        unexpected = [message for w in self.writers for message in w.unexpected]
        if unexpected:
            lines = self.server.output().splitlines()
            said = "\n".join([line for line in lines if line[:1] != " "][-20:])
            raise AssertionError(
                "unexpected answers:\n" + "\n".join(unexpected) + "\n"
                f"the server said:\n{said}"
            )

    def go_on(self, operations: int) -> None:
        """Returns once the writers have acknowledged `operations` more mixed writes (or
        have all stopped)."""
        target = sum(w.mixed for w in self.writers) + operations
        deadline = time.monotonic() + WAIT_LIMIT_S
        while sum(w.mixed for w in self.writers) < target:
            if not any(thread.is_alive() for thread in self.threads):
                return  # `join` says why
            assert time.monotonic() < deadline, "the writers make no progress"
            time.sleep(0.005)

    def finish(self) -> None:
        self.stop.set()
        self.join()


# -- checks -----------------------------------------------------------------------------


def info(client: httpx.Client) -> dict:
    response = client.get(f"/collections/{COLLECTION}")
    assert response.status_code == 200, response.text
    return response.json()["result"]


def wait_for(url: str, condition: Callable[[dict], bool], what: str) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        deadline = time.monotonic() + WAIT_LIMIT_S
        while not condition(info(client)):
            assert time.monotonic() < deadline, f"{what} never happened: {info(client)}"
            time.sleep(0.02)


def count(client: httpx.Client, query_filter: dict | None = None) -> int:
    body: dict = {"exact": True}
    if query_filter is not None:
        body["filter"] = query_filter
    response = client.post(f"{points_path()}/count", json=body)
    assert response.status_code == 200, response.text
    return response.json()["result"]["count"]


def scrolled_ids(client: httpx.Client) -> list:
    ids: list = []
    offset = None
    while True:
        body = {"limit": 10_000, "with_payload": False, "with_vector": False}
        if offset is not None:
            body["offset"] = offset
        response = client.post(f"{points_path()}/scroll", json=body)
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        ids.extend(record["id"] for record in result["points"])
        offset = result["next_page_offset"]
        if offset is None:
            return ids


def retrieved(client: httpx.Client, ids: list[int]) -> State:
    state: State = {}
    for start in range(0, len(ids), 2_000):
        response = client.post(
            points_path(),
            json={
                "ids": ids[start : start + 2_000],
                "with_payload": True,
                "with_vector": True,
            },
        )
        assert response.status_code == 200, response.text
        for record in response.json()["result"]:
            assert record["id"] not in state, f"{record['id']} retrieved twice"
            state[record["id"]] = (tuple(record["vector"]), record["payload"] or {})
    return state


def differences(expected: State, got: State, limit: int = 5) -> str:
    lost = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    changed = sorted(i for i in set(expected) & set(got) if expected[i] != got[i])
    lines = [
        f"{len(lost)} points lost, e.g. {lost[:limit]}",
        f"{len(extra)} points that should not be there, e.g. {extra[:limit]}",
        f"{len(changed)} points differ",
    ]
    for point_id in changed[:limit]:
        (vector, payload), (got_vector, got_payload) = expected[point_id], got[point_id]
        what = "payload" if vector == got_vector else "vector and payload"
        if payload == got_payload:
            what = "vector"
        lines.append(f"  {point_id}: {what}: model {payload}, server {got_payload}")
    return "\n".join(lines)


def check(url: str, writers: list[Writer], context: str) -> int:
    """Compares the collection with the writers' models; each writer's in-flight
    operation may have landed (then it is acknowledged in the model). Returns how many
    in-flight operations landed."""
    landed = 0
    with httpx.Client(base_url=url, timeout=60) as client:
        ids = scrolled_ids(client)
        assert len(ids) == len(set(ids)), f"{context}: a scroll returns a point twice"
        total = count(client)
        assert total == len(ids), (
            f"{context}: count says {total}, a scroll finds {len(ids)}"
        )
        status = info(client)
        assert status["points_count"] == total, (
            f"{context}: collection info says {status['points_count']} points, count {total}"
        )
        strangers = [i for i in ids if not any(w.owns(i) for w in writers)]
        assert not strangers, f"{context}: points nobody wrote: {strangers[:5]}"
        wanted = set(ids)
        for writer in writers:
            wanted.update(writer.model)
            if writer.in_flight is not None:
                wanted.update(writer.in_flight.applied_to(writer.model))
        stored = retrieved(client, sorted(wanted))
        assert set(stored) == set(ids), (
            f"{context}: retrieve and scroll disagree: retrieve finds "
            f"{sorted(set(stored) - set(ids))[:5]} that scroll does not, scroll "
            f"{sorted(set(ids) - set(stored))[:5]} that retrieve does not"
        )
        for writer in writers:
            mine = {i: point for i, point in stored.items() if writer.owns(i)}
            operation, writer.in_flight = writer.in_flight, None
            if operation is not None and operation.field is not None:
                # An index creation changes no point; if the index is there, it stays.
                if operation.field in status["payload_schema"]:
                    writer.acknowledge(operation)
                operation = None
            if mine == writer.model:
                continue
            if operation is not None and mine == operation.applied_to(writer.model):
                writer.acknowledge(operation)
                landed += 1
                continue
            in_flight = "nothing" if operation is None else operation.kind
            raise AssertionError(
                f"{context}: writer {writer.name}'s points are not as its "
                f"{sum(writer.counts.values())} acknowledged operations left them "
                f"({in_flight} in flight):\n{differences(writer.model, mine)}"
            )
        indexes = {w: t["data_type"] for w, t in status["payload_schema"].items()}
        expected = set().union(*(w.indexes for w in writers))
        assert expected <= set(indexes) <= set(INDEXES), (
            f"{context}: payload indexes {indexes}, acknowledged {sorted(expected)}"
        )
        for field, data_type in indexes.items():
            assert data_type == INDEXES[field], (
                f"{context}: index {field} is {data_type}"
            )
            having = sum(
                1
                for w in writers
                for _, p in w.model.values()
                if p.get(field) is not None
            )
            points = status["payload_schema"][field]["points"]
            assert points == having, (
                f"{context}: index {field} covers {points} points, the model {having}"
            )
        for writer in writers:
            for group in (0, 1, GROUPS - 1):
                expected_count = len(writer.matching("g", group))
                got = count(client, writer.filter_of("g", group))
                assert got == expected_count, (
                    f"{context}: {writer.name}'s points with g = {group}: {got}, "
                    f"the model has {expected_count}"
                )
    return landed


def test_acknowledged_writes_survive_kills_and_restarts(tmp_path):
    chooser = random.Random(SEED)
    server = SagittaServer(tmp_path / "data")
    url = server.start()
    writers = [Writer(index) for index in range(WRITERS)]
    stops: Counter = Counter()
    landed = 0
    writing: Writing | None = None

    def restart(how: str, context: str) -> str:
        nonlocal landed
        assert server.process.poll() is None, (
            f"the server died on its own:\n{server.output()[-3000:]}"
        )
        if how == "SIGTERM":
            assert server.stop() == 0, server.output()
        else:
            server.kill()
        stops[how] += 1
        writing.join()
        new_url = server.start()
        landed += check(new_url, writers, f"{context} ({how})")
        return new_url

    def bulk_load(points: int = BULK_POINTS, pace: float = 0.0) -> Writing:
        """Starts the writers with a bulk load of `points` new points, and returns once
        it is acknowledged; the mixed writes go on."""
        for writer in writers:
            writer.bulk(points // WRITERS)
        started = Writing(server, writers, pace)
        for writer in writers:
            assert writer.bulk_loaded.wait(WAIT_LIMIT_S), "the bulk load did not end"
        return started

    try:
        response = httpx.put(
            f"{url}/collections/{COLLECTION}",
            json={"vectors": {"size": DIM, "distance": "Dot"}, "shard_number": 1},
            timeout=30,
        )
        assert response.status_code == 200, response.text

        # Issue 12's reproduction: the bulk load starts a seal of 20,000 points; mixed
        # writes, payload updates of the bulk-loaded points above all, go on one small
        # request after another while it runs; the writes stop, the collection turns
        # green; SIGTERM and restart. The engine lost the points updated during the seal
        # when the write buffer that holds them joined the new segment's graph (it is then
        # left in the log when the writes stop), which takes the right amount of writes
        # before and after the seal commits: SEAL_PACE_S and FILL_POINTS.
        writing = bulk_load(pace=SEAL_PACE_S)
        wait_for(url, lambda i: i["segments_count"] >= 1, "the bulk's seal")
        writing.finish()
        bulk_load(points=FILL_POINTS).finish()
        wait_for(url, lambda i: i["status"] == "green", "green after the writes")
        url = restart("SIGTERM", "stop 1: once green after writes during a seal")

        for number, plan in enumerate(PLANS, start=2):
            if plan == "bulk":
                writing = bulk_load()  # another seal of 20,000 points starts
                writing.go_on(chooser.randint(20, 400))  # the seal takes ~400 of them
            else:
                writing = Writing(server, writers)
                writing.go_on(chooser.randint(20, 150))
                if plan != "random":
                    writing.idle_pause()
                after = {"after idle seal": (40, 120), "during idle seal": (0, 20)}
                writing.go_on(chooser.randint(*after.get(plan, (0, 150))))
            how = "SIGTERM" if plan == "under load" else "SIGKILL"
            url = restart(how, f"stop {number}: {plan}")

        # Writes during an idle seal, then green, then a graceful restart, twice.
        writing = Writing(server, writers)
        writing.go_on(chooser.randint(20, 80))
        writing.idle_pause()
        writing.go_on(chooser.randint(0, 60))
        writing.finish()
        wait_for(url, lambda i: i["status"] == "green", "green after the writes")
        number = len(PLANS) + 2
        url = restart("SIGTERM", f"stop {number}: once green")
        url = restart("SIGTERM", f"stop {number + 1}: again with no write in between")

        counts = sum((w.counts for w in writers), Counter())
        print(
            f"\noperations acknowledged: {dict(counts)}\nstops: {dict(stops)}; "
            f"in-flight operations found applied: {landed}"
        )
        mixed = {k: n for k, n in counts.items() if k != "bulk upsert"}
        assert sum(mixed.values()) >= 500, f"the test exercised too little: {mixed}"
        kinds = {
            "upsert",
            "delete",
            "delete by filter",
            "set payload",
            "overwrite payload",
            "delete payload keys",
            "clear payload",
            "create index",
        }
        assert kinds <= set(mixed), f"some write kinds were never acknowledged: {mixed}"
    finally:
        server.stop()
