"""The mixed read/write benchmark: the pacing schedule with a fake clock, and a tiny run end
to end (timings are not asserted, only structure and correctness floors)."""

import json

import numpy as np
import pytest

from bench.__main__ import main as bench_main
from bench.mixed import InsertStream, Pacer, insert_loop, main


class FakeTime:
    """A clock that only moves when the code under test sleeps or 'works'."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeStop:
    """threading.Event stand-in: wait() advances the fake clock; set after ``limit`` calls."""

    def __init__(self, clock: FakeTime) -> None:
        self.clock = clock
        self.flag = False

    def is_set(self) -> bool:
        return self.flag

    def wait(self, seconds: float) -> bool:
        self.clock.now += seconds
        return self.flag


def _run(rate, work_seconds, batches_before_stop, batch=100):
    clock = FakeTime()
    stop = FakeStop(clock)
    sent_at = []

    def upsert(ids, rows):
        sent_at.append(clock.now)
        clock.now += work_seconds
        if len(sent_at) == batches_before_stop:
            stop.flag = True

    def batches(i):
        return list(range(i * batch, (i + 1) * batch)), None

    out = insert_loop(upsert, batches, rate, stop, clock=clock)
    return out, sent_at


def test_pacer_schedule():
    pacer = Pacer(rate=2000.0, start=10.0)  # vectors per second
    assert pacer.paced
    assert [pacer.due(v) for v in (0, 100, 200)] == pytest.approx([10.0, 10.05, 10.1])
    assert pacer.delay(200, now=10.02) == pytest.approx(0.08)
    assert pacer.delay(200, now=10.5) == 0.0  # late: send at once
    unpaced = Pacer(rate=None, start=3.0)
    assert not unpaced.paced and unpaced.delay(5000, now=3.0) == 0.0


def test_insert_stream_only_adds_new_points():
    rows = np.arange(25, dtype=np.float32).reshape(5, 5)  # 5 held-out rows
    stream = InsertStream(rows, first_id=100, batch=2)  # batches of 2, 2, 1
    ids = [stream(i)[0] for i in range(5)]
    assert ids == [[100, 101], [102, 103], [104], [105, 106], [107, 108]]
    np.testing.assert_array_equal(stream(3)[1], rows[:2])  # vectors repeat, ids do not
    np.testing.assert_array_equal(stream(2)[1], rows[4:])


def test_paced_inserter_follows_the_schedule_not_sleep_after_batch():
    # 2,000 vectors/s in batches of 100: one batch every 50 ms; each upsert takes 20 ms.
    out, sent_at = _run(rate=2000.0, work_seconds=0.02, batches_before_stop=10)
    assert sent_at == pytest.approx([0.05 * i for i in range(10)])  # not 70 ms apart
    assert out["batches"] == 10 and out["vectors"] == 1000
    assert out["seconds"] == pytest.approx(0.47)
    assert out["achieved_vectors_per_second"] == pytest.approx(1000 / 0.47, rel=1e-3)
    assert out["target_vectors_per_second"] == 2000.0
    assert out["max_lag_seconds"] == pytest.approx(0.0)
    assert out["busy_fraction"] == pytest.approx(0.2 / 0.47, rel=1e-3)


def test_late_inserter_catches_up_without_sleeping():
    out, sent_at = _run(rate=2000.0, work_seconds=0.08, batches_before_stop=5)
    assert sent_at == pytest.approx([0.08 * i for i in range(5)])  # back to back
    assert out["max_lag_seconds"] == pytest.approx(4 * 0.08 - 4 * 0.05)


def test_unpaced_inserter_runs_flat_out():
    out, sent_at = _run(rate=None, work_seconds=0.01, batches_before_stop=7)
    assert sent_at == pytest.approx([0.01 * i for i in range(7)])
    assert out["target_vectors_per_second"] is None and out["max_lag_seconds"] is None
    assert out["achieved_vectors_per_second"] == pytest.approx(700 / 0.07)


def test_mixed_end_to_end(tmp_path):
    rng = np.random.default_rng(1)
    data = tmp_path / "data"
    data.mkdir()
    np.save(data / "base.npy", rng.standard_normal((2000, 16)).astype(np.float16))
    np.save(data / "queries.npy", rng.standard_normal((20, 16)).astype(np.float16))
    out = tmp_path / "mixed.json"
    args = [
        "--dataset-path",
        str(data),
        "--duration",
        "0.2",
        "--max-rate-seconds",
        "0.2",
    ]
    args += [
        "--insert-batch",
        "50",
        "--workdir",
        str(tmp_path / "db"),
        "--out",
        str(out),
    ]
    assert main(args) == 0
    assert bench_main(["check", str(out)]) == 0
    document = json.loads(out.read_text())
    (result,) = document["results"]
    assert result["index_params"]["preload_rows"] == 1600
    scenarios = [run["scenario"] for run in result["runs"]]
    assert scenarios == ["read-only", "mixed-insert", "read-only", "mixed-insert"]
    paced, unpaced = result["runs"][1], result["runs"][3]
    assert paced["insert_load"]["fraction_of_max"] == 0.2
    assert paced["insert_load"]["target_vectors_per_second"] == pytest.approx(
        0.2 * result["max_insert_rate"]["sustained_vectors_per_second"], rel=1e-3
    )
    assert unpaced["insert_load"]["target_vectors_per_second"] is None
    for run in result["runs"]:
        assert run["queries_run"] > 0
        before = run["collection_state_before"]
        assert before["status"] == "green"
        assert before["points_count"] == before["indexed_vectors_count"] == 1600
        if run["scenario"] == "read-only":
            assert run["recall_at_k"] >= 0.9  # exact top 10 of the preloaded rows
        else:  # every insert is a new point
            inserted = run["insert_load"]["vectors"]
            assert inserted > 0 and run["points_after"] == 1600 + inserted
    maximum = result["max_insert_rate"]
    assert maximum["vectors"] > 0
    # the sustained rate waits for the index: never above the burst rate
    assert (
        0
        < maximum["sustained_vectors_per_second"]
        <= maximum["burst_vectors_per_second"]
    )
    assert len(result["preloads"]) == 3  # max rate, then one fresh collection per load
    assert set(result["load_ratios"]) == {"0.2", "max"}
    for ratio in result["load_ratios"].values():
        assert set(ratio["mixed_over_read_only"]) == {"p50", "p95", "p99"}
    assert list((tmp_path / "db").iterdir()) == []
