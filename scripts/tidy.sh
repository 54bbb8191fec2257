#!/usr/bin/env bash
# Tidy checks, for running them alone: the rules are tests in crates/sagitta-tidy (files over
# 1,200 lines, dbg!, TODO without an issue number, unsafe outside sagitta-kernels or without
# its SAFETY comment, developer-machine paths, functions over 70 lines, module import
# cycles). scripts/test.sh runs them once, inside its `cargo test --workspace`.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo test --release -p sagitta-tidy "$@"
