"""Comparisons of SagittaDB's answers with qdrant-client's local mode (the oracle),
shared by the oracle tests: hits (scores within a tolerance, ties broken either way)
and vectors (dense lists, sparse vectors in any index order, multivectors row by row).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
import httpx
import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

TOLERANCE = 1e-4

# What qdrant-client raises when the server refuses a request: over REST and over gRPC.
REFUSED = (UnexpectedResponse, grpc.RpcError)

# The HTTP status of each gRPC status the server answers with (Qdrant's pairing).
_HTTP_OF_GRPC = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.UNAVAILABLE: 503,
}


def remote_client(server: object, api: str) -> QdrantClient:
    """qdrant-client on a running `SagittaServer`, over REST (`api == "rest"`) or gRPC."""
    grpc_port = getattr(server, "grpc_port", None)
    assert api == "rest" or grpc_port, "the server runs without its gRPC API"
    return QdrantClient(
        url=server.url,
        grpc_port=grpc_port or 6334,
        prefer_grpc=api == "grpc",
        timeout=30,
    )


def refused_as(error: BaseException) -> tuple[int, str]:
    """The HTTP status and the message of a refusal, whichever API carried it."""
    if isinstance(error, UnexpectedResponse):
        return error.status_code, str(error.content)
    assert isinstance(error, grpc.Call), error
    return _HTTP_OF_GRPC.get(error.code(), 500), error.details() or ""


def close(mine: float, theirs: float) -> bool:
    return abs(mine - theirs) <= TOLERANCE * max(1.0, abs(theirs))


def same_hits(
    got: list[models.ScoredPoint], expected: list[models.ScoredPoint]
) -> None:
    assert len(got) == len(expected), (got, expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert close(mine.score, theirs.score), (got, expected)
    # ties may be broken either way: each hit is one the oracle scores the same, or
    # ties with the last hit (points tied at the cut may be left out either way)
    for point in got:
        same = {theirs.id for theirs in expected if close(point.score, theirs.score)}
        at_cut = bool(expected) and close(point.score, expected[-1].score)
        assert point.id in same or at_cut, (point, expected)


def same_vector(mine: object, theirs: object, name: str = "") -> None:
    """One vector: a sparse vector, a multivector (a list of rows) or a dense list."""
    if isinstance(theirs, models.SparseVector):
        assert isinstance(mine, models.SparseVector), (name, mine)
        order = sorted(range(len(theirs.indices)), key=lambda i: theirs.indices[i])
        assert mine.indices == [theirs.indices[i] for i in order]
        assert mine.values == pytest.approx([theirs.values[i] for i in order])
    elif isinstance(theirs, list) and theirs and isinstance(theirs[0], list):
        assert isinstance(mine, list) and len(mine) == len(theirs), (name, mine, theirs)
        for row, expected_row in zip(mine, theirs, strict=True):
            assert row == pytest.approx(expected_row), (name, mine, theirs)
    else:
        assert mine == pytest.approx(theirs), (name, mine, theirs)


def same_vectors(got: object, expected: object) -> None:
    """A point's vectors: none, the unnamed one alone, or a map of named ones."""
    if expected in (None, {}):
        assert got in (None, {}), got
        return
    if not isinstance(expected, dict):
        same_vector(got, expected)
        return
    assert isinstance(got, dict), (got, expected)
    assert set(got) == set(expected), (got, expected)
    for name, theirs in expected.items():
        same_vector(got[name], theirs, name)


def refusal(url: str, method: str, path: str, body: dict[str, object]) -> str:
    """The error text of a request SagittaDB must refuse with 400."""
    reply = httpx.request(method, f"{url}{path}", json=body, timeout=30)
    assert reply.status_code == 400, reply.text
    return str(reply.json()["status"]["error"])


def same_recommendations(
    remote: QdrantClient, oracle: QdrantClient, collection: str, using: str
) -> None:
    """Every recommend strategy by point ids (positive only, with negatives, negatives
    only for the scoring ones) gives the oracle's hits."""
    strategies = (
        models.RecommendStrategy.AVERAGE_VECTOR,
        models.RecommendStrategy.BEST_SCORE,
        models.RecommendStrategy.SUM_SCORES,
    )
    for strategy in strategies:
        examples: list[tuple[list[int], list[int]]] = [([1, 2], []), ([1, 13], [5, 21])]
        if strategy != models.RecommendStrategy.AVERAGE_VECTOR:
            examples.append(([], [2, 7]))
        for positive, negative in examples:
            query = models.RecommendQuery(
                recommend=models.RecommendInput(
                    positive=list(positive), negative=list(negative), strategy=strategy
                )
            )
            got, expected = (
                client.query_points(
                    collection, query=query, using=using, limit=6
                ).points
                for client in (remote, oracle)
            )
            same_hits(got, expected)


def same_has_vector(
    remote: QdrantClient, oracle: QdrantClient, collection: str, name: str
) -> None:
    """The points that have vector `name`, and those that lack it, are the oracle's."""
    condition = models.HasVectorCondition(has_vector=name)
    for query_filter in (
        models.Filter(must=[condition]),
        models.Filter(must_not=[condition]),
    ):
        got, expected = (
            sorted(
                str(record.id)
                for record in client.scroll(
                    collection, scroll_filter=query_filter, limit=1000
                )[0]
            )
            for client in (remote, oracle)
        )
        assert got == expected, (name, query_filter)
        assert remote.count(collection, count_filter=query_filter).count == len(got)


def paired_clients(
    server: object,
    api: str,
    create: Callable[[QdrantClient], None],
    names: tuple[str, ...],
) -> Iterator[tuple[QdrantClient, QdrantClient]]:
    """A client of `server` over `api` and a local-mode oracle, each with `create`'s
    collections; the server's collections `names` are dropped afterwards."""
    remote = remote_client(server, api)
    oracle = QdrantClient(":memory:")
    for client in (remote, oracle):
        create(client)
    yield remote, oracle
    for name in names:
        remote.delete_collection(name)
    remote.close()
    oracle.close()
