#!/usr/bin/env bash
# The test command: set up (scripts/bootstrap.sh) and run the whole suite against real
# Tansu brokers and real Spark started by the tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# Headless Chromium checks that the HTML drift report renders (the test skips, saying why, without it).
# Installed only when no Chromium is present, quietly, and never fatal.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
   && ! command -v google-chrome >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium; } \
    >/dev/null 2>&1 || echo "[test] could not install chromium; the HTML rendering test will be skipped" >&2
fi
# tini, the job image's init (tests/integration/test_k8s_stop.py runs the image's entry point under it; the test
# skips, saying why, without it). Installed the same way: only when missing, quietly, never fatal.
if [ ! -x /usr/bin/tini ] && command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq tini; } \
    >/dev/null 2>&1 || echo "[test] could not install tini; the Kubernetes stop test will be skipped" >&2
fi
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
