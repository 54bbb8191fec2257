"""The device baseline's fio jobs and how their output is read (fio itself runs only in the
benchmark: CI has no disk worth measuring)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fio


def fio_output(iops: float, io_bytes: int) -> dict:
    """The fields of fio's --output-format=json that the baseline reads, one job."""
    percentiles = {"50.000000": 250_000, "95.000000": 900_000, "99.000000": 1_500_000}
    return {
        "jobs": [
            {
                "jobname": "randread-qd64",
                "read": {
                    "iops": iops,
                    "bw_bytes": int(iops * 4096),
                    "io_bytes": io_bytes,
                    "runtime": 10_000,
                    "clat_ns": {"mean": 400_000.0, "percentile": percentiles},
                },
            }
        ]
    }


def test_a_job_reads_with_o_direct_through_io_uring_for_its_runtime() -> None:
    command = fio.fio_command(
        Path("f"), "randread-qd8", "randread", "4k", 8, 10.0, "4G"
    )
    assert "--direct=1" in command
    assert "--ioengine=io_uring" in command
    assert "--iodepth=8" in command
    assert "--runtime=10.0" in command
    assert "--time_based" in command
    layout = fio.fio_command(Path("f"), "layout", "write", "1m", 16, None, "4G")
    assert not [part for part in layout if part.startswith("--runtime")]
    assert "--time_based" not in layout


def test_a_job_is_read_into_iops_bandwidth_and_latency() -> None:
    result = fio.parse_job(
        fio_output(78_123.45, 3_200_000_000), "randread-4k", 4096, 64
    )
    assert result["iops"] == pytest.approx(78_123.45, abs=0.06)
    assert result["bytes_per_second"] == int(78_123.45 * 4096)
    assert result["iodepth"] == 64
    assert result["latency_ms"] == {"mean": 0.4, "p50": 0.25, "p95": 0.9, "p99": 1.5}


def test_an_empty_or_odd_output_is_an_error_not_a_zero() -> None:
    with pytest.raises(ValueError, match="read nothing"):
        fio.parse_job(fio_output(0.0, 0), "randread-4k", 4096, 1)
    with pytest.raises(ValueError, match="one job"):
        fio.parse_job({"jobs": []}, "randread-4k", 4096, 1)


def test_page_reader_rows_are_stated_as_a_fraction_of_fio_at_the_same_depth() -> None:
    rows = [
        {"engine": "fio", "scenario": "randread-4k", "iodepth": 64, "iops": 90_000.0},
        {"engine": "fio", "scenario": "seqread-1m", "iodepth": 16, "iops": 1_000.0},
        {"engine": "sagitta-pageio-io_uring", "iodepth": 64, "iops": 81_000.0},
        {"engine": "sagitta-pageio-io_uring", "iodepth": 16, "iops": 5_000.0},
    ]
    fio.with_ratios(rows)
    assert rows[2]["fraction_of_fio"] == 0.9
    assert "fraction_of_fio" not in rows[3], "no fio random-read row at depth 16"
    assert "fraction_of_fio" not in rows[0]
