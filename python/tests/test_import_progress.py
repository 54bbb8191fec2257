"""`Database.import_collection(progress=...)` on the embedded database: the callback runs
on the calling thread with monotone `(done, total)` ending at `(n, n)` once the collection
exists; an exception from it (or Ctrl-C) stops the import and leaves no collection."""

import os
import signal
import threading
import time

import numpy as np
import pytest
import sagittadb

# Large enough that the graph build outlasts several 0.1 s polls, and its rest takes well
# over STOPS_WITHIN seconds, on any machine: the mid-import tests stop it early (cheaply)
# and check that the stop is prompt, not the end of a build run to completion.
LARGE = 200_000
LARGE_DIM = 64
STOPS_WITHIN = 1.0


def vectors(count, dim, seed=0):
    return np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)


def leftover_files(root, name):
    directory = root / "collections" / name
    return [path for path in directory.rglob("*") if path.is_file()]


def test_a_callable_sees_monotone_progress_ending_at_the_point_count(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    data = vectors(3_000, 16)
    ids = [*range(3_000), 7]  # a repeated id: the last wins and counts once
    rows = np.vstack([data, data[:1]])
    calls = []
    docs = db.import_collection(
        "docs",
        ids,
        rows,
        distance="Dot",
        shard_number=2,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert calls and calls[-1] == (3_000, 3_000), calls
    assert all(total == 3_000 and 0 <= done <= total for done, total in calls), calls
    done = [done for done, _ in calls]
    assert done == sorted(done) and len(set(calls)) == len(calls), calls
    assert done.count(3_000) == 1, "(n, n) comes once, when the collection exists"
    assert docs.status()["indexed_vectors_count"] == 3_000
    assert docs.get([7])[0]["id"] == 7


def test_progress_false_and_true_both_import(tmp_path, capsys):
    pytest.importorskip("tqdm")
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    data = vectors(2_000, 16)
    quiet = db.import_collection("quiet", range(2_000), data, progress=False)
    assert len(quiet) == 2_000
    assert capsys.readouterr().err == ""
    bar = db.import_collection("bar", range(2_000), data, progress=True)
    assert len(bar) == 2_000
    drawn = capsys.readouterr().err
    assert "importing bar" in drawn and "2000/2000" in drawn, drawn


def test_a_bad_progress_value_is_a_type_error_and_imports_nothing(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    for bad in ("yes", 1, [print]):
        with pytest.raises(TypeError, match="`progress`"):
            db.import_collection("docs", range(10), vectors(10, 4), progress=bad)
    assert db.list_collections() == []


def test_an_import_error_still_raises_and_never_reports_completion(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    data = vectors(2_000, 16)
    data[1_234, 3] = np.nan
    calls = []
    with pytest.raises(sagittadb.InvalidParameterError, match="1234"):
        db.import_collection(
            "docs", range(2_000), data, progress=lambda *args: calls.append(args)
        )
    assert (2_000, 2_000) not in calls
    assert db.list_collections() == []


def test_a_callback_raising_at_the_end_drops_the_finished_collection(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)

    def fail_when_done(done, total):
        if done == total:
            raise ValueError("refused at the end")

    with pytest.raises(ValueError, match="refused at the end"):
        db.import_collection(
            "docs", range(3_000), vectors(3_000, 16), progress=fail_when_done
        )
    assert db.list_collections() == []
    assert leftover_files(tmp_path / "db", "docs") == []
    # the name is free again, also after reopening
    del db
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    assert db.list_collections() == []
    assert len(db.import_collection("docs", range(5), vectors(5, 16))) == 5


def test_a_callback_raising_mid_import_cancels_it_on_the_calling_thread(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    data = vectors(LARGE, LARGE_DIM)
    caller = threading.get_ident()
    ticks = [0]
    stop_ticking = threading.Event()

    def tick():  # a Python thread: runs only while no other thread holds the GIL
        while not stop_ticking.is_set():
            ticks[0] += 1

    calls = []
    raised_at = []

    def fail_on_fourth_call(done, total):
        assert threading.get_ident() == caller
        calls.append((done, total, time.monotonic(), ticks[0]))
        if len(calls) == 4:
            raised_at.append(time.monotonic())
            raise ValueError("enough")

    ticker = threading.Thread(target=tick)
    ticker.start()
    try:
        start, before = time.monotonic(), ticks[0]
        time.sleep(0.2)
        alone = (ticks[0] - before) / (time.monotonic() - start)
        with pytest.raises(ValueError, match="enough"):
            db.import_collection(
                "docs", range(LARGE), data, distance="Dot", progress=fail_on_fourth_call
            )
        stopped_after = time.monotonic() - raised_at[0]
    finally:
        stop_ticking.set()
        ticker.join()
    assert len(calls) == 4
    assert all(done < total == LARGE for done, total, _, _ in calls), calls
    # Between polls the importing thread waits without the GIL, so the ticker keeps a
    # good share of its solo rate (about 40 % on 2 busy cores); were the GIL held, it
    # would tick only in the switch intervals around each callback (about 5 %).
    for later in (2, 3):
        (_, _, t0, k0), (_, _, t1, k1) = calls[later - 1], calls[later]
        share = (k1 - k0) / (t1 - t0) / alone
        assert share > 0.15, f"other threads got {share:.0%} of their solo rate"
    assert db.list_collections() == []
    assert leftover_files(tmp_path / "db", "docs") == []
    assert stopped_after < STOPS_WITHIN, f"{stopped_after:.2f} s from raise to return"


def test_ctrl_c_during_an_import_raises_keyboard_interrupt_and_leaves_nothing(tmp_path):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach only the main thread")
    # Python leaves SIGINT ignored when it started ignored (a shell's background job):
    # the test then sent a Ctrl-C nobody saw. It installs Python's own handler meanwhile.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        interrupt_an_import(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def interrupt_an_import(tmp_path):
    db = sagittadb.open(tmp_path / "db", background_optimizer=False)
    data = vectors(LARGE, LARGE_DIM)
    calls = []
    sent_at = []

    def send_sigint():
        sent_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    def interrupt_once(done, total):
        calls.append((done, total))
        if len(calls) == 1:
            # Sent from another thread and waited for, so it is pending before the import
            # goes on: a timer of 10 ms raced the import's end on a quiet machine (the
            # import finished first and nothing was raised). The handler then runs at the
            # import's next signal check, or as this callback returns: during the import
            # either way.
            sender = threading.Thread(target=send_sigint)
            sender.start()
            sender.join()

    with pytest.raises(KeyboardInterrupt):
        db.import_collection(
            "docs", range(LARGE), data, distance="Dot", progress=interrupt_once
        )
    stopped_after = time.monotonic() - sent_at[0]
    assert stopped_after < STOPS_WITHIN, f"{stopped_after:.2f} s from Ctrl-C to return"
    assert calls and all(done < total for done, total in calls), calls
    assert db.list_collections() == []
    assert leftover_files(tmp_path / "db", "docs") == []
    # and the database still works
    assert len(db.import_collection("docs", range(10), vectors(10, 4))) == 10


def test_an_hnsw_index_add_reports_linking_and_finishes_before_raising():
    index = sagittadb.HnswIndex(16, metric="l2", m=8, ef_construction=32)
    data = vectors(20_000, 16, seed=3)
    calls = []
    index.add(data, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1] == (20_000, 20_000), calls
    done = [done for done, _ in calls]
    assert done == sorted(done) and all(total == 20_000 for _, total in calls), calls

    def refuse(done, total):
        raise RuntimeError(f"stop at {done}")

    # An exception from the callback comes after the add: every row is in and reachable.
    more = vectors(5_000, 16, seed=4)
    with pytest.raises(RuntimeError, match="stop at"):
        index.add(more, ids=np.arange(20_000, 25_000, dtype=np.uint64), progress=refuse)
    assert len(index) == 25_000
    ids, _ = index.search(more[:50], k=1, ef=64)
    assert (ids[:, 0] == np.arange(20_000, 20_050)).mean() >= 0.95
    with pytest.raises(TypeError, match="progress"):
        index.add(vectors(10, 16, seed=5), progress="yes")
    assert len(index) == 25_000, "a bad `progress` is refused before anything is added"
