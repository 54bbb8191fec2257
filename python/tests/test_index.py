"""The sagittadb Python API over numpy: exactness, recall floors, persistence, bad input."""

import threading

import numpy as np
import pytest
import sagittadb

DIM = 40


def clustered(count, dim=DIM, seed=0):
    """Embedding-like data: a 12-d Gaussian latent, a fixed random projection, noise."""
    projection = np.random.default_rng(0).normal(size=(12, dim))
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(count, 12))
    noise = rng.normal(scale=0.5, size=(count, dim))
    return np.ascontiguousarray(latent @ projection + noise, dtype=np.float32)


def exact_top_k(base, queries, k, metric):
    if metric == "cosine":
        base = base / np.linalg.norm(base, axis=1, keepdims=True)
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    if metric == "l2":
        distances = (
            (queries[:, None, :].astype(np.float64) - base[None, :, :]) ** 2
        ).sum(-1)
    else:
        distances = -(queries.astype(np.float64) @ base.T.astype(np.float64))
    return np.argsort(distances, axis=1, kind="stable")[:, :k]


def recall(found, truth):
    k = truth.shape[1]
    hits = sum(
        len(set(f.tolist()) & set(t.tolist()))
        for f, t in zip(found, truth, strict=True)
    )
    return hits / (len(truth) * k)


def test_simd_level_is_reported():
    assert sagittadb.simd_level() in {"scalar", "neon", "avx2", "avx512", "avx512-vnni"}


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_flat_index_is_exact(metric):
    base, queries = clustered(2000, seed=1), clustered(40, seed=2)
    index = sagittadb.FlatIndex(DIM, metric=metric)
    index.add(base)
    ids, scores = index.search(queries, k=10, threads=2)
    assert ids.dtype == np.uint64 and ids.shape == (40, 10)
    assert scores.dtype == np.float32
    assert recall(ids, exact_top_k(base, queries, 10, metric)) == 1.0


@pytest.mark.parametrize("quantization", ["none", "sq8"])
@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_hnsw_recall_floor(metric, quantization):
    base, queries = clustered(3000, seed=3), clustered(60, seed=4)
    index = sagittadb.HnswIndex(
        DIM, metric=metric, m=12, ef_construction=80, quantization=quantization
    )
    index.add(base, threads=2)
    assert len(index) == 3000
    ids, _ = index.search(queries, k=10, ef=64, threads=2)
    assert recall(ids, exact_top_k(base, queries, 10, metric)) >= 0.95


def test_a_large_batch_is_placed_by_cluster_and_keeps_every_id_with_its_vector():
    """From 16,384 rows a batch is reordered by cluster inside the index (faster linking):
    ids, given or default, must still travel with their own vectors."""
    count = 20_000
    base = clustered(count, dim=16, seed=5)
    given = np.random.default_rng(3).permutation(10 * count)[:count].astype(np.uint64)
    for ids in (given, None):
        index = sagittadb.HnswIndex(16, metric="l2", capacity=count)
        index.add(base, ids=ids, link_order="shuffled" if ids is None else "clustered")
        expected = given if ids is not None else np.arange(count, dtype=np.uint64)
        sample = np.arange(0, count, 37)
        found, scores = index.search(base[sample], k=1, ef=64)
        assert np.mean(found[:, 0] == expected[sample]) >= 0.99
        assert np.all(scores[found[:, 0] == expected[sample], 0] < 1e-3)
        truth = exact_top_k(base, base[sample[:100]] + 0.01, 10, "l2")
        found, _ = index.search(base[sample[:100]] + 0.01, k=10, ef=64)
        assert recall(found, expected[truth]) >= 0.9
    # a bad value in a large batch is reported at the row the caller gave, nothing stored
    index = sagittadb.HnswIndex(16, metric="l2", capacity=count)
    bad = base.copy()
    bad[17_000, 3] = np.nan
    with pytest.raises(
        sagittadb.InvalidParameterError, match=r"row 17000 .* position 3"
    ):
        index.add(bad)
    assert len(index) == 0


def test_custom_ids_deletes_and_missing_slots():
    base = clustered(500, seed=5)
    ids = np.arange(1000, 1500, dtype=np.uint64)
    index = sagittadb.HnswIndex(DIM, metric="l2", m=8, ef_construction=40)
    index.add(base, ids=ids)
    found, _ = index.search(base[:1], k=1, ef=32)
    assert found[0, 0] == 1000
    assert index.mark_deleted(1000)
    assert not index.mark_deleted(1000)
    found, _ = index.search(base[:1], k=5, ef=32)
    assert 1000 not in found[0].tolist()
    small = sagittadb.FlatIndex(DIM, metric="dot")
    small.add(base[:2])
    found, _ = small.search(base[:1], k=4)
    assert (found[0, 2:] == sagittadb.MISSING_ID).all()


def test_save_and_load_round_trip(tmp_path):
    base, queries = clustered(1200, seed=6), clustered(20, seed=7)
    for index in (
        sagittadb.HnswIndex(DIM, metric="cosine", m=8, ef_construction=40),
        sagittadb.FlatIndex(DIM, metric="cosine"),
    ):
        index.add(base)
        path = tmp_path / f"{type(index).__name__}.sgt"
        index.save(path)
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []
        loaded = type(index).load(path)
        assert len(loaded) == len(index)
        before = index.search(queries, k=5)
        after = loaded.search(queries, k=5)
        np.testing.assert_array_equal(before[0], after[0])
        np.testing.assert_array_equal(before[1], after[1])


def test_corrupt_file_raises_format_error(tmp_path):
    index = sagittadb.HnswIndex(DIM, m=8, ef_construction=40)
    index.add(clustered(300, seed=8))
    path = tmp_path / "index.sgt"
    index.save(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(sagittadb.FormatError, match="checksum"):
        sagittadb.HnswIndex.load(path)
    with pytest.raises(OSError):
        sagittadb.HnswIndex.load(tmp_path / "missing.sgt")


def test_bad_input_names_the_field_and_stores_nothing():
    index = sagittadb.HnswIndex(4, metric="cosine")
    with pytest.raises(sagittadb.DimensionError, match="dim"):
        index.add(np.ones((2, 5), dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="non-finite"):
        index.add(np.array([[1, np.nan, 0, 0]], dtype=np.float32))
    with pytest.raises(sagittadb.DuplicateIdError, match="id 7"):
        index.add(
            np.ones((2, 4), dtype=np.float32), ids=np.array([7, 7], dtype=np.uint64)
        )
    with pytest.raises(sagittadb.DimensionError, match="ids"):
        index.add(np.ones((2, 4), dtype=np.float32), ids=np.array([1], dtype=np.uint64))
    assert len(index) == 0
    with pytest.raises(sagittadb.InvalidParameterError, match="`m`"):
        sagittadb.HnswIndex(4, m=1)
    with pytest.raises(sagittadb.InvalidParameterError, match="metric"):
        sagittadb.HnswIndex(4, metric="hamming")
    with pytest.raises(sagittadb.InvalidParameterError, match="quantization"):
        sagittadb.HnswIndex(4, quantization="pq")
    with pytest.raises(sagittadb.InvalidParameterError, match="link_order"):
        index.add(np.ones((1, 4), dtype=np.float32), link_order="random")
    assert len(index) == 0
    index.add(np.ones((1, 4), dtype=np.float32))
    with pytest.raises(sagittadb.InvalidParameterError, match="`ef`"):
        index.search(np.ones(4, dtype=np.float32), k=1, ef=0)
    with pytest.raises(sagittadb.DimensionError):
        index.search(np.ones((1, 2, 4), dtype=np.float32), k=1)
    assert issubclass(sagittadb.DimensionError, sagittadb.SagittaError)


def test_search_runs_while_another_thread_inserts():
    base = clustered(4000, seed=9)
    index = sagittadb.HnswIndex(DIM, metric="l2", m=8, ef_construction=40)
    index.add(base[:500])
    errors = []

    def insert():
        try:
            for start in range(500, 4000, 500):
                index.add(base[start : start + 500], threads=1)
        except Exception as error:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(error)

    writer = threading.Thread(target=insert)
    writer.start()
    searches = 0
    while writer.is_alive() or searches < 3:
        ids, _ = index.search(base[:8], k=3, ef=16, threads=1)
        assert (ids < 4000).all()
        searches += 1
    writer.join()
    assert not errors
    assert len(index) == 4000
    assert index.memory_bytes()["index"] < index.memory_bytes()["total"]


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_interleaved_batches_answer_exactly_as_single_queries(metric):
    """interleave=True walks several queries per thread in turn; on the same index it
    must return the same ids and scores as the one-query-at-a-time walk."""
    base, queries = clustered(3000, seed=21), clustered(37, seed=22)
    index = sagittadb.HnswIndex(
        DIM, metric=metric, m=12, ef_construction=60, quantization="sq8"
    )
    index.add(base, threads=2)
    for deleted in range(0, 3000, 7):
        assert index.mark_deleted(deleted)
    for ef in (16, 64):
        for threads in (1, 2):
            plain = index.search(queries, k=10, ef=ef, threads=threads)
            lanes = index.search(queries, k=10, ef=ef, threads=threads, interleave=True)
            np.testing.assert_array_equal(lanes[0], plain[0])
            np.testing.assert_array_equal(lanes[1], plain[1])


def test_search_stats_count_the_work():
    base = clustered(2000, seed=10)
    for quantization in ("none", "sq8"):
        index = sagittadb.HnswIndex(
            DIM, m=8, ef_construction=40, quantization=quantization
        )
        index.add(base)
        small = index.search_stats(base[:20], k=10, ef=16)
        large = index.search_stats(base[:20], k=10, ef=128)
        assert 16 <= small["traversal_distances"] < large["traversal_distances"] <= 2000
        if quantization == "sq8":
            assert small["rescore_distances"] == 16  # min(ef, max(4k, 32)) candidates
            assert large["rescore_distances"] == 40
        else:
            assert large["rescore_distances"] == 0
        assert large["bytes_read"] > small["bytes_read"] > 0


def test_float64_and_non_contiguous_inputs_are_converted():
    base = clustered(300, seed=11)
    index = sagittadb.FlatIndex(DIM, metric="l2")
    index.add(base.astype(np.float64))
    queries = base[:5]
    expected = index.search(queries, k=3)
    strided = np.asfortranarray(queries)
    assert not strided.flags["C_CONTIGUOUS"]
    for variant in (queries.astype(np.float64), strided, queries.tolist()):
        found = index.search(variant, k=3)
        np.testing.assert_array_equal(found[0], expected[0])
    np.testing.assert_array_equal(expected[0][:, 0], np.arange(5, dtype=np.uint64))


def test_small_first_batch_trains_sq8_once_the_index_is_large_enough():
    base = clustered(2500, seed=12)
    index = sagittadb.HnswIndex(DIM, metric="cosine", m=8, ef_construction=40)
    index.add(np.zeros((1, DIM), dtype=np.float32))
    assert index.memory_bytes()["codes"] == 0  # one zero vector must not fix the scale
    index.add(base, ids=np.arange(1, 2501, dtype=np.uint64))
    assert index.memory_bytes()["codes"] > 0
    ids, _ = index.search(base[:30], k=10, ef=64)
    truth = exact_top_k(base, base[:30], 10, "cosine") + 1
    assert recall(ids, truth) >= 0.95


def test_concurrent_adds_with_default_ids_never_collide():
    base = clustered(4000, seed=13)
    for index in (
        sagittadb.HnswIndex(DIM, m=8, ef_construction=40, capacity=10),
        sagittadb.FlatIndex(DIM),
    ):
        errors = []

        def add(part, index=index, errors=errors):
            try:
                for start in range(0, 1000, 100):
                    index.add(part[start : start + 100])
            except Exception as error:  # noqa: BLE001 - surfaced by the assertion below
                errors.append(error)

        threads = [
            threading.Thread(target=add, args=(base[i * 1000 : (i + 1) * 1000],))
            for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert len(index) == 4000
        ids, _ = index.search(base, k=1)
        # ids 0..3999 were each given once; every point finds itself
        assert len(set(ids[:, 0].tolist())) > 3900


def test_flat_rejects_duplicate_and_reserved_ids():
    index = sagittadb.FlatIndex(4)
    index.add(np.ones((1, 4), dtype=np.float32), ids=np.array([5], dtype=np.uint64))
    with pytest.raises(sagittadb.DuplicateIdError, match="id 5"):
        index.add(np.ones((1, 4), dtype=np.float32), ids=np.array([5], dtype=np.uint64))
    with pytest.raises(sagittadb.InvalidParameterError, match="reserved"):
        index.add(
            np.ones((1, 4), dtype=np.float32),
            ids=np.array([sagittadb.MISSING_ID], dtype=np.uint64),
        )
    assert len(index) == 1
