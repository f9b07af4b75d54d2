#!/usr/bin/env bash
# Container entrypoint for Spark on Kubernetes (the part of Spark's kubernetes/dockerfiles entrypoint.sh
# the pip-installed Spark lacks): Spark's k8s backend starts pods with "driver ..." or "executor";
# anything else runs as given (e.g. `python3 jobs/generate_page_views.py ...`).
set -euo pipefail

SPARK_HOME=${SPARK_HOME:?}
SPARK_CLASSPATH="${SPARK_CLASSPATH:-}:${SPARK_HOME}/jars/*"
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-python3}
export PYSPARK_DRIVER_PYTHON=${PYSPARK_DRIVER_PYTHON:-python3}

# Spark passes executor JVM options as SPARK_JAVA_OPT_0, SPARK_JAVA_OPT_1, ... in the pod's environment.
java_opts=()
while IFS='=' read -r name value; do
  java_opts+=("$value")
done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n)

case "${1:-}" in
  driver)
    shift
    exec "${SPARK_HOME}/bin/spark-submit" \
      --conf "spark.driver.bindAddress=${SPARK_DRIVER_BIND_ADDRESS:-0.0.0.0}" \
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=${SPARK_DRIVER_BIND_ADDRESS:-}" \
      --deploy-mode client "$@"
    ;;
  executor)
    shift
    exec java "${java_opts[@]}" \
      -Xms"${SPARK_EXECUTOR_MEMORY:-1g}" -Xmx"${SPARK_EXECUTOR_MEMORY:-1g}" \
      -cp "${SPARK_CLASSPATH}" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "${SPARK_DRIVER_URL:?}" \
      --executor-id "${SPARK_EXECUTOR_ID:?}" \
      --cores "${SPARK_EXECUTOR_CORES:-1}" \
      --app-id "${SPARK_APPLICATION_ID:?}" \
      --hostname "${SPARK_EXECUTOR_POD_IP:?}" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-}"
    ;;
  *)
    exec "$@"
    ;;
esac
