#!/usr/bin/env bash
# Qdrant's client test suite (qdrant-client v1.18.0, REST variants) against `sagitta serve`
# (issue 16). Usage: scripts/qdrant-compat.sh SUITE_DIR [OUT_JSON]
#
# SUITE_DIR is a checkout of https://github.com/qdrant/qdrant-client at tag v1.18.0
# (commit 326adefcc2158121dd0d04877e1a483b5aa2627b), kept outside this repository; the
# suite is never copied into it. Get it once with
#   git clone https://github.com/qdrant/qdrant-client ../qdrant-client
#   git -C ../qdrant-client checkout v1.18.0
# The run fetches nothing: the suite's packages go into .venv-compat once (pinned below),
# and bench/compat.py refuses a checkout at another commit.
set -euo pipefail
cd "$(dirname "$0")/.."
suite=${1:?usage: scripts/qdrant-compat.sh SUITE_DIR [OUT_JSON]}
out=${2:-bench/results/qdrant-compat.json}
if [ ! -x .venv-compat/bin/python ]; then
  python3 -m venv .venv-compat
fi
.venv-compat/bin/python -m pip install --quiet "qdrant-client==1.18.0" "pytest>=7.1,<8" \
  "pytest-asyncio>=0.21,<0.22" "pytest-timeout>=2.1" "pytest-mock>=3.14"
cargo build --release -p sagitta-cli
python3 -m bench.compat --suite "$suite" --python .venv-compat/bin/python --out "$out"
