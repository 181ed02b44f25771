# The image of the replication jobs on Kubernetes (the Spark operator runs it as an engine's driver and executors).
# Python and pyspark are the project's own: the Python minor that CI tests (PYTHON_VERSION, within pyproject's
# requires-python) and pyspark/pyarrow at the versions of constraints.txt (the `spark` extra installed with
# `-c constraints.txt`), on Debian bookworm with its OpenJDK 17. Spark comes from the pyspark wheel (its jars,
# spark-submit and the Kubernetes backend); /opt/spark links into it, and deploy/image/entrypoint.sh is the
# `driver` / `executor` entry point the operator's pods call (apache/spark-docker's, for this layout). The project
# lies at the path the rendered SparkApplication names: local:///opt/reconciler/jobs/mirror_job.py.
#
# The project and its dependencies live in a virtual environment (/opt/venv, first on PATH), so the build is the
# same on any Debian bookworm base with python3 and its venv module: Python's official image by default, or
# (BASE_IMAGE) one made from Debian's own packages, whose python3 is also 3.11 and refuses system-wide pip
# installs (PEP 668); tests/integration/test_image.py builds on such a base with buildah (docs/install.md).
# pip reaches PyPI with the CA bundle of the secret `ca-bundle` when one is given (a TLS-intercepting proxy).
#
#   docker build -t reconciler-job:0.1.0 .          (the `image` workflow builds and pushes it)
#   docker build --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt -t reconciler-job:0.1.0 .
ARG PYTHON_VERSION=3.11
ARG BASE_IMAGE=python:${PYTHON_VERSION}-slim-bookworm
FROM ${BASE_IMAGE}

# Debian bookworm's packages: the base tag fixes the release; exact versions are withdrawn on security updates.
# hadolint ignore=DL3008
RUN set -eux; \
    mkdir -p /usr/share/man/man1; \
    apt-get update; \
    apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps libnss-wrapper; \
    rm -rf /var/lib/apt/lists/*; \
    groupadd --system --gid=185 spark; \
    useradd --system --uid=185 --gid=spark -d /nonexistent spark; \
    python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /opt/reconciler
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY requirements ./requirements
COPY reconciler ./reconciler
COPY schemas ./schemas
COPY jobs ./jobs
COPY topologies/demo ./topologies/demo
# The project with the job runtime (pyspark, pyarrow) from the hash-locked requirements/image.txt (the versions of
# constraints.txt; scripts/lock.sh), the build requirements included, no build isolation; then SPARK_HOME
# (/opt/spark) made of the pyspark wheel's Spark, with a work directory the spark user can write.
RUN --mount=type=secret,id=ca-bundle set -eux; \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi; \
    python3 -m pip install --no-cache-dir --require-hashes --no-deps -r requirements/image.txt; \
    python3 -m pip install --no-cache-dir --no-deps --no-build-isolation .; \
    pyspark_home="$(python3 -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"; \
    mkdir -p /opt/spark/work-dir; \
    for d in bin sbin jars python data examples; do \
        if [ -e "$pyspark_home/$d" ]; then ln -s "$pyspark_home/$d" "/opt/spark/$d"; fi; \
    done; \
    chmod a+x "$pyspark_home"/bin/* "$pyspark_home"/sbin/*; \
    chown -R spark:spark /opt/spark/work-dir; \
    chmod g+w /opt/spark/work-dir; \
    python3 -c "import reconciler.resources as r; r.job_script(); r.schema_path()"; \
    python3 jobs/mirror_job.py --help > /dev/null
COPY deploy/image/entrypoint.sh /opt/entrypoint.sh

ENV SPARK_HOME=/opt/spark \
    PYSPARK_PYTHON=python3 \
    PYTHONPATH=/opt/reconciler

# The unprivileged spark user the Spark images run as (uid 185), in a working directory it can write (the Spark
# operator's pods run the driver there; the job itself stays at /opt/reconciler/jobs/mirror_job.py).
WORKDIR /opt/spark/work-dir
USER 185
ENTRYPOINT ["/opt/entrypoint.sh"]
