#!/usr/bin/env bash
# The test command: set up (scripts/bootstrap.sh) and run the whole suite against real
# Tansu brokers and real Spark started by the tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
# Debian packages some tests use, each installed only when missing, quietly, and never fatal (the test skips,
# saying why, without it): headless Chromium checks that the HTML drift report renders; buildah and debootstrap
# build the job image and run an engine in it (tests/integration/test_image.py); tini runs the image's entry point
# on the host as a pod does (tests/integration/test_k8s_stop.py); openssl and stunnel4 put TLS in front of a test
# broker (tests/integration/test_secure_clusters.py).
apt_install() {  # PACKAGE WHAT-IS-SKIPPED
  command -v apt-get >/dev/null 2>&1 || { echo "[test] no apt-get to install $1; $2 will be skipped" >&2; return 0; }
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo -n"
  if [ -z "${APT_UPDATED:-}" ]; then $SUDO apt-get update -qq >/dev/null 2>&1 || true; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$1" >/dev/null 2>&1 \
    || echo "[test] could not install $1; $2 will be skipped" >&2
}
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
   && ! command -v google-chrome >/dev/null 2>&1; then
  apt_install chromium "the HTML rendering test"
fi
for pkg in buildah debootstrap; do
  command -v "$pkg" >/dev/null 2>&1 || [ -x "/usr/sbin/$pkg" ] || apt_install "$pkg" "the job image test"
done
# openssl and stunnel4: a throwaway CA and a TLS terminator in front of a test broker (TLS and mutual TLS;
# tests/integration/test_secure_clusters.py, reconciler/dev/tls.py)
command -v openssl >/dev/null 2>&1 || apt_install openssl "the TLS tests"
command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1 || apt_install stunnel4 "the TLS tests"
# tini, the job image's init (tests/integration/test_k8s_stop.py runs the image's entry point under it)
[ -x /usr/bin/tini ] || apt_install tini "the Kubernetes stop test"
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
