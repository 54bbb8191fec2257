"""Result documents (bench-schema "sagitta-bench/1"), validation, summary, table and plot."""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

SCHEMA = "sagitta-bench/1"
SUMMARY_RECALLS = (0.95, 0.99)
OURS = ("sagitta-hnsw-sq8", "sagitta-hnsw")


# ---------------------------------------------------------------------------------------------
# Machine


_REPO_ROOT = Path(__file__).resolve().parent.parent


def repo_relative(path: str | Path) -> str:
    """`path` as recorded in a result: relative to the repository when it lies in the
    repository or beside it (``target/release/sagitta``, ``../shared/datasets/...``), so
    results name no machine's absolute paths; otherwise as given."""
    resolved = Path(path).resolve()
    if resolved.is_relative_to(_REPO_ROOT.parent):
        return os.path.relpath(resolved, _REPO_ROOT)
    return str(path)


def repo_relative_text(text: str) -> str:
    """`text` (a command line) with every absolute path into the repository or beside it
    written relative to the repository, as [`repo_relative`] writes one path."""
    root, parent = str(_REPO_ROOT), str(_REPO_ROOT.parent)
    return text.replace(root + os.sep, "").replace(parent + os.sep, ".." + os.sep)


def _cpuinfo() -> dict:
    info: dict = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if (
                    key in ("model name", "flags", "Features", "CPU implementer")
                    and key not in info
                ):
                    info[key] = value.strip()
    except OSError:
        pass
    return info


def _simd_from_flags(info: dict) -> str:
    flags = set(info.get("flags", "").split()) | set(info.get("Features", "").split())
    if "avx512_vnni" in flags:
        return "avx512-vnni"
    if "avx512f" in flags:
        return "avx512"
    if "avx2" in flags:
        return "avx2"
    if "asimd" in flags or "neon" in flags:
        return "neon"
    return "scalar"


def _memory_total() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def process_rss_bytes(pid: int) -> int | None:
    """Resident memory of process ``pid`` (``VmRSS`` of ``/proc/PID/status``), or None where
    it cannot be read (the process is gone, or no procfs)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def machine_info() -> dict:
    info = _cpuinfo()
    try:
        import sagittadb

        simd = str(sagittadb.simd_level())
        simd_source = "sagittadb.simd_level()"
    except Exception:  # noqa: BLE001 - any failure falls back to /proc/cpuinfo
        simd = _simd_from_flags(info)
        simd_source = "/proc/cpuinfo flags"
    return {
        "cpu_model": info.get("model name", "unknown"),
        "cores": os.cpu_count() or 0,
        "simd": simd,
        "memory_bytes": _memory_total(),
        "simd_source": simd_source,
    }


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------------------------------------
# Summary


def best_run_at(runs: list[dict], recall: float) -> dict | None:
    """The run with the highest QPS among those with ``recall_at_k >= recall`` (the first of
    equals), or None when no run reaches ``recall``."""
    candidates = [run for run in runs if run["recall_at_k"] >= recall]
    return max(candidates, key=lambda run: run["qps"]) if candidates else None


def best_qps_at(result: dict, recall: float) -> float | None:
    best = best_run_at(result["runs"], recall)
    return None if best is None else best["qps"]


def _ratio_to_best_peer(best: dict) -> dict:
    """For each of ours and each recall floor: the fastest peer there (none of ours) and
    our best QPS over its; the peer is None when no peer reaches the floor."""
    peers = {
        engine: qps for engine, qps in best.items() if not engine.startswith("sagitta-")
    }
    ratios: dict = {}
    for ours in OURS:
        if ours not in best:
            continue
        for key, our_qps in best[ours].items():
            reached = [(qps[key], peer) for peer, qps in peers.items() if qps[key]]
            peer_qps, peer = max(reached) if reached else (None, None)
            value = our_qps / peer_qps if our_qps and peer_qps else None
            ratios.setdefault(ours, {})[key] = {
                "peer": peer,
                "ratio": None if value is None else round(value, 3),
            }
    return ratios


def summarize(results: list[dict]) -> dict:
    """Best QPS at recall >= 0.95 / 0.99 per engine, and ours / each peer at those recalls."""
    best = {
        result["engine"]: {f"{r:.2f}": best_qps_at(result, r) for r in SUMMARY_RECALLS}
        for result in results
    }
    ratios: dict = {}
    for ours in OURS:
        if ours not in best:
            continue
        for peer, peer_best in best.items():
            if peer == ours:
                continue
            for key, peer_qps in peer_best.items():
                our_qps = best[ours][key]
                value = our_qps / peer_qps if our_qps and peer_qps else None
                ratios.setdefault(ours, {}).setdefault(peer, {})[key] = (
                    None if value is None else round(value, 3)
                )
    return {
        "best_qps_at_recall": best,
        "ratio_to_peer": ratios,
        "ratio_to_best_peer": _ratio_to_best_peer(best),
        "note": "ratio = our best QPS / peer best QPS at the same recall floor; null = the "
        "floor was not reached by one side",
    }


# ---------------------------------------------------------------------------------------------
# Document, validation


def build_document(
    *,
    suite: str,
    command: str,
    started_at: str,
    dataset: dict,
    results: list[dict],
    extra: dict | None = None,
) -> dict:
    document = {
        "schema": SCHEMA,
        "suite": suite,
        "started_at": started_at,
        "command": command,
        "machine": machine_info(),
        "dataset": dataset,
        "results": results,
        "summary": summarize(results),
    }
    if extra:
        document.update(extra)
    return document


def _finite(value) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def validate(document) -> list[str]:
    """Errors against the required fields of bench-schema.md (empty list = valid)."""
    errors: list[str] = []

    def need(obj, key, kind, where):
        if not isinstance(obj, dict) or key not in obj:
            errors.append(f"{where}: missing {key!r}")
            return None
        value = obj[key]
        if kind == "number":
            ok = _finite(value)
        elif kind == "number?":
            ok = value is None or _finite(value)
        elif kind == "int":
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif kind == "int?":
            ok = value is None or (
                isinstance(value, int) and not isinstance(value, bool)
            )
        else:
            ok = isinstance(value, kind)
        if not ok:
            errors.append(f"{where}.{key}: unexpected value {value!r}")
        return value

    if not isinstance(document, dict):
        return ["document is not a JSON object"]
    if need(document, "schema", str, "$") not in (None, SCHEMA):
        errors.append(f"$.schema: expected {SCHEMA!r}")
    need(document, "suite", str, "$")
    started = need(document, "started_at", str, "$")
    if isinstance(started, str):
        try:
            datetime.strptime(started, "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            errors.append(
                "$.started_at: not a UTC ISO-8601 time like 2026-11-21T05:00:00Z"
            )
    need(document, "command", str, "$")
    machine = need(document, "machine", dict, "$")
    if isinstance(machine, dict):
        need(machine, "cpu_model", str, "$.machine")
        need(machine, "cores", "int", "$.machine")
        need(machine, "simd", str, "$.machine")
        need(machine, "memory_bytes", "int", "$.machine")
    dataset = need(document, "dataset", dict, "$")
    if isinstance(dataset, dict):
        need(dataset, "name", str, "$.dataset")
        for key in ("n", "dim", "queries", "k"):
            need(dataset, key, "int", "$.dataset")
        if need(dataset, "metric", str, "$.dataset") not in (
            None,
            "cosine",
            "dot",
            "l2",
        ):
            errors.append("$.dataset.metric: expected cosine, dot or l2")
    results = need(document, "results", list, "$")
    for i, result in enumerate(results or []):
        where = f"$.results[{i}]"
        need(result, "engine", str, where)
        need(result, "engine_version", str, where)
        need(result, "index_params", dict, where)
        need(result, "build_seconds", "number", where)
        need(result, "upload_seconds", "number?", where)
        need(result, "memory_bytes", "int?", where)
        need(result, "disk_bytes_written", "int?", where)
        runs = need(result, "runs", list, where)
        for j, run in enumerate(runs or []):
            run_where = f"{where}.runs[{j}]"
            need(run, "scenario", str, run_where)
            need(run, "search_params", dict, run_where)
            need(run, "threads", "int", run_where)
            need(run, "concurrency", "int", run_where)
            recall = need(run, "recall_at_k", "number", run_where)
            if _finite(recall) and not 0.0 <= recall <= 1.0:
                errors.append(f"{run_where}.recall_at_k: outside [0, 1]")
            need(run, "qps", "number", run_where)
            latency = need(run, "latency_ms", dict, run_where)
            if isinstance(latency, dict):
                for key in ("p50", "p95", "p99"):
                    need(latency, key, "number", f"{run_where}.latency_ms")
            need(run, "disk_bytes_read_per_query", "number?", run_where)
    return errors


def invalid(document) -> bool:
    """Whether `document` breaks bench-schema.md: its errors go to stderr (a bug in the
    harness, never expected; the caller exits with status 2 without writing it)."""
    errors = validate(document)
    if errors:
        print("\n".join(errors), file=sys.stderr)
    return bool(errors)


def write_json(document: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    os.replace(tmp, path)
    return path


# ---------------------------------------------------------------------------------------------
# Table and plot


def format_table(document: dict) -> str:
    k = document["dataset"]["k"]
    header = (
        f"{'engine':<18} {'params':<12} {'recall@' + str(k):>9} {'qps':>11} "
        f"{'p50 ms':>8} {'p99 ms':>8} {'build s':>8} {'mem MiB':>8}"
    )
    lines = [header]
    for result in document["results"]:
        for run in result["runs"]:
            params = (
                ",".join(f"{key}={v}" for key, v in run["search_params"].items())
                or "exact"
            )
            latency = run.get("latency_ms") or {}
            lines.append(
                f"{result['engine']:<18} {params:<12} {run['recall_at_k']:>9.4f} "
                f"{run['qps']:>11.1f} {latency.get('p50', float('nan')):>8.3f} "
                f"{latency.get('p99', float('nan')):>8.3f} {result['build_seconds']:>8.2f} "
                f"{(result['memory_bytes'] or 0) / 2**20:>8.1f}"
            )
    return "\n".join(lines)


def format_summary(summary: dict) -> str:
    floors = [f"{r:.2f}" for r in SUMMARY_RECALLS]
    lines = ["best QPS at recall floor:"]
    lines.append(f"  {'engine':<18} " + " ".join(f"{'>=' + f:>12}" for f in floors))
    for engine, best in summary["best_qps_at_recall"].items():
        cells = " ".join(
            f"{best[f]:>12.1f}" if best[f] else f"{'-':>12}" for f in floors
        )
        lines.append(f"  {engine:<18} {cells}")
    for ours, peers in summary["ratio_to_peer"].items():
        lines.append(f"{ours} / peer (QPS ratio at the same recall floor):")
        for peer, ratio in peers.items():
            cells = " ".join(
                f"{ratio[f]:>12.2f}x" if ratio[f] is not None else f"{'-':>13}"
                for f in floors
            )
            lines.append(f"  {peer:<18} {cells}")
    for ours, floors_best in summary.get("ratio_to_best_peer", {}).items():
        cells = ", ".join(
            f">= {floor}: {entry['ratio']}x {entry['peer']}"
            for floor, entry in floors_best.items()
        )
        lines.append(f"{ours} / best peer: {cells}")
    return "\n".join(lines)


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_title(document: dict) -> str:
    """The dataset and the CPU, as every plot of a result document is titled."""
    dataset = document["dataset"]
    return (
        f"{dataset['name']}: n={dataset['n']:,}, dim={dataset['dim']}, {dataset['metric']}, "
        f"{dataset['queries']} queries\n{document['machine']['cpu_model']}"
    )


def save_figure(fig, path: str | Path) -> Path:
    """Lays out ``fig``, writes it as a PNG at ``path`` and closes it."""
    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    pyplot().close(fig)
    return path


def plot(document: dict, path: str | Path) -> Path:
    """Recall@k (x) against QPS (y, log scale), one line per engine; PNG at ``path``."""
    plt = pyplot()
    dataset = document["dataset"]
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    markers = "osD^v<>ph*X"
    for i, result in enumerate(document["results"]):
        runs = sorted(result["runs"], key=lambda run: run["recall_at_k"])
        recalls = [run["recall_at_k"] for run in runs]
        qps = [run["qps"] for run in runs]
        ours = result["engine"].startswith("sagitta-")
        ax.plot(
            recalls,
            qps,
            marker=markers[i % len(markers)],
            linewidth=2.2 if ours else 1.3,
            markersize=5,
            label=result["engine"],
        )
    ax.set_yscale("log")
    ax.set_xlabel(f"recall@{dataset['k']}")
    threads = {
        run["threads"] for result in document["results"] for run in result["runs"]
    }
    threads_label = (
        f", {'/'.join(str(t) for t in sorted(threads))} threads" if threads else ""
    )
    ax.set_ylabel(f"queries per second (log scale){threads_label}")
    ax.set_title(plot_title(document), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    return save_figure(fig, path)
