#!/usr/bin/env bash
# Every test: formatting, lints, Rust tests, Python tests. Sets up what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
echo "== cargo fmt --check"
cargo fmt --all --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets --release -- -D warnings
if rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu; then
  echo "== cargo check (aarch64: the NEON kernels compile)"
  cargo check -p sagitta-kernels -p sagitta-index --target aarch64-unknown-linux-gnu
else
  echo "== aarch64 target not installed: NEON kernels not compiled here"
fi
# Tidy rules (scripts/tidy.sh alone) are the sagitta-tidy crate's tests, run by cargo test below.
echo "== cargo test"
cargo test --workspace --exclude sagittadb-python --release
echo "== MPI: sagitta-cluster's mpi feature, and mpirun -n 4 against one process"
scripts/setup-mpi.sh
cargo clippy -p sagitta-cluster -p sagitta-cli --features sagitta-cluster/mpi,sagitta-cli/mpi \
  --all-targets --release -- -D warnings
cargo build -p sagitta-cluster --features mpi --example mpi_check --release
# `sagitta serve --mpi`, run by python/tests/test_mpi_serve.py (it serves without --mpi too)
cargo build -p sagitta-cli --features mpi --release
cp target/release/sagitta target/release/sagitta-mpi
export SAGITTA_MPI_BIN="$PWD/target/release/sagitta-mpi"
# the CI machine runs as root; OpenMPI refuses that unless told twice
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  mpirun --oversubscribe -n 4 target/release/examples/mpi_check
echo "== python setup"
scripts/setup-python.sh
echo "== ruff"
.venv/bin/ruff check python bench rag
.venv/bin/ruff format --check python bench rag
echo "== pyright (strict, python/sagittadb: pyrightconfig.json)"
# The wheel brings its own Node.js; the variable skips the check for a newer pyright (a request
# to PyPI on every run).
PYRIGHT_PYTHON_IGNORE_WARNINGS=1 .venv/bin/pyright
echo "== pytest (the dashboard test drives Debian's chromium: scripts/setup-browser.sh)"
scripts/setup-browser.sh
.venv/bin/python -m pytest -q python/tests bench/tests
