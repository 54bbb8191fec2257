"""SagittaDB in Python: a durable database of collections, embedded (``sagittadb.open``)
or on a server (``sagittadb.connect``, same API), and exact (flat) and HNSW vector indexes
over numpy arrays.

>>> import numpy as np, sagittadb
>>> index = sagittadb.HnswIndex(4, metric="cosine", m=8, ef_construction=32)
>>> index.add(np.eye(4, dtype=np.float32))
>>> ids, scores = index.search(np.eye(4, dtype=np.float32)[:1], k=1)
>>> int(ids[0, 0])
0
"""

from ._native import (
    CapacityError,
    Collection,
    CollectionExistsError,
    CollectionNotFoundError,
    Database,
    DimensionError,
    DuplicateIdError,
    FlatIndex,
    FormatError,
    HnswIndex,
    InvalidParameterError,
    PointNotFoundError,
    SagittaError,
    StorageError,
    __version__,
    open,
    simd_level,
)
from .remote import AuthenticationError, RemoteCollection, RemoteDatabase, connect

MISSING_ID = 2**64 - 1
"""The id in a result slot that no point filled (fewer than k points matched)."""

__all__ = [
    "MISSING_ID",
    "AuthenticationError",
    "CapacityError",
    "Collection",
    "CollectionExistsError",
    "CollectionNotFoundError",
    "Database",
    "DimensionError",
    "DuplicateIdError",
    "FlatIndex",
    "FormatError",
    "HnswIndex",
    "InvalidParameterError",
    "PointNotFoundError",
    "RemoteCollection",
    "RemoteDatabase",
    "SagittaError",
    "StorageError",
    "__version__",
    "connect",
    "open",
    "simd_level",
]
