#!/usr/bin/env bash
# Installs the benchmark-only peers (requirements-bench.txt: qdrant-edge-py, LanceDB, Chroma;
# DiskANN in .venv-diskann, below)
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
# DiskANN (diskannpy, for python -m bench.disk) pins numpy 1.25, which pyarrow and the other
# peers cannot share: it gets its own environment, .venv-diskann (numpy only besides it).
if [ ! -x .venv-diskann/bin/python ]; then
  .venv/bin/python -m venv .venv-diskann
fi
.venv-diskann/bin/python -m pip install --quiet "diskannpy==0.7.0"
.venv-diskann/bin/python -c "import diskannpy, numpy; print('diskannpy', diskannpy.__version__ if hasattr(diskannpy, '__version__') else '0.7.0', 'numpy', numpy.__version__)"
