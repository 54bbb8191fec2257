"""The embedded database: sagittadb.open(path) → durable collections with payloads."""

import subprocess
import sys
import uuid

import numpy as np
import pytest
import sagittadb


def vectors(count, dim=8, seed=0):
    return np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)


def test_collections_round_trip_through_reopen(tmp_path):
    db = sagittadb.open(tmp_path / "data")
    docs = db.create_collection("docs", dim=8, distance="Cosine", shard_number=2)
    data = vectors(200)
    ids = list(range(200))
    payloads = [{"title": f"doc {i}", "tags": ["a", "b"][: i % 3]} for i in ids]
    docs.upsert(ids=ids, vectors=data, payloads=payloads)
    key = uuid.UUID("12345678-1234-5678-1234-567812345678")
    docs.upsert(ids=[key], vectors=data[:1] * 2, payloads=[None], wait=False)
    assert docs.count() == 201 and len(docs) == 201
    hits = docs.search(data[17], limit=3)
    assert hits[0]["id"] == 17 and hits[0]["payload"] == payloads[17]
    assert abs(hits[0]["score"] - 1.0) < 1e-5
    assert "vector" not in hits[0]
    assert {hit["id"] for hit in docs.search(data[0], limit=2)} == {0, str(key)}
    docs.delete([3, 4])
    assert [p["id"] for p in docs.get([2, 3, 4, str(key)])] == [2, str(key)]
    assert db.list_collections() == ["docs"]
    del docs, db

    db = sagittadb.open(tmp_path / "data")
    docs = db.collection("docs")
    assert (docs.dim, docs.distance, docs.count()) == (8, "Cosine", 199)
    (point,) = docs.get([5])
    assert point["payload"] == payloads[5]
    np.testing.assert_allclose(
        point["vector"], data[5] / np.linalg.norm(data[5]), rtol=1e-5
    )
    db.drop_collection("docs")
    with pytest.raises(sagittadb.CollectionNotFoundError):
        db.collection("docs")


def test_bad_input_names_the_field_and_stores_nothing(tmp_path):
    db = sagittadb.open(tmp_path)
    col = db.create_collection("c", dim=4, distance="Dot")
    with pytest.raises(sagittadb.CollectionExistsError):
        db.create_collection("c", dim=4)
    with pytest.raises(sagittadb.InvalidParameterError, match="collection name"):
        db.create_collection("no/slashes", dim=4)
    with pytest.raises(sagittadb.InvalidParameterError, match="distance"):
        db.create_collection("d", dim=4, distance="Manhattan")
    with pytest.raises(sagittadb.DimensionError):
        col.upsert(ids=[1, 2], vectors=np.ones((2, 5), dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="non-finite"):
        col.upsert(ids=[1], vectors=np.array([[1, np.inf, 0, 0]], dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="not a valid UUID"):
        col.upsert(ids=["not-a-uuid"], vectors=np.ones((1, 4), dtype=np.float32))
    # Python's uuid.UUID takes a sign, "urn:uuid:" with simple hex and braces around
    # simple hex; Qdrant (and the server) refuse them (issue 13 §2)
    for text in [
        "+f9619ff8b86d011b42d00c04fc964ff",
        "{0f9619ff8b86d011b42d00c04fc964ff}",
        "urn:uuid:0f9619ff8b86d011b42d00c04fc964ff",
    ]:
        with pytest.raises(sagittadb.InvalidParameterError, match="not a valid UUID"):
            col.upsert(ids=[text], vectors=np.ones((1, 4), dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="payload"):
        col.upsert(
            ids=[1], vectors=np.ones((1, 4), dtype=np.float32), payloads=[[1, 2, 3]]
        )
    with pytest.raises(sagittadb.DimensionError, match="ids"):
        col.upsert(ids=[1, 2, 3], vectors=np.ones((2, 4), dtype=np.float32))
    with pytest.raises(sagittadb.DimensionError, match="query"):
        col.search(np.ones(3, dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="limit"):
        col.search(np.ones(4, dtype=np.float32), limit=0)
    assert col.count() == 0


CHILD = """
import sys, numpy as np, sagittadb
col = sagittadb.open(sys.argv[1]).collection("c")
for batch in range(10**9):
    ids = list(range(batch * 5, batch * 5 + 5))
    vectors = np.array([[float(i)] * 4 for i in ids], dtype=np.float32)
    col.upsert(ids=ids, vectors=vectors, payloads=[{"i": i} for i in ids], wait=True)
    print(batch, flush=True)
"""


def test_acknowledged_writes_survive_sigkill(tmp_path):
    db = sagittadb.open(tmp_path)
    db.create_collection("c", dim=4, distance="Euclid", shard_number=2)
    del db
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    acknowledged = [int(child.stdout.readline()) for _ in range(20)]
    child.kill()
    child.wait()
    acknowledged += [int(line) for line in child.stdout.read().split()]
    col = sagittadb.open(tmp_path).collection("c")
    present = {p["id"]: p for p in col.get(range((acknowledged[-1] + 1) * 5))}
    for batch in acknowledged:
        for i in range(batch * 5, batch * 5 + 5):
            assert present[i]["payload"] == {"i": i}
            assert present[i]["vector"] == [float(i)] * 4


def test_filters_scroll_count_and_delete(tmp_path):
    col = sagittadb.open(tmp_path).create_collection("c", dim=2, distance="Euclid")
    ids = list(range(100))
    data = np.array([[float(i), 0.0] for i in ids], dtype=np.float32)
    payloads = [{"color": ["red", "blue"][i % 2], "n": i} for i in ids]
    col.upsert(ids=ids, vectors=data, payloads=payloads)
    red = {"must": [{"key": "color", "match": {"value": "red"}}]}
    assert col.count(filter=red) == 50
    hits = col.search(np.array([11.0, 0.0], dtype=np.float32), limit=3, filter=red)
    assert [hit["id"] for hit in hits] == [10, 12, 8]
    assert all(hit["payload"]["color"] == "red" for hit in hits)

    pages, offset = [], None
    while True:
        page, offset = col.scroll(limit=7, offset=offset, filter=red)
        pages += [point["id"] for point in page]
        if offset is None:
            break
    assert pages == list(range(0, 100, 2))

    small = {"must": [{"key": "n", "range": {"lt": 10}}]}
    assert col.delete(filter=small) == 10
    assert col.count() == 90 and col.count(filter=small) == 0
    with pytest.raises(
        sagittadb.InvalidParameterError, match=r"filter\.must\[0\]\.range\.lt"
    ):
        col.count(filter={"must": [{"key": "n", "range": {"lt": "ten"}}]})
    with pytest.raises(sagittadb.InvalidParameterError, match=r"filter.should"):
        col.search(np.zeros(2, dtype=np.float32), filter={"should": 5})


def test_payload_updates_thresholds_and_batches(tmp_path):
    col = sagittadb.open(tmp_path).create_collection("c", dim=2, distance="Euclid")
    ids = list(range(10))
    col.upsert(
        ids=ids,
        vectors=np.array([[float(i), 0.0] for i in ids], dtype=np.float32),
        payloads=[{"n": i, "keep": True} for i in ids],
    )
    col.set_payload({"flag": "x"}, ids=[1, 2])
    col.set_payload({"big": 1}, filter={"must": [{"key": "n", "range": {"gte": 8}}]})
    col.overwrite_payload({"only": 1}, ids=[3])
    col.delete_payload(["keep"], ids=[4])
    payloads = {p["id"]: p["payload"] for p in col.get(ids)}
    assert payloads[1] == {"n": 1, "keep": True, "flag": "x"}
    assert payloads[9] == {"n": 9, "keep": True, "big": 1}
    assert payloads[3] == {"only": 1} and payloads[4] == {"n": 4}
    with pytest.raises(sagittadb.InvalidParameterError, match="payload"):
        col.set_payload([1, 2], ids=[1])

    query = np.array([4.0, 0.0], dtype=np.float32)
    near = col.search(query, limit=10, score_threshold=1.5)
    assert sorted(hit["id"] for hit in near) == [3, 4, 5]
    assert [h["id"] for h in col.search(query, limit=2, offset=1)] == [
        h["id"] for h in col.search(query, limit=3)
    ][1:]
    queries = np.array([[0.0, 0.0], [9.0, 0.0]], dtype=np.float32)
    batch = col.search_batch(queries, limit=2)
    assert [[h["id"] for h in hits] for hits in batch] == [[0, 1], [9, 8]]
    with pytest.raises(sagittadb.DimensionError):
        col.search_batch(np.zeros((2, 3), dtype=np.float32))


def test_optimize_seals_into_an_index_that_survives_reopen(tmp_path):
    db = sagittadb.open(tmp_path)
    col = db.create_collection("c", dim=16, distance="Cosine", shard_number=2)
    data = vectors(3000, dim=16, seed=3)
    col.upsert(ids=range(3000), vectors=data, payloads=[{"i": i} for i in range(3000)])
    assert col.point_counts() == {"indexed": 0, "buffered": 3000}
    assert col.optimize() == 3000
    assert col.point_counts() == {"indexed": 3000, "buffered": 0}
    col.upsert(ids=[5], vectors=data[6:7], payloads=[{"moved": True}])
    col.delete([7])
    assert col.point_counts() == {"indexed": 2998, "buffered": 1}
    hits = col.search(data[6], limit=2)
    assert {hit["id"] for hit in hits} == {5, 6}
    assert all(hit["id"] != 7 for hit in col.search(data[7], limit=5))
    del col, db
    col = sagittadb.open(tmp_path).collection("c")
    assert col.point_counts() == {"indexed": 2998, "buffered": 1}
    assert col.get([5])[0]["payload"] == {"moved": True}
    # sealed vectors come back bit for bit as stored (unit length for Cosine)
    stored = np.array(col.get([100])[0]["vector"], dtype=np.float32)
    expected = data[100] / np.linalg.norm(data[100])
    np.testing.assert_allclose(stored, expected, rtol=1e-6)


def test_background_optimizer_indexes_and_reports_status(tmp_path):
    db = sagittadb.open(tmp_path / "data")
    docs = db.create_collection("docs", dim=16, distance="Dot", shard_number=2)
    docs.configure_optimizer(seal_points=500, seal_idle_seconds=0.05, max_segments=2)
    data = vectors(3_000, dim=16)
    for first in range(0, 3_000, 250):
        docs.upsert(ids=range(first, first + 250), vectors=data[first : first + 250])
    docs.wait_until_indexed(timeout=60)
    status = docs.status()
    assert status["status"] == "green"
    assert status["points_count"] == status["indexed_vectors_count"] == 3_000
    assert 1 <= status["segments_count"] <= 4
    assert status["optimizer_error"] is None
    query = vectors(1, dim=16, seed=9)[0]
    truth = np.argsort(-(data @ query))[:10].tolist()
    assert [hit["id"] for hit in docs.search(query, limit=10, exact=True)] == truth
    assert [hit["id"] for hit in docs.search(query, limit=10, hnsw_ef=500)] == truth
    (batch,) = docs.search_batch(query[None, :], limit=10, exact=True)
    assert [hit["id"] for hit in batch] == truth
    with pytest.raises(sagittadb.InvalidParameterError, match="hnsw_ef"):
        docs.search(query, hnsw_ef=0)
    with pytest.raises(sagittadb.InvalidParameterError, match="vacuum_fraction"):
        docs.configure_optimizer(vacuum_fraction=2.0)


def test_status_is_yellow_without_the_background_optimizer(tmp_path):
    db = sagittadb.open(tmp_path / "data", background_optimizer=False)
    docs = db.create_collection("docs", dim=8)
    docs.upsert(ids=[1, 2], vectors=vectors(2))
    assert docs.status()["status"] == "yellow"
    with pytest.raises(sagittadb.SagittaError, match="background_optimizer"):
        docs.wait_until_indexed(timeout=1)
    docs.optimize()
    assert docs.status()["status"] == "green"
    assert docs.status()["indexed_vectors_count"] == 2


def test_a_directory_is_opened_by_one_database_at_a_time(tmp_path):
    db = sagittadb.open(tmp_path / "data")
    with pytest.raises(sagittadb.StorageError, match="locked"):
        sagittadb.open(tmp_path / "data")
    script = f"import sagittadb; sagittadb.open({str(tmp_path / 'data')!r})"
    other = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True
    )
    assert other.returncode != 0 and "locked" in other.stderr
    del db
    sagittadb.open(tmp_path / "data")


def test_import_collection_is_indexed_at_once_and_all_or_nothing(tmp_path):
    db = sagittadb.open(tmp_path / "data")
    data = vectors(2_000, dim=16)
    payloads = [{"n": i} for i in range(2_000)]
    docs = db.import_collection(
        "docs",
        ids=range(2_000),
        vectors=data,
        payloads=payloads,
        distance="Dot",
        shard_number=2,
    )
    status = docs.status()
    assert status["status"] == "green"
    assert status["indexed_vectors_count"] == 2_000
    query = data[5]
    truth = np.argsort(-(data @ query))[:5].tolist()
    hits = docs.search(query, limit=5, exact=True)
    assert [hit["id"] for hit in hits] == truth
    assert docs.get([1999])[0]["payload"] == {"n": 1999}
    with pytest.raises(sagittadb.CollectionExistsError):
        db.import_collection("docs", ids=[1], vectors=data[:1])
    bad = data.copy()
    bad[1234, 3] = np.inf
    with pytest.raises(sagittadb.SagittaError, match="1234"):
        db.import_collection("other", ids=range(2_000), vectors=bad)
    assert db.list_collections() == ["docs"]


def test_payload_indexes_keep_answers_and_persist(tmp_path):
    db = sagittadb.open(tmp_path / "data", background_optimizer=False)
    docs = db.create_collection("docs", dim=8, distance="Euclid")
    rng = np.random.default_rng(3)
    payloads = [
        {"kind": f"k{i % 40}", "year": int(rng.integers(1990, 2030)), "ok": bool(i % 3)}
        for i in range(3_000)
    ]
    docs.upsert(ids=range(3_000), vectors=vectors(3_000), payloads=payloads)
    docs.optimize()
    filters = [
        {"must": [{"key": "kind", "match": {"value": "k7"}}]},
        {"must": [{"key": "year", "range": {"gte": 2000, "lt": 2002}}]},
        {"must": [{"key": "ok", "match": {"value": False}}]},
    ]
    before = [docs.count(f) for f in filters]
    expected = [
        sum(p["kind"] == "k7" for p in payloads),
        sum(2000 <= p["year"] < 2002 for p in payloads),
        sum(not p["ok"] for p in payloads),
    ]
    assert before == expected
    docs.create_payload_index("kind", "keyword")
    docs.create_payload_index("year", "integer")
    docs.create_payload_index("ok", "bool")
    assert [docs.count(f) for f in filters] == expected
    hits = docs.search(vectors(1, seed=5)[0], limit=5, filter=filters[0])
    assert all(hit["payload"]["kind"] == "k7" for hit in hits) and len(hits) == 5
    with pytest.raises(sagittadb.InvalidParameterError, match="geography"):
        docs.create_payload_index("place", "geography")
    del docs, db
    db = sagittadb.open(tmp_path / "data", background_optimizer=False)
    docs = db.collection("docs")
    assert docs.payload_schema() == {"kind": "keyword", "ok": "bool", "year": "integer"}
    docs.delete_payload_index("year")
    assert docs.payload_schema() == {"kind": "keyword", "ok": "bool"}


def test_a_text_index_makes_text_matches_token_matches(tmp_path):
    db = sagittadb.open(tmp_path / "data", background_optimizer=False)
    docs = db.create_collection("docs", dim=8, distance="Euclid")
    bodies = [
        "Graph search on disk",
        "photographs of cats",
        "the disk graph",
        "vector search",
    ]
    docs.upsert(
        ids=range(4), vectors=vectors(4), payloads=[{"body": b} for b in bodies]
    )
    text = {"must": [{"key": "body", "match": {"text": "graph"}}]}

    def matching() -> list[int]:
        hits = docs.search(vectors(1, seed=1)[0], limit=10, filter=text)
        return sorted(int(hit["id"]) for hit in hits)

    assert matching() == [1, 2]  # no index: a substring, case and all
    docs.create_payload_index("body", "text")
    assert docs.payload_schema() == {"body": "text"}
    assert matching() == [0, 2]  # a token in any case, not part of a word
    assert docs.count(text) == 2
    phrase = {"must": [{"key": "body", "match": {"phrase": "disk graph"}}]}
    with pytest.raises(sagittadb.InvalidParameterError, match="phrase_matching"):
        docs.count(phrase)


def test_disk_segments_search_like_exact_and_reopen(tmp_path):
    """segment_kind="disk": sealed vectors live in records files, RaBitQ codes in RAM."""
    db = sagittadb.open(tmp_path)
    col = db.create_collection(
        "d",
        dim=32,
        distance="Dot",
        shard_number=2,
        segment_kind="disk",
        page_cache_mb=4,
    )
    centers = vectors(20, dim=32, seed=11)
    picks = np.random.default_rng(12).integers(0, 20, size=4000)
    noise = vectors(4000, dim=32, seed=13) * 0.2
    data = (centers[picks] + noise).astype(np.float32)
    col.upsert(ids=range(4000), vectors=data, payloads=[{"i": i} for i in range(4000)])
    assert col.optimize() == 4000
    assert col.point_counts() == {"indexed": 4000, "buffered": 0}
    shard = tmp_path / "collections" / "d" / "shard-0"
    assert any(path.suffix == ".records" for path in shard.iterdir())
    queries = vectors(20, dim=32, seed=14)
    found = 0
    for query in queries:
        exact = {hit["id"] for hit in col.search(query, limit=10, exact=True)}
        found += len(exact & {hit["id"] for hit in col.search(query, limit=10)})
    assert found / 200 >= 0.95
    # RAM of the codes (~4 words + floats a vector): far below the 128-byte f32 vectors
    status = col.status()
    assert 0 < status["index_ram_bytes"] < 4000 * 32 * 4
    assert status["disk_bytes"] > 4000 * 32 * 4
    del col, db
    col = sagittadb.open(tmp_path).collection("d")
    got = col.get([17])[0]
    assert got["payload"] == {"i": 17}
    np.testing.assert_array_equal(np.array(got["vector"], dtype=np.float32), data[17])
    with pytest.raises(sagittadb.InvalidParameterError, match="segment_kind"):
        sagittadb.open(tmp_path / "other").create_collection(
            "x", dim=4, segment_kind="lsm"
        )
    with pytest.raises(sagittadb.InvalidParameterError, match="partition_size"):
        sagittadb.open(tmp_path / "other").create_collection(
            "x", dim=4, segment_kind="disk", partition_size=1
        )


def test_hnsw_vectors_on_disk_leave_ram(tmp_path):
    """on_disk=True (Qdrant's vectors.on_disk): sealed HNSW segments keep their rows in
    records files; RAM holds the graph and codes, and the answers stay those of the rows."""
    db = sagittadb.open(tmp_path)
    centers = vectors(20, dim=64, seed=21)
    picks = np.random.default_rng(22).integers(0, 20, size=3000)
    data = (centers[picks] + vectors(3000, dim=64, seed=23) * 0.2).astype(np.float32)
    made = {}
    for name, on_disk in (("rows", True), ("ram", False)):
        col = db.create_collection(name, dim=64, distance="Euclid", on_disk=on_disk)
        col.upsert(
            ids=range(3000), vectors=data, payloads=[{"i": i} for i in range(3000)]
        )
        assert col.optimize() == 3000
        made[name] = col
    shard = tmp_path / "collections" / "rows" / "shard-0"
    assert any(path.suffix == ".records" for path in shard.iterdir())
    # the rows (3000 × 64 × 4 bytes) left RAM
    ram = {name: col.status()["index_ram_bytes"] for name, col in made.items()}
    assert ram["rows"] + 3000 * 64 * 4 <= ram["ram"], ram
    found = 0
    for query in vectors(20, dim=64, seed=24):
        exact = [hit["id"] for hit in made["rows"].search(query, limit=10, exact=True)]
        assert exact == [
            hit["id"] for hit in made["ram"].search(query, limit=10, exact=True)
        ]
        found += len(
            set(exact) & {hit["id"] for hit in made["rows"].search(query, limit=10)}
        )
    assert found / 200 >= 0.95
    del made, col, db
    col = sagittadb.open(tmp_path).collection("rows")
    got = col.get([17])[0]
    assert got["payload"] == {"i": 17}
    np.testing.assert_array_equal(np.array(got["vector"], dtype=np.float32), data[17])


def test_disk_records_stripe_over_several_directories(tmp_path):
    """stripe_dirs: a disk segment's partitions spread over the database directory and
    each stripe directory (other devices); the same ones open it again."""
    stripes = [tmp_path / "nvme1", tmp_path / "nvme2"]
    db = sagittadb.open(tmp_path / "main", stripe_dirs=stripes)
    col = db.create_collection(
        "d", dim=16, distance="Euclid", segment_kind="disk", partition_size=50
    )
    data = vectors(3000, dim=16, seed=31)
    col.upsert(ids=range(3000), vectors=data, payloads=[{"i": i} for i in range(3000)])
    assert col.optimize() == 3000
    for root in [tmp_path / "main", *stripes]:
        shard = root / "collections" / "d" / "shard-0"
        assert any(path.suffix == ".records" for path in shard.iterdir()), root
    queries = vectors(10, dim=16, seed=32)
    before = [[hit["id"] for hit in col.search(q, limit=10)] for q in queries]
    del col, db
    with pytest.raises(sagittadb.SagittaError, match="stripe"):
        sagittadb.open(tmp_path / "main")
    col = sagittadb.open(tmp_path / "main", stripe_dirs=stripes).collection("d")
    assert [[hit["id"] for hit in col.search(q, limit=10)] for q in queries] == before
    got = col.get([1234])[0]
    np.testing.assert_array_equal(np.array(got["vector"], dtype=np.float32), data[1234])


def test_seals_append_to_a_disk_segment_and_split_its_partitions(tmp_path):
    """A later seal appends the buffer to the disk segment (a new records file for the
    new vectors only); partitions grown past twice `partition_size` split; every point
    is still found, and the segment reopens."""
    db = sagittadb.open(tmp_path, background_optimizer=False)
    col = db.create_collection(
        "a", dim=16, distance="Euclid", segment_kind="disk", partition_size=50
    )
    data = vectors(3000, dim=16, seed=31)
    col.upsert(ids=range(1000), vectors=data[:1000])
    assert col.optimize() == 1000
    shard = tmp_path / "collections" / "a" / "shard-0"
    first = {path.name for path in shard.glob("*.records")}
    assert len(first) == 1
    for start in (1000, 1500, 2000, 2500):
        col.upsert(ids=range(start, start + 500), vectors=data[start : start + 500])
        col.optimize()
    records = {path.name for path in shard.glob("*.records")}
    assert first < records and len(records) == 5, records
    (ivf,) = shard.glob("*.ivf")
    # the .ivf body (after its 24-byte frame) holds the partition count at byte 24
    partitions = int.from_bytes(ivf.read_bytes()[48:52], "little")
    assert partitions >= 3000 // (2 * 50), "partitions past 100 vectors were split"
    assert col.point_counts() == {"indexed": 3000, "buffered": 0}
    found = 0
    for query in data[::100]:
        exact = {hit["id"] for hit in col.search(query, limit=10, exact=True)}
        found += len(exact & {hit["id"] for hit in col.search(query, limit=10)})
    assert found / 300 >= 0.9
    del col, db
    col = sagittadb.open(tmp_path).collection("a")
    for point in col.get([0, 1499, 2999]):
        np.testing.assert_array_equal(
            np.array(point["vector"], dtype=np.float32), data[point["id"]]
        )


def test_a_memory_mapped_file_imports_in_place_at_half_precision(tmp_path):
    """A float32 memmap imported into a Dot disk collection without payloads is built
    where it lies; datatype="float16" keeps every value rounded to half precision."""
    data = vectors(3000, dim=24, seed=21)
    path = tmp_path / "rows.npy"
    np.save(path, data)
    mapped = np.load(path, mmap_mode="r")
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    col = db.import_collection(
        "m",
        np.arange(3000, dtype=np.uint64),
        mapped,
        distance="Dot",
        segment_kind="disk",
        page_cache_mb=1,
        datatype="float16",
        progress=False,
    )
    assert col.point_counts() == {"indexed": 3000, "buffered": 0}
    half = data.astype(np.float16).astype(np.float32)
    assert not np.array_equal(half, data)
    for point in col.get([0, 1234, 2999]):
        np.testing.assert_array_equal(
            np.array(point["vector"], dtype=np.float32), half[point["id"]]
        )
    query = vectors(1, dim=24, seed=22)[0]
    exact = [hit["id"] for hit in col.search(query, limit=10, exact=True)]
    assert exact == list(np.argsort(-(half @ query), kind="stable")[:10])
    with pytest.raises(sagittadb.InvalidParameterError, match="datatype"):
        db.create_collection("x", dim=4, datatype="uint8")
