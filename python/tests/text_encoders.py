"""Deterministic text encoders for the client tests (nothing downloaded): a hashed
bag-of-words dense embedding and a BM25-style sparse encoder, and a small corpus."""

from __future__ import annotations

import math
import random
import zlib
from collections import Counter

import numpy as np

DIM = 32
WORDS = [
    "kernel", "package", "mirror", "install", "upgrade", "network", "driver", "printer",
    "sound", "video", "firmware", "boot", "grub", "disk", "partition", "mount", "user",
    "password", "ssh", "server", "desktop", "gnome", "kde", "wifi", "bluetooth", "apt",
    "security", "update", "backport", "release",
]  # fmt: skip
QUERIES = [
    "kernel upgrade",
    "wifi driver firmware",
    "ssh server password",
    "grub boot disk",
]


def tokens(text: str) -> list[str]:
    return text.lower().split()


def _seed(token: str) -> int:
    return zlib.crc32(token.encode())


def corpus(count: int = 48, seed: int = 7) -> list[str]:
    """`count` texts of 4 to 9 words of [`WORDS`]."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
        for _ in range(count)
    ]


def dense(text: str) -> list[float]:
    """Each token a fixed pseudo-random direction, summed and normalized."""
    total = np.zeros(DIM)
    for token in tokens(text):
        total += np.random.default_rng(_seed(token)).standard_normal(DIM)
    norm = float(np.linalg.norm(total)) or 1.0
    return (total / norm).tolist()


def _weight(token: str) -> float:
    return 1.0 + (_seed(token) % 997) / 997


def sparse_document(text: str) -> tuple[list[int], list[float]]:
    """(1 + ln tf) times a per-term weight in [1, 2), times a per-document factor (as
    BM25's length normalization gives) that keeps documents with the same matching terms
    apart: no ties for a fusion to break. Indices are hashes of the terms."""
    counts = Counter(tokens(text))
    terms = sorted(counts, key=_seed)
    factor = 1 + (_seed(text) % 100_000) / 1_000_000
    indices = [_seed(t) % (1 << 20) for t in terms]
    return indices, [(1 + math.log(counts[t])) * _weight(t) * factor for t in terms]


def sparse_query(text: str) -> tuple[list[int], list[float]]:
    """Each distinct term with its weight."""
    terms = sorted(set(tokens(text)), key=_seed)
    return [_seed(t) % (1 << 20) for t in terms], [_weight(t) for t in terms]
