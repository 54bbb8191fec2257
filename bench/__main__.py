"""Command line: ``python -m bench {ann,scaling,check,calibrate} ...`` (from the repository root).

Examples::

    python -m bench ann --quick
    python -m bench ann --dataset synth --n 200000 --dim 768 --threads 2 --k 10 --m 16 \\
        --ef-construction 100 --engines sagitta-flat,sagitta-hnsw,sagitta-hnsw-sq8,hnswlib,\\
faiss-hnsw,faiss-ivf,usearch-f32,usearch-i8 --out bench/results/ann-synth-768-200k.json
    python -m bench ann --dataset debian-minilm --dataset-path ../shared/datasets/debian-minilm
    python -m bench ann --dataset hdf5 --dataset-path glove-100-angular.hdf5 --queries 1000
    python -m bench scaling --dataset debian-minilm --dataset-path ../shared/datasets/debian-minilm
    python -m bench scaling --dataset synth --n 1000000 --dim 768
    python -m bench check bench/results/ann-synth-768-200k.json
    python -m bench calibrate --n 50000 --dim 768
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from pathlib import Path

from bench import datasets, engines, report, scaling, scenarios

BENCH_DIR = Path(__file__).resolve().parent

# Values used when an option is not given; --quick replaces some of them.
DEFAULTS = {
    "n": 200_000,
    "dim": 768,
    "queries": 1000,
    "ef_sweep": ",".join(map(str, engines.DEFAULT_EF_SWEEP)),
    "nprobe_sweep": ",".join(map(str, engines.DEFAULT_NPROBE_SWEEP)),
    "kfactor_sweep": ",".join(map(str, engines.DEFAULT_KFACTOR_SWEEP)),
    "latency_queries": 200,
    "min_seconds": 0.5,
}
QUICK = {
    "n": 20_000,
    "dim": 128,
    "queries": 200,
    "ef_sweep": "16,32,64,128",
    "nprobe_sweep": "1,4,16",
    "kfactor_sweep": "2,8",
    "latency_queries": 50,
    "min_seconds": 0.05,
}


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _add_synthetic_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--n", type=int, help="synthetic: base vectors (default 200000)"
    )
    parser.add_argument("--dim", type=int, help="synthetic: dimension (default 768)")
    parser.add_argument(
        "--intrinsic-dim",
        type=int,
        default=datasets.DEFAULT_INTRINSIC_DIM,
        help="synthetic",
    )
    parser.add_argument(
        "--difficulty",
        type=float,
        default=datasets.DEFAULT_DIFFICULTY,
        help="synthetic",
    )
    parser.add_argument(
        "--seed", type=int, default=datasets.DEFAULT_SEED, help="synthetic"
    )


def _add_dataset_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        default="synth",
        choices=["synth", "debian-minilm", "npy", "fvecs", "hdf5"],
        help="synth (generated), debian-minilm, npy dir, fvecs/bvecs dir, ann-benchmarks hdf5",
    )
    parser.add_argument(
        "--dataset-path", help="file or directory for non-synthetic datasets"
    )
    parser.add_argument(
        "--metric", choices=datasets.METRICS, help="for npy (cosine) / fvecs (l2)"
    )
    parser.add_argument("--name", help="dataset name in the result (default derived)")
    parser.add_argument(
        "--queries", type=int, help="synthetic: queries generated; others: first N kept"
    )
    _add_synthetic_options(parser)
    parser.add_argument(
        "--recompute-gt", action="store_true", help="ignore a shipped ground truth"
    )


def _add_graph_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--m", type=int, default=16)
    parser.add_argument("--ef-construction", type=int, default=100)


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", help="result JSON (PNG plot written next to it)")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--strict",
        action="store_true",
        help="fail instead of skipping unimportable engines",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__.split("\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    ann = sub.add_parser(
        "ann", help="ANN engines side by side: recall, QPS, latency, memory"
    )
    _add_dataset_options(ann)
    ann.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    _add_graph_options(ann)
    ann.add_argument(
        "--ef-sweep", help="comma list (default 16,24,32,48,64,96,128,192,256)"
    )
    ann.add_argument(
        "--nprobe-sweep", help="comma list for IVF (default 1,2,4,8,16,32,64)"
    )
    ann.add_argument(
        "--kfactor-sweep",
        help="comma list of refine depths (k_factor × k re-scored) for the IVF engines "
        "with refinement, crossed with --nprobe-sweep (default 2,4,8,16)",
    )
    ann.add_argument(
        "--engines", default=",".join(engines.ALL_ENGINES), help="comma list"
    )
    ann.add_argument(
        "--latency-queries", type=int, help="queries in the latency loop (200)"
    )
    ann.add_argument(
        "--min-seconds", type=float, help="repeat short QPS calls up to this time"
    )
    _add_output_options(ann)
    ann.add_argument(
        "--quick", action="store_true", help="20k x 128-d, 200 queries, small sweep"
    )

    scaling_parser = sub.add_parser(
        "scaling",
        help="QPS against search threads per engine at a recall floor (issue 17)",
    )
    _add_dataset_options(scaling_parser)
    _add_graph_options(scaling_parser)
    scaling_parser.add_argument(
        "--threads-list",
        default=",".join(map(str, scaling.DEFAULT_THREADS)),
        help="comma list; counts above os.cpu_count() are dropped, 1 always measured",
    )
    scaling_parser.add_argument(
        "--ef-sweep",
        default=",".join(map(str, scaling.DEFAULT_EF_SWEEP)),
        help="comma list; each engine uses the first reaching --recall-floor",
    )
    scaling_parser.add_argument(
        "--recall-floor", type=float, default=scaling.DEFAULT_RECALL_FLOOR
    )
    scaling_parser.add_argument(
        "--repeats",
        type=int,
        default=scaling.DEFAULT_REPEATS,
        help="batched calls per thread count, fastest kept",
    )
    scaling_parser.add_argument(
        "--engines", default=",".join(scaling.DEFAULT_ENGINES), help="comma list"
    )
    scaling_parser.add_argument(
        "--latency-queries", type=int, help="queries in the latency loop (200)"
    )
    _add_output_options(scaling_parser)

    check = sub.add_parser(
        "check", help="validate result JSON files against bench-schema.md"
    )
    check.add_argument("files", nargs="+")

    calibrate = sub.add_parser(
        "calibrate", help="hnswlib recall-vs-ef table on synthetic data"
    )
    _add_synthetic_options(calibrate)
    calibrate.add_argument("--queries", type=int, default=1000)
    calibrate.add_argument("--threads", type=int, default=2)
    _add_graph_options(calibrate)
    calibrate.add_argument("--ef-sweep", default=DEFAULTS["ef_sweep"])
    return parser


def _resolve(args: argparse.Namespace) -> None:
    preset = QUICK if getattr(args, "quick", False) else DEFAULTS
    for key, value in preset.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)


def load_dataset(args: argparse.Namespace) -> datasets.Dataset:
    if args.dataset == "synth":
        return datasets.synthetic(
            args.n,
            args.queries,
            args.dim,
            intrinsic_dim=args.intrinsic_dim,
            difficulty=args.difficulty,
            seed=args.seed,
            name=args.name,
        )
    if args.dataset == "debian-minilm":
        path = args.dataset_path or datasets.DEBIAN_MINILM_PATH
        dataset = datasets.load_debian_minilm(path)
    elif args.dataset_path is None:
        raise SystemExit(f"--dataset {args.dataset} needs --dataset-path")
    elif args.dataset == "npy":
        dataset = datasets.load_npy_dir(
            args.dataset_path, args.metric or "cosine", args.name
        )
    elif args.dataset == "fvecs":
        dataset = datasets.load_vecs_dir(
            args.dataset_path, args.metric or "l2", args.name
        )
    else:
        dataset = datasets.load_hdf5(args.dataset_path, args.name)
    if args.name:
        dataset.name = args.name
    if args.recompute_gt:
        dataset.gt = None
    return dataset.subsample_queries(args.queries)


def _engine_names(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in engines.ALL_ENGINES]
    if unknown:
        raise SystemExit(
            f"unknown engines {unknown}; known: {', '.join(engines.ALL_ENGINES)}"
        )
    return names


def _load_with_ground_truth(args: argparse.Namespace) -> datasets.Dataset:
    start = time.perf_counter()
    dataset = load_dataset(args)
    print(
        f"dataset {dataset.name}: n={dataset.n} dim={dataset.dim} metric={dataset.metric} "
        f"queries={dataset.nq} (loaded in {time.perf_counter() - start:.1f} s)"
    )
    start = time.perf_counter()
    dataset.ensure_gt(args.k)
    print(f"ground truth ready in {time.perf_counter() - start:.1f} s")
    return dataset


def _finish(args: argparse.Namespace, document: dict, out: Path, describe, plot) -> int:
    """Writes ``document`` to ``out`` and prints ``describe(document)``, then its plot
    beside it (``plot(document, path)``) unless --no-plot; 2, writing nothing, when the
    document breaks the schema."""
    if report.invalid(document):
        return 2
    report.write_json(document, out)
    print()
    print(describe(document))
    print(f"\nwrote {out}")
    if not args.no_plot and document["results"]:
        print(f"wrote {plot(document, out.with_suffix('.png'))}")
    return 0


def cmd_ann(args: argparse.Namespace, command: str) -> int:
    _resolve(args)
    started_at = report.utc_now()
    names = _engine_names(args.engines)
    dataset = _load_with_ground_truth(args)

    results, skipped = scenarios.run_ann(
        dataset,
        names,
        k=args.k,
        threads=args.threads,
        m=args.m,
        ef_construction=args.ef_construction,
        ef_sweep=_int_list(args.ef_sweep),
        nprobe_sweep=_int_list(args.nprobe_sweep),
        kfactor_sweep=_int_list(args.kfactor_sweep),
        latency_queries=args.latency_queries,
        min_seconds=args.min_seconds,
        seed=args.seed,
        require=args.strict,
    )
    extra = {"skipped_engines": skipped} if skipped else None
    document = report.build_document(
        suite="ann-peers",
        command=command,
        started_at=started_at,
        dataset=dataset.result_entry(args.k),
        results=results,
        extra=extra,
    )
    if args.out:
        out = Path(args.out)
    elif args.quick:
        out = BENCH_DIR / "cache" / "ann-quick.json"
    else:
        out = BENCH_DIR / "results" / f"ann-{dataset.name}.json"
    return _finish(
        args,
        document,
        out,
        lambda doc: (
            report.format_table(doc) + "\n\n" + report.format_summary(doc["summary"])
        ),
        report.plot,
    )


def cmd_scaling(args: argparse.Namespace, command: str) -> int:
    _resolve(args)
    started_at = report.utc_now()
    names = _engine_names(args.engines)
    threads_requested = _int_list(args.threads_list)
    if not threads_requested or min(threads_requested) < 1:
        raise SystemExit("--threads-list: thread counts of at least 1")
    if args.repeats < 1 or not 0.0 < args.recall_floor <= 1.0:
        raise SystemExit("--repeats must be at least 1, --recall-floor in (0, 1]")
    dataset = _load_with_ground_truth(args)
    settings = scaling.Settings(
        k=args.k,
        threads_requested=tuple(threads_requested),
        m=args.m,
        ef_construction=args.ef_construction,
        ef_sweep=tuple(_int_list(args.ef_sweep)),
        recall_floor=args.recall_floor,
        repeats=args.repeats,
        latency_queries=args.latency_queries,
        seed=args.seed,
    )
    results, extra = scaling.run_scaling(dataset, names, settings, require=args.strict)
    document = report.build_document(
        suite="scaling",
        command=command,
        started_at=started_at,
        dataset=dataset.result_entry(args.k),
        results=results,
        extra=extra,
    )
    out = Path(args.out or BENCH_DIR / "results" / f"scaling-{dataset.name}.json")
    return _finish(args, document, out, scaling.format_table, scaling.plot)


def cmd_check(args: argparse.Namespace) -> int:
    status = 0
    for file in args.files:
        try:
            document = json.loads(Path(file).read_text())
        except (OSError, json.JSONDecodeError) as error:
            print(f"{file}: cannot read: {error}")
            status = 1
            continue
        errors = report.validate(document)
        if errors:
            status = 1
            print(f"{file}: {len(errors)} error(s)")
            for error in errors:
                print(f"  {error}")
        else:
            runs = sum(len(result["runs"]) for result in document["results"])
            print(f"{file}: ok ({len(document['results'])} engines, {runs} runs)")
    return status


def cmd_calibrate(args: argparse.Namespace) -> int:
    n = args.n or 50_000
    dim = args.dim or 768
    dataset = datasets.synthetic(
        n,
        args.queries,
        dim,
        intrinsic_dim=args.intrinsic_dim,
        difficulty=args.difficulty,
        seed=args.seed,
    )
    print(
        f"{dataset.name}: intrinsic_dim={args.intrinsic_dim} difficulty={args.difficulty} "
        f"seed={args.seed}; hnswlib M={args.m} ef_construction={args.ef_construction} "
        f"threads={args.threads} k={args.k} queries={args.queries}"
    )
    result = scenarios.run_engine(
        "hnswlib",
        dataset,
        k=args.k,
        threads=args.threads,
        m=args.m,
        ef_construction=args.ef_construction,
        ef_sweep=_int_list(args.ef_sweep),
        latency_queries=0,
        min_seconds=0.0,
        seed=args.seed,
        log=lambda *_: None,
    )
    print(f"build {result['build_seconds']:.1f} s")
    print(f"ef    recall@{args.k}")
    for run in result["runs"]:
        print(f"{run['search_params']['ef']:<5} {run['recall_at_k']:.4f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    command = "python -m bench " + shlex.join(argv)
    if args.command == "ann":
        return cmd_ann(args, command)
    if args.command == "scaling":
        return cmd_scaling(args, command)
    if args.command == "check":
        return cmd_check(args)
    return cmd_calibrate(args)


if __name__ == "__main__":
    sys.exit(main())
