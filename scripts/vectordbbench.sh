#!/usr/bin/env bash
# VectorDBBench 2.0's qdrant_local client, unchanged, against `sagitta serve` on debian-minilm
# (custom performance case: m 16, ef_construct 100, hnsw_ef 64, k 10, concurrency 1/8/32).
# Usage: scripts/vectordbbench.sh [OUT_JSON] [more bench/vdbbench.py options]
#   --client qdrantcloud: VectorDBBench's qdrant_cloud client instead, which, given an API key,
#   speaks gRPC (port 6334): the server gets a random key (or --api-key KEY), the client the same
#   key; it sends m 16 and hnsw_ef 100 and has no options for them, e.g.
#   scripts/vectordbbench.sh bench/results/vectordbbench-cloud-debian-minilm.json --client qdrantcloud
#
# Makes .venv-vdbbench once from PyPI (vectordb-bench pinned below, with its qdrant extra),
# converts the dataset into VectorDBBench's custom-dataset layout in the temporary directory, starts
# target/release/sagitta (build it first: cargo build --release -p sagitta-cli) on a fresh data
# directory on port 6333 and writes one bench-schema JSON. The run itself fetches nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench/results/vectordbbench.json}
shift || true
if [ ! -x .venv-vdbbench/bin/vectordbbench ]; then
  python3 -m venv .venv-vdbbench
  .venv-vdbbench/bin/python -m pip install --quiet --upgrade pip
  .venv-vdbbench/bin/python -m pip install --quiet "vectordb-bench[qdrant]==2.0.0"
fi
exec .venv-vdbbench/bin/python -m bench.vdbbench --out "$out" "$@"
