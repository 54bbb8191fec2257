"""The two conversational sources: past messages and the current chat buffer.

``past_messages()`` is a fixed history of earlier conversations (user and assistant
turns with timestamps), loaded into the ``messages`` collection. ``SEED_BUFFER`` is how
the current conversation stands when a session starts; the ``buffer`` collection holds
its last ``BUFFER_TURNS`` turns and is recreated for every session.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

BUFFER_TURNS = 8
_EPOCH = datetime(2025, 3, 3, 9, 0, tzinfo=UTC)

# Blocks: "conversation day-offset", then "role: text" lines (indented lines continue
# the message above).
_HISTORY = """
venv-setup 0
user: How should I set up an isolated environment for my project's Python
  dependencies?
assistant: Create a virtual environment with `python -m venv .venv`, activate it,
  then install from a pinned requirements file with `pip install -r requirements.txt`.

sourdough 2
user: My sourdough loaf came out flat and dense. What went wrong?
assistant: A flat, dense loaf usually means the starter was not active enough or the
  dough was under-proofed; feed the starter until it doubles in 4-6 hours and let the
  bulk ferment go longer.

git-rebase 5
user: Should I merge main into my feature branch or rebase onto it?
assistant: Rebase your feature branch onto main with `git rebase main` to keep a
  linear history; never rebase commits others have already pulled, and push with
  `git push --force-with-lease` afterwards.

lisbon-trip 9
user: I'm visiting Lisbon for three days in May. What should I see?
assistant: Ride tram 28 through Alfama, visit the Belem tower and the Jeronimos
  monastery, eat pasteis de nata, and watch the sunset from the Miradouro da Senhora
  do Monte.

hnsw-tuning 14
user: Which HNSW parameters should we use for our 384-dimensional embedding index?
assistant: We settled on m=16 and ef_construction=200 for the vector index, with
  ef=64 at query time; recall@10 was 0.98 on the evaluation set.

asyncio-timeout 20
user: How do I stop an asyncio task that hangs forever on a network call?
assistant: Wrap the awaitable in `asyncio.wait_for(coro, timeout=5)`; it cancels the
  task and raises TimeoutError when the time runs out.

timezone-bug 27
user: Comparing two datetimes raises "can't compare offset-naive and offset-aware
  datetimes".
assistant: One of them has no tzinfo. Make both aware, e.g.
  `datetime.now(timezone.utc)`, and store timestamps in UTC.

marathon 33
user: I want to run my first marathon in October. How should I train?
assistant: Follow a 16-week plan: build up to about 50 km a week with one long run on
  weekends of up to 32 km, keep most runs at an easy pace, and taper in the last two
  weeks.
"""

_SEED = """
user: I'm writing a script that reads a CSV export of our sales data.
assistant: Use the csv module: csv.DictReader yields each row as a dict keyed by the
  header line.
user: The first column name comes out as '\\ufeffdate' instead of 'date'.
assistant: The file starts with a byte order mark; open it with encoding='utf-8-sig'
  and the BOM is stripped.
"""


def _stamp(moment: datetime) -> dict:
    return {
        "timestamp": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ts": int(moment.timestamp()),
    }


def _turns(lines: list[str]) -> list[tuple[str, str]]:
    turns: list[tuple[str, str]] = []
    for line in lines:
        if line.startswith("  "):
            role, text = turns[-1]
            turns[-1] = (role, f"{text} {line.strip()}")
        else:
            role, text = line.split(": ", 1)
            turns.append((role, text))
    return turns


def _conversations() -> list[tuple[str, int, list[tuple[str, str]]]]:
    conversations = []
    for block in _HISTORY.strip().split("\n\n"):
        header, *lines = block.splitlines()
        name, day = header.split()
        conversations.append((name, int(day), _turns(lines)))
    return conversations


SEED_BUFFER = _turns(_SEED.strip().splitlines())


def past_messages() -> list[dict]:
    """Payloads of the ``messages`` collection, in time order (id = index)."""
    messages = []
    for conversation, day, turns in _conversations():
        start = _EPOCH + timedelta(days=day)
        for turn, (role, text) in enumerate(turns):
            moment = start + timedelta(minutes=3 * turn)
            messages.append(
                {"conversation": conversation, "role": role, "text": text}
                | _stamp(moment)
            )
    return messages


def buffer_turn(turn: int, role: str, text: str, now: datetime | None = None) -> dict:
    """Payload of one turn of the current conversation."""
    moment = now or datetime.now(UTC)
    return {"turn": turn, "role": role, "text": text} | _stamp(moment)


def embedding_text(payload: dict) -> str:
    return f"{payload['role']}: {payload['text']}"
