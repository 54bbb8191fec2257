import h5py
import numpy as np
import pytest

from bench import datasets
from bench.datasets import (
    Dataset,
    exact_search,
    ground_truth,
    load_debian_minilm,
    load_hdf5,
    load_npy_dir,
    load_vecs_dir,
    read_vecs,
    recall_at_k,
    synthetic,
    write_vecs,
)


def test_synthetic_is_deterministic_and_seed_dependent():
    a = synthetic(3000, 40, 48, intrinsic_dim=8, seed=1)
    b = synthetic(3000, 40, 48, intrinsic_dim=8, seed=1)
    c = synthetic(3000, 40, 48, intrinsic_dim=8, seed=2)
    assert a.base.tobytes() == b.base.tobytes()
    assert a.queries.tobytes() == b.queries.tobytes()
    assert a.base.tobytes() != c.base.tobytes()
    assert a.queries.tobytes() != c.queries.tobytes()


def test_synthetic_shapes_dtypes_normalized():
    ds = synthetic(20000, 33, 24, intrinsic_dim=6)  # crosses a chunk boundary
    assert ds.name == "synth-24-20k"
    assert ds.metric == "cosine"
    assert ds.base.shape == (20000, 24) and ds.queries.shape == (33, 24)
    assert ds.base.dtype == np.float32 and ds.queries.dtype == np.float32
    assert ds.base.flags.c_contiguous and ds.queries.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(ds.base, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(ds.queries, axis=1), 1.0, atol=1e-5)
    assert np.all(np.isfinite(ds.base))
    # Queries are fresh draws, not copies of base rows.
    assert (ds.queries @ ds.base.T).max() < 0.99999


def test_synthetic_prefix_independent_of_n():
    small = synthetic(1000, 10, 16, intrinsic_dim=4)
    large = synthetic(2000, 10, 16, intrinsic_dim=4)
    np.testing.assert_array_equal(small.base, large.base[:1000])
    np.testing.assert_array_equal(small.queries, large.queries)


def _naive(base, queries, k, metric):
    out = []
    for q in queries:
        if metric == "l2":
            scores = [-float(np.sum((b.astype(np.float64) - q) ** 2)) for b in base]
        else:
            scores = [float(np.dot(b.astype(np.float64), q)) for b in base]
        out.append(sorted(range(len(base)), key=lambda i: -scores[i])[:k])
    return np.array(out)


@pytest.mark.parametrize("metric", ["cosine", "dot", "l2"])
def test_ground_truth_matches_naive_loop(metric):
    rng = np.random.default_rng(0)
    base = rng.standard_normal((300, 12)).astype(np.float32)
    queries = rng.standard_normal((7, 12)).astype(np.float32)
    if metric == "cosine":
        base, queries = datasets.normalize(base), datasets.normalize(queries)
    np.testing.assert_array_equal(
        exact_search(base, queries, 5, metric), _naive(base, queries, 5, metric)
    )


def test_ground_truth_cache(tmp_path):
    rng = np.random.default_rng(1)
    base = rng.standard_normal((200, 8)).astype(np.float32)
    queries = rng.standard_normal((5, 8)).astype(np.float32)
    first = ground_truth(base, queries, 10, "l2", tmp_path)
    files = list(tmp_path.glob("gt-*.npy"))
    assert len(files) == 1
    np.testing.assert_array_equal(
        ground_truth(base, queries, 10, "l2", tmp_path), first
    )
    ground_truth(base, queries, 10, "dot", tmp_path)  # different key
    assert len(list(tmp_path.glob("gt-*.npy"))) == 2
    assert first.dtype == np.int64 and first.shape == (5, 10)


def test_recall_hand_made():
    gt = np.array([[0, 1, 2, 3], [4, 5, 6, 7]])
    ids = np.array([[0, 1, 9, 8], [7, 6, 5, -1]])
    assert recall_at_k(ids, gt, 4) == pytest.approx((2 + 3) / 8)
    assert recall_at_k(ids, gt, 2) == pytest.approx((2 + 0) / 4)
    assert recall_at_k(gt, gt, 4) == 1.0


@pytest.mark.parametrize(
    "suffix,dtype", [(".fvecs", np.float32), (".ivecs", np.int32), (".bvecs", np.uint8)]
)
def test_vecs_round_trip(tmp_path, suffix, dtype):
    rng = np.random.default_rng(2)
    data = (rng.random((17, 5)) * 200).astype(dtype)
    path = tmp_path / f"x{suffix}"
    write_vecs(path, data)
    assert path.stat().st_size == 17 * (4 + 5 * np.dtype(dtype).itemsize)
    loaded = read_vecs(path)
    assert loaded.dtype == dtype
    np.testing.assert_array_equal(loaded, data)


def test_vecs_directory_loader(tmp_path):
    rng = np.random.default_rng(3)
    base = rng.integers(0, 255, (100, 16)).astype(np.uint8)
    queries = rng.integers(0, 255, (6, 16)).astype(np.uint8)
    write_vecs(tmp_path / "bigann_base.bvecs", base)
    write_vecs(tmp_path / "bigann_query.bvecs", queries)
    gt = exact_search(base.astype(np.float32), queries.astype(np.float32), 10, "l2")
    write_vecs(tmp_path / "bigann_groundtruth.ivecs", gt)
    ds = load_vecs_dir(tmp_path)
    assert (
        ds.metric == "l2" and ds.base.dtype == np.float32 and ds.base.shape == (100, 16)
    )
    np.testing.assert_array_equal(ds.gt, gt)


def test_hdf5_round_trip(tmp_path):
    rng = np.random.default_rng(4)
    train = rng.standard_normal((150, 10)).astype(np.float32)
    test = rng.standard_normal((8, 10)).astype(np.float32)
    neighbors = exact_search(
        datasets.normalize(train), datasets.normalize(test), 20, "cosine"
    )
    path = tmp_path / "tiny-10-angular.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "angular"
        f["train"], f["test"], f["neighbors"] = train, test, neighbors.astype(np.int32)
    ds = load_hdf5(path)
    assert ds.name == "tiny-10-angular" and ds.metric == "cosine"
    np.testing.assert_allclose(np.linalg.norm(ds.base, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(ds.gt, neighbors)
    assert ds.ensure_gt(10) is ds.gt  # shipped gt is deep enough
    np.testing.assert_array_equal(ds.subsample_queries(3).gt, neighbors[:3])


def test_hdf5_euclidean(tmp_path):
    path = tmp_path / "e.hdf5"
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = "euclidean"
        f["train"] = np.ones((4, 3), np.float32) * 3
        f["test"] = np.ones((2, 3), np.float32)
    ds = load_hdf5(path)
    assert ds.metric == "l2" and ds.gt is None
    assert ds.base[0, 0] == 3.0  # not normalized for l2


def test_npy_dir_and_debian_minilm_loader(tmp_path):
    rng = np.random.default_rng(5)
    base = rng.standard_normal((120, 6)).astype(np.float16)
    queries = rng.standard_normal((4, 6)).astype(np.float16)
    np.save(tmp_path / "base.npy", base)
    np.save(tmp_path / "queries.npy", queries)
    np.save(tmp_path / "gt.npy", np.zeros((4, 100), np.int32))  # stale float16 gt
    ds = load_debian_minilm(tmp_path)
    assert ds.name == "debian-minilm" and ds.metric == "cosine" and ds.gt is None
    assert ds.base.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(ds.base, axis=1), 1.0, atol=1e-5)
    gt = ds.ensure_gt(10)
    np.testing.assert_array_equal(gt, exact_search(ds.base, ds.queries, 10, "cosine"))
    npy = load_npy_dir(tmp_path, "dot")
    assert npy.metric == "dot" and npy.gt.shape == (4, 100)
    with pytest.raises(FileNotFoundError):
        load_debian_minilm(tmp_path / "missing")


def test_dataset_validation():
    with pytest.raises(ValueError):
        Dataset("x", np.zeros((3, 4)), np.zeros((2, 5)), "cosine")
    with pytest.raises(ValueError):
        Dataset("x", np.zeros((3, 4)), np.zeros((2, 4)), "hamming")


@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_streamed_ground_truth_equals_the_blocked_one(tmp_path, metric):
    name, _ = datasets.synthetic_to_files(tmp_path, 3000, 20, dim=32)
    reference = datasets.synthetic(3000, nq=20, dim=32)
    base = np.load(tmp_path / "base.npy", mmap_mode="r")
    assert name == reference.name
    np.testing.assert_array_equal(base, reference.base)
    np.testing.assert_array_equal(np.load(tmp_path / "queries.npy"), reference.queries)
    streamed = datasets.exact_search_streamed(base, reference.queries, 10, metric, 700)
    blocked = datasets.exact_search(reference.base, reference.queries, 10, metric)
    np.testing.assert_array_equal(streamed, blocked)
