"""Three context sources per question, each its own SagittaDB collection.

* ``documents``: the chunked corpus (:mod:`rag.corpus`), bulk-imported;
* ``messages``: past conversations (:func:`rag.chat.past_messages`), bulk-imported;
* ``buffer``: the current conversation's last turns, recreated for every session and
  updated as the conversation goes on.

A question is embedded once and searched in all three; the hits are composed into one
context block (for an LLM, when one is configured). The database is either embedded
(``sagittadb.open``) or a server (``sagittadb.connect``): the same API, the same code.
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

SOURCES = ("documents", "messages", "buffer")
EMBED_BLOCK = 256  # texts embedded between two progress lines


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
    embed_ms: float
    results: list[SourceResult]

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
        """Imports ``documents`` and ``messages`` where missing (every time with
        ``force``); returns {source: {"points", "built", timings...}}."""
        existing = set(self.db.list_collections())
        stats = {}
        for source in ("documents", "messages"):
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
            ids = list(range(len(texts)))
            self._handles[source] = self.db.import_collection(
                name, ids, vectors, payloads, distance="Cosine"
            )
            import_ms = _ms(start)
            stats[source] = {
                "points": len(ids),
                "built": True,
                "prepare_ms": prepare_ms,
                "embed_ms": embed_ms,
                "import_ms": import_ms,
            }
            log(
                f"{name}: built {len(ids)} points — prepare {prepare_ms:.0f} ms, "
                f"embed {embed_ms / 1000:.1f} s "
                f"({embed_ms / max(1, len(ids)):.1f} ms/text), "
                f"import {import_ms:.0f} ms"
            )
        return stats

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

    def retrieve(self, question: str, k: int = 3) -> Retrieval:
        start = time.perf_counter()
        vector = self.embedder.embed([question])[0]
        embed_ms = _ms(start)
        results = []
        for source in SOURCES:
            start = time.perf_counter()
            hits = self.collection(source).search(vector, limit=k)
            results.append(SourceResult(source, hits, _ms(start)))
        return Retrieval(question, embed_ms, results)

    def ask(self, question: str, k: int = 3, llm=None, remember: bool = True):
        """Retrieves (and answers, with ``llm``); the question (and the answer) then
        join the current conversation. Returns (retrieval, answer or None, llm ms)."""
        retrieval = self.retrieve(question, k)
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
