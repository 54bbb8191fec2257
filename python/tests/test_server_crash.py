"""Acknowledged writes survive SIGKILL.

Writers upsert small batches with `wait=true` and record a batch only once its 200 has
arrived; the server is SIGKILLed at a random moment, restarted on the same data
directory, and every acknowledged point must be there with its vector and payload. A
batch in flight at the kill may or may not be there, but if any of it is, it is intact.
"""

from __future__ import annotations

import random
import threading
import time
import uuid

import httpx
import numpy as np
from server_process import SagittaServer

DIM = 16
BATCH = 20
ITERATIONS = 6
COLLECTION = "crash"


class Writer(threading.Thread):
    """Upserts batches until a request fails (the server died)."""

    def __init__(self, url: str, name: str, make_id, first: int, seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.url = url
        self.make_id = make_id
        self.next = first
        self.rng = np.random.default_rng(seed)
        self.acknowledged: dict = {}
        self.in_flight: dict = {}
        self.unexpected: list[str] = []

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10) as client:
            while True:
                vectors = self.rng.standard_normal((BATCH, DIM)).astype(np.float32)
                batch = {}
                for row in vectors:
                    point_id = self.make_id(self.next)
                    batch[point_id] = (row, {"seq": self.next, "writer": self.name})
                    self.next += 1
                self.in_flight = batch
                body = {
                    "points": [
                        {"id": i, "vector": v.tolist(), "payload": p}
                        for i, (v, p) in batch.items()
                    ]
                }
                try:
                    response = client.put(
                        f"/collections/{COLLECTION}/points",
                        params={"wait": "true"},
                        json=body,
                    )
                except httpx.HTTPError:
                    return  # killed: this batch stays in flight
                if response.status_code != 200:
                    self.unexpected.append(f"{response.status_code}: {response.text}")
                    return
                self.acknowledged.update(batch)
                self.in_flight = {}


def unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def stored_points(url: str) -> dict:
    """Every point on the server, by scrolling, with vectors and payloads."""
    points = {}
    offset = None
    with httpx.Client(base_url=url, timeout=30) as client:
        while True:
            body = {"limit": 1000, "with_payload": True, "with_vector": True}
            if offset is not None:
                body["offset"] = offset
            response = client.post(
                f"/collections/{COLLECTION}/points/scroll", json=body
            )
            assert response.status_code == 200, response.text
            result = response.json()["result"]
            for record in result["points"]:
                assert record["id"] not in points, f"{record['id']} scrolled twice"
                points[record["id"]] = record
            offset = result["next_page_offset"]
            if offset is None:
                return points


def check(url: str, acknowledged: dict, maybe: dict, iteration: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        count = client.post(
            f"/collections/{COLLECTION}/points/count", json={"exact": True}
        )
        assert count.status_code == 200, count.text
        count = count.json()["result"]["count"]
        ids = list(acknowledged)
        retrieved = {}
        for start in range(0, len(ids), 1000):
            response = client.post(
                f"/collections/{COLLECTION}/points",
                json={
                    "ids": ids[start : start + 1000],
                    "with_payload": True,
                    "with_vector": True,
                },
            )
            assert response.status_code == 200, response.text
            retrieved.update((r["id"], r) for r in response.json()["result"])
    missing = [i for i in ids if i not in retrieved]
    assert not missing, (
        f"after kill {iteration}: {len(missing)} of {len(ids)} acknowledged points are lost, "
        f"e.g. {missing[:5]}"
    )
    stored = stored_points(url)
    assert count == len(stored), f"count says {count}, scroll finds {len(stored)}"
    extra = set(stored) - set(acknowledged)
    assert extra <= set(maybe), (
        f"points that were never written: {sorted(extra - set(maybe))[:5]}"
    )
    assert len(acknowledged) <= count <= len(acknowledged) + len(maybe)
    for point_id, record in list(retrieved.items()) + [(i, stored[i]) for i in extra]:
        vector, payload = acknowledged.get(point_id) or maybe[point_id]
        assert record["payload"] == payload, (
            f"point {point_id}: payload {record['payload']}"
        )
        np.testing.assert_allclose(
            unit(record["vector"]), unit(vector), atol=1e-5, err_msg=f"point {point_id}"
        )


def test_acknowledged_writes_survive_sigkill(tmp_path):
    chooser = random.Random(20240611)
    server = SagittaServer(tmp_path / "data")
    url = server.start()
    try:
        response = httpx.put(
            f"{url}/collections/{COLLECTION}",
            json={"vectors": {"size": DIM, "distance": "Cosine"}},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        acknowledged: dict = {}
        maybe: dict = {}
        next_int, next_uuid = 1, 1
        started = time.monotonic()
        for iteration in range(ITERATIONS):
            writers = [
                Writer(url, "ints", lambda n: n, next_int, seed=2 * iteration),
                Writer(
                    url,
                    "uuids",
                    lambda n: str(uuid.UUID(int=n)),
                    next_uuid,
                    seed=2 * iteration + 1,
                ),
            ]
            for writer in writers:
                writer.start()
            time.sleep(
                chooser.uniform(0.05, 0.5)
            )  # when to crash, not a wait for a result
            server.kill()
            for writer in writers:
                writer.join(timeout=30)
                assert not writer.is_alive(), (
                    f"writer {writer.name} hangs after the kill"
                )
                assert not writer.unexpected, writer.unexpected
                acknowledged.update(writer.acknowledged)
                maybe.update(writer.in_flight)
            next_int, next_uuid = writers[0].next, writers[1].next
            url = server.start()
            check(url, acknowledged, maybe, iteration)
        assert len(acknowledged) >= ITERATIONS * BATCH, (
            f"only {len(acknowledged)} points were acknowledged: the test exercised too little"
        )
        # A graceful stop and restart keeps everything too.
        assert server.stop() == 0, server.output()
        url = server.start()
        check(url, acknowledged, maybe, ITERATIONS)
        assert time.monotonic() - started < 60
    finally:
        server.stop()
