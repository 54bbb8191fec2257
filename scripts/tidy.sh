#!/usr/bin/env bash
# Tidy checks (TigerBeetle's tidy.zig in spirit): no dbg!, no TODO without an issue number,
# no unsafe outside sagitta-kernels, no source file over 1,200 lines.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
files=$(git ls-files '*.rs' '*.py' 2>/dev/null || find crates python bench -name '*.rs' -o -name '*.py')
if grep -n 'dbg!(' $(echo "$files" | grep '\.rs$') 2>/dev/null; then echo "tidy: dbg! found"; status=1; fi
if grep -nE '(TODO|FIXME|XXX)' $files 2>/dev/null | grep -vE '(TODO|FIXME)\(#?[0-9]+\)'; then
  echo "tidy: TODO/FIXME without an issue number, write TODO(#N)"; status=1
fi
for file in $(echo "$files" | grep '\.rs$' | grep -v '^crates/sagitta-kernels/'); do
  if grep -nE '^\s*(unsafe\s|.*\bunsafe\s*\{)' "$file" | grep -v 'deny(unsafe' >/dev/null; then
    echo "tidy: unsafe outside sagitta-kernels in $file"; status=1
  fi
done
for file in $files; do
  lines=$(wc -l < "$file")
  if [ "$lines" -gt 1200 ]; then echo "tidy: $file has $lines lines (max 1200)"; status=1; fi
done
[ $status -eq 0 ] && echo "tidy: ok"
exit $status
