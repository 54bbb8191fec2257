"""The remote backend: the same ``Database`` / ``Collection`` API as the embedded engine,
spoken over a SagittaDB server's REST API (Qdrant's contract), e.g. one started with
``sagitta serve``.

>>> db = sagittadb.connect("http://127.0.0.1:6333", api_key=None)  # doctest: +SKIP
>>> docs = db.create_collection("docs", dim=4)  # doctest: +SKIP

Results have the embedded backend's shapes: hits are dicts with ``id``, ``score``,
``payload`` (``None`` for a point without one) and, when asked, ``vector``. HTTP errors
become the embedded backend's exceptions: 404 for a collection → ``CollectionNotFoundError``,
404 for a payload change naming a missing point → ``PointNotFoundError``,
409 → ``CollectionExistsError``, a dimension error → ``DimensionError``, other 400/413/422
→ ``InvalidParameterError``, 401/403 → ``AuthenticationError``, 5xx → ``StorageError``. A
429 (the server's write queue is full) is retried after its ``Retry-After``.

What differs: ``import_collection`` uploads in batches (the server has no bulk endpoint
yet), so unlike the embedded import it is not all or nothing — on failure it drops the
half-made collection; ``delete`` returns the number of points its filter matched just
before the delete (the embedded backend counts them atomically); ``optimize`` and
``configure_optimizer`` are embedded-only (the server's optimizer runs on its own).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Union, cast

import httpx
import numpy as np
import numpy.typing as npt

from ._native import (
    CollectionExistsError,
    CollectionNotFoundError,
    DimensionError,
    InvalidParameterError,
    PointNotFoundError,
    SagittaError,
    StorageError,
)
from .progress import Progress
from .progress import finish as finish_progress
from .progress import resolve as resolve_progress

# Union, not `|`: evaluated at run time, and the package supports Python 3.9.
PointId = Union[int, str, uuid.UUID]
#: A JSON object: a request or answer body, a payload, a filter, a hit. Its values are any
#: JSON (``Any``: what the server sends is only known at run time).
JsonObject = dict[str, Any]

#: Points per upsert request of ``import_collection`` and of large ``upsert`` calls.
UPLOAD_BATCH_POINTS = 1_000
#: Times a request answered 429 is retried before the error is raised.
RETRIES_AFTER_429 = 20


class AuthenticationError(SagittaError):
    """The server refused the API key (missing, wrong, or read-only for a write)."""


def _error_for(response: httpx.Response) -> SagittaError:
    """The exception for an error answer (the one table from HTTP to Python errors)."""
    try:
        message = response.json()["status"]["error"]
    except (ValueError, KeyError, TypeError):
        message = response.text or response.reason_phrase
    status = response.status_code
    text = f"{message} (HTTP {status})"
    if status == 404 and "Collection" in message:
        return CollectionNotFoundError(text)
    if status == 404 and "No point with id" in message:
        return PointNotFoundError(text)
    if status == 409:
        return CollectionExistsError(text)
    if status in (401, 403):
        return AuthenticationError(text)
    if status in (400, 413, 422):
        if "dimension" in message:
            return DimensionError(text)
        return InvalidParameterError(text)
    if status >= 500:
        return StorageError(text)
    return SagittaError(text)


def _id_out(value: object) -> int | str:
    """A point id as JSON; anything else is refused (ids come from untyped callers too)."""
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bool, np.bool_)):
        raise InvalidParameterError(f"point id {value!r} is a bool, not an int or UUID")
    if isinstance(value, np.integer):
        value = value.item()  # a numpy integer as the Python int it holds
    if isinstance(value, int):
        if value < 0:
            raise InvalidParameterError(f"point id {int(value)} is negative")
        return int(value)
    if isinstance(value, str):
        return value
    raise InvalidParameterError(f"point id {value!r} is neither an int nor a UUID")


def _vectors(vectors: npt.ArrayLike, dim: int, name: str) -> npt.NDArray[np.float32]:
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = np.reshape(array, (1, -1))
    if array.ndim != 2:
        raise DimensionError(
            f"`{name}` must be a 2-D array (n × dim), got {array.ndim}-D"
        )
    if array.shape[1] != dim:
        raise DimensionError(
            f"vector dimension error: `{name}`: expected dim {dim}, got {array.shape[1]}"
        )
    if not np.isfinite(array).all():
        row, column = np.argwhere(~np.isfinite(array))[0]
        raise InvalidParameterError(
            f"`{name}` row {row} has a non-finite value (NaN or Inf) at position {column}"
        )
    return array


def _sparse(value: object, field: str) -> JsonObject:
    """A sparse vector as Qdrant's JSON: from a ``{"indices", "values"}`` dict, an object
    with those attributes, or an ``(indices, values)`` pair (the embedded API's forms)."""
    parts: tuple[object, object]
    if isinstance(value, dict):
        mapping = cast(dict[str, object], value)
        parts = (mapping.get("indices"), mapping.get("values"))
    elif hasattr(value, "indices") and hasattr(value, "values"):
        parts = (getattr(value, "indices"), getattr(value, "values"))  # noqa: B009
    elif isinstance(value, tuple) and len(cast(tuple[object, ...], value)) == 2:
        pair = cast(tuple[object, object], value)
        parts = (pair[0], pair[1])
    else:
        parts = (None, None)
    indices, values = parts
    if indices is None or values is None:
        raise InvalidParameterError(
            f'`{field}`: expected {{"indices": [...], "values": [...]}} or an '
            "(indices, values) pair"
        )
    try:
        out = {
            "indices": [int(i) for i in cast(Iterable[Any], indices)],
            "values": [float(v) for v in cast(Iterable[Any], values)],
        }
    except (TypeError, ValueError) as error:
        raise InvalidParameterError(f"`{field}`: {error}") from None
    for position, value in enumerate(out["values"]):
        if not math.isfinite(value):
            raise InvalidParameterError(
                f"`{field}`: values[{position}] is not a finite number"
            )
    return out


def _search_params(hnsw_ef: int | None, exact: bool) -> JsonObject:
    """A search's ``params``: ``exact`` wins over ``hnsw_ef``; empty for the default."""
    if exact:
        return {"exact": True}
    return {} if hnsw_ef is None else {"hnsw_ef": hnsw_ef}


def _hit(
    point: JsonObject, with_payload: bool, with_vector: bool, sparse: bool = False
) -> JsonObject:
    """A point as the embedded API gives it; ``sparse``: its collection has sparse
    vectors, returned as ``sparse`` beside the dense ``vector``."""
    out: JsonObject = {"id": point["id"]}
    if "score" in point:
        out["score"] = point["score"]
    payload = point.get("payload") if with_payload else None
    out["payload"] = payload or None
    if with_vector:
        vector = point.get("vector")
        others: JsonObject = {}
        if isinstance(vector, dict):
            # the map of a point with sparse vectors: the dense one is Qdrant's `""`
            named = cast(JsonObject, vector)
            vector = named.get("")
            others = {k: v for k, v in named.items() if k != ""}
        out["vector"] = vector
        if sparse:
            out["sparse"] = others
    return out


class _Client:
    def __init__(self, url: str, api_key: str | None, timeout: float) -> None:
        headers = {"api-key": api_key} if api_key else {}
        self.http = httpx.Client(
            base_url=url.rstrip("/"), headers=headers, timeout=timeout
        )

    def call(
        self,
        method: str,
        path: str,
        body: JsonObject | None = None,
        **params: str | None,
    ) -> Any:
        """The ``result`` of the server's JSON answer (``Any``: its shape depends on the
        endpoint); an error answer is raised as the embedded backend's exception. Query
        parameters that are None are left out."""
        query = {key: value for key, value in params.items() if value is not None}
        for attempt in range(RETRIES_AFTER_429 + 1):
            try:
                response = self.http.request(method, path, json=body, params=query)
            except httpx.TransportError as error:
                raise StorageError(
                    f"cannot reach the server at {self.http.base_url}: {error}"
                ) from error
            if response.status_code == 429 and attempt < RETRIES_AFTER_429:
                time.sleep(float(response.headers.get("retry-after", "1")))
                continue
            if response.status_code != 200:
                raise _error_for(response)
            return response.json()["result"]
        raise AssertionError("unreachable: the last attempt returns or raises")


class RemoteDatabase:
    """A SagittaDB server, seen through the embedded ``Database`` API."""

    def __init__(
        self, url: str, api_key: str | None = None, timeout: float = 60.0
    ) -> None:
        self.url = url
        self._client = _Client(url, api_key, timeout)
        self._client.call("GET", "/collections")

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
        sparse_vectors: dict[str, JsonObject | None] | None = None,
    ) -> RemoteCollection:
        """Creates an empty collection; ``CollectionExistsError`` if the name is taken.
        ``segment_kind``, ``page_cache_mb`` and ``partition_size`` travel as SagittaDB's
        ``sagitta`` extension of the collection config, ``datatype``, ``on_disk`` and
        ``sparse_vectors`` as Qdrant's ``vectors.datatype``, ``vectors.on_disk`` and
        ``sparse_vectors``."""
        distance = _distance_name(distance)
        if segment_kind not in ("hnsw", "disk"):
            raise InvalidParameterError(
                f'`segment_kind` = "{segment_kind}": expected "hnsw" or "disk"'
            )
        if datatype not in ("float32", "float16"):
            raise InvalidParameterError(
                f'`datatype` = "{datatype}": expected "float32" or "float16"'
            )
        body = {
            "vectors": {
                "size": dim,
                "distance": distance,
                "datatype": datatype,
                "on_disk": on_disk,
            },
            "shard_number": shard_number,
            **(
                {"sparse_vectors": {k: v or {} for k, v in sparse_vectors.items()}}
                if sparse_vectors
                else {}
            ),
            "sagitta": {
                "segment_kind": segment_kind,
                "page_cache_mb": page_cache_mb,
                "partition_size": partition_size,
            },
        }
        self._client.call("PUT", f"/collections/{name}", body)
        return RemoteCollection(self._client, name)

    def import_collection(
        self,
        name: str,
        ids: Iterable[PointId],
        vectors: npt.ArrayLike,
        payloads: Sequence[JsonObject | None] | None = None,
        distance: str = "Cosine",
        shard_number: int = 1,
        progress: Progress = None,
        segment_kind: str = "hnsw",
        page_cache_mb: int = 64,
        datatype: str = "float32",
        partition_size: int = 1000,
        on_disk: bool = False,
        sparse_vectors: dict[str, JsonObject | None] | None = None,
        sparse: dict[str, Sequence[object | None]] | None = None,
    ) -> RemoteCollection:
        """Creates ``name`` and uploads every point (in batches, ``wait=True``, followed by
        ``progress``); on any error the collection is dropped again and the error raised."""
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2:
            raise DimensionError("`vectors` must be a 2-D array (n × dim)")
        if sparse and not sparse_vectors:
            raise InvalidParameterError(
                "`sparse`: give the collection's `sparse_vectors` too"
            )
        collection = self.create_collection(
            name,
            array.shape[1],
            distance,
            shard_number,
            segment_kind,
            page_cache_mb,
            datatype,
            partition_size,
            on_disk,
            sparse_vectors,
        )
        try:
            collection.upsert(
                list(ids), array, payloads, wait=True, progress=progress, sparse=sparse
            )
        except BaseException:
            self._client.call("DELETE", f"/collections/{name}")
            raise
        return collection

    def collection(self, name: str) -> RemoteCollection:
        """The collection ``name``; ``CollectionNotFoundError`` if there is none."""
        return RemoteCollection(self._client, name)

    def list_collections(self) -> list[str]:
        result = self._client.call("GET", "/collections")
        return sorted(entry["name"] for entry in result["collections"])

    def drop_collection(self, name: str) -> None:
        """Drops ``name``; ``CollectionNotFoundError`` if there is none."""
        if not self._client.call("DELETE", f"/collections/{name}"):
            raise CollectionNotFoundError(f"no collection `{name}`")

    def close(self) -> None:
        self._client.http.close()

    def __enter__(self) -> RemoteDatabase:  # noqa: PYI034 - typing.Self needs Python 3.11
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RemoteDatabase(url={self.url!r})"


def _distance_name(distance: str) -> str:
    """Qdrant's spelling, as the embedded backend (the engine's `Distance::from_name`)."""
    if distance not in ("Cosine", "Dot", "Euclid"):
        raise InvalidParameterError(
            f"`distance`: unknown distance `{distance}`, expected one of "
            "`Cosine`, `Dot`, `Euclid`"
        )
    return distance


class RemoteCollection:
    """A collection on a server, with the embedded ``Collection`` API."""

    def __init__(self, client: _Client, name: str) -> None:
        self._client = client
        self.name = name
        info = self._info()
        vectors = info["config"]["params"]["vectors"]
        self.dim: int = vectors["size"]
        self.distance: str = vectors["distance"]
        self._sparse = bool(info["config"]["params"].get("sparse_vectors"))

    def _info(self) -> JsonObject:
        return self._client.call("GET", f"/collections/{self.name}")

    def _path(self, suffix: str) -> str:
        return f"/collections/{self.name}/{suffix}"

    def upsert(
        self,
        ids: Iterable[PointId],
        vectors: npt.ArrayLike,
        payloads: Sequence[JsonObject | None] | None = None,
        wait: bool = True,
        progress: Progress = None,
        sparse: dict[str, Sequence[object | None]] | None = None,
    ) -> None:
        """Inserts or replaces points (batch form, ``UPLOAD_BATCH_POINTS`` per request);
        ``progress`` (see ``sagittadb.progress``) follows the upload when it takes more than
        one request. ``sparse``: ``{name: one sparse vector (or None) per point}``."""
        ids = [_id_out(value) for value in ids]
        array = _vectors(vectors, self.dim, "vectors")
        if len(ids) != len(array):
            raise InvalidParameterError(f"{len(ids)} ids for {len(array)} vectors")
        if payloads is not None and len(payloads) != len(ids):
            raise InvalidParameterError(f"{len(payloads)} payloads for {len(ids)} ids")
        several = len(ids) > UPLOAD_BATCH_POINTS
        callback = resolve_progress(
            progress if several else False, f"uploading {self.name}"
        )
        if sparse:
            try:
                self._upsert_points(ids, array, payloads, wait, sparse, callback)
            finally:
                finish_progress(callback)
            return
        try:
            for start in range(0, len(ids), UPLOAD_BATCH_POINTS):
                end = start + UPLOAD_BATCH_POINTS
                batch: JsonObject = {
                    "ids": ids[start:end],
                    "vectors": array[start:end].tolist(),
                }
                if payloads is not None:
                    batch["payloads"] = list(payloads[start:end])
                self._client.call(
                    "PUT", self._path("points"), {"batch": batch}, wait=_flag(wait)
                )
                if callback is not None:
                    callback(min(end, len(ids)), len(ids))
        finally:
            finish_progress(callback)

    def _upsert_points(
        self,
        ids: list[int | str],
        array: npt.NDArray[np.float32],
        payloads: Sequence[JsonObject | None] | None,
        wait: bool,
        sparse: dict[str, Sequence[object | None]],
        callback: Callable[[int, int], None] | None,
    ) -> None:
        """``upsert`` with sparse vectors: the list form, each point's vectors a map
        (the dense one under Qdrant's unnamed name ``""``)."""
        for name, rows in sparse.items():
            if len(rows) != len(ids):
                raise InvalidParameterError(
                    f"`sparse[{name!r}]` has {len(rows)} entries but {len(ids)} points "
                    "were given"
                )
        points: list[JsonObject] = []
        for row, point_id in enumerate(ids):
            vector: JsonObject = {"": array[row].tolist()}
            for name, rows in sparse.items():
                if rows[row] is not None:
                    vector[name] = _sparse(rows[row], f"sparse[{name!r}][{row}]")
            point: JsonObject = {"id": point_id, "vector": vector}
            if payloads is not None:
                point["payload"] = payloads[row]
            points.append(point)
        for start in range(0, len(points), UPLOAD_BATCH_POINTS):
            body = {"points": points[start : start + UPLOAD_BATCH_POINTS]}
            self._client.call("PUT", self._path("points"), body, wait=_flag(wait))
            if callback is not None:
                callback(min(start + UPLOAD_BATCH_POINTS, len(points)), len(points))

    def _query(
        self,
        query: object,
        limit: int,
        filter: JsonObject | None,
        with_payload: bool,
        with_vector: bool,
        score_threshold: float | None,
        offset: int,
        hnsw_ef: int | None,
        exact: bool,
    ) -> JsonObject:
        body: JsonObject = {
            "query": query,
            "limit": limit,
            "offset": offset,
            "with_payload": with_payload,
            "with_vector": with_vector,
        }
        if filter is not None:
            body["filter"] = filter
        if score_threshold is not None:
            body["score_threshold"] = score_threshold
        params = _search_params(hnsw_ef, exact)
        if params:
            body["params"] = params
        return body

    def search(
        self,
        query: npt.ArrayLike,
        limit: int = 10,
        filter: JsonObject | None = None,
        with_payload: bool = True,
        with_vector: bool = False,
        score_threshold: float | None = None,
        offset: int = 0,
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[JsonObject]:
        """Top-``limit`` points passing ``filter``: dicts with id, score, payload (and
        vector)."""
        row = _vectors(query, self.dim, "query")[0]
        body = self._query(
            row.tolist(),
            limit,
            filter,
            with_payload,
            with_vector,
            score_threshold,
            offset,
            hnsw_ef,
            exact,
        )
        result = self._client.call("POST", self._path("points/query"), body)
        return [
            _hit(point, with_payload, with_vector, self._sparse)
            for point in result["points"]
        ]

    def search_sparse(
        self,
        using: str,
        query: object,
        limit: int = 10,
        filter: JsonObject | None = None,
        with_payload: bool = True,
        score_threshold: float | None = None,
        offset: int = 0,
    ) -> list[JsonObject]:
        """Top-``limit`` points by the sparse vector ``using`` (the embedded API's)."""
        body = self._query(
            _sparse(query, "query"),
            limit,
            filter,
            with_payload,
            False,
            score_threshold,
            offset,
            None,
            False,
        )
        body["using"] = using
        result = self._client.call("POST", self._path("points/query"), body)
        return [_hit(point, with_payload, False) for point in result["points"]]

    def hybrid_search(
        self,
        query: npt.ArrayLike,
        sparse: object,
        using: str,
        limit: int = 10,
        filter: JsonObject | None = None,
        with_payload: bool = True,
        candidates: int | None = None,
        fusion: str = "rrf",
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[JsonObject]:
        """Dense and sparse candidates fused into the top ``limit`` (the embedded API's
        ``hybrid_search``): one Query API request with two prefetches."""
        if fusion not in ("rrf", "dbsf"):
            raise InvalidParameterError(
                f'`fusion` = "{fusion}": expected "rrf" or "dbsf"'
            )
        row = _vectors(query, self.dim, "query")[0]
        candidates = candidates if candidates is not None else max(2 * limit, 20)
        dense: JsonObject = {"query": row.tolist(), "limit": candidates}
        params = _search_params(hnsw_ef, exact)
        if params:
            dense["params"] = params
        lexical: JsonObject = {
            "query": _sparse(sparse, "sparse"),
            "using": using,
            "limit": candidates,
        }
        if filter is not None:
            dense["filter"] = filter
            lexical["filter"] = filter
        body: JsonObject = {
            "prefetch": [dense, lexical],
            "query": {"fusion": fusion},
            "limit": limit,
            "with_payload": with_payload,
        }
        result = self._client.call("POST", self._path("points/query"), body)
        return [_hit(point, with_payload, False) for point in result["points"]]

    def search_batch(
        self,
        queries: npt.ArrayLike,
        limit: int = 10,
        filter: JsonObject | None = None,
        with_payload: bool = True,
        with_vector: bool = False,
        score_threshold: float | None = None,
        hnsw_ef: int | None = None,
        exact: bool = False,
    ) -> list[list[JsonObject]]:
        """Several searches in one request; one list of hits per query."""
        rows = _vectors(queries, self.dim, "queries")
        searches = [
            self._query(
                row.tolist(),
                limit,
                filter,
                with_payload,
                with_vector,
                score_threshold,
                0,
                hnsw_ef,
                exact,
            )
            for row in rows
        ]
        result = self._client.call(
            "POST", self._path("points/query/batch"), {"searches": searches}
        )
        return [
            [
                _hit(point, with_payload, with_vector, self._sparse)
                for point in entry["points"]
            ]
            for entry in result
        ]

    def _selector(
        self, ids: Iterable[PointId] | None, filter: JsonObject | None
    ) -> JsonObject:
        if ids is None and filter is None:
            return {"points": []}  # names no point, as in the embedded backend
        conditions: list[JsonObject] = []
        if ids is not None:
            conditions.append({"has_id": [_id_out(value) for value in ids]})
        if filter is not None:
            conditions.append(filter)
        if len(conditions) == 1 and ids is not None:
            return {"points": conditions[0]["has_id"]}
        if len(conditions) == 1:
            return {"filter": filter}
        # Points named by ids or matched by the filter (the embedded backend's union).
        return {"filter": {"should": conditions}}

    def set_payload(
        self,
        payload: JsonObject,
        ids: Iterable[PointId] | None = None,
        filter: JsonObject | None = None,
        wait: bool = True,
    ) -> None:
        """Merges ``payload`` into the payload of the points named or matched."""
        body = {"payload": payload, **self._selector(ids, filter)}
        self._client.call("POST", self._path("points/payload"), body, wait=_flag(wait))

    def overwrite_payload(
        self,
        payload: JsonObject,
        ids: Iterable[PointId] | None = None,
        filter: JsonObject | None = None,
        wait: bool = True,
    ) -> None:
        """Replaces the payload of the points named or matched."""
        body = {"payload": payload, **self._selector(ids, filter)}
        self._client.call("PUT", self._path("points/payload"), body, wait=_flag(wait))

    def delete_payload(
        self,
        keys: Sequence[str],
        ids: Iterable[PointId] | None = None,
        filter: JsonObject | None = None,
        wait: bool = True,
    ) -> None:
        """Removes top-level ``keys`` from the payload of the points named or matched."""
        body = {"keys": list(keys), **self._selector(ids, filter)}
        self._client.call(
            "POST", self._path("points/payload/delete"), body, wait=_flag(wait)
        )

    def get(self, ids: Iterable[PointId]) -> list[JsonObject]:
        """Points by id (missing ids are skipped): dicts with id, payload and vector."""
        body = {"ids": [_id_out(value) for value in ids], "with_vector": True}
        records = self._client.call("POST", self._path("points"), body)
        return [_hit(record, True, True, self._sparse) for record in records]

    def delete(
        self,
        ids: Iterable[PointId] | None = None,
        filter: JsonObject | None = None,
        wait: bool = True,
    ) -> int:
        """Deletes points by id and/or every point passing ``filter``; returns how many the
        filter matched (counted just before the delete)."""
        matched = 0
        if ids is not None:
            body = {"points": [_id_out(value) for value in ids]}
            self._client.call(
                "POST", self._path("points/delete"), body, wait=_flag(wait)
            )
        if filter is not None:
            matched = self.count(filter)
            self._client.call(
                "POST",
                self._path("points/delete"),
                {"filter": filter},
                wait=_flag(wait),
            )
        return matched

    def scroll(
        self,
        limit: int = 10,
        offset: PointId | None = None,
        filter: JsonObject | None = None,
        with_vector: bool = False,
    ) -> tuple[list[JsonObject], int | str | None]:
        """One page of points in id order: ``(points, next_offset)``."""
        body: JsonObject = {
            "limit": limit,
            "with_payload": True,
            "with_vector": with_vector,
        }
        if offset is not None:
            body["offset"] = _id_out(offset)
        if filter is not None:
            body["filter"] = filter
        result = self._client.call("POST", self._path("points/scroll"), body)
        points = [
            _hit(point, True, with_vector, self._sparse) for point in result["points"]
        ]
        return points, result.get("next_page_offset")

    def count(self, filter: JsonObject | None = None) -> int:
        """Exact number of points (passing ``filter`` when given)."""
        body = {"exact": True} if filter is None else {"filter": filter, "exact": True}
        return int(self._client.call("POST", self._path("points/count"), body)["count"])

    def __len__(self) -> int:
        return self.count()

    def status(self) -> JsonObject:
        """``{"status", "points_count", "indexed_vectors_count", "segments_count",
        "optimizer_error", "write_error"}`` as the embedded backend reports it (the
        server reports a red collection's reason as its optimizer error)."""
        info = self._info()
        optimizer = info.get("optimizer_status")  # "ok" or {"error": reason}
        error = (
            cast(JsonObject, optimizer).get("error")
            if isinstance(optimizer, dict)
            else None
        )
        return {
            "status": info["status"],
            "points_count": info.get("points_count"),
            "indexed_vectors_count": info.get("indexed_vectors_count"),
            "segments_count": info["segments_count"],
            "optimizer_error": error,
            "write_error": error if info["status"] == "red" else None,
        }

    def wait_until_indexed(
        self, timeout: float | None = None, progress: Progress = None
    ) -> None:
        """Polls until the status is green; ``TimeoutError`` after ``timeout`` seconds,
        ``SagittaError`` if it turns red. ``progress`` (see ``sagittadb.progress``) is
        called with ``(indexed, points)`` as they change."""
        callback = resolve_progress(progress, f"indexing {self.name}")
        try:
            self._wait(timeout, callback)
        finally:
            finish_progress(callback)

    def _wait(
        self, timeout: float | None, callback: Callable[[int, int], None] | None
    ) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        reported = None
        while True:
            status = self.status()
            counts = (status["indexed_vectors_count"], status["points_count"])
            if callback is not None and counts != reported:
                callback(*counts)
                reported = counts
            if status["status"] == "green":
                return
            if status["status"] == "red":
                raise SagittaError(
                    f"collection {self.name} is red: {status['optimizer_error'] or ''}"
                )
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(
                    f"collection {self.name} not indexed after {timeout} s: "
                    f"{counts[0]} of {counts[1]} points indexed"
                )
            time.sleep(0.05)

    def create_payload_index(self, field: str, field_schema: str) -> None:
        """Indexes payload field ``field`` as keyword, integer, float or bool."""
        body = {"field_name": field, "field_schema": field_schema}
        self._client.call("PUT", self._path("index"), body, wait="true")

    def delete_payload_index(self, field: str) -> None:
        self._client.call("DELETE", self._path(f"index/{field}"), wait="true")

    def payload_schema(self) -> dict[str, str]:
        """The indexed payload fields: ``{field: "keyword" | "integer" | ...}``."""
        schema = self._info()["payload_schema"]
        return {field: entry["data_type"] for field, entry in schema.items()}

    def __repr__(self) -> str:
        return (
            f"RemoteCollection(name={self.name!r}, dim={self.dim}, "
            f"distance={self.distance!r}, count={self.count()})"
        )


def _flag(value: bool) -> str:
    return "true" if value else "false"


def connect(
    url: str, api_key: str | None = None, timeout: float = 60.0
) -> RemoteDatabase:
    """A SagittaDB server at ``url`` (e.g. ``http://127.0.0.1:6333``), with the embedded
    backend's API. Checks the server answers before returning."""
    return RemoteDatabase(url, api_key=api_key, timeout=timeout)
