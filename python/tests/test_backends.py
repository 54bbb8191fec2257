"""One API, two backends: every test here runs against the embedded engine
(``sagittadb.open``) and against a real ``sagitta serve`` (``sagittadb.connect``), and both
must give the answers of a numpy brute-force model.

The state machine drives random upserts, deletes (by id and by filter), payload updates
and searches; exact searches must equal the model exactly (integer-valued vectors and the
Dot distance make every score exact, ties break by id in both), HNSW searches must find
points at least as good as the model's k-th best for most of the k slots.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
import sagittadb
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

DIM = 6
K = 5


def fresh_name() -> str:
    return f"c{uuid.uuid4().hex[:12]}"


def test_the_same_operations_give_the_same_answers(database):
    rng = np.random.default_rng(7)
    name = fresh_name()
    docs = database.create_collection(name, dim=DIM, distance="Dot")
    assert name in database.list_collections()
    assert (docs.dim, docs.distance) == (DIM, "Dot")
    vectors = rng.integers(-3, 4, size=(30, DIM)).astype(np.float32)
    key = uuid.UUID(int=12345)
    ids = [*range(29), key]
    payloads = [{"g": i % 3, "meta": {"kind": f"k{i % 2}"}} for i in range(29)] + [None]
    docs.upsert(ids, vectors, payloads)
    assert (
        len(docs) == 30
        and docs.count({"must": [{"key": "g", "match": {"value": 1}}]}) == 10
    )
    query = rng.integers(-3, 4, size=DIM).astype(np.float32)
    scores = vectors @ query
    order = sorted(
        range(30), key=lambda row: (-scores[row], row if row < 29 else 1 << 70)
    )
    hits = docs.search(query, limit=K, exact=True, with_vector=True)
    assert [hit["score"] for hit in hits] == pytest.approx(
        [scores[row] for row in order[:K]]
    )
    assert [hit["id"] for hit in hits] == [
        ids[row] if row < 29 else str(key) for row in order[:K]
    ]
    assert all(len(hit["vector"]) == DIM for hit in hits)
    batch = docs.search_batch(np.stack([query, -query]), limit=3, exact=True)
    assert [hit["id"] for hit in batch[0]] == [hit["id"] for hit in hits[:3]]
    only_kind = {"must": [{"key": "meta.kind", "match": {"value": "k1"}}]}
    filtered = docs.search(query, limit=50, filter=only_kind, exact=True)
    assert sorted(hit["id"] for hit in filtered) == list(range(1, 29, 2))
    assert docs.get([3, key, 999]) == [
        {"id": 3, "payload": payloads[3], "vector": vectors[3].tolist()},
        {"id": str(key), "payload": None, "vector": vectors[29].tolist()},
    ]
    docs.set_payload({"tag": "x"}, ids=[0, 1])
    docs.overwrite_payload(
        {"g": 9}, filter={"must": [{"key": "g", "match": {"value": 2}}]}
    )
    docs.delete_payload(["meta"], ids=[0])
    assert docs.get([0])[0]["payload"] == {"g": 0, "tag": "x"}
    assert docs.get([2])[0]["payload"] == {"g": 9}
    seen, offset = [], None
    while True:
        page, offset = docs.scroll(limit=7, offset=offset)
        seen.extend(point["id"] for point in page)
        if offset is None:
            break
    assert seen == [*range(29), str(key)]
    assert docs.delete(filter={"must": [{"key": "g", "match": {"value": 9}}]}) == 9
    docs.delete(ids=[0, key])
    assert len(docs) == 19
    docs.create_payload_index("g", "integer")
    assert docs.payload_schema() == {"g": "integer"}
    reports = []
    docs.wait_until_indexed(
        timeout=60, progress=lambda done, total: reports.append((done, total))
    )
    assert reports and reports[-1] == (19, 19), reports
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)
    status = docs.status()
    assert status["status"] == "green" and status["points_count"] == 19
    database.drop_collection(name)
    assert name not in database.list_collections()


def test_errors_are_the_same_exceptions(database):
    name = fresh_name()
    docs = database.create_collection(name, dim=DIM)
    with pytest.raises(sagittadb.CollectionExistsError):
        database.create_collection(name, dim=DIM)
    with pytest.raises(sagittadb.CollectionNotFoundError):
        database.collection(fresh_name())
    with pytest.raises(sagittadb.CollectionNotFoundError):
        database.drop_collection(fresh_name())
    with pytest.raises(sagittadb.DimensionError, match="dim"):
        docs.upsert([1], np.ones((1, DIM + 1), dtype=np.float32))
    with pytest.raises(sagittadb.DimensionError):
        docs.search(np.ones(DIM - 1, dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match=r"non-finite|NaN"):
        docs.upsert([1], np.full((1, DIM), np.nan, dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="filter"):
        docs.count({"must": [{"key": "a", "range": {"gt": "soon"}}]})
    assert len(docs) == 0


class Model(RuleBasedStateMachine):
    """A collection and its brute-force model: id -> (vector, payload)."""

    database = None  # set per backend before the run

    @initialize()
    def create(self):
        self.name = fresh_name()
        self.collection = self.database.create_collection(
            self.name, dim=DIM, distance="Dot"
        )
        self.points: dict[int, tuple[np.ndarray, dict | None]] = {}

    def teardown(self):
        self.database.drop_collection(self.name)

    ids = st.lists(st.integers(0, 40), min_size=1, max_size=8, unique=True)
    vector = st.lists(st.integers(-3, 3), min_size=DIM, max_size=DIM)
    group = st.integers(0, 3)

    @rule(ids=ids, data=st.data())
    def upsert(self, ids, data):
        vectors = np.array([data.draw(self.vector) for _ in ids], dtype=np.float32)
        payloads = [
            data.draw(st.none() | st.builds(lambda g: {"g": g}, self.group))
            for _ in ids
        ]
        self.collection.upsert(ids, vectors, payloads, wait=data.draw(st.booleans()))
        for point_id, row, payload in zip(ids, vectors, payloads, strict=True):
            self.points[point_id] = (row, payload)

    @rule(ids=ids)
    def delete(self, ids):
        self.collection.delete(ids=ids)
        for point_id in ids:
            self.points.pop(point_id, None)

    @rule(group=group)
    def delete_by_filter(self, group):
        matched = self.collection.delete(filter=self.group_filter(group))
        doomed = [
            i
            for i, (_, payload) in self.points.items()
            if self.in_group(payload, group)
        ]
        assert matched == len(doomed)
        for point_id in doomed:
            del self.points[point_id]

    @rule(ids=ids, value=st.integers(0, 9), overwrite=st.booleans())
    def change_payload(self, ids, value, overwrite):
        change = (
            (lambda: self.collection.overwrite_payload({"g": value % 4}, ids=ids))
            if overwrite
            else (lambda: self.collection.set_payload({"h": value}, ids=ids))
        )
        if self.refused_for_a_missing_point(ids, change):
            return
        for point_id in ids:
            if point_id in self.points:
                row, payload = self.points[point_id]
                payload = (
                    {"g": value % 4} if overwrite else {**(payload or {}), "h": value}
                )
                self.points[point_id] = (row, payload)

    @rule(ids=ids)
    def drop_group_key(self, ids):
        def change():
            self.collection.delete_payload(["g"], ids=ids)

        if self.refused_for_a_missing_point(ids, change):
            return
        for point_id in ids:
            if point_id in self.points:
                row, payload = self.points[point_id]
                rest = {k: v for k, v in (payload or {}).items() if k != "g"}
                self.points[point_id] = (row, rest or None)

    def refused_for_a_missing_point(self, ids, change) -> bool:
        """Runs a payload change by ids; when one of them names no point, both backends
        refuse it whole with `PointNotFoundError` (as Qdrant's server does)."""
        if all(point_id in self.points for point_id in ids):
            change()
            return False
        with pytest.raises(sagittadb.PointNotFoundError):
            change()
        return True

    @staticmethod
    def group_filter(group):
        return {"must": [{"key": "g", "match": {"value": group}}]}

    @staticmethod
    def in_group(payload, group):
        return payload is not None and payload.get("g") == group

    def ranked(self, query, group=None):
        """The model's (score, id) list, best first, ties by id."""
        scored = [
            (float(row @ query), point_id)
            for point_id, (row, payload) in self.points.items()
            if group is None or self.in_group(payload, group)
        ]
        return sorted(scored, key=lambda pair: (-pair[0], pair[1]))

    @rule(query=vector, group=st.none() | group)
    def exact_search(self, query, group):
        query = np.array(query, dtype=np.float32)
        hits = self.collection.search(
            query,
            limit=K,
            exact=True,
            filter=None if group is None else self.group_filter(group),
        )
        expected = self.ranked(query, group)[:K]
        assert [(hit["score"], hit["id"]) for hit in hits] == expected

    @rule(query=vector)
    def approximate_search(self, query):
        query = np.array(query, dtype=np.float32)
        hits = self.collection.search(query, limit=K)
        expected = self.ranked(query)[:K]
        assert len(hits) == len(expected)
        assert len({hit["id"] for hit in hits}) == len(hits), "a point came back twice"
        for hit in hits:
            row, _ = self.points[hit["id"]]
            assert hit["score"] == pytest.approx(float(row @ query))
        if expected:
            kth = expected[-1][0]
            good = sum(hit["score"] >= kth - 1e-4 for hit in hits)
            assert good >= 0.8 * len(expected), (hits, expected)

    @invariant()
    def counts_agree(self):
        if not hasattr(self, "collection"):
            return
        assert len(self.collection) == len(self.points)
        for group in range(4):
            members = sum(self.in_group(p, group) for _, p in self.points.values())
            assert self.collection.count(self.group_filter(group)) == members

    @rule()
    def scroll_and_get_everything(self):
        seen, offset = [], None
        while True:
            page, offset = self.collection.scroll(limit=9, offset=offset)
            seen.extend(page)
            if offset is None:
                break
        assert [point["id"] for point in seen] == sorted(self.points)
        for point in seen:
            assert (point["payload"] or None) == self.points[point["id"]][1]
        stored = self.collection.get(sorted(self.points))
        for point in stored:
            row, payload = self.points[point["id"]]
            assert point["vector"] == row.tolist()
            assert (point["payload"] or None) == payload


@pytest.mark.parametrize("backend", ["embedded", "remote"])
def test_state_machine_against_brute_force(backend, tmp_path, server):
    if backend == "embedded":
        Model.database = sagittadb.open(tmp_path / "db")
    else:
        Model.database = sagittadb.connect(server.url)
    run_state_machine_as_test(
        Model,
        settings=settings(
            max_examples=25,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_import_collection_reports_progress_and_a_raising_callback_leaves_nothing(
    database, monkeypatch
):
    if isinstance(database, sagittadb.RemoteDatabase):
        monkeypatch.setattr(sagittadb.remote, "UPLOAD_BATCH_POINTS", 10)
    name = fresh_name()
    reports = []
    docs = database.import_collection(
        name,
        range(35),
        np.ones((35, 2), dtype=np.float32),
        progress=lambda done, total: reports.append((done, total)),
    )
    assert len(docs) == 35
    assert reports and reports[-1] == (35, 35), reports
    assert all(total == 35 for _, total in reports), reports
    assert [done for done, _ in reports] == sorted(done for done, _ in reports)

    def refuse(done, total):
        raise RuntimeError(f"refused at {done}/{total}")

    other = fresh_name()
    with pytest.raises(RuntimeError, match="refused at"):
        database.import_collection(
            other, range(35), np.ones((35, 2), dtype=np.float32), progress=refuse
        )
    with pytest.raises(TypeError, match="progress"):
        database.import_collection(
            other, range(35), np.ones((35, 2), dtype=np.float32), progress="yes"
        )
    assert other not in database.list_collections()
    database.drop_collection(name)


def test_progress_arguments(database, monkeypatch):
    from sagittadb import progress

    assert progress.resolve(False, "x") is None
    callback = print
    assert progress.resolve(callback, "x") is callback
    with pytest.raises(TypeError, match="progress"):
        progress.resolve("yes", "x")
    # Not a terminal (pytest captures standard error): the default draws nothing.
    assert progress.resolve(None, "x") is None
    name = fresh_name()
    docs = database.create_collection(name, dim=2)
    with pytest.raises(TypeError, match="progress"):
        docs.wait_until_indexed(timeout=5, progress="yes")
    if isinstance(docs, sagittadb.RemoteCollection):
        monkeypatch.setattr(sagittadb.remote, "UPLOAD_BATCH_POINTS", 10)
        uploads = []
        docs.upsert(
            range(35),
            np.ones((35, 2), dtype=np.float32),
            progress=lambda done, total: uploads.append((done, total)),
        )
        assert uploads == [(10, 35), (20, 35), (30, 35), (35, 35)]


@pytest.mark.parametrize("distance", ["cosine", "l2", "Manhattan", "EUCLID", ""])
def test_both_backends_refuse_the_same_distance_names(database, distance):
    """One spelling of distance names, Qdrant's, in both backends (the embedded one took
    "l2" and any case, the server refused them)."""
    with pytest.raises(sagittadb.InvalidParameterError, match="distance"):
        database.create_collection(fresh_name(), dim=DIM, distance=distance)


@pytest.mark.parametrize("segment_kind", ["hnsw", "disk"])
def test_both_backends_keep_float16_collections_at_half_precision(
    database, segment_kind
):
    """``datatype="float16"`` (Qdrant's ``vectors.datatype``) rounds every stored value to
    half precision, in both backends and both segment kinds; others are refused alike."""
    name = fresh_name()
    docs = database.create_collection(
        name, dim=3, distance="Euclid", segment_kind=segment_kind, datatype="float16"
    )
    vector = np.array([0.1, 1.0, 2.71], dtype=np.float32)
    docs.upsert(ids=[1], vectors=[vector])
    stored = np.array(docs.get([1])[0]["vector"], dtype=np.float32)
    np.testing.assert_array_equal(stored, vector.astype(np.float16).astype(np.float32))
    assert not np.array_equal(stored, vector)
    with pytest.raises(sagittadb.InvalidParameterError, match="datatype"):
        database.create_collection(fresh_name(), dim=3, datatype="uint8")
