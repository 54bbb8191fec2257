"""LlamaIndex's `QdrantVectorStore` against `sagitta serve`, with fixed embeddings."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import QdrantClient

DIM = 16
N_NODES = 36
DOCS = ["doc-0", "doc-1", "doc-2"]
CATEGORIES = ["science", "history", "art"]
COLLECTION = "llama_nodes"


@pytest.fixture(scope="module")
def client(server):
    client = QdrantClient(url=server.url, timeout=30)
    yield client
    client.close()


def make_nodes() -> list[TextNode]:
    rng = np.random.default_rng(11)
    embeddings = rng.standard_normal((N_NODES, DIM)).astype(np.float32)
    nodes = []
    for i in range(N_NODES):
        node = TextNode(
            id_=str(uuid.UUID(int=0xABCDEF << 64 | i)),
            text=f"node number {i} about {CATEGORIES[i % 3]}",
            embedding=embeddings[i].tolist(),
            metadata={
                "category": CATEGORIES[i % 3],
                "year": 1990 + i,
                "author": f"a{i % 4}",
            },
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
            node_id=DOCS[i % 3]
        )
        nodes.append(node)
    return nodes


def reference(
    nodes: list[TextNode], query: list[float], k: int, keep=lambda node: True
):
    """Node ids of the `k` nearest nodes by cosine similarity, among those `keep` accepts."""
    q = np.array(query) / np.linalg.norm(query)
    scored = []
    for node in nodes:
        if keep(node):
            e = np.array(node.embedding)
            scored.append((float(e @ q / np.linalg.norm(e)), node.node_id))
    scored.sort(reverse=True)
    return [node_id for _, node_id in scored[:k]]


@pytest.fixture(scope="module")
def store(client):
    """A store built on an empty server: its first `add` creates the collection."""
    assert not client.collection_exists(COLLECTION)
    store = QdrantVectorStore(collection_name=COLLECTION, client=client)
    nodes = make_nodes()
    ids = store.add(nodes)
    assert ids == [node.node_id for node in nodes]
    return store, nodes


def test_add_creates_the_collection(client, store):
    _, nodes = store
    info = client.get_collection(COLLECTION)
    assert info.config.params.vectors.size == DIM
    assert info.points_count == len(nodes)
    # The store indexes `doc_id` (keyword) when it creates the collection.
    assert "doc_id" in info.payload_schema
    record = client.retrieve(COLLECTION, ids=[nodes[0].node_id])[0]
    assert record.payload["doc_id"] == "doc-0"
    assert "_node_content" in record.payload


def test_query_returns_the_nearest_nodes(store):
    vector_store, nodes = store
    for i in (0, 7, 20):
        query = VectorStoreQuery(query_embedding=nodes[i].embedding, similarity_top_k=5)
        result = vector_store.query(query)
        assert result.ids == reference(nodes, nodes[i].embedding, 5)
        assert result.ids[0] == nodes[i].node_id
        assert result.similarities[0] == pytest.approx(1.0, abs=1e-4)
        assert result.similarities == sorted(result.similarities, reverse=True)
        top = result.nodes[0]
        assert top.get_content() == nodes[i].get_content()
        assert top.metadata == nodes[i].metadata
        assert top.ref_doc_id == nodes[i].ref_doc_id


FILTERS = {
    "eq": (
        MetadataFilters(filters=[MetadataFilter(key="category", value="science")]),
        lambda n: n.metadata["category"] == "science",
    ),
    "gte and lt": (
        MetadataFilters(
            filters=[
                MetadataFilter(key="year", value=2000, operator=FilterOperator.GTE),
                MetadataFilter(key="year", value=2015, operator=FilterOperator.LT),
            ]
        ),
        lambda n: 2000 <= n.metadata["year"] < 2015,
    ),
    "in": (
        MetadataFilters(
            filters=[
                MetadataFilter(
                    key="author", value=["a1", "a3"], operator=FilterOperator.IN
                )
            ]
        ),
        lambda n: n.metadata["author"] in ("a1", "a3"),
    ),
    "ne": (
        MetadataFilters(
            filters=[
                MetadataFilter(key="category", value="art", operator=FilterOperator.NE)
            ]
        ),
        lambda n: n.metadata["category"] != "art",
    ),
    "or": (
        MetadataFilters(
            filters=[
                MetadataFilter(key="category", value="history"),
                MetadataFilter(key="author", value="a0"),
            ],
            condition=FilterCondition.OR,
        ),
        lambda n: n.metadata["category"] == "history" or n.metadata["author"] == "a0",
    ),
    "nested": (
        MetadataFilters(
            filters=[
                MetadataFilter(
                    key="category", value="science", operator=FilterOperator.NE
                ),
                MetadataFilters(
                    filters=[
                        MetadataFilter(
                            key="year", value=1995, operator=FilterOperator.LTE
                        ),
                        MetadataFilter(
                            key="year", value=2020, operator=FilterOperator.GT
                        ),
                    ],
                    condition=FilterCondition.OR,
                ),
            ]
        ),
        lambda n: (
            n.metadata["category"] != "science"
            and (n.metadata["year"] <= 1995 or n.metadata["year"] > 2020)
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_query_with_metadata_filters(store, name):
    vector_store, nodes = store
    filters, keep = FILTERS[name]
    assert 0 < sum(map(keep, nodes)) < len(nodes)
    query_embedding = nodes[4].embedding
    result = vector_store.query(
        VectorStoreQuery(
            query_embedding=query_embedding, similarity_top_k=4, filters=filters
        )
    )
    assert result.ids == reference(nodes, query_embedding, 4, keep)
    assert all(keep(node) for node in result.nodes)


def test_get_nodes(store):
    vector_store, nodes = store
    wanted = [nodes[1], nodes[10], nodes[33]]
    got = vector_store.get_nodes(node_ids=[n.node_id for n in wanted])
    by_id = {node.node_id: node for node in got}
    assert set(by_id) == {n.node_id for n in wanted}
    for node in wanted:
        assert by_id[node.node_id].get_content() == node.get_content()
        assert by_id[node.node_id].metadata == node.metadata
        # Cosine vectors are stored normalized.
        stored = np.array(by_id[node.node_id].embedding)
        expected = np.array(node.embedding)
        np.testing.assert_allclose(
            stored / np.linalg.norm(stored),
            expected / np.linalg.norm(expected),
            atol=1e-5,
        )
    filters, keep = FILTERS["eq"]
    got = vector_store.get_nodes(filters=filters)
    assert sorted(n.node_id for n in got) == sorted(n.node_id for n in nodes if keep(n))


def test_a_second_store_reopens_the_collection(server, store):
    _, nodes = store
    # A new store on an existing collection detects it and its vector format.
    reopened = QdrantVectorStore(
        collection_name=COLLECTION, client=QdrantClient(url=server.url, timeout=30)
    )
    assert reopened._collection_initialized
    result = reopened.query(
        VectorStoreQuery(query_embedding=nodes[9].embedding, similarity_top_k=3)
    )
    assert result.ids == reference(nodes, nodes[9].embedding, 3)


def test_delete_by_ref_doc_id_then_clear(client, store):
    vector_store, nodes = store
    doomed = [n for n in nodes if n.ref_doc_id == "doc-1"]
    kept = [n for n in nodes if n.ref_doc_id != "doc-1"]
    vector_store.delete(ref_doc_id="doc-1")
    assert client.count(COLLECTION).count == len(kept)
    assert vector_store.get_nodes(node_ids=[n.node_id for n in doomed]) == []
    result = vector_store.query(
        VectorStoreQuery(
            query_embedding=doomed[0].embedding, similarity_top_k=len(nodes)
        )
    )
    assert sorted(result.ids) == sorted(n.node_id for n in kept)
    assert result.ids[:5] == reference(kept, doomed[0].embedding, 5)

    # Adding again after a delete works, with the same ids.
    vector_store.add(doomed)
    assert client.count(COLLECTION).count == len(nodes)

    vector_store.clear()
    assert not client.collection_exists(COLLECTION)
    # The store creates the collection again on the next add.
    vector_store.add(nodes[:3])
    assert client.count(COLLECTION).count == 3
    vector_store.clear()
    assert not client.collection_exists(COLLECTION)
