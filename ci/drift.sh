#!/usr/bin/env bash
# Scheduled drift report: compare the live clusters and jobs with the topology; never applies.
#
# Writes the report as HTML (for people: upload it as an artifact), Markdown (an issue body) and
# JSON (for machines), prints the text summary, and exits like `reconciler drift`.
#
# Environment:
#   TOPOLOGY_PATHS  topology files or directories, space-separated (required)
#   TOPOLOGY_ENV    the environment, of a topology that declares `environments:` (`--env`; docs/environments.md)
#   OUT_DIR         where to write drift.html, drift.md, drift.json (default ci-out)
#   DRIFT_ARGS      extra arguments, e.g. `--no-jobs` or `--revision origin/main`
#   RECONCILER      the CLI (default `reconciler`)
#   ${ENV_VAR}s the topology references, from the CI's secret store
# Exit: 0 no drift, 2 drift, 1 error (invalid topology, unreadable cluster or job status).
set -uo pipefail
: "${TOPOLOGY_PATHS:?set TOPOLOGY_PATHS to the topology files or directories}"
OUT_DIR=${OUT_DIR:-ci-out}
RECONCILER=${RECONCILER:-reconciler}
read -r -a paths <<< "$TOPOLOGY_PATHS"
env_args=()
[ -n "${TOPOLOGY_ENV:-}" ] && env_args=(--env "$TOPOLOGY_ENV")
read -r -a extra <<< "${DRIFT_ARGS:-}"
mkdir -p "$OUT_DIR"

# shellcheck disable=SC2086
$RECONCILER drift "${env_args[@]}" "${paths[@]}" "${extra[@]}" \
  --out "$OUT_DIR/drift.html" --out "$OUT_DIR/drift.md" --out "$OUT_DIR/drift.json"
code=$?
echo "$code" > "$OUT_DIR/drift.exitcode"
exit "$code"
