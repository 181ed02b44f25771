#!/bin/bash
# The job image's entry point, as the Spark operator's pods call it: `driver ARGS...` (spark-submit in client mode
# inside the driver pod) and `executor` (the Kubernetes executor backend); anything else runs as given.
# The behaviour of apache/spark-docker's entrypoint.sh (Apache License 2.0), with Spark from the pyspark wheel the
# image installs (SPARK_HOME=/opt/spark links into it) and setpriv instead of gosu.
set -eo pipefail

attempt_setup_fake_passwd_entry() {
  # A container UID without a passwd entry (OpenShift's random UIDs): fake one, Hadoop's user lookup needs it.
  local myuid; myuid="$(id -u)"
  if ! getent passwd "$myuid" &> /dev/null; then
    local wrapper
    for wrapper in {/usr,}/lib{/*,}/libnss_wrapper.so; do
      if [ -s "$wrapper" ]; then
        NSS_WRAPPER_PASSWD="$(mktemp)"
        NSS_WRAPPER_GROUP="$(mktemp)"
        export LD_PRELOAD="$wrapper" NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP
        local mygid; mygid="$(id -g)"
        # shellcheck disable=SC2016  # ${SPARK_USER_NAME:-...} is written as is, like upstream
        printf 'spark:x:%s:%s:${SPARK_USER_NAME:-anonymous uid}:%s:/bin/false\n' "$myuid" "$mygid" "$SPARK_HOME" > "$NSS_WRAPPER_PASSWD"
        printf 'spark:x:%s:\n' "$mygid" > "$NSS_WRAPPER_GROUP"
        break
      fi
    done
  fi
}

if [ -z "$JAVA_HOME" ]; then
  JAVA_HOME=$(java -XshowSettings:properties -version 2>&1 > /dev/null | grep 'java.home' | awk '{print $3}')
fi

SPARK_CLASSPATH="$SPARK_CLASSPATH:${SPARK_HOME}/jars/*"
SPARK_EXECUTOR_JAVA_OPTS=()
for v in "${!SPARK_JAVA_OPT_@}"; do
  SPARK_EXECUTOR_JAVA_OPTS+=( "${!v}" )
done

if [ -n "$SPARK_EXTRA_CLASSPATH" ]; then
  SPARK_CLASSPATH="$SPARK_CLASSPATH:$SPARK_EXTRA_CLASSPATH"
fi

if [ -n "${PYSPARK_PYTHON+x}" ]; then
  export PYSPARK_PYTHON
fi
if [ -n "${PYSPARK_DRIVER_PYTHON+x}" ]; then
  export PYSPARK_DRIVER_PYTHON
fi

if [ -n "${HADOOP_HOME}" ] && [ -z "${SPARK_DIST_CLASSPATH}" ]; then
  SPARK_DIST_CLASSPATH="$("$HADOOP_HOME/bin/hadoop" classpath)"
  export SPARK_DIST_CLASSPATH
fi

if [ -n "${HADOOP_CONF_DIR+x}" ]; then
  SPARK_CLASSPATH="$HADOOP_CONF_DIR:$SPARK_CLASSPATH"
fi

if [ -n "${SPARK_CONF_DIR+x}" ]; then
  SPARK_CLASSPATH="$SPARK_CONF_DIR:$SPARK_CLASSPATH"
elif [ -n "${SPARK_HOME+x}" ]; then
  SPARK_CLASSPATH="$SPARK_HOME/conf:$SPARK_CLASSPATH"
fi

# SPARK-43540: the working directory is on the executor's classpath
SPARK_CLASSPATH="$SPARK_CLASSPATH:$PWD"

# Run as the spark user (uid 185, the image's) when started as root; otherwise as the user given.
AS_SPARK=()
if [ "$(id -u)" -eq 0 ] && getent passwd spark > /dev/null; then
  AS_SPARK=(setpriv --reuid=spark --regid=spark --init-groups)
fi

TINI=${TINI:-/usr/bin/tini}

case "$1" in
  driver)
    shift 1
    # spark-submit under the project's supervisor (reconciler/deployers/supervisor.py), under tini: the SIGTERM the
    # kubelet sends PID 1 when the pod is deleted goes from tini to the supervisor, which passes it to the Python
    # driver (Spark does not); the engine finishes its batch, commits, publishes its final status and exits 0.
    # The supervisor runs under the Python that runs the driver (the image's python3, with the project).
    CMD=(
      "${PYSPARK_DRIVER_PYTHON:-${PYSPARK_PYTHON:-python3}}" -m reconciler.deployers.supervisor --
      "$SPARK_HOME/bin/spark-submit"
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS"
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS"
      --deploy-mode client
      "$@"
    )
    attempt_setup_fake_passwd_entry
    exec "${AS_SPARK[@]}" "$TINI" -s -- "${CMD[@]}"
    ;;
  executor)
    shift 1
    CMD=(
      "${JAVA_HOME}/bin/java"
      "${SPARK_EXECUTOR_JAVA_OPTS[@]}"
      -Xms"$SPARK_EXECUTOR_MEMORY"
      -Xmx"$SPARK_EXECUTOR_MEMORY"
      -cp "$SPARK_CLASSPATH:$SPARK_DIST_CLASSPATH"
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
      --driver-url "$SPARK_DRIVER_URL"
      --executor-id "$SPARK_EXECUTOR_ID"
      --cores "$SPARK_EXECUTOR_CORES"
      --app-id "$SPARK_APPLICATION_ID"
      --hostname "$SPARK_EXECUTOR_POD_IP"
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID"
      --podName "$SPARK_EXECUTOR_POD_NAME"
    )
    attempt_setup_fake_passwd_entry
    exec "${AS_SPARK[@]}" "$TINI" -s -- "${CMD[@]}"
    ;;
  *)
    # not a Spark-on-Kubernetes command: run it as given
    exec "$@"
    ;;
esac
