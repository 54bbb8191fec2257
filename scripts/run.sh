#!/usr/bin/env bash
# The main job until the server exists: build everything and run the side-by-side ANN
# benchmark on a small synthetic dataset (SagittaDB vs hnswlib, FAISS, usearch).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-python.sh
mkdir -p bench/results
.venv/bin/python -m bench ann --quick --out bench/results/quick.json "$@"
