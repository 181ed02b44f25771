#!/usr/bin/env bash
# The test command: set up (scripts/bootstrap.sh) and run the whole suite against real
# Tansu brokers and real Spark started by the tests. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$PWD/.venv/bin/python" PYSPARK_DRIVER_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
