"""python -m rag: build the three collections and retrieve context for questions.

    python -m rag --data ./rag-data --build --ask "how do I open a file in python?"
    python -m rag --url http://127.0.0.1:6333 --questions questions.txt --k 5
    python -m rag --data ./rag-data --mode dense --ask "what does lambda do?"
    python -m rag --data ./rag-data --build --evaluate --corpus-limit 300
    python -m rag --data ./rag-data --ask "..." --llm-url http://127.0.0.1:8000/v1 \\
        --llm-model qwen2.5-7b-instruct
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
import time

from .embed import MODEL_ID, Embedder
from .evaluate import (
    API_QUESTIONS,
    DOCUMENT_QUESTIONS,
    MESSAGE_QUESTIONS,
    evaluate,
    table,
)
from .llm import LLM
from .pipeline import MODES, MissingSparseError, Pipeline, Retrieval, open_database


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m rag",
        description="Three-source RAG retrieval over SagittaDB: documents, past "
        "messages and the current chat buffer, each its own collection.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--data", default="rag-data", help="embedded database directory")
    where.add_argument(
        "--url", help="a SagittaDB server instead (e.g. http://127.0.0.1:6333)"
    )
    parser.add_argument("--api-key", default=os.environ.get("SAGITTA_API_KEY"))
    parser.add_argument("--prefix", default="", help="collection name prefix")
    parser.add_argument("--build", action="store_true", help="rebuild the collections")
    parser.add_argument(
        "--corpus-limit", type=int, help="at most N document chunks (small CI runs)"
    )
    parser.add_argument("--ask", action="append", default=[], help="a question")
    parser.add_argument("--questions", help="a file of questions, one per line")
    parser.add_argument("--k", type=int, default=3, help="hits per source")
    parser.add_argument(
        "--mode",
        choices=MODES,
        default="hybrid",
        help="how documents and messages are searched: the dense embedding, the "
        "BM25 sparse vector, or both fused by RRF (default); the buffer is dense",
    )
    parser.add_argument(
        "--evaluate",
        action="store_true",
        help="print top-1/top-3 hit rates of every mode on the labelled questions",
    )
    parser.add_argument("--threads", type=int, help="onnxruntime threads")
    parser.add_argument("--width", type=int, default=160, help="passage preview chars")
    parser.add_argument("--llm-url", default=os.environ.get("RAG_LLM_URL"))
    parser.add_argument("--llm-model", default=os.environ.get("RAG_LLM_MODEL"))
    parser.add_argument("--llm-key", default=os.environ.get("RAG_LLM_KEY"))
    args = parser.parse_args(argv)
    if bool(args.llm_url) != bool(args.llm_model):
        parser.error("--llm-url and --llm-model go together")
    return args


def questions_of(args: argparse.Namespace) -> list[str]:
    questions = list(args.ask)
    if args.questions:
        with open(args.questions, encoding="utf-8") as file:
            for line in file:
                if line.strip() and not line.lstrip().startswith("#"):
                    questions.append(line.strip())
    return questions


def label(source: str, payload: dict) -> str:
    if source == "documents":
        return f"{payload['title']} #{payload['chunk']}"
    if source == "messages":
        return f"{payload['timestamp'][:16]} {payload['role']}"
    return f"turn {payload['turn']} {payload['role']}"


def show(retrieval: Retrieval, width: int) -> None:
    searched = sum(r.search_ms for r in retrieval.results)
    print(f"\nQ: {retrieval.question}")
    print(
        f"   embed {retrieval.embed_ms:.1f} ms, search {searched:.1f} ms "
        f"(3 sources, {retrieval.mode})"
    )
    for result in retrieval.results:
        print(f"  {result.source}: {len(result.hits)} hits, {result.search_ms:.2f} ms")
        for hit in result.hits:
            payload = hit["payload"]
            text = textwrap.shorten(payload["text"], width=width, placeholder=" …")
            print(f"    {hit['score']:.3f}  [{label(result.source, payload)}] {text}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    embedder = Embedder(threads=args.threads)
    where = args.url or args.data
    print(f"model {MODEL_ID} loaded in {time.perf_counter() - start:.2f} s; db {where}")
    db = open_database(args.data, args.url, args.api_key)
    pipeline = Pipeline(db, embedder, prefix=args.prefix)
    stats = pipeline.build(args.corpus_limit, force=args.build, log=print)
    questions = questions_of(args)
    if args.evaluate or (questions and args.mode != "dense"):
        try:
            pipeline.check_sparse()
        except MissingSparseError as error:
            print(f"python -m rag: {error}", file=sys.stderr)
            return 2
    if args.evaluate:
        start = time.perf_counter()
        report = evaluate(pipeline)
        points = stats["documents"]["points"]
        print(
            f"\nretrieval quality: {len(DOCUMENT_QUESTIONS)} document questions and "
            f"{len(API_QUESTIONS)} naming an API ({points} chunks), "
            f"{len(MESSAGE_QUESTIONS)} message questions, "
            f"{time.perf_counter() - start:.1f} s"
        )
        print(table(report))
    pipeline.start_session()
    llm = None
    if args.llm_url:
        llm = LLM(args.llm_url, args.llm_model, api_key=args.llm_key)
    for question in questions:
        retrieval, answer, llm_ms = pipeline.ask(
            question, k=args.k, llm=llm, mode=args.mode
        )
        show(retrieval, args.width)
        if answer is None:
            print("  context (no --llm-url, so no answer):")
            print(textwrap.indent(retrieval.context(), "    "))
        else:
            print(f"  answer ({args.llm_model}, {llm_ms:.0f} ms):")
            print(textwrap.indent(answer, "    "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
