#!/usr/bin/env bash
# Regenerate the hash-locked requirement files from pyproject.toml, constraints.txt and requirements/build.in:
#   requirements/ci.txt     what the workflows install to plan, apply and report drift (no extras)
#   requirements/image.txt  the job image (the `spark` extra)
#   requirements/test.txt   the test suite (the `test` extra): scripts/bootstrap.sh, hence .ci/run
# Each is installed with `pip install --require-hashes`: a changed or substituted file on the index is refused.
# Run it after changing pyproject.toml's dependencies or constraints.txt; tests/unit/test_lock.py fails while a
# file is stale. Needs uv (`pip install uv`, a tool of this script only; set UV to its path).
set -euo pipefail
cd "$(dirname "$0")/.."
UV=${UV:-uv}
export SSL_CERT_FILE=${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}
compile() {  # OUT [EXTRA]
  local out=$1 extra=${2:-}
  "$UV" pip compile --quiet --generate-hashes --python-version 3.11.9 --python-platform x86_64-manylinux_2_28 \
    --constraint constraints.txt --no-emit-package kafka-replication-reconciler \
    ${extra:+--extra "$extra"} --custom-compile-command "bash scripts/lock.sh" \
    pyproject.toml requirements/build.in -o "$out"
}
compile requirements/ci.txt
compile requirements/image.txt spark
compile requirements/test.txt test
echo "wrote requirements/ci.txt, image.txt, test.txt" >&2
