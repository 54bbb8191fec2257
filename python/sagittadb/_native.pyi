"""Type stubs for the compiled part of ``sagittadb`` (PyO3, ``python/src``)."""

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import Any, TypeAlias
from uuid import UUID

import numpy as np
import numpy.typing as npt

__version__: str

PointId: TypeAlias = int | str | UUID
Filter: TypeAlias = dict[str, Any]
Hit: TypeAlias = dict[str, Any]
# {"indices": [...], "values": [...]}, an object with those attributes, or a pair
SparseLike: TypeAlias = dict[str, Any] | tuple[Sequence[int], Sequence[float]] | Any
ArrayLike = npt.ArrayLike

class SagittaError(Exception): ...
class DimensionError(SagittaError): ...
class InvalidParameterError(SagittaError): ...
class DuplicateIdError(SagittaError): ...
class CapacityError(SagittaError): ...
class FormatError(SagittaError): ...
class CollectionNotFoundError(SagittaError): ...
class PointNotFoundError(SagittaError): ...
class CollectionExistsError(SagittaError): ...
class StorageError(SagittaError): ...

def simd_level() -> str:
    """The instruction set the distance kernels use on this CPU (e.g. "avx512")."""

def open(
    path: str | PathLike[str],
    background_optimizer: bool = True,
    stripe_dirs: Sequence[str | PathLike[str]] | None = None,
) -> Database:
    """Opens (or creates) the database in directory ``path``; disk segments' records
    files spread over ``stripe_dirs`` too (the same ones, in order, every time)."""

class FlatIndex:
    def __init__(self, dim: int, metric: str = "cosine") -> None: ...
    @property
    def dim(self) -> int: ...
    @property
    def metric(self) -> str: ...
    def __len__(self) -> int: ...
    def add(self, vectors: ArrayLike, ids: ArrayLike | None = None) -> None: ...
    def search(
        self, queries: ArrayLike, k: int = 10, threads: int = 0
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]: ...
    def memory_bytes(self) -> int: ...
    def save(self, path: str | PathLike[str]) -> None: ...
    @staticmethod
    def load(path: str | PathLike[str]) -> FlatIndex: ...

class HnswIndex:
    def __init__(
        self,
        dim: int,
        metric: str = "cosine",
        m: int = 16,
        ef_construction: int = 100,
        quantization: str = "sq8",
        capacity: int = 0,
        seed: int = 42,
    ) -> None: ...
    @property
    def dim(self) -> int: ...
    @property
    def metric(self) -> str: ...
    @property
    def quantization(self) -> str: ...
    @property
    def capacity(self) -> int: ...
    def __len__(self) -> int: ...
    def add(
        self,
        vectors: ArrayLike,
        ids: ArrayLike | None = None,
        threads: int = 0,
        progress: bool | Callable[[int, int], None] | None = None,
        link_order: str = "clustered",
    ) -> None: ...
    def search(
        self,
        queries: ArrayLike,
        k: int = 10,
        ef: int = 64,
        threads: int = 0,
        rescore: int | None = None,
        exact_traversal: bool = False,
        first_pass: bool = False,
        interleave: bool = False,
        bit_walk: bool = False,
    ) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.float32]]: ...
    def search_stats(
        self,
        queries: ArrayLike,
        k: int = 10,
        ef: int = 64,
        rescore: int | None = None,
        first_pass: bool = False,
        bit_walk: bool = False,
    ) -> dict[str, float]: ...
    def enable_first_pass(self, threads: int = 0) -> bool: ...
    def mark_deleted(self, id: int) -> bool: ...
    def memory_bytes(self) -> dict[str, int]: ...
    def save(self, path: str | PathLike[str]) -> None: ...
    @staticmethod
    def load(path: str | PathLike[str]) -> HnswIndex: ...

class Database:
    def create_collection(
        self,
        name: str,
        dim: int,
        distance: str = "Cosine",
        shard_number: int = 1,
        segment_kind: str = "hnsw",
        page_cache_mb: int = 64,
        datatype: str = "float32",
        partition_size: int = 1000,
        on_disk: bool = False,
        sparse_vectors: Mapping[str, dict[str, Any] | None] | None = None,
    ) -> Collection: ...
    def import_collection(
        self,
        name: str,
        ids: Iterable[PointId],
        vectors: ArrayLike,
        payloads: Sequence[dict[str, Any] | None] | None = None,
        distance: str = "Cosine",
        shard_number: int = 1,
        progress: bool | Callable[[int, int], None] | None = None,
        segment_kind: str = "hnsw",
        page_cache_mb: int = 64,
        datatype: str = "float32",
        partition_size: int = 1000,
        on_disk: bool = False,
        sparse_vectors: Mapping[str, dict[str, Any] | None] | None = None,
        sparse: Mapping[str, Sequence[SparseLike | None]] | None = None,
    ) -> Collection: ...
    def collection(self, name: str) -> Collection: ...
    def list_collections(self) -> list[str]: ...
    def drop_collection(self, name: str) -> None: ...

class Collection:
    @property
    def name(self) -> str: ...
    @property
    def dim(self) -> int: ...
    @property
    def distance(self) -> str: ...
    def upsert(
        self,
        ids: Iterable[PointId],
        vectors: ArrayLike,
        payloads: Sequence[dict[str, Any] | None] | None = None,
        wait: bool = True,
        sparse: Mapping[str, Sequence[SparseLike | None]] | None = None,
    ) -> None: ...
    def search(
        self,
        query: ArrayLike,
        limit: int = 10,
        filter: Filter | None = None,
        with_payload: bool = True,
        with_vector: bool = False,
        score_threshold: float | None = None,
        offset: int = 0,
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[Hit]: ...
    def search_sparse(
        self,
        using: str,
        query: SparseLike,
        limit: int = 10,
        filter: Filter | None = None,
        with_payload: bool = True,
        score_threshold: float | None = None,
        offset: int = 0,
    ) -> list[Hit]: ...
    def hybrid_search(
        self,
        query: ArrayLike,
        sparse: SparseLike,
        using: str,
        limit: int = 10,
        filter: Filter | None = None,
        with_payload: bool = True,
        candidates: int | None = None,
        fusion: str = "rrf",
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[Hit]: ...
    def search_batch(
        self,
        queries: ArrayLike,
        limit: int = 10,
        filter: Filter | None = None,
        with_payload: bool = True,
        with_vector: bool = False,
        score_threshold: float | None = None,
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[list[Hit]]: ...
    def set_payload(
        self,
        payload: dict[str, Any],
        ids: Iterable[PointId] | None = None,
        filter: Filter | None = None,
        wait: bool = True,
    ) -> None: ...
    def overwrite_payload(
        self,
        payload: dict[str, Any],
        ids: Iterable[PointId] | None = None,
        filter: Filter | None = None,
        wait: bool = True,
    ) -> None: ...
    def delete_payload(
        self,
        keys: Sequence[str],
        ids: Iterable[PointId] | None = None,
        filter: Filter | None = None,
        wait: bool = True,
    ) -> None: ...
    def get(self, ids: Iterable[PointId]) -> list[Hit]: ...
    def delete(
        self,
        ids: Iterable[PointId] | None = None,
        filter: Filter | None = None,
        wait: bool = True,
    ) -> int: ...
    def scroll(
        self,
        limit: int = 10,
        offset: PointId | None = None,
        filter: Filter | None = None,
        with_vector: bool = False,
    ) -> tuple[list[Hit], int | str | None]: ...
    def count(self, filter: Filter | None = None) -> int: ...
    def __len__(self) -> int: ...
    def optimize(self) -> int: ...
    def status(self) -> dict[str, Any]: ...
    def wait_until_indexed(
        self,
        timeout: float | None = None,
        progress: bool | Callable[[int, int], None] | None = None,
    ) -> None: ...
    def configure_optimizer(
        self,
        seal_points: int | None = None,
        seal_idle_seconds: float | None = None,
        vacuum_min_deleted: int | None = None,
        vacuum_fraction: float | None = None,
        max_segments: int | None = None,
    ) -> None: ...
    def create_payload_index(self, field: str, field_schema: str) -> None: ...
    def delete_payload_index(self, field: str) -> None: ...
    def payload_schema(self) -> dict[str, str]: ...
    def point_counts(self) -> dict[str, int]: ...
