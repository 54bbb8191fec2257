"""Three context sources per question, each its own SagittaDB collection.

* ``documents``: the chunked corpus (:mod:`rag.corpus`);
* ``messages``: past conversations (:func:`rag.chat.past_messages`);
* ``buffer``: the current conversation's last turns, recreated for every session and
  updated as the conversation goes on.

``documents`` and ``messages`` hold two vectors per point, both made from the same
text: a dense all-MiniLM-L6-v2 embedding and a BM25-style sparse vector ``bm25``
(:mod:`rag.sparse`; the collection weighs its terms by IDF, ``modifier: idf``). A
question is searched in one of three modes: ``dense`` (the embedding alone),
``sparse`` (the terms alone) or ``hybrid`` (both, fused by reciprocal rank fusion in
the database), the default. The ``buffer`` is always searched dense.

A question is encoded once and searched in all three sources; the hits are composed
into one context block (for an LLM, when one is configured). The database is either
embedded (``sagittadb.open``) or a server (``sagittadb.connect``): the same API, the
same code.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sagittadb

from . import chat
from .corpus import build_corpus
from .embed import Embedder
from .sparse import Sparse, encode_document, encode_query

SOURCES = ("documents", "messages", "buffer")
LEXICAL_SOURCES = ("documents", "messages")  # the sources with a sparse vector
MODES = ("dense", "sparse", "hybrid")
SPARSE = "bm25"  # the sparse vector's name in documents and messages
SPARSE_CONFIG = {SPARSE: {"modifier": "idf"}}
EMBED_BLOCK = 256  # texts embedded between two progress lines


class MissingSparseError(RuntimeError):
    """A collection has no ``bm25`` sparse vector: it was built by an older version of
    the pipeline (dense only), so the sparse and hybrid modes cannot search it."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        listed = ", ".join(repr(name) for name in names)
        super().__init__(
            f"collection {listed} has no {SPARSE!r} sparse vector (built by an older "
            "python -m rag, dense only): rebuild with --build, or search with "
            "--mode dense"
        )


def _is_missing_sparse(error: Exception) -> bool:
    """Whether a search failed because the collection lacks the sparse vector: the
    embedded API says "Not existing sparse vector name error: bm25", a server "Not
    existing vector name error: bm25 (`using`)"."""
    message = str(error).lower()
    return (
        isinstance(error, sagittadb.InvalidParameterError)
        and "not existing" in message
        and "vector name" in message
        and SPARSE in message
    )


def open_database(data: str | Path | None = None, url: str | None = None, api_key=None):
    """A server when ``url`` is given, else the embedded database at ``data``."""
    if url:
        return sagittadb.connect(url, api_key=api_key)
    if data is None:
        raise ValueError("give a data directory or a server URL")
    return sagittadb.open(str(data))


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


@dataclass
class SourceResult:
    source: str
    hits: list[dict]  # {"id", "score", "payload"}, best first
    search_ms: float


@dataclass
class Retrieval:
    question: str
    embed_ms: float  # encoding the question: the embedding, and its terms if used
    results: list[SourceResult]
    mode: str = "hybrid"

    def hits(self, source: str) -> list[dict]:
        return next(r.hits for r in self.results if r.source == source)

    def context(self) -> str:
        """The composed context block, one tagged passage per line."""
        lines = ["Documentation passages:"]
        for n, hit in enumerate(self.hits("documents"), 1):
            p = hit["payload"]
            lines.append(f"[D{n}] {p['title']} ({p['source']}): {p['text']}")
        lines.append("Messages from earlier conversations:")
        for n, hit in enumerate(self.hits("messages"), 1):
            p = hit["payload"]
            lines.append(f"[M{n}] {p['timestamp'][:10]} {p['role']}: {p['text']}")
        lines.append("The current conversation (oldest first):")
        turns = sorted(self.hits("buffer"), key=lambda hit: hit["payload"]["turn"])
        for n, hit in enumerate(turns, 1):
            p = hit["payload"]
            lines.append(f"[B{n}] turn {p['turn']} {p['role']}: {p['text']}")
        return "\n".join(lines)


class Pipeline:
    def __init__(self, db, embedder: Embedder | None = None, prefix: str = "") -> None:
        self.db = db
        self.embedder = embedder if embedder is not None else Embedder()
        self.names = {source: prefix + source for source in SOURCES}
        self.turn = 0
        self._handles: dict = {}

    def collection(self, source: str):
        """The collection behind ``source`` (handles are kept: a remote one costs a
        request to open)."""
        if source not in self._handles:
            self._handles[source] = self.db.collection(self.names[source])
        return self._handles[source]

    def _drop(self, source: str) -> None:
        self._handles.pop(source, None)
        self.db.drop_collection(self.names[source])

    # -- building ----------------------------------------------------------------------

    def build(
        self,
        corpus_limit: int | None = None,
        force: bool = False,
        log: Callable[[str], None] = lambda line: None,
    ) -> dict:
        """Builds ``documents`` and ``messages`` where missing (every time with
        ``force``); returns {source: {"points", "built", timings...}}.

        Each gets a dense vector and the ``bm25`` sparse vector of the same text,
        bulk-imported (all or nothing, indexed when it appears)."""
        existing = set(self.db.list_collections())
        stats = {}
        for source in LEXICAL_SOURCES:
            name = self.names[source]
            if name in existing and not force:
                points = self.collection(source).count()
                stats[source] = {"points": points, "built": False}
                log(f"{name}: {points} points already there (--build rebuilds)")
                continue
            if name in existing:
                self._drop(source)
            start = time.perf_counter()
            if source == "documents":
                chunks = build_corpus(corpus_limit)
                texts = [chunk.embedding_text() for chunk in chunks]
                payloads = [chunk.payload() for chunk in chunks]
            else:
                payloads = chat.past_messages()
                texts = [chat.embedding_text(payload) for payload in payloads]
            prepare_ms = _ms(start)
            start = time.perf_counter()
            blocks = []
            for first in range(0, len(texts), EMBED_BLOCK):
                blocks.append(self.embedder.embed(texts[first : first + EMBED_BLOCK]))
                if len(texts) > EMBED_BLOCK:
                    done = min(len(texts), first + EMBED_BLOCK)
                    log(
                        f"{name}: embedded {done}/{len(texts)} in {_ms(start) / 1000:.1f} s"
                    )
            vectors = np.concatenate(blocks)
            embed_ms = _ms(start)
            start = time.perf_counter()
            sparse = [encode_document(text) for text in texts]
            sparse_ms = _ms(start)
            start = time.perf_counter()
            self._handles[source] = self.db.import_collection(
                name,
                list(range(len(texts))),
                vectors,
                payloads,
                distance="Cosine",
                sparse_vectors=SPARSE_CONFIG,
                sparse={SPARSE: sparse},
            )
            import_ms = _ms(start)
            stats[source] = {
                "points": len(texts),
                "built": True,
                "prepare_ms": prepare_ms,
                "embed_ms": embed_ms,
                "sparse_ms": sparse_ms,
                "import_ms": import_ms,
            }
            log(
                f"{name}: built {len(texts)} points — prepare {prepare_ms:.0f} ms, "
                f"embed {embed_ms / 1000:.1f} s "
                f"({embed_ms / max(1, len(texts)):.1f} ms/text), "
                f"bm25 {sparse_ms:.0f} ms, import {import_ms:.0f} ms"
            )
        return stats

    def check_sparse(self) -> None:
        """Raises :class:`MissingSparseError` naming the collections (``documents``,
        ``messages``) without the ``bm25`` sparse vector; one small query each."""
        missing = []
        for source in LEXICAL_SOURCES:
            try:
                self.collection(source).search_sparse(
                    SPARSE, Sparse([], []), limit=1, with_payload=False
                )
            except sagittadb.SagittaError as error:
                if not _is_missing_sparse(error):
                    raise
                missing.append(self.names[source])
        if missing:
            raise MissingSparseError(missing)

    # -- the current conversation ------------------------------------------------------

    def start_session(self, turns=chat.SEED_BUFFER) -> None:
        """Recreates ``buffer`` holding ``turns`` (role, text) as the conversation so far."""
        name = self.names["buffer"]
        if name in self.db.list_collections():
            self._drop("buffer")
        self._handles["buffer"] = self.db.create_collection(
            name, dim=self.embedder.dim, distance="Cosine"
        )
        self.turn = 0
        for role, text in turns:
            self.add_turn(role, text)

    def add_turn(self, role: str, text: str) -> int:
        """Appends a turn (id = turn number) and forgets turns older than the window."""
        self.turn += 1
        payload = chat.buffer_turn(self.turn, role, text)
        vector = self.embedder.embed([chat.embedding_text(payload)])
        buffer = self.collection("buffer")
        buffer.upsert(ids=[self.turn], vectors=vector, payloads=[payload], wait=True)
        stale = self.turn - chat.BUFFER_TURNS
        if stale >= 1:
            buffer.delete([stale], wait=True)
        return self.turn

    # -- asking --------------------------------------------------------------------------

    def encode(
        self, question: str, mode: str = "hybrid"
    ) -> tuple[np.ndarray, Sparse | None]:
        """The question's dense embedding and, unless ``mode`` is dense, its sparse
        query (else ``None``)."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        vector = self.embedder.embed([question])[0]
        return vector, (encode_query(question) if mode != "dense" else None)

    def search(
        self, source: str, vector, sparse: Sparse | None, k: int, mode: str
    ) -> list[dict]:
        """The top ``k`` of one source. ``buffer`` is searched dense whatever the
        mode: it holds a handful of turns and is recreated every session, so it has no
        sparse vector."""
        if mode not in MODES:
            raise ValueError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
        collection = self.collection(source)
        if source not in LEXICAL_SOURCES or mode == "dense":
            return collection.search(vector, limit=k)
        if sparse is None:
            raise ValueError(f"mode {mode!r} needs the sparse query (encode's)")
        try:
            if mode == "sparse":
                return collection.search_sparse(SPARSE, sparse, limit=k)
            return collection.hybrid_search(vector, sparse, using=SPARSE, limit=k)
        except sagittadb.SagittaError as error:
            if _is_missing_sparse(error):
                raise MissingSparseError([self.names[source]]) from None
            raise

    def retrieve(self, question: str, k: int = 3, mode: str = "hybrid") -> Retrieval:
        """The top ``k`` of every source. ``mode`` (``dense``, ``sparse`` or
        ``hybrid``: dense and BM25 fused by RRF) applies to ``documents`` and
        ``messages``; the ``buffer`` is always searched dense (see :meth:`search`).
        A collection built before the sparse vector existed raises
        :class:`MissingSparseError` outside the dense mode."""
        start = time.perf_counter()
        vector, sparse = self.encode(question, mode)
        embed_ms = _ms(start)
        results = []
        for source in SOURCES:
            start = time.perf_counter()
            hits = self.search(source, vector, sparse, k, mode)
            results.append(SourceResult(source, hits, _ms(start)))
        return Retrieval(question, embed_ms, results, mode)

    def ask(
        self,
        question: str,
        k: int = 3,
        llm=None,
        remember: bool = True,
        mode: str = "hybrid",
    ):
        """Retrieves (and answers, with ``llm``); the question (and the answer) then
        join the current conversation. Returns (retrieval, answer or None, llm ms)."""
        retrieval = self.retrieve(question, k, mode)
        answer, llm_ms = None, 0.0
        if llm is not None:
            start = time.perf_counter()
            answer = llm.answer(question, retrieval.context())
            llm_ms = _ms(start)
        if remember:
            self.add_turn("user", question)
            if answer:
                self.add_turn("assistant", answer)
        return retrieval, answer, llm_ms
