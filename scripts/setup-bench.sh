#!/usr/bin/env bash
# Installs the benchmark-only peers (requirements-bench.txt: qdrant-edge-py, LanceDB, Chroma)
# into .venv, creating .venv and building `sagittadb` first if it is missing. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  scripts/setup-python.sh
fi
.venv/bin/python -m pip install --quiet -r requirements-bench.txt
.venv/bin/python - <<'PY'
import importlib.metadata as m

for name in ("qdrant-edge-py", "lancedb", "chromadb"):
    print(name, m.version(name))
PY
