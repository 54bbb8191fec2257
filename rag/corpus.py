"""The documents corpus: real text that ships with every CPython, chunked.

Two sources, both read from the running interpreter (no network, no files to fetch):

* ``python-docs``: the language reference topics that ``help()`` shows
  (``pydoc_data.topics.topics``: ``with``, ``try``, ``for``, ... about 65,000 words);
* ``stdlib``: docstrings of the builtins and of a fixed list of standard-library
  modules (module docstrings and those of their public functions and classes).

Each document is split into overlapping word windows (``CHUNK_WORDS`` words, the next
window starting ``CHUNK_WORDS - OVERLAP_WORDS`` words later). The corpus is ordered
round-robin by chunk index — every document's first chunk, then every second chunk,
... — so ``limit=N`` keeps a small corpus that still covers every document's opening
(its definition) instead of the first few documents whole.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass

CHUNK_WORDS = 120
OVERLAP_WORDS = 30
MIN_WORDS = 6

STDLIB_MODULES = (
    "builtins",
    "os",
    "pathlib",
    "shutil",
    "json",
    "csv",
    "re",
    "datetime",
    "time",
    "collections",
    "itertools",
    "functools",
    "subprocess",
    "threading",
    "logging",
    "argparse",
    "random",
    "math",
    "statistics",
    "string",
    "textwrap",
    "tempfile",
    "glob",
    "sqlite3",
    "urllib.parse",
    "hashlib",
    "base64",
    "zipfile",
    "gzip",
    "pickle",
    "copy",
    "heapq",
    "bisect",
    "dataclasses",
    "enum",
    "typing",
    "contextlib",
)


# Modules whose functions live in a C module of another name.
_ALIASES = {"os": ("posix", "nt")}


@dataclass(frozen=True)
class Document:
    source: str  # "python-docs" or "stdlib"
    doc: str  # stable key: the pydoc topic, or "module.name"
    title: str  # human-readable heading
    text: str


@dataclass(frozen=True)
class Chunk:
    source: str
    doc: str
    title: str
    chunk: int  # index of the chunk within its document
    text: str

    def payload(self) -> dict:
        return {
            "source": self.source,
            "doc": self.doc,
            "title": self.title,
            "chunk": self.chunk,
            "text": self.text,
        }

    def embedding_text(self) -> str:
        """What is embedded: the heading then the passage (the heading disambiguates
        passages that never name their subject)."""
        return f"{self.title}: {self.text}"


def pydoc_documents() -> list[Document]:
    from pydoc_data.topics import topics

    docs = []
    for key in sorted(topics):
        text = topics[key].strip()
        lines = text.splitlines()
        title = lines[0].strip() if lines else key
        # Drop the "*****" underline under the heading.
        body = "\n".join(
            line for line in lines[1:] if not re.fullmatch(r"\s*[*=-]{3,}\s*", line)
        )
        docs.append(Document("python-docs", key, title, body))
    return docs


def _members(module) -> list[tuple[str, object]]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name in dir(module) if not name.startswith("_")]
    home = module.__name__.split(".")[0].lstrip("_")
    homes = (home, *_ALIASES.get(home, ()))
    members = []
    for name in sorted(set(names)):
        obj = getattr(module, name, None)
        if not (inspect.isroutine(obj) or inspect.isclass(obj)):
            continue
        owner = (getattr(obj, "__module__", None) or "").lstrip("_")
        if module.__name__ != "builtins" and not owner.startswith(homes):
            continue  # re-exported from elsewhere
        members.append((name, obj))
    return members


def stdlib_documents(modules=STDLIB_MODULES) -> list[Document]:
    """Each module's docstring, then its members' (longest first), interleaved across
    modules (every module's first document, then every second, ...): any prefix of the
    list mixes all the modules."""
    per_module = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        docs = []
        text = inspect.getdoc(module) or ""
        if len(text.split()) >= MIN_WORDS:
            title = f"{module_name} module"
            docs.append(Document("stdlib", module_name, title, text))
        members = []
        for name, obj in _members(module):
            text = inspect.getdoc(obj) or ""
            if len(text.split()) >= MIN_WORDS:
                key = f"{module_name}.{name}"
                members.append(Document("stdlib", key, key, text))
        # The most documented members first (open, Popen, ArgumentParser, ...).
        members.sort(key=lambda doc: (-len(doc.text.split()), doc.doc))
        per_module.append(docs + members)
    return _interleave(per_module)


def _interleave(lists: list[list]) -> list:
    depth = max(len(items) for items in lists)
    return [items[i] for i in range(depth) for items in lists if i < len(items)]


def chunk_document(
    document: Document, words: int = CHUNK_WORDS, overlap: int = OVERLAP_WORDS
) -> list[Chunk]:
    tokens = document.text.split()
    step = max(1, words - overlap)
    chunks: list[Chunk] = []
    start = 0
    while True:
        text = " ".join(tokens[start : start + words])
        chunks.append(
            Chunk(document.source, document.doc, document.title, len(chunks), text)
        )
        if start + words >= len(tokens):
            return chunks
        start += step


def build_corpus(limit: int | None = None) -> list[Chunk]:
    """Every chunk of both sources, round-robin by chunk index, at most ``limit``."""
    per_doc = [
        chunk_document(document) for document in pydoc_documents() + stdlib_documents()
    ]
    ordered = _interleave(per_doc)
    return ordered if limit is None else ordered[:limit]
