"""BM25-style sparse vectors, computed locally with no model: the lexical half of hybrid
retrieval.

A text becomes a sparse vector whose indices are its terms hashed to 31 bits and whose
values are BM25's term-frequency part, ``tf * (k1 + 1) / (tf + k1 * (1 - b + b * len /
avg_len))``. The inverse document frequency is not in the vector: the collection's
sparse vector is created with ``modifier: idf``, so the database weighs each query term
by its frequency in the stored documents (Qdrant's scheme, and FastEmbed's ``Bm25``).
A query is its distinct terms with weight 1.

Terms: lower-cased runs of letters, digits and underscores, English stop words dropped,
a light suffix stripping (``parsing``/``parsed``/``parses`` → ``pars``) so inflections
meet. Identifiers keep their underscores and dots split them (``functools.lru_cache`` →
``functools``, ``lru_cache``), which is what a question about an API names.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass

K1 = 1.2
B = 0.75
AVG_LEN = 80.0  # terms in a typical chunk after stop words (120-word windows)

_TERM = re.compile(r"[a-z0-9_]+")
_SUFFIXES = ("ing", "ed", "es", "s")
_STOP_TEXT = """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


def terms(text: str) -> list[str]:
    """The text's terms in order (repeats kept)."""
    out = []
    for word in _TERM.findall(text.lower()):
        if word in STOP_WORDS or len(word) < 2:
            continue
        for suffix in _SUFFIXES:
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)]
                break
        out.append(word)
    return out


def term_index(term: str) -> int:
    """A term's index: its CRC-32 folded to 31 bits (stable across runs and machines)."""
    return zlib.crc32(term.encode("utf-8")) & 0x7FFF_FFFF


@dataclass(frozen=True)
class Sparse:
    """Sorted distinct ``indices`` and their ``values`` (Qdrant's sparse vector)."""

    indices: list[int]
    values: list[float]

    def as_dict(self) -> dict:
        return {"indices": self.indices, "values": self.values}


def _from_weights(weights: dict[int, float]) -> Sparse:
    indices = sorted(weights)
    return Sparse(indices, [weights[i] for i in indices])


def encode_document(text: str) -> Sparse:
    """BM25's term-frequency weight of every distinct term (IDF left to the database)."""
    counts = Counter(term_index(term) for term in terms(text))
    length = sum(counts.values())
    norm = K1 * (1.0 - B + B * length / AVG_LEN)
    return _from_weights({i: tf * (K1 + 1.0) / (tf + norm) for i, tf in counts.items()})


def encode_query(text: str) -> Sparse:
    """Each distinct term once, weight 1."""
    return _from_weights({term_index(term): 1.0 for term in terms(text)})
