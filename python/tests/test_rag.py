"""The RAG pipeline (python -m rag): real embeddings, real text, three collections.

Builds a 300-chunk corpus (Python's own documentation and stdlib docstrings) with the
all-MiniLM-L6-v2 int8 ONNX model and checks that hand-written questions retrieve the
passage that answers them, that past messages and the current chat buffer come back
as expected, that an OpenAI-compatible endpoint gets the composed context, and that
the same pipeline runs against a `sagitta serve` server.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import numpy as np
import pytest
import sagittadb
from server_process import running_server

from rag import chat
from rag.__main__ import main
from rag.corpus import CHUNK_WORDS, OVERLAP_WORDS, build_corpus, pydoc_documents
from rag.embed import Embedder
from rag.llm import LLM
from rag.pipeline import Pipeline

CORPUS_LIMIT = 300

# (question, the document whose passage answers it): must be in the top 3 of 300.
DOCUMENT_QUESTIONS = [
    ("How do I open a file for reading?", "builtins.open"),
    (
        "How does the with statement use a context manager's __enter__ and __exit__?",
        "with",
    ),
    ("How do I catch an exception and run cleanup code with finally?", "try"),
    ("How do I write an anonymous function in one line?", "lambda"),
    ("How do I split a string with a regular expression?", "re.split"),
    (
        "How do I add a sanity check that raises AssertionError when a condition is false?",
        "assert",
    ),
    ("How do I write a generator function that produces values lazily?", "yield"),
    ("How do I raise an exception with a cause?", "raise"),
    ("How do I read rows from a CSV file?", "csv.reader"),
    ("How do I count how many times each element occurs?", "collections.Counter"),
    ("How do I cache the results of an expensive function?", "functools.lru_cache"),
    ("How do I connect to an SQLite database?", "sqlite3.connect"),
    ("How do I compare two floats for approximate equality?", "math.isclose"),
    ("How do I parse command-line arguments?", "argparse.ArgumentParser"),
    ("How do I find the n largest elements?", "heapq.nlargest"),
    (
        "How do I remove common leading whitespace from lines of text?",
        "textwrap.dedent",
    ),
]

MESSAGE_QUESTIONS = [
    ("which hnsw settings did we choose?", "hnsw-tuning"),
    ("what did you suggest for my flat sourdough bread?", "sourdough"),
    ("how do I undo a rebase?", "git-rebase"),
    ("my asyncio task hangs, how do I time it out?", "asyncio-timeout"),
    ("what should I see in Lisbon?", "lisbon-trip"),
]


@pytest.fixture(scope="module")
def embedder():
    return Embedder()


@pytest.fixture(scope="module")
def pipeline(embedder, tmp_path_factory):
    db = sagittadb.open(tmp_path_factory.mktemp("rag-data"))
    pipe = Pipeline(db, embedder)
    stats = pipe.build(CORPUS_LIMIT)
    assert stats["documents"] == {
        **stats["documents"],
        "points": CORPUS_LIMIT,
        "built": True,
    }
    assert stats["messages"]["points"] == len(chat.past_messages())
    pipe.start_session()
    return pipe


def test_embeddings_are_sane(embedder):
    vectors = embedder.embed(
        [
            "How do I open a file in Python?",
            "What is the way to read a file using Python?",
            "The cat sat on the mat in the sun.",
        ]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    paraphrase, unrelated = vectors[0] @ vectors[1], vectors[0] @ vectors[2]
    assert paraphrase > 0.7 and unrelated < 0.3
    # Batching pads to the longest text; the mask keeps the vectors the same.
    alone = embedder.embed(["short text"])[0]
    padded = embedder.embed(["short text", "a much longer text " * 30])[0]
    assert float(alone @ padded) > 0.9999


def test_corpus_is_deterministic_chunked_and_covers_every_topic():
    chunks = build_corpus(CORPUS_LIMIT)
    assert chunks == build_corpus(CORPUS_LIMIT) and len(chunks) == CORPUS_LIMIT
    assert all(len(chunk.text.split()) <= CHUNK_WORDS for chunk in chunks)
    # The limited corpus keeps every reference topic's opening chunk.
    topics = {doc.doc for doc in pydoc_documents()}
    assert {c.doc for c in chunks if c.source == "python-docs"} == topics
    # Consecutive chunks of one document overlap by OVERLAP_WORDS words.
    full = [c for c in build_corpus() if c.doc == "with"]
    assert len(full) > 3 and [c.chunk for c in full] == list(range(len(full)))
    first, second = full[0].text.split(), full[1].text.split()
    assert first[-OVERLAP_WORDS:] == second[:OVERLAP_WORDS]


@pytest.mark.parametrize(("question", "expected"), DOCUMENT_QUESTIONS)
def test_documents_source_retrieves_the_answering_passage(pipeline, question, expected):
    hits = pipeline.retrieve(question, k=3).hits("documents")
    found = [hit["payload"]["doc"] for hit in hits]
    assert expected in found, f"{question!r}: top 3 were {found}"
    assert all(hit["payload"]["text"] for hit in hits)


def test_documents_source_ranks_most_answers_first(pipeline):
    firsts = [
        pipeline.retrieve(question, k=1).hits("documents")[0]["payload"]["doc"]
        for question, _ in DOCUMENT_QUESTIONS
    ]
    right = sum(
        doc == expected
        for doc, (_, expected) in zip(firsts, DOCUMENT_QUESTIONS, strict=True)
    )
    assert right >= 12, list(zip(firsts, DOCUMENT_QUESTIONS, strict=True))


@pytest.mark.parametrize(("question", "conversation"), MESSAGE_QUESTIONS)
def test_messages_source_retrieves_the_past_conversation(
    pipeline, question, conversation
):
    (top,) = pipeline.retrieve(question, k=1).hits("messages")
    assert top["payload"]["conversation"] == conversation
    assert top["payload"]["role"] in {"user", "assistant"}
    assert top["payload"]["timestamp"].startswith("2025-")


def test_buffer_returns_the_latest_turn_and_keeps_a_window(pipeline):
    pipeline.start_session()
    assert pipeline.collection("buffer").count() == len(chat.SEED_BUFFER)
    latest = pipeline.add_turn(
        "user", "Now I need to send the totals by e-mail every Monday."
    )
    hits = pipeline.retrieve("how can I email the weekly totals?", k=3).hits("buffer")
    assert hits[0]["id"] == latest and hits[0]["payload"]["turn"] == latest
    # A question asked joins the conversation, after its own retrieval.
    retrieval, answer, _ = pipeline.ask(
        "Can the e-mail include the CSV as an attachment?"
    )
    assert answer is None and all(
        h["id"] != latest + 1 for h in retrieval.hits("buffer")
    )
    hits = pipeline.retrieve("attach the csv file to the mail", k=1).hits("buffer")
    assert hits[0]["payload"]["turn"] == latest + 1
    for n in range(chat.BUFFER_TURNS + 2):
        pipeline.add_turn("assistant", f"Filler turn number {n}.")
    buffer = pipeline.collection("buffer")
    assert buffer.count() == chat.BUFFER_TURNS
    kept = sorted(point["id"] for point in buffer.scroll(limit=100)[0])
    assert kept == list(range(pipeline.turn - chat.BUFFER_TURNS + 1, pipeline.turn + 1))


def test_context_block_composes_all_three_sources(pipeline):
    pipeline.start_session()
    retrieval = pipeline.retrieve("How do I read rows from a CSV file?", k=2)
    context = retrieval.context()
    for tag in ("[D1]", "[D2]", "[M1]", "[M2]", "[B1]", "[B2]"):
        assert tag in context
    assert "csv.reader" in context and "csv.DictReader" in context
    assert retrieval.embed_ms > 0 and all(r.search_ms > 0 for r in retrieval.results)


class _FakeChat(BaseHTTPRequestHandler):
    requests: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _FakeChat.requests.append((self.path, self.headers.get("Authorization"), body))
        reply = {
            "choices": [
                {"message": {"role": "assistant", "content": " Use csv.reader. "}}
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_an_openai_compatible_endpoint_gets_context_and_question(pipeline):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeChat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        pipeline.start_session()
        llm = LLM(url, "test-model", api_key="secret")
        retrieval, answer, _ = pipeline.ask(
            "How do I read rows from a CSV file?", llm=llm
        )
    finally:
        server.shutdown()
        server.server_close()
    assert answer == "Use csv.reader."
    ((path, auth, body),) = _FakeChat.requests
    assert path == "/v1/chat/completions" and auth == "Bearer secret"
    assert body["model"] == "test-model"
    prompt = body["messages"][-1]["content"]
    assert retrieval.context() in prompt and prompt.endswith(
        "How do I read rows from a CSV file?"
    )
    last = pipeline.collection("buffer").get([pipeline.turn])[0]["payload"]
    assert (last["role"], last["text"]) == ("assistant", "Use csv.reader.")


def test_cli_builds_and_prints_passages_scores_and_timings(tmp_path, capsys):
    question = "How do I write an anonymous function in one line?"
    args = ["--data", str(tmp_path / "db"), "--corpus-limit", "60", "--k", "2"]
    assert main([*args, "--ask", question]) == 0
    out = capsys.readouterr().out
    assert "documents: built 60 points" in out and "messages: built 16 points" in out
    assert f"Q: {question}" in out and "embed" in out and " ms" in out
    for source in ("documents", "messages", "buffer"):
        assert f"  {source}: 2 hits" in out
    documents = out.split("  documents: 2 hits")[1].splitlines()
    assert "[Lambdas #0]" in documents[1], documents[1]
    assert "context (no --llm-url" in out and "[D1]" in out
    # A second run reuses the collections.
    questions = tmp_path / "questions.txt"
    questions.write_text("# a comment\nWhat does the pass statement do?\n")
    assert main([*args, "--questions", str(questions)]) == 0
    out = capsys.readouterr().out
    assert (
        "60 points already there" in out
        and "Q: What does the pass statement do?" in out
    )


def test_same_pipeline_against_a_server(tmp_path, capsys):
    question = "How do I write an anonymous function in one line?"
    with running_server(tmp_path / "server-data") as server:
        assert (
            main(["--url", server.url, "--corpus-limit", "50", "--ask", question]) == 0
        )
        out = capsys.readouterr().out
        assert "documents: built 50 points" in out and f"Q: {question}" in out
        db = sagittadb.connect(server.url)
        assert db.list_collections() == ["buffer", "documents", "messages"]
        assert db.collection("documents").count() == 50
        assert db.collection("buffer").count() == len(chat.SEED_BUFFER) + 1
        pipe = Pipeline(db, Embedder())
        pipe.start_session()
        hits = pipe.retrieve(question, k=3).hits("documents")
        assert hits[0]["payload"]["doc"] == "lambda"
