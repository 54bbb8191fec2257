#!/usr/bin/env bash
# Qdrant's vector-db-benchmark (github.com/qdrant/vector-db-benchmark, commit 203ab7e), unchanged,
# against `sagitta serve` on debian-minilm: its `qdrant` engine (qdrant-client over gRPC, config
# qdrant-default) and its `qdrant_native` engine (REST over httpx, config qdrant-native-default),
# recall@10 and QPS of both side by side in one bench-schema JSON.
# Usage: scripts/vector-db-benchmark.sh [--suite DIR] [more bench/vector_db_benchmark.py options]
#   e.g. scripts/vector-db-benchmark.sh --n 10000 --queries 200 --out bench/results/quick.vdb-smoke.json
#
# The suite is a checkout outside this repository (default ../vector-db-benchmark; get it with
# `git clone https://github.com/qdrant/vector-db-benchmark && git -C vector-db-benchmark checkout
# 203ab7e`); it is copied into a temporary directory and only the dataset is added to the copy.
# Makes .venv-vdb once from PyPI with what the suite imports (its client factory imports every
# engine's client; versions from its poetry.lock, but qdrant-client 1.18.0 from PyPI where the
# suite pins qdrant-client's dev branch). The suite needs Python 3.10-3.12: set PYTHON to such an
# interpreter if python3 is another. Build the server first:
# cargo build --release -p sagitta-cli (or pass --binary). The run itself fetches nothing; it uses
# ports 6333 and 6334, which the suite's clients hard-code.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
if [ ! -x .venv-vdb/bin/python ]; then
  "$python" -c 'import sys; v = sys.version_info[:2]
if not (3, 10) <= v <= (3, 12): sys.exit(f"vector-db-benchmark needs Python 3.10-3.12, not {v}; set PYTHON")'
  "$python" -m venv .venv-vdb
  .venv-vdb/bin/python -m pip install --quiet --upgrade pip
  .venv-vdb/bin/python -m pip install --quiet \
    "qdrant-client==1.18.0" "typer==0.27.1" "jsons==1.6.3" "h5py==3.16.0" "httpx==0.27.0" \
    "tqdm==4.70.0" "weaviate-client==4.22.0" "elasticsearch==9.5.0" "pymilvus==2.6.6" \
    "redis==5.3.1" "opensearch-py==3.2.0" "psycopg[binary]==3.3.4" "pgvector==0.5.0"
fi
suite=../vector-db-benchmark
for arg in "$@"; do
  case $arg in --suite | --suite=*) suite= ;; esac
done
exec .venv-vdb/bin/python -m bench.vector_db_benchmark ${suite:+--suite "$suite"} "$@"
