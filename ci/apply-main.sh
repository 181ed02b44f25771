#!/usr/bin/env bash
# Merge to the main branch: plan from this very commit, save the plan, and apply exactly that plan.
#
# `reconciler plan --out` saves the plan with a fingerprint of the live state it was computed from, the
# topology's content digest and commit, signed with RECONCILER_PLAN_KEY (mode 0600);
# `reconciler apply PLANFILE TOPOLOGY...` verifies the signature, checks the topology is the one
# planned, plans again and refuses any action the fresh plan does not have, connects with the
# topology's settings (never the file's), takes the lease on every cluster it changes, refuses the
# plan if the clusters changed since, applies it, and records the commit (author, time, dirty flag)
# next to the lease. Nothing is applied when the plan has no changes. docs/security.md.
#
# Environment:
#   TOPOLOGY_PATHS       topology files or directories, space-separated (required)
#   TOPOLOGY_ENV         the environment, of a topology that declares `environments:` (`--env`; docs/environments.md)
#   RECONCILER_PLAN_KEY  the key that signs and verifies the saved plan, from the CI's secret store (required)
#   OUT_DIR              where to write plan.json, plan.txt, apply.txt (default ci-out; created 0700)
#   RECONCILER           the CLI (default `reconciler`)
#   ${ENV_VAR}s the topology references, from the CI's secret store
# Exit: 0 applied (or nothing to apply), 1 the plan or the apply failed.
set -uo pipefail
: "${TOPOLOGY_PATHS:?set TOPOLOGY_PATHS to the topology files or directories}"
OUT_DIR=${OUT_DIR:-ci-out}
RECONCILER=${RECONCILER:-reconciler}
: "${RECONCILER_PLAN_KEY:?set RECONCILER_PLAN_KEY (from the CI secret store) to sign and verify the saved plan}"
read -r -a paths <<< "$TOPOLOGY_PATHS"
env_args=()
[ -n "${TOPOLOGY_ENV:-}" ] && env_args=(--env "$TOPOLOGY_ENV")
(umask 077 && mkdir -p "$OUT_DIR")  # the saved plan is the approval: only this job's user reads it

# shellcheck disable=SC2086
$RECONCILER plan "${env_args[@]}" "${paths[@]}" --out "$OUT_DIR/plan.json" --detailed-exitcode | tee "$OUT_DIR/plan.txt"
code=${PIPESTATUS[0]}
case "$code" in
  0) echo "No changes: nothing to apply."; exit 0 ;;
  2) ;;
  *) echo "error: the plan failed (exit $code); nothing was applied" >&2; exit 1 ;;
esac

# shellcheck disable=SC2086
$RECONCILER apply "${env_args[@]}" "$OUT_DIR/plan.json" "${paths[@]}" --auto-approve | tee "$OUT_DIR/apply.txt"
exit "${PIPESTATUS[0]}"
