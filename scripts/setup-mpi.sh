#!/usr/bin/env bash
# What the `mpi` feature builds and runs with: OpenMPI (mpirun, mpicc, its headers) and
# libclang (rsmpi generates its bindings with bindgen), from Debian's packages. Installs
# them when missing; needs root (or sudo) only then.
set -euo pipefail
missing=()
command -v mpirun >/dev/null || missing+=(openmpi-bin)
command -v mpicc >/dev/null || missing+=(libopenmpi-dev)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/*/libclang*.so* >/dev/null 2>&1 \
  || missing+=(libclang-dev)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
