"""Device baseline (issue 15): what this machine's disk does with fio, before any engine is
measured against it.

Runs, on one file in ``--dir`` (laid out first, then read with O_DIRECT through io_uring):
- 4 KiB random reads at each queue depth of ``--depths`` (default 1, 8, 32, 64, 128);
- 1 MiB sequential reads at queue depth 16;
- then SagittaDB's page reader (sagitta-storage ``PageIo``, the ``page_reads`` example) on
  the same file: io_uring at each depth, pread with 64 threads; each row states its IOPS as
  a fraction of fio's at the same depth (``fraction_of_fio``).

Each job runs ``--runtime`` seconds, one job, one thread. The result is a JSON document of
schema ``sagitta-device/1`` (not an index benchmark: there is no recall, so it does not
claim the ``sagitta-bench/1`` shape): per job the IOPS, bytes per second and completion
latency percentiles as fio reports them. Disk-index benchmarks state their reads per
second as a fraction of the random-read IOPS at the same queue depth.

    cargo build --release -p sagitta-storage --example page_reads
    python -m bench.fio --dir /path/on/the/disk --out bench/results/fio-baseline.json

fio comes from Debian (``apt-get install fio``).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from bench import report

SCHEMA = "sagitta-device/1"
SEQUENTIAL_DEPTH = 16


def fio_command(
    file: Path,
    name: str,
    rw: str,
    block: str,
    depth: int,
    runtime: float | None,
    size: str,
) -> list[str]:
    """The fio command line of one job over `file`: `runtime` seconds, or (None) one pass."""
    timing = [f"--runtime={runtime}", "--time_based"] if runtime is not None else []
    return [
        "fio",
        f"--name={name}",
        f"--filename={file}",
        f"--size={size}",
        f"--rw={rw}",
        f"--bs={block}",
        f"--iodepth={depth}",
        "--direct=1",
        "--ioengine=io_uring",
        "--numjobs=1",
        *timing,
        "--group_reporting",
        "--output-format=json",
    ]


def parse_job(output: dict, scenario: str, block_bytes: int, depth: int) -> dict:
    """One job's read figures from fio's JSON output."""
    jobs = output.get("jobs") or []
    if len(jobs) != 1:
        raise ValueError(f"expected one job in fio's output, got {len(jobs)}")
    read = jobs[0]["read"]
    if read.get("io_bytes", 0) <= 0:
        raise ValueError(f"{scenario}: fio read nothing")
    percentiles = read["clat_ns"].get("percentile", {})

    def milliseconds(key: str) -> float:
        return round(percentiles[key] / 1e6, 4)

    return {
        "engine": "fio",
        "scenario": scenario,
        "block_bytes": block_bytes,
        "iodepth": depth,
        "iops": round(read["iops"], 1),
        "bytes_per_second": read["bw_bytes"],
        "latency_ms": {
            "mean": round(read["clat_ns"]["mean"] / 1e6, 4),
            "p50": milliseconds("50.000000"),
            "p95": milliseconds("95.000000"),
            "p99": milliseconds("99.000000"),
        },
        "io_bytes": read["io_bytes"],
        "runtime_ms": read["runtime"],
    }


def run_job(command: list[str]) -> dict:
    """Runs fio and returns its JSON output."""
    print("$ " + shlex.join(command), flush=True)
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(
            f"fio failed ({completed.returncode}): {completed.stderr[-2000:]}"
        )
    return json.loads(completed.stdout)


PAGE_READS = (
    Path(__file__).resolve().parent.parent / "target/release/examples/page_reads"
)


def run_page_reads(file: Path, backend: str, depth: int, seconds: float) -> dict:
    """SagittaDB's page reader (sagitta-storage `PageIo`) on the same file: random 4 KiB
    reads, `depth` in flight from one thread (pread: `depth` threads)."""
    command = [str(PAGE_READS), "--file", str(file), "--backend", backend]
    command += ["--depth", str(depth), "--seconds", str(seconds)]
    print("$ " + shlex.join(command), flush=True)
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"page_reads failed: {completed.stderr[-2000:]}")
    measured = json.loads(completed.stdout)
    return {
        "engine": f"sagitta-pageio-{measured['backend']}",
        "scenario": "randread-4k",
        "block_bytes": 4096,
        "iodepth": depth,
        "iops": round(measured["iops"], 1),
        "bytes_per_second": round(measured["bytes_per_second"]),
        "o_direct": measured["direct"],
        "reads": measured["reads"],
    }


def with_ratios(results: list[dict]) -> list[dict]:
    """Each page-reader row with its IOPS as a fraction of fio's at the same depth."""
    fio_iops = {
        row["iodepth"]: row["iops"]
        for row in results
        if row["engine"] == "fio" and row["scenario"] == "randread-4k"
    }
    for row in results:
        if row["engine"] != "fio" and row["iodepth"] in fio_iops:
            row["fraction_of_fio"] = round(row["iops"] / fio_iops[row["iodepth"]], 3)
    return results


def device_of(directory: Path) -> dict:
    """The file system holding `directory` and its device, as findmnt names them."""
    if shutil.which("findmnt") is None:
        return {}
    completed = subprocess.run(
        ["findmnt", "-no", "SOURCE,FSTYPE", "-T", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    fields = completed.stdout.split()
    return {"source": fields[0], "fstype": fields[1]} if len(fields) == 2 else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir",
        required=True,
        help="a directory on the disk to measure (a --size file is written there, then removed)",
    )
    parser.add_argument(
        "--size", default="4G", help="the test file's size (fio syntax)"
    )
    parser.add_argument("--runtime", type=float, default=10.0, help="seconds per job")
    parser.add_argument(
        "--depths", default="1,8,32,64,128", help="random-read queue depths"
    )
    parser.add_argument(
        "--no-page-reads",
        dest="page_reads",
        action="store_false",
        help="skip SagittaDB's page reader (examples/page_reads) on the same file",
    )
    parser.add_argument("--out", help="result JSON")
    args = parser.parse_args(argv)
    if shutil.which("fio") is None:
        raise SystemExit("fio is not installed (apt-get install fio)")
    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    file = directory / "sagitta-fio.dat"
    started_at = report.utc_now()
    results = []
    try:
        run_job(fio_command(file, "layout", "write", "1m", 16, None, args.size))
        depths = [int(depth) for depth in args.depths.split(",")]
        for depth in depths:
            command = fio_command(
                file,
                f"randread-qd{depth}",
                "randread",
                "4k",
                depth,
                args.runtime,
                args.size,
            )
            results.append(parse_job(run_job(command), "randread-4k", 4096, depth))
        command = fio_command(
            file, "seqread", "read", "1m", SEQUENTIAL_DEPTH, args.runtime, args.size
        )
        results.append(
            parse_job(run_job(command), "seqread-1m", 1 << 20, SEQUENTIAL_DEPTH)
        )
        if args.page_reads:
            if not PAGE_READS.exists():
                raise SystemExit(
                    f"{PAGE_READS} is missing: cargo build --release -p sagitta-storage "
                    "--example page_reads (or pass --no-page-reads)"
                )
            for depth in depths:
                results.append(run_page_reads(file, "io_uring", depth, args.runtime))
            results.append(run_page_reads(file, "pread", 64, args.runtime))
    finally:
        file.unlink(missing_ok=True)
    version = subprocess.run(
        ["fio", "--version"], capture_output=True, text=True
    ).stdout
    document = {
        "schema": SCHEMA,
        "suite": "device-baseline",
        "started_at": started_at,
        "command": "python -m bench.fio " + shlex.join(argv or sys.argv[1:]),
        "machine": report.machine_info(),
        "tool": {"name": "fio", "version": version.strip(), "ioengine": "io_uring"},
        "target": {"dir": report.repo_relative(directory), "size": args.size}
        | device_of(directory),
        "results": with_ratios(results),
    }
    for result in results:
        latency = result.get("latency_ms")
        detail = (
            f"p50 {latency['p50']:.3f} ms  p99 {latency['p99']:.3f} ms"
            if latency
            else f"{result.get('fraction_of_fio', 0):.0%} of fio"
        )
        print(
            f"{result['engine']:>24} {result['scenario']:>13} qd {result['iodepth']:>3}: "
            f"{result['iops']:>10,.0f} IOPS  {result['bytes_per_second'] / 1e6:>8,.1f} MB/s  "
            + detail
        )
    if args.out:
        Path(args.out).write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
