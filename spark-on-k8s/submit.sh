#!/usr/bin/env bash
# spark-submit in Kubernetes cluster mode (without the Spark Operator): the driver runs as a pod and
# starts executor pods itself, with the `spark` service account of manifests/rbac.yaml.
#
#   spark-on-k8s/submit.sh streaming|report [extra spark-submit args...]
#
# Environment: K8S_API (default: the current kubectl context's server), NAMESPACE (spark), IMAGE
# (brook-spark:4.3.0), BROOK_BOOTSTRAP (brook:9092), EXECUTORS (2), TRIGGER (streaming: the job's
# --trigger, e.g. available-now to read what is there and stop), DRY_RUN=1 prints the command.
set -euo pipefail

job=${1:?usage: submit.sh streaming|report [spark-submit args...]}
shift
NAMESPACE=${NAMESPACE:-spark}
IMAGE=${IMAGE:-brook-spark:4.3.0}
BROOK_BOOTSTRAP=${BROOK_BOOTSTRAP:-brook:9092}
EXECUTORS=${EXECUTORS:-2}
if [ -z "${K8S_API:-}" ]; then
  K8S_API=$(kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' 2>/dev/null || true)
fi
K8S_API=${K8S_API:-https://kubernetes.default.svc}

case "$job" in
  streaming)
    name=page-view-counts
    app=local:///opt/brook/spark-on-k8s/jobs/page_view_counts.py
    app_args=(--bootstrap "$BROOK_BOOTSTRAP" --checkpoint /checkpoints/page-view-counts)
    if [ -n "${TRIGGER:-}" ]; then app_args+=(--trigger "$TRIGGER"); fi
    ;;
  report)
    name=page-view-report
    app=local:///opt/brook/spark-on-k8s/jobs/page_view_report.py
    app_args=(--bootstrap "$BROOK_BOOTSTRAP")
    ;;
  *)
    echo "submit.sh: unknown job '$job' (streaming or report)" >&2
    exit 2
    ;;
esac

cmd=(
  spark-submit
  --master "k8s://${K8S_API}"
  --deploy-mode cluster
  --name "$name"
  --conf "spark.kubernetes.namespace=${NAMESPACE}"
  --conf "spark.kubernetes.container.image=${IMAGE}"
  --conf "spark.kubernetes.authenticate.driver.serviceAccountName=spark"
  --conf "spark.kubernetes.driver.label.app.kubernetes.io/part-of=brook-pipelines"
  --conf "spark.kubernetes.executor.label.app.kubernetes.io/part-of=brook-pipelines"
  --conf "spark.executor.instances=${EXECUTORS}"
  --conf "spark.executor.cores=1"
  --conf "spark.executor.memory=1g"
  --conf "spark.driver.memory=1g"
  --conf "spark.sql.session.timeZone=UTC"
  --conf "spark.kubernetes.pyspark.pythonVersion=3"
  --conf "spark.kubernetes.driverEnv.BROOK_BOOTSTRAP=${BROOK_BOOTSTRAP}"
  --conf "spark.kubernetes.driver.volumes.persistentVolumeClaim.checkpoints.options.claimName=spark-checkpoints"
  --conf "spark.kubernetes.driver.volumes.persistentVolumeClaim.checkpoints.mount.path=/checkpoints"
  --conf "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoints.options.claimName=spark-checkpoints"
  --conf "spark.kubernetes.executor.volumes.persistentVolumeClaim.checkpoints.mount.path=/checkpoints"
  "$@"
  "$app" "${app_args[@]}"
)
if [ "${DRY_RUN:-0}" = 1 ]; then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
exec "${cmd[@]}"
