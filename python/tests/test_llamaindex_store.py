"""SagittaVectorStore (LlamaIndex) on both backends: index documents, retrieve with and
without metadata filters, delete a document and see it gone, get_nodes, clear."""

from __future__ import annotations

import numpy as np
import pytest
import sagittadb
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
)
from sagittadb.llamaindex import SagittaVectorStore, to_sagitta_filter

DIM = 16


def make_nodes():
    """Three documents of four chunks; chunk embeddings are seeded random unit vectors."""
    rng = np.random.default_rng(3)
    nodes = []
    for doc in range(3):
        for chunk in range(4):
            vector = rng.normal(size=DIM)
            vector /= np.linalg.norm(vector)
            node = TextNode(
                text=f"document {doc} chunk {chunk}",
                id_=f"doc{doc}-chunk{chunk}",  # not a UUID: mapped to one
                embedding=vector.tolist(),
                metadata={
                    "doc": doc,
                    "chunk": chunk,
                    "lang": "en" if doc < 2 else "de",
                },
            )
            node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(
                node_id=f"doc{doc}"
            )
            nodes.append(node)
    return nodes


def brute_force(nodes, query, keep=lambda node: True, k=3):
    scored = [
        (float(np.dot(node.embedding, query)), node.node_id)
        for node in nodes
        if keep(node)
    ]
    return [node_id for _, node_id in sorted(scored, reverse=True)[:k]]


def test_vector_store_on_both_backends(database):
    name = f"li{np.random.default_rng().integers(1 << 40):x}"
    store = SagittaVectorStore(database, name)
    nodes = make_nodes()
    assert store.add(nodes) == [node.node_id for node in nodes]
    query = np.array(nodes[5].embedding) + 0.1 * np.array(nodes[9].embedding)
    query /= np.linalg.norm(query)  # Cosine: scores are then plain dot products
    result = store.query(
        VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=3)
    )
    assert result.ids == brute_force(nodes, query)
    assert result.nodes[0].text == nodes[5].text
    assert result.nodes[0].metadata["doc"] == 1
    assert result.similarities[0] == pytest.approx(
        float(np.dot(nodes[5].embedding, query)), 1e-4
    )

    german = MetadataFilters(filters=[MetadataFilter(key="lang", value="de")])
    result = store.query(
        VectorStoreQuery(
            query_embedding=query.tolist(), similarity_top_k=3, filters=german
        )
    )
    assert result.ids == brute_force(nodes, query, lambda n: n.metadata["lang"] == "de")
    late_or_first = MetadataFilters(
        filters=[
            MetadataFilter(key="chunk", value=2, operator=FilterOperator.GTE),
            MetadataFilter(key="doc", value=0, operator=FilterOperator.EQ),
        ],
        condition=FilterCondition.OR,
    )
    result = store.query(
        VectorStoreQuery(
            query_embedding=query.tolist(), similarity_top_k=5, filters=late_or_first
        )
    )
    wanted = brute_force(
        nodes, query, lambda n: n.metadata["chunk"] >= 2 or n.metadata["doc"] == 0, k=5
    )
    assert result.ids == wanted

    store.delete("doc1")
    result = store.query(
        VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=12)
    )
    assert len(result.ids) == 8
    assert not any(node_id.startswith("doc1-") for node_id in result.ids)
    fetched = store.get_nodes(node_ids=["doc0-chunk1", "doc1-chunk1"])
    assert [node.node_id for node in fetched] == ["doc0-chunk1"]
    assert fetched[0].embedding == pytest.approx(nodes[1].embedding, abs=1e-6)
    assert len(store.get_nodes(filters=german)) == 4
    store.delete_nodes(node_ids=["doc2-chunk0"])
    assert len(store.get_nodes()) == 7

    reopened = SagittaVectorStore(database, name)
    assert len(reopened.get_nodes()) == 7
    reopened.clear()
    assert name not in database.list_collections()
    assert reopened.query(VectorStoreQuery(query_embedding=query.tolist())).ids == []


def test_filters_translate_to_the_qdrant_grammar():
    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="a", value=1, operator=FilterOperator.NE),
            MetadataFilter(key="b", value=[1, 2], operator=FilterOperator.IN),
            MetadataFilters(
                filters=[MetadataFilter(key="c", value=5, operator=FilterOperator.LT)],
                condition=FilterCondition.NOT,
            ),
        ]
    )
    assert to_sagitta_filter(filters) == {
        "must_not": [{"key": "a", "match": {"value": 1}}],
        "must": [
            {"key": "b", "match": {"any": [1, 2]}},
            {"must_not": [{"key": "c", "range": {"lt": 5}}]},
        ],
    }
    unsupported = MetadataFilters(
        filters=[
            MetadataFilter(
                key="t", value="x", operator=FilterOperator.TEXT_MATCH_INSENSITIVE
            )
        ]
    )
    with pytest.raises(sagittadb.InvalidParameterError, match="not supported"):
        to_sagitta_filter(unsupported)
