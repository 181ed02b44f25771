#!/usr/bin/env bash
# Pull request: plan what the pull request changes in the topology and write the comment body.
#
# Runs `reconciler plan --base BASE_REF --clusters-from BASE_REF` (only the flows changed since the base
# branch, saying which files and flows changed; every cluster connected with the base branch's connection
# settings, never the pull request's: docs/security.md) as Markdown, prefixed with a hidden marker so that CI updates ONE comment
# per pull request instead of adding one per push. Nothing is applied.
#
# Environment:
#   TOPOLOGY_PATHS  topology files or directories, space-separated (required)
#   TOPOLOGY_ENV    the environment, of a topology that declares `environments:` (`--env`; docs/environments.md)
#   BASE_REF        what the pull request is compared with (default origin/main)
#   POLICY_PATHS    policy directories or files, space-separated (optional): read from this checkout, the base
#                   branch's (the workflow takes only the topology files of the pull request, ci/take-topology.sh)
#   OUT_DIR         where to write plan-comment.md (default ci-out)
#   RECONCILER      the CLI (default `reconciler`; e.g. `python -m reconciler`)
#   ${ENV_VAR}s the topology references (the read-only plan principal's credentials, from the CI secret
#                   store's plan environment; never the apply principal's: docs/security.md)
# Exit: 0 the plan was made (with or without changes), 1 it failed (the comment body says why), 3 it violates a
# policy (the comment lists each violation).
set -uo pipefail
: "${TOPOLOGY_PATHS:?set TOPOLOGY_PATHS to the topology files or directories}"
BASE_REF=${BASE_REF:-origin/main}
OUT_DIR=${OUT_DIR:-ci-out}
RECONCILER=${RECONCILER:-reconciler}
MARKER=${PLAN_COMMENT_MARKER:-<!-- reconciler-plan -->}
read -r -a paths <<< "$TOPOLOGY_PATHS"
env_args=()
[ -n "${TOPOLOGY_ENV:-}" ] && env_args=(--env "$TOPOLOGY_ENV")
policy_args=()
if [ -n "${POLICY_PATHS:-}" ]; then
  read -r -a policy_paths <<< "$POLICY_PATHS"
  for p in "${policy_paths[@]}"; do policy_args+=(--policy "$p"); done
fi
mkdir -p "$OUT_DIR"

# shellcheck disable=SC2086 # RECONCILER may be a command with arguments
$RECONCILER plan "${env_args[@]}" "${paths[@]}" --base "$BASE_REF" --clusters-from "$BASE_REF" --format markdown --detailed-exitcode \
  "${policy_args[@]}" > "$OUT_DIR/plan.md" 2> "$OUT_DIR/plan.err"
code=$?
cat "$OUT_DIR/plan.err" >&2

{
  echo "$MARKER"
  if [ "$code" -eq 1 ]; then
    echo "### ❌ Reconciler plan failed"
    echo
    echo "The topology does not validate or the clusters could not be read:"
    echo
    # The errors quote the topology (names, patterns): a fence longer than any backtick run in them, so no
    # quoted text can close it and be read as Markdown (docs/security.md).
    tail -c 30000 "$OUT_DIR/plan.err" > "$OUT_DIR/plan.err.tail"
    longest=$(grep -o '`\+' "$OUT_DIR/plan.err.tail" | awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
    fence=$(printf '%*s' $(( longest < 3 ? 3 : longest + 1 )) '' | tr ' ' '`')
    echo "$fence"
    cat "$OUT_DIR/plan.err.tail"
    echo
    echo "$fence"
    cat "$OUT_DIR/plan.md"
  else
    cat "$OUT_DIR/plan.md"
  fi
  echo
  echo "<sub>Planned at commit \`$(git rev-parse --short HEAD 2>/dev/null || echo unknown)\` against \`$BASE_REF\` by \`reconciler plan --base\`. Updated on every push.</sub>"
} > "$OUT_DIR/plan-comment.md"

echo "Wrote $OUT_DIR/plan-comment.md (plan exit code $code)" >&2
[ "$code" -eq 1 ] && exit 1
[ "$code" -eq 3 ] && exit 3
exit 0
