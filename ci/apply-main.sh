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
# With POLICY_PATHS, the plan is judged by the policies (docs/policy.md) as they are at POLICY_REV, the main branch
# before this change (HEAD^): a change cannot relax the policies that judge it (a policy path new in this change is
# read from HEAD). A violation stops here (exit 3). The changes a policy marks as needing an approval are applied
# only when the plan records one: APPROVED_BY (and APPROVED_AT), which the workflow sets from the approving review
# of the pull request, is signed into the saved plan with it (`plan --approved-by`); without it, apply refuses them
# (exit 3) and applies nothing.
#
# Environment:
#   TOPOLOGY_PATHS       topology files or directories, space-separated (required)
#   TOPOLOGY_ENV         the environment, of a topology that declares `environments:` (`--env`; docs/environments.md)
#   RECONCILER_PLAN_KEY  the key that signs and verifies the saved plan, from the CI's secret store (required)
#   POLICY_PATHS         policy directories or files, space-separated, relative to the repository (optional)
#   POLICY_REV           the revision whose policies judge the change (default HEAD^)
#   APPROVED_BY          who approved the change (optional; set by the workflow, never by the change itself)
#   APPROVED_AT          when, ISO 8601 (optional; default: now)
#   OUT_DIR              where to write plan.json, plan.txt, apply.txt (default ci-out; created 0700)
#   RECONCILER           the CLI (default `reconciler`)
#   ${ENV_VAR}s the topology references, from the CI's secret store
# Exit: 0 applied (or nothing to apply), 1 the plan or the apply failed, 3 refused by policy (a violation, or a
# change that needs an approval nobody gave); nothing is applied unless 0.
set -uo pipefail
: "${TOPOLOGY_PATHS:?set TOPOLOGY_PATHS to the topology files or directories}"
OUT_DIR=${OUT_DIR:-ci-out}
RECONCILER=${RECONCILER:-reconciler}
: "${RECONCILER_PLAN_KEY:?set RECONCILER_PLAN_KEY (from the CI secret store) to sign and verify the saved plan}"
read -r -a paths <<< "$TOPOLOGY_PATHS"
env_args=()
[ -n "${TOPOLOGY_ENV:-}" ] && env_args=(--env "$TOPOLOGY_ENV")
(umask 077 && mkdir -p "$OUT_DIR")  # the saved plan is the approval: only this job's user reads it

policy_args=()
if [ -n "${POLICY_PATHS:-}" ]; then
  read -r -a policy_paths <<< "$POLICY_PATHS"
  rev=${POLICY_REV:-HEAD^}
  if ! git rev-parse -q --verify "$rev^{commit}" >/dev/null; then
    echo "note: $rev is not a commit of this clone (the first commit, or a checkout without fetch-depth: 2): the policies of HEAD judge this change" >&2
    rev=HEAD
  fi
  policy_dir="$OUT_DIR/policies"
  rm -rf "$policy_dir" && mkdir -p "$policy_dir"
  for p in "${policy_paths[@]}"; do
    at=$rev
    if ! git cat-file -e "$rev:${p%/}" 2>/dev/null; then
      echo "note: $p is not in $rev: its version of HEAD judges this change" >&2
      at=HEAD
    fi
    if ! git archive "$at" -- "${p%/}" | tar -x -C "$policy_dir"; then
      echo "error: the policies $p cannot be read at $at; nothing was applied" >&2
      exit 1
    fi
    policy_args+=(--policy "$policy_dir/${p%/}")
  done
fi
approval_args=()
if [ -n "${APPROVED_BY:-}" ]; then
  approval_args+=(--approved-by "$APPROVED_BY")
  [ -n "${APPROVED_AT:-}" ] && approval_args+=(--approved-at "$APPROVED_AT")
fi

# shellcheck disable=SC2086
$RECONCILER plan "${env_args[@]}" "${paths[@]}" --out "$OUT_DIR/plan.json" --detailed-exitcode "${policy_args[@]}" "${approval_args[@]}" \
  | tee "$OUT_DIR/plan.txt"
code=${PIPESTATUS[0]}
case "$code" in
  0) echo "No changes: nothing to apply."; exit 0 ;;
  2) ;;
  3) echo "error: the plan violates a policy (exit 3, see above); nothing was applied" >&2; exit 3 ;;
  *) echo "error: the plan failed (exit $code); nothing was applied" >&2; exit 1 ;;
esac

# shellcheck disable=SC2086
$RECONCILER apply "${env_args[@]}" "$OUT_DIR/plan.json" "${paths[@]}" --auto-approve "${policy_args[@]}" | tee "$OUT_DIR/apply.txt"
exit "${PIPESTATUS[0]}"
