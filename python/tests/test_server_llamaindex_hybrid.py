"""LlamaIndex's `QdrantVectorStore` with `enable_hybrid=True` against `sagitta serve`,
with qdrant-client's local mode as the oracle: a named dense vector and a sparse one per
node (deterministic encoders, `sparse_doc_fn` / `sparse_query_fn`, nothing downloaded);
dense, sparse and hybrid queries (LlamaIndex fuses the two lists by relative score), with
and without a metadata filter, then a delete by document; the server's answers must be
the oracle's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient
from text_encoders import QUERIES, corpus, dense, sparse_document, sparse_query

COLLECTION = "llama_hybrid"
DOCS = ["doc-a", "doc-b", "doc-c", "doc-d"]


def _documents(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    encoded = [sparse_document(text) for text in texts]
    return [i for i, _ in encoded], [v for _, v in encoded]


def _queries(texts: list[str]) -> tuple[list[list[int]], list[list[float]]]:
    encoded = [sparse_query(text) for text in texts]
    return [i for i, _ in encoded], [v for _, v in encoded]


def _nodes() -> list[TextNode]:
    nodes = []
    for i, text in enumerate(corpus(40, seed=19)):
        node = TextNode(
            id_=str(uuid.UUID(int=0x11A4A << 64 | i)),
            text=text,
            embedding=dense(text),
            metadata={"topic": ["apt", "boot", "net"][i % 3]},
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=DOCS[i % 4]
        )
        nodes.append(node)
    return nodes


@pytest.fixture()
def stores(server) -> Iterator[tuple[QdrantVectorStore, QdrantVectorStore]]:
    remote_client = QdrantClient(url=server.url, timeout=30)
    oracle_client = QdrantClient(":memory:")
    if remote_client.collection_exists(COLLECTION):
        remote_client.delete_collection(COLLECTION)
    made = [
        QdrantVectorStore(
            collection_name=COLLECTION,
            client=client,
            enable_hybrid=True,
            sparse_doc_fn=_documents,
            sparse_query_fn=_queries,
        )
        for client in (remote_client, oracle_client)
    ]
    for store in made:
        store.add(_nodes())
    yield made[0], made[1]
    remote_client.delete_collection(COLLECTION)
    remote_client.close()
    oracle_client.close()


def _answer(
    store: QdrantVectorStore, query: VectorStoreQuery
) -> list[tuple[str, float]]:
    result = store.query(query)
    return list(
        zip(
            [node.node_id for node in result.nodes or []],
            result.similarities or [],
            strict=True,
        )
    )


def _same(got: list[tuple[str, float]], expected: list[tuple[str, float]]) -> bool:
    """The same nodes in the same order, scores equal up to f32 rounding (the server
    scores in f32, local mode in f64; fusion rescales both)."""
    return [node for node, _ in got] == [node for node, _ in expected] and all(
        abs(a - b) <= 1e-3 for (_, a), (_, b) in zip(got, expected, strict=True)
    )


def _query(
    text: str, mode: VectorStoreQueryMode, topic: str | None
) -> VectorStoreQuery:
    filters = (
        MetadataFilters(filters=[MetadataFilter(key="topic", value=topic)])
        if topic
        else None
    )
    return VectorStoreQuery(
        query_embedding=dense(text),
        query_str=text,
        similarity_top_k=5,
        sparse_top_k=8,
        mode=mode,
        alpha=0.4,
        filters=filters,
    )


MODES = [
    VectorStoreQueryMode.DEFAULT,
    VectorStoreQueryMode.SPARSE,
    VectorStoreQueryMode.HYBRID,
]


def test_hybrid_store_matches_local_mode(stores) -> None:
    remote, oracle = stores
    for text in QUERIES:
        for mode in MODES:
            for topic in (None, "boot"):
                query = _query(text, mode, topic)
                expected = _answer(oracle, query)
                assert expected, (text, mode, topic)
                got = _answer(remote, query)
                assert _same(got, expected), (text, mode, topic, got, expected)
    for store in (remote, oracle):
        store.delete(ref_doc_id="doc-b")
    for text in QUERIES:
        for mode in MODES:
            query = _query(text, mode, None)
            got = _answer(remote, query)
            assert _same(got, _answer(oracle, query)), (text, mode)
            left = {node.node_id for node in _nodes() if node.ref_doc_id != "doc-b"}
            assert all(node_id in left for node_id, _ in got)
