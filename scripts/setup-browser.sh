#!/usr/bin/env bash
# What python/tests/test_dashboard.py drives: Debian's Chromium and its matching
# chromedriver (Selenium talks to the system browser; nothing is downloaded by the test).
# Installs them when missing; needs root (or sudo) only then.
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi
