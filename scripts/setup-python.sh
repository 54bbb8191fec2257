#!/usr/bin/env bash
# Creates .venv (if missing), installs the Python tools and peers the tests and benchmarks
# use, and builds the `sagittadb` extension into it (release mode). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -r requirements-dev.txt
# maturin develop needs VIRTUAL_ENV to find the interpreter it installs into.
VIRTUAL_ENV="$PWD/.venv" .venv/bin/maturin develop --quiet --release -m python/Cargo.toml
.venv/bin/python -c "import sagittadb; print('sagittadb', sagittadb.__version__, 'simd', sagittadb.simd_level())"
