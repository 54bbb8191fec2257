"""langchain-qdrant's `QdrantVectorStore` against `sagitta serve` in its dense, sparse and
hybrid retrieval modes, with qdrant-client's local mode (`location=":memory:"`) as the
oracle: the same texts, embeddings and operations on both (add, query with and without a
metadata filter, get by id, delete), and their answers must agree. The embeddings are
computed here, deterministically, so nothing is downloaded: a hashed bag-of-words dense
embedding and a BM25-style sparse encoder (term frequency, a per-term weight). The dense
answers are also checked against brute force.
"""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_qdrant import (
    QdrantVectorStore,
    RetrievalMode,
    SparseEmbeddings,
    SparseVector,
)
from qdrant_client import models
from text_encoders import QUERIES, corpus, dense, sparse_document, sparse_query

TOLERANCE = 1e-4


class HashedEmbeddings(Embeddings):
    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [dense(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return dense(text)


class TermWeights(SparseEmbeddings):
    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        encoded = (sparse_document(text) for text in texts)
        return [SparseVector(indices=i, values=v) for i, v in encoded]

    def embed_query(self, text: str) -> SparseVector:
        indices, values = sparse_query(text)
        return SparseVector(indices=indices, values=values)


def _corpus() -> tuple[list[str], list[dict], list[str]]:
    texts = corpus()
    metadatas = [{"topic": i % 3, "n": i} for i in range(len(texts))]
    ids = [str(uuid.UUID(int=0x5A6177 << 64 | i)) for i in range(len(texts))]
    return texts, metadatas, ids


def _stores(server, mode: RetrievalMode) -> tuple[QdrantVectorStore, QdrantVectorStore]:
    texts, metadatas, ids = _corpus()
    common = {
        "texts": texts,
        "embedding": HashedEmbeddings(),
        "metadatas": metadatas,
        "ids": ids,
        "collection_name": f"langchain_{mode.value}",
        "retrieval_mode": mode,
        "sparse_embedding": TermWeights(),
        "force_recreate": True,
    }
    remote = QdrantVectorStore.from_texts(url=server.url, timeout=30, **common)
    oracle = QdrantVectorStore.from_texts(location=":memory:", **common)
    return remote, oracle


def _same_answers(got, wide) -> None:
    """The same scores in order as the oracle's first `len(got)` and, score by score, the
    documents of that score among the oracle's `wide` answer (a tie may be broken either
    way, at the cut too)."""
    expected = wide[: len(got)]
    assert [round(score, 3) for _, score in got] == [
        round(score, 3) for _, score in expected
    ], (got, expected)
    by_score: dict[float, set] = {}
    for document, score in wide:
        by_score.setdefault(round(score, 3), set()).add(document.metadata["_id"])
    for document, score in got:
        assert document.metadata["_id"] in by_score[round(score, 3)], (got, expected)
        assert document.page_content


TOPIC_ONE = models.Filter(
    must=[models.FieldCondition(key="metadata.topic", match=models.MatchValue(value=1))]
)


@pytest.mark.parametrize(
    "mode", [RetrievalMode.DENSE, RetrievalMode.SPARSE, RetrievalMode.HYBRID]
)
def test_langchain_qdrant_matches_local_mode(server, mode: RetrievalMode) -> None:
    remote, oracle = _stores(server, mode)
    # the oracle's answer past the cut shows which documents tie there; a hybrid query's
    # limit is also its prefetches', so it is asked for as many
    wide = 6 if mode == RetrievalMode.HYBRID else 40
    for query in QUERIES:
        for query_filter in (None, TOPIC_ONE):
            answers = [
                store.similarity_search_with_score(query, k=k, filter=query_filter)
                for store, k in ((remote, 6), (oracle, wide))
            ]
            assert answers[1], "the oracle finds something"
            _same_answers(*answers)
            for document, _ in answers[0]:
                if query_filter is not None:
                    assert document.metadata["topic"] == 1
    _, _, ids = _corpus()
    got = remote.get_by_ids(ids[:3])
    assert sorted(d.page_content for d in got) == sorted(
        d.page_content for d in oracle.get_by_ids(ids[:3])
    )
    doomed: list[str | int] = list(ids[::2])
    for store in (remote, oracle):
        assert store.delete(doomed)
    for query in QUERIES:
        answers = [
            store.similarity_search_with_score(query, k=k)
            for store, k in ((remote, 6), (oracle, wide))
        ]
        _same_answers(*answers)
        deleted = set(ids[::2])
        assert all(d.metadata["_id"] not in deleted for d, _ in answers[0])
    remote.client.delete_collection(remote.collection_name)


def test_langchain_dense_scores_are_cosine_similarities(server) -> None:
    remote, _ = _stores(server, RetrievalMode.DENSE)
    texts, _, ids = _corpus()
    embeddings = np.array(HashedEmbeddings().embed_documents(texts))
    for query in QUERIES:
        vector = np.array(HashedEmbeddings().embed_query(query))
        scores = embeddings @ vector
        expected = sorted(scores, reverse=True)[:5]
        got = remote.similarity_search_with_score(query, k=5)
        assert [round(s, 4) for _, s in got] == [round(float(s), 4) for s in expected]
        for document, score in got:
            at = ids.index(document.metadata["_id"])
            assert abs(scores[at] - score) < TOLERANCE
    remote.client.delete_collection(remote.collection_name)
