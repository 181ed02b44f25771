#!/usr/bin/env bash
# Build the replication jobs' image (Dockerfile) and check that it runs; export IMAGE and VERSION to later
# steps when GITHUB_ENV is set (.github/workflows/image.yml).
set -euo pipefail
version=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
owner=$(echo "${GITHUB_REPOSITORY_OWNER:-local}" | tr '[:upper:]' '[:lower:]')
if [ -n "${GITHUB_ENV:-}" ]; then
  echo "IMAGE=ghcr.io/$owner/reconciler-job" >> "$GITHUB_ENV"
  echo "VERSION=$version" >> "$GITHUB_ENV"
fi
docker build -f Dockerfile -t "reconciler-job:$version" .
docker run --rm --entrypoint python3 "reconciler-job:$version" -c "import reconciler.resources as r; print(r.job_script())"
docker run --rm --entrypoint python3 "reconciler-job:$version" /opt/reconciler/jobs/mirror_job.py --help
docker run --rm "reconciler-job:$version" /opt/spark/bin/spark-submit --version
