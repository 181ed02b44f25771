#!/usr/bin/env bash
# The main job: set up (scripts/bootstrap.sh) and run `reconciler demo` on the embedded
# default clusters of topologies/demo. Extra arguments go to `reconciler demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/reconciler demo "$@"
