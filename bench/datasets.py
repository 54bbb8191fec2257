"""Datasets for the benchmark harness: loaders, a synthetic generator and exact ground truth.

Every loader returns a :class:`Dataset` whose ``base`` and ``queries`` are C-contiguous float32
arrays and whose ``gt`` holds exact neighbour row indices (int64, nq x >=k) computed on exactly
those arrays. For ``metric == "cosine"`` the vectors are L2-normalized here, so every engine sees
the same unit vectors (and inner product on them equals cosine similarity).

Synthetic data calibration (see :func:`synthetic`)
---------------------------------------------------
Goal (datasets/README.md): HNSW with M=16, ef_construction=100 should need ef in the 64-128
range for recall@10 of 0.95-0.99, as real 768-d text embeddings do. Measured with
``python -m bench calibrate`` (hnswlib 0.8.0, space "ip", M=16, ef_construction=100,
2 threads, k=10, seed 42, intrinsic_dim=32, 300 clusters, dim=768), recall@10 by ef:

    ef                    16     24     32     48     64     96     128    192    256
    50k  diff 1.5 *     0.832  0.896  0.934  0.965  0.977  0.989  0.992  0.995  0.997
    50k  diff 1.6       0.819  0.884  0.921  0.956  0.969  0.982  0.988  0.992  0.995
    50k  diff 1.7       0.793  0.866  0.907  0.945  0.963  0.976  0.984  0.991  0.994
    200k diff 1.5 *     0.654  0.741  0.801  0.876  0.910  0.952  0.969  0.983  0.989
    200k diff 1.7       0.602  0.690  0.761  0.841  0.883  0.932  0.952  0.972  0.979
    (50k: 1,000 queries; 200k: 500 queries.) * = default.

Recall at a fixed ef falls much more from 50k to 200k on this data than "a bit" (probably
because noise makes the local neighbourhood high-dimensional once clusters get dense), so the
default is chosen for the 200k headline set rather than for the 50k target of ef 48-96 for
0.95 (which difficulty 1.7 meets): with difficulty 1.5, 50k needs ef ~40 for 0.95 and ~100
for 0.99; 200k needs ef ~96 for 0.95, ~128 for 0.97 and ~260 for 0.99. For comparison, an earlier
revision with difficulty 0.3-1.0 reached 0.95-0.97 already at ef 16 (n=20k), which measures
little; and real debian-minilm (384-d MiniLM, hnswlib, same settings) gets 0.951 at ef 16
and 0.989 at ef 64 at n=100k (0.932 / 0.987 at n=25k), so it is the easier of the two.
Reproduce with::

    python -m bench calibrate --n 50000 --dim 768 [--difficulty 1.5]
    python -m bench calibrate --n 200000 --dim 768 --queries 500
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench import report

METRICS = ("cosine", "dot", "l2")

# Defaults chosen by the calibration described in the module docstring.
DEFAULT_INTRINSIC_DIM = 32
DEFAULT_DIFFICULTY = 1.5
DEFAULT_CLUSTERS = 300
DEFAULT_SEED = 42

# ef -> hnswlib recall@10 on synth-768-50k with the defaults above (module docstring).
CALIBRATION_TABLE: dict[int, float] = {
    16: 0.8321,
    24: 0.8962,
    32: 0.9339,
    48: 0.9647,
    64: 0.9773,
    96: 0.9886,
    128: 0.9923,
    192: 0.9950,
    256: 0.9969,
}

_CHUNK_ROWS = 16384
REFERENCE_DIM = 768  # `difficulty` is defined at this dimension (see _synthetic_rows)


@dataclass
class Dataset:
    """Base vectors, query vectors, metric and exact ground truth (row indices into base)."""

    name: str
    base: np.ndarray
    queries: np.ndarray
    metric: str
    gt: np.ndarray | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got {self.metric!r}")
        self.base = np.ascontiguousarray(self.base, dtype=np.float32)
        self.queries = np.ascontiguousarray(self.queries, dtype=np.float32)
        if self.base.ndim != 2 or self.queries.ndim != 2:
            raise ValueError("base and queries must be 2-d arrays")
        if self.base.shape[1] != self.queries.shape[1]:
            raise ValueError(
                f"dimension mismatch: base {self.base.shape[1]}, queries {self.queries.shape[1]}"
            )
        if self.gt is not None:
            self.gt = np.ascontiguousarray(self.gt, dtype=np.int64)
            if self.gt.shape[0] != self.queries.shape[0]:
                raise ValueError("ground truth must have one row per query")

    @property
    def n(self) -> int:
        return int(self.base.shape[0])

    @property
    def dim(self) -> int:
        return int(self.base.shape[1])

    @property
    def nq(self) -> int:
        return int(self.queries.shape[0])

    def result_entry(self, k: int) -> dict:
        """The ``dataset`` object of a result document (bench-schema.md) searched with k."""
        entry = {
            "name": self.name,
            "n": self.n,
            "dim": self.dim,
            "metric": self.metric,
            "queries": self.nq,
            "k": k,
        }
        if self.extra:
            entry["source"] = self.extra
        return entry

    def subsample_queries(self, count: int) -> Dataset:
        """The first ``count`` queries (and their ground truth); deterministic."""
        if count <= 0 or count >= self.nq:
            return self
        gt = None if self.gt is None else self.gt[:count]
        return Dataset(
            self.name, self.base, self.queries[:count], self.metric, gt, self.extra
        )

    def ensure_gt(self, k: int, cache_dir: Path | None = None) -> np.ndarray:
        """Exact ground truth with at least ``k`` columns (computed and cached when absent)."""
        if self.gt is None or self.gt.shape[1] < k:
            self.gt = ground_truth(self.base, self.queries, k, self.metric, cache_dir)
        return self.gt


def normalize(x: np.ndarray) -> np.ndarray:
    """Row-wise L2 normalization in float32 (zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(x / norms, dtype=np.float32)


def _prepare(
    base: np.ndarray, queries: np.ndarray, metric: str
) -> tuple[np.ndarray, np.ndarray]:
    base = np.ascontiguousarray(base, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if metric == "cosine":
        base, queries = normalize(base), normalize(queries)
    return base, queries


# ---------------------------------------------------------------------------------------------
# Ground truth


def default_cache_dir() -> Path:
    env = os.environ.get("SAGITTA_BENCH_CACHE")
    return Path(env) if env else Path(__file__).resolve().parent / "cache"


def data_hash(base: np.ndarray, queries: np.ndarray, k: int, metric: str) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for array in (base, queries):
        digest.update(repr((array.shape, str(array.dtype))).encode())
        digest.update(np.ascontiguousarray(array).data)
    digest.update(f"k={k};metric={metric}".encode())
    return digest.hexdigest()


def exact_search(
    base: np.ndarray, queries: np.ndarray, k: int, metric: str
) -> np.ndarray:
    """Exact top-k row indices by blocked matmul + argpartition (best first)."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    n = base.shape[0]
    k = min(k, n)
    base = np.ascontiguousarray(base, dtype=np.float32)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    base_sq = np.einsum("ij,ij->i", base, base) if metric == "l2" else None
    # Bound the score block to about 256 MiB.
    block = max(1, min(queries.shape[0], (64 << 20) // max(n, 1)))
    result = np.empty((queries.shape[0], k), dtype=np.int64)
    for start in range(0, queries.shape[0], block):
        q = queries[start : start + block]
        scores = q @ base.T  # higher is better
        if metric == "l2":
            scores = (
                2.0 * scores - base_sq[None, :]
            )  # -(|b|^2 - 2 q.b), |q|^2 is constant
        if k < n:
            part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        else:
            part = np.tile(np.arange(n), (q.shape[0], 1))
        part_scores = np.take_along_axis(scores, part, axis=1)
        order = np.argsort(-part_scores, axis=1, kind="stable")
        result[start : start + block] = np.take_along_axis(part, order, axis=1)
    return result


def ground_truth(
    base: np.ndarray,
    queries: np.ndarray,
    k: int,
    metric: str,
    cache_dir: Path | None = None,
) -> np.ndarray:
    """Exact ground truth, cached under ``cache_dir`` keyed by a hash of data + k + metric."""
    cache_dir = default_cache_dir() if cache_dir is None else Path(cache_dir)
    key = data_hash(base, queries, k, metric)
    path = cache_dir / f"gt-{key}.npy"
    if path.exists():
        gt = np.load(path)
        if gt.shape == (queries.shape[0], min(k, base.shape[0])):
            return gt.astype(np.int64, copy=False)
    gt = exact_search(base, queries, k, metric)
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, gt)
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimization only
    return gt


def recall_at_k(ids: np.ndarray, gt: np.ndarray, k: int) -> float:
    """Mean |result ∩ exact top-k| / k over all queries (ids < 0 never match)."""
    ids = np.asarray(ids)[:, :k]
    truth = np.asarray(gt)[:, :k]
    if ids.shape[0] != truth.shape[0]:
        raise ValueError("ids and ground truth have different query counts")
    hits = 0
    for row, true_row in zip(ids, truth, strict=True):
        hits += np.intersect1d(row[row >= 0], true_row, assume_unique=False).size
    return float(hits) / (k * ids.shape[0])


# ---------------------------------------------------------------------------------------------
# Synthetic data


def synthetic_name(n: int, dim: int) -> str:
    size = f"{n // 1000}k" if n % 1000 == 0 else str(n)
    return f"synth-{dim}-{size}"


def _synthetic_model(dim: int, intrinsic_dim: int, clusters: int, seed: int) -> dict:
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([seed, 0])))
    # Uneven cluster weights (Dirichlet with alpha < 1) and spreads (log-normal).
    weights = rng.dirichlet(np.full(clusters, 0.6))
    centers = rng.standard_normal((clusters, intrinsic_dim)).astype(np.float32)
    spreads = (0.55 * rng.lognormal(0.0, 0.35, clusters)).astype(np.float32)
    # Per-cluster anisotropy: a few latent directions dominate inside each cluster.
    axis_scales = rng.lognormal(0.0, 0.5, (clusters, intrinsic_dim)).astype(np.float32)
    axis_scales /= np.sqrt(np.mean(axis_scales**2, axis=1, keepdims=True))
    # Fixed linear map to the ambient space; each output coordinate has ~unit variance.
    mapping = rng.standard_normal((intrinsic_dim, dim)).astype(np.float32)
    mapping /= np.float32(np.sqrt(intrinsic_dim * (1.0 + float(np.mean(spreads**2)))))
    bias = (0.3 * rng.standard_normal(dim)).astype(np.float32)
    model = {
        "cumulative": np.cumsum(weights),
        "centers": centers,
        "spreads": spreads,
        "axis_scales": axis_scales,
        "mapping": mapping,
        "bias": bias,
        "signal_norm": 1.0,
    }
    # RMS norm of the noiseless signal, estimated once from a fixed sample of the model.
    sample = _synthetic_rows(model, 4096, 0.0, rng)
    model["signal_norm"] = float(
        np.sqrt(np.mean(np.einsum("ij,ij->i", sample, sample)))
    )
    return model


def _synthetic_rows(
    model: dict, rows: int, difficulty: float, rng: np.random.Generator
):
    dim = model["mapping"].shape[1]
    intrinsic_dim = model["mapping"].shape[0]
    cluster = np.searchsorted(
        model["cumulative"], rng.random(rows) * model["cumulative"][-1]
    )
    cluster = np.minimum(cluster, len(model["spreads"]) - 1)
    z = rng.standard_normal((rows, intrinsic_dim), dtype=np.float32)
    z *= model["axis_scales"][cluster]
    z *= model["spreads"][cluster][:, None]
    z += model["centers"][cluster]
    x = z @ model["mapping"]
    x += model["bias"]
    half = dim // 2
    np.tanh(x[:, :half], out=x[:, :half])  # mild nonlinearity on half the coordinates
    # Isotropic noise whose expected norm is `difficulty * (dim / 768) ** 0.25` times the
    # signal's. The spread of |n1 - n2|^2 relative to its mean falls as 1 / sqrt(dim), so this
    # scaling keeps the neighbour structure about equally hard at 128, 768 and 1536 dimensions.
    noise_norm = difficulty * (dim / REFERENCE_DIM) ** 0.25 * model["signal_norm"]
    noise_std = np.float32(noise_norm / np.sqrt(dim))
    x += noise_std * rng.standard_normal((rows, dim), dtype=np.float32)
    return x


def _generate(
    model: dict,
    rows: int,
    difficulty: float,
    seed: int,
    stream: int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    dim = model["mapping"].shape[1]
    if out is None:
        out = np.empty((rows, dim), dtype=np.float32)
    for chunk_index, start in enumerate(range(0, rows, _CHUNK_ROWS)):
        stop = min(rows, start + _CHUNK_ROWS)
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence([seed, stream, chunk_index]))
        )
        # Always draw a whole chunk so row i depends only on (parameters, i), never on n.
        chunk = _synthetic_rows(model, _CHUNK_ROWS, difficulty, rng)
        out[start:stop] = normalize(chunk[: stop - start])
    return out


def synthetic(
    n: int,
    nq: int = 1000,
    dim: int = 768,
    intrinsic_dim: int = DEFAULT_INTRINSIC_DIM,
    difficulty: float = DEFAULT_DIFFICULTY,
    seed: int = DEFAULT_SEED,
    clusters: int = DEFAULT_CLUSTERS,
    name: str | None = None,
) -> Dataset:
    """Deterministic embedding-like data with low intrinsic dimension (metric cosine).

    Model: a latent z in R^intrinsic_dim from a mixture of ``clusters`` anisotropic Gaussians
    with uneven (Dirichlet) weights and log-normal spreads, mapped to R^dim by a fixed random
    linear map plus a bias, tanh applied to half of the coordinates, isotropic noise whose
    expected norm is ``difficulty * (dim / 768) ** 0.25`` times the signal norm (so one
    difficulty means about the same hardness at any dimension), then L2-normalized. Queries are
    fresh draws from the same distribution (never copies of base rows). Rows are produced in
    chunks of 16,384 with one PCG64 stream per chunk (SeedSequence([seed, stream, chunk])), so
    row i depends only on the parameters and i (a smaller n gives a prefix of a larger one)
    and peak memory is the output plus a few chunks (about 200 MB at dim 768).
    """
    if n <= 0 or nq <= 0 or dim <= 0 or intrinsic_dim <= 0:
        raise ValueError("n, nq, dim and intrinsic_dim must be positive")
    model = _synthetic_model(dim, intrinsic_dim, clusters, seed)
    base = _generate(model, n, difficulty, seed, stream=1)
    queries = _generate(model, nq, difficulty, seed, stream=2)
    params = {
        "generator": "bench.datasets.synthetic",
        "seed": seed,
        "intrinsic_dim": intrinsic_dim,
        "difficulty": difficulty,
        "clusters": clusters,
    }
    return Dataset(
        name or synthetic_name(n, dim), base, queries, "cosine", None, params
    )


# ---------------------------------------------------------------------------------------------
# File formats


def synthetic_to_files(
    directory: Path, n: int, nq: int, dim: int = 768
) -> tuple[str, dict]:
    """:func:`synthetic`'s rows written straight to ``base.npy`` and ``queries.npy`` in
    ``directory`` (the same rows, bit for bit), chunk by chunk through a memory map: data
    larger than RAM (10M x 768 is 30 GB) never has to fit. Returns the name and parameters.
    """
    model = _synthetic_model(dim, DEFAULT_INTRINSIC_DIM, DEFAULT_CLUSTERS, DEFAULT_SEED)
    for file, rows, stream in (("base.npy", n, 1), ("queries.npy", nq, 2)):
        out = np.lib.format.open_memmap(
            Path(directory) / file, mode="w+", dtype=np.float32, shape=(rows, dim)
        )
        _generate(model, rows, DEFAULT_DIFFICULTY, DEFAULT_SEED, stream, out)
        out.flush()
        del out
    params = {
        "generator": "bench.datasets.synthetic",
        "seed": DEFAULT_SEED,
        "intrinsic_dim": DEFAULT_INTRINSIC_DIM,
        "difficulty": DEFAULT_DIFFICULTY,
        "clusters": DEFAULT_CLUSTERS,
    }
    return synthetic_name(n, dim), params


def exact_search_streamed(
    base: np.ndarray,
    queries: np.ndarray,
    k: int,
    metric: str,
    block_rows: int = 65536,
) -> np.ndarray:
    """:func:`exact_search` in one pass over ``base`` (a memory map of a file larger than
    RAM): every block of rows is scored against every query and merged into a running
    top-k, so the file is read once rather than once per handful of queries."""
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}")
    n = base.shape[0]
    k = min(k, n)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    best_scores = np.full((queries.shape[0], k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((queries.shape[0], k), dtype=np.int64)
    for start in range(0, n, block_rows):
        block = np.ascontiguousarray(base[start : start + block_rows], dtype=np.float32)
        scores = queries @ block.T  # higher is better
        if metric == "l2":
            scores = 2.0 * scores - np.einsum("ij,ij->i", block, block)[None, :]
        take = min(k, block.shape[0])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        merged_scores = np.concatenate(
            [best_scores, np.take_along_axis(scores, part, axis=1)], axis=1
        )
        merged_ids = np.concatenate([best_ids, part + start], axis=1)
        keep = np.argpartition(-merged_scores, k - 1, axis=1)[:, :k]
        best_scores = np.take_along_axis(merged_scores, keep, axis=1)
        best_ids = np.take_along_axis(merged_ids, keep, axis=1)
    order = np.argsort(-best_scores, axis=1, kind="stable")
    return np.take_along_axis(best_ids, order, axis=1)


def read_vecs(path: str | Path) -> np.ndarray:
    """Read a TEXMEX .fvecs / .ivecs / .bvecs file (int32 dim header before every row)."""
    path = Path(path)
    suffix = path.suffix.lower()
    dtypes = {".fvecs": np.float32, ".ivecs": np.int32, ".bvecs": np.uint8}
    if suffix not in dtypes:
        raise ValueError(f"unknown vecs format {suffix!r}")
    raw = np.fromfile(path, dtype=np.uint8)
    if raw.size == 0:
        return np.empty((0, 0), dtype=dtypes[suffix])
    dim = int(raw[:4].view(np.int32)[0])
    item = np.dtype(dtypes[suffix]).itemsize
    row_bytes = 4 + dim * item
    if dim <= 0 or raw.size % row_bytes != 0:
        raise ValueError(
            f"{path}: size {raw.size} is not a multiple of row size {row_bytes}"
        )
    rows = raw.reshape(-1, row_bytes)
    headers = rows[:, :4].copy().view(np.int32).ravel()
    if not np.all(headers == dim):
        raise ValueError(f"{path}: rows have differing dimensions")
    return np.ascontiguousarray(rows[:, 4:]).view(dtypes[suffix]).reshape(-1, dim)


def write_vecs(path: str | Path, data: np.ndarray) -> None:
    """Write a TEXMEX .fvecs / .ivecs / .bvecs file."""
    path = Path(path)
    dtypes = {".fvecs": np.float32, ".ivecs": np.int32, ".bvecs": np.uint8}
    dtype = dtypes[path.suffix.lower()]
    data = np.ascontiguousarray(data, dtype=dtype)
    n, dim = data.shape
    rows = np.empty((n, 4 + dim * data.itemsize), dtype=np.uint8)
    rows[:, :4] = np.full((n, 1), dim, dtype=np.int32).view(np.uint8)
    rows[:, 4:] = data.view(np.uint8).reshape(n, -1)
    rows.tofile(path)


def _find_one(directory: Path, patterns: tuple[str, ...]) -> Path | None:
    for pattern in patterns:
        found = sorted(directory.glob(pattern))
        if found:
            return found[0]
    return None


def load_vecs_dir(
    path: str | Path, metric: str = "l2", name: str | None = None
) -> Dataset:
    """A TEXMEX-style directory: *base.[fb]vecs, *query.[fb]vecs, optional *groundtruth.ivecs."""
    directory = Path(path)
    base_path = _find_one(directory, ("*base.fvecs", "*base.bvecs", "*learn.fvecs"))
    query_path = _find_one(
        directory, ("*query.fvecs", "*query.bvecs", "*queries.fvecs")
    )
    if base_path is None or query_path is None:
        raise FileNotFoundError(
            f"{directory}: need *base.fvecs|bvecs and *query.fvecs|bvecs"
        )
    gt_path = _find_one(directory, ("*groundtruth.ivecs", "*gt.ivecs"))
    base, queries = _prepare(read_vecs(base_path), read_vecs(query_path), metric)
    gt = read_vecs(gt_path).astype(np.int64) if gt_path is not None else None
    return Dataset(
        name or directory.name,
        base,
        queries,
        metric,
        gt,
        {"path": report.repo_relative(directory)},
    )


def load_npy_dir(
    path: str | Path, metric: str = "cosine", name: str | None = None
) -> Dataset:
    """A directory with base.npy, queries.npy and optionally gt.npy (row indices)."""
    directory = Path(path)
    base, queries = _prepare(
        np.load(directory / "base.npy"), np.load(directory / "queries.npy"), metric
    )
    gt_path = directory / "gt.npy"
    gt = np.load(gt_path).astype(np.int64) if gt_path.exists() else None
    return Dataset(
        name or directory.name,
        base,
        queries,
        metric,
        gt,
        {"path": report.repo_relative(directory)},
    )


_HDF5_METRICS = {"angular": "cosine", "cosine": "cosine", "euclidean": "l2", "l2": "l2"}
_HDF5_METRICS.update({"dot": "dot", "ip": "dot", "inner_product": "dot"})


def load_hdf5(path: str | Path, name: str | None = None) -> Dataset:
    """An ann-benchmarks HDF5 file: datasets train, test, neighbors; attrs['distance']."""
    import h5py

    path = Path(path)
    with h5py.File(path, "r") as f:
        distance = f.attrs.get("distance", "euclidean")
        if isinstance(distance, bytes):
            distance = distance.decode()
        if distance not in _HDF5_METRICS:
            raise ValueError(f"{path}: unsupported distance {distance!r}")
        metric = _HDF5_METRICS[distance]
        base, queries = _prepare(f["train"][:], f["test"][:], metric)
        gt = f["neighbors"][:].astype(np.int64) if "neighbors" in f else None
    return Dataset(
        name or path.stem,
        base,
        queries,
        metric,
        gt,
        {"path": report.repo_relative(path)},
    )


# debian-minilm: $SAGITTA_DEBIAN_MINILM, else the shared datasets beside the repository
# (../shared/datasets/debian-minilm); benchmarks take --dataset-path over both.
DEBIAN_MINILM_PATH = os.environ.get("SAGITTA_DEBIAN_MINILM") or str(
    Path(__file__).resolve().parent.parent.parent
    / "shared"
    / "datasets"
    / "debian-minilm"
)


def load_debian_minilm(
    path: str | Path = DEBIAN_MINILM_PATH,
) -> Dataset:
    """debian-minilm: float16 .npy -> float32, re-normalized; exact gt recomputed on float32.

    The shipped gt.npy was computed on the float16 values; recall must be measured against
    the data the engines actually see, so the ground truth is recomputed (and cached) by
    :meth:`Dataset.ensure_gt` instead.
    """
    directory = Path(path)
    if not (directory / "base.npy").exists():
        raise FileNotFoundError(
            f"debian-minilm not found at {directory} (need base.npy)"
        )
    base = normalize(np.load(directory / "base.npy").astype(np.float32))
    queries = normalize(np.load(directory / "queries.npy").astype(np.float32))
    return Dataset(
        "debian-minilm",
        base,
        queries,
        "cosine",
        None,
        {"path": report.repo_relative(directory)},
    )
