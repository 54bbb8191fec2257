"""Retrieval quality on a labelled question set: top-1 and top-3 hit rates per mode.

``DOCUMENT_QUESTIONS`` pairs a question with the document (a chunk's ``doc``) whose
passage answers it; ``MESSAGE_QUESTIONS`` a question with the past ``conversation``
it refers to. Every answer is in the 300-chunk corpus (``build_corpus(300)`` keeps
every document's opening chunk), so the set holds for ``--corpus-limit 300`` and up.

A question is a hit at top-n when the expected document (conversation) is among the
first n hits of its source. ``python -m rag --evaluate`` prints the table.
"""

from __future__ import annotations

from .pipeline import MODES, Pipeline

# (question, the document whose passage answers it)
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

# (question, the past conversation it refers to)
MESSAGE_QUESTIONS = [
    ("which hnsw settings did we choose?", "hnsw-tuning"),
    ("what did you suggest for my flat sourdough bread?", "sourdough"),
    ("how do I undo a rebase?", "git-rebase"),
    ("my asyncio task hangs, how do I time it out?", "asyncio-timeout"),
    ("what should I see in Lisbon?", "lisbon-trip"),
]

# (question naming an API, the document that describes it): how developers often ask —
# by name rather than by paraphrase; written before any mode was measured on them
API_QUESTIONS = [
    ("what does shutil.copytree do with symlinks?", "shutil.copytree"),
    ("when should I use heapreplace?", "heapq.heapreplace"),
    ("how does itertools.groupby group consecutive keys?", "itertools.groupby"),
    ("what arguments does subprocess.run take?", "subprocess.run"),
    ("how does urlencode handle lists with doseq?", "urllib.parse.urlencode"),
    ("what does bisect_left return?", "bisect.bisect_left"),
    ("how do I use zip_longest with a fillvalue?", "itertools.zip_longest"),
    ("what does os.fwalk yield?", "os.fwalk"),
    ("when is isclose's abs_tol needed?", "math.isclose"),
    ("what does tempfile.mkstemp return?", "tempfile.mkstemp"),
]

# set name: (the source searched, its questions, the payload field naming the answer)
QUESTION_SETS = {
    "documents": ("documents", DOCUMENT_QUESTIONS, "doc"),
    "named-apis": ("documents", API_QUESTIONS, "doc"),
    "messages": ("messages", MESSAGE_QUESTIONS, "conversation"),
}
DEPTH = 3  # hits fetched per question: top-1 and top-3 come from the same list


def evaluate(pipeline: Pipeline, modes=MODES) -> dict:
    """Per mode and question set: ``{"top1", "top3"}`` hit rates in [0, 1], ``"questions"``
    and ``"misses"`` (question, expected, the top-3 found) for the questions missed at
    top 3. Each question is encoded once and searched in every mode."""
    modes = tuple(modes)
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        raise ValueError(f"modes {unknown}: expected some of {', '.join(MODES)}")
    encoding = "dense" if set(modes) == {"dense"} else "hybrid"  # the sparse query too
    report = {mode: {} for mode in modes}
    for name, (source, questions, field) in QUESTION_SETS.items():
        tallies = {mode: {"top1": 0, "top3": 0, "misses": []} for mode in modes}
        for question, expected in questions:
            vector, sparse = pipeline.encode(question, encoding)
            for mode in modes:
                hits = pipeline.search(source, vector, sparse, DEPTH, mode)
                found = [hit["payload"][field] for hit in hits]
                tally = tallies[mode]
                tally["top1"] += found[:1] == [expected]
                if expected in found[:3]:
                    tally["top3"] += 1
                else:
                    tally["misses"].append((question, expected, found))
        for mode, tally in tallies.items():
            report[mode][name] = {
                "top1": tally["top1"] / len(questions),
                "top3": tally["top3"] / len(questions),
                "questions": len(questions),
                "misses": tally["misses"],
            }
    return report


def table(report: dict) -> str:
    """The report as a small text table: mode × question set, top-1 and top-3."""
    lines = [f"{'mode':<8} {'questions':<10} {'top-1':>13} {'top-3':>13}"]
    for mode, sets in report.items():
        for name, rates in sets.items():
            n = rates["questions"]
            cells = [
                f"{rates[key]:.3f} ({round(rates[key] * n)}/{n})"
                for key in ("top1", "top3")
            ]
            lines.append(f"{mode:<8} {name:<10} {cells[0]:>13} {cells[1]:>13}")
    return "\n".join(lines)
