# The image of the replication jobs on Kubernetes (the Spark operator runs it as driver and executors).
# Spark, Java 17 and PySpark come from the Apache Spark base image; this adds the reconciler package
# (the job's code) without a second copy of PySpark, and the entry point at the path the rendered
# SparkApplication names: local:///opt/reconciler/jobs/mirror_job.py.
#
#   docker build -t reconciler-job:0.1.0 .          (the `image` workflow builds and pushes it)
ARG SPARK_IMAGE=apache/spark:4.0.1-python3
FROM ${SPARK_IMAGE}

USER 0
WORKDIR /opt/reconciler
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY reconciler ./reconciler
COPY schemas ./schemas
COPY jobs ./jobs
COPY topologies/demo ./topologies/demo
# pyspark is the base image's own (/opt/spark/python); pyarrow is the job runtime's other half.
RUN grep -E '^(pyarrow|prometheus-client)==' constraints.txt > /tmp/runtime.txt \
    && python3 -m pip install --no-cache-dir -c constraints.txt . -r /tmp/runtime.txt \
    && rm /tmp/runtime.txt \
    && python3 -c "import reconciler.resources as r; r.job_script(); r.schema_path()"

# The base image's unprivileged spark user.
USER 185
