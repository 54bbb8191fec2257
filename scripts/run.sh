#!/usr/bin/env bash
# The main job: build the `sagitta` binary (release) and run the server — Qdrant's REST API
# on http://127.0.0.1:6333 — on the default data directory ./sagitta-data. Extra arguments
# go to `sagitta serve` (e.g. --host 0.0.0.0 --port 6333 --data-dir DIR --api-key KEY;
# `sagitta serve --help` lists them). Ctrl-C (or SIGTERM) stops it after flushing.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p sagitta-cli
exec target/release/sagitta serve "$@"
