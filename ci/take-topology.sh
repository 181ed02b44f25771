#!/usr/bin/env bash
# Pull request (pull_request_target): replace the topology files of this checkout (the base branch) with
# the pull request's, read from the directory DIR where the pull request was checked out. Only the paths
# in TOPOLOGY_PATHS are taken, and only regular files: the pull request's code, scripts, workflows and
# symbolic links (which could point at the runner's files) stay out (docs/security.md).
#
# Usage: ci/take-topology.sh DIR        Environment: TOPOLOGY_PATHS (space-separated, required)
set -euo pipefail
: "${TOPOLOGY_PATHS:?set TOPOLOGY_PATHS to the topology files or directories}"
src=${1:?usage: ci/take-topology.sh DIR}
read -r -a paths <<< "$TOPOLOGY_PATHS"
for p in "${paths[@]}"; do
  case "$p" in /*|*..*) echo "take-topology: refusing path $p (absolute or with ..)" >&2; exit 1 ;; esac
  rm -rf -- "$p"
  if [ -d "$src/$p" ] && [ ! -L "$src/$p" ]; then
    mkdir -p -- "$p"
    (cd "$src/$p" && find . -type f \( -name '*.yaml' -o -name '*.yml' \) -print0) |
      while IFS= read -r -d '' f; do
        mkdir -p -- "$p/$(dirname "$f")"
        cp -- "$src/$p/$f" "$p/$f"
      done
  elif [ -f "$src/$p" ] && [ ! -L "$src/$p" ]; then
    mkdir -p -- "$(dirname "$p")"
    cp -- "$src/$p" "$p"
  fi
done
rm -rf -- "$src"
