"""langchain-qdrant's `QdrantVectorStore` against `sagitta serve` in its dense, sparse and
hybrid retrieval modes, with qdrant-client's local mode (`location=":memory:"`) as the
oracle: the same texts, embeddings and operations on both (add, query with and without a
metadata filter, get by id, delete), and their answers must agree. The embeddings are
computed here, deterministically, so nothing is downloaded: a hashed bag-of-words dense
embedding and a BM25-style sparse encoder (term frequency, a per-term weight). The dense
answers are also checked against brute force.
"""

from __future__ import annotations

import math
import random
import uuid
import zlib
from collections import Counter

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

DIM = 32
WORDS = [
    "kernel", "package", "mirror", "install", "upgrade", "network", "driver", "printer",
    "sound", "video", "firmware", "boot", "grub", "disk", "partition", "mount", "user",
    "password", "ssh", "server", "desktop", "gnome", "kde", "wifi", "bluetooth", "apt",
    "security", "update", "backport", "release",
]  # fmt: skip
TOLERANCE = 1e-4


def _tokens(text: str) -> list[str]:
    return text.lower().split()


def _seed(token: str) -> int:
    return zlib.crc32(token.encode())


class HashedEmbeddings(Embeddings):
    """A bag of words: each token a fixed pseudo-random direction, summed and normalized."""

    def _embed(self, text: str) -> list[float]:
        total = np.zeros(DIM)
        for token in _tokens(text):
            total += np.random.default_rng(_seed(token)).standard_normal(DIM)
        norm = float(np.linalg.norm(total)) or 1.0
        return (total / norm).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


class TermWeights(SparseEmbeddings):
    """BM25-like: (1 + ln tf) times a per-term weight in [1, 2) for documents, the term
    weight alone for queries; indices are hashes of the terms."""

    @staticmethod
    def _weight(token: str) -> float:
        return 1.0 + (_seed(token) % 997) / 997

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        vectors = []
        for text in texts:
            counts = Counter(_tokens(text))
            terms = sorted(counts, key=_seed)
            # a per-document factor (as BM25's length normalization gives) keeps documents
            # with the same matching terms apart: no ties for a fusion to break
            factor = 1 + (_seed(text) % 1000) / 10_000
            vectors.append(
                SparseVector(
                    indices=[_seed(t) % (1 << 20) for t in terms],
                    values=[
                        (1 + math.log(counts[t])) * self._weight(t) * factor
                        for t in terms
                    ],
                )
            )
        return vectors

    def embed_query(self, text: str) -> SparseVector:
        terms = sorted(set(_tokens(text)), key=_seed)
        return SparseVector(
            indices=[_seed(t) % (1 << 20) for t in terms],
            values=[self._weight(t) for t in terms],
        )


def _corpus() -> tuple[list[str], list[dict], list[str]]:
    rng = random.Random(7)
    texts = [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))) for _ in range(48)
    ]
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
QUERIES = [
    "kernel upgrade",
    "wifi driver firmware",
    "ssh server password",
    "grub boot disk",
]


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
