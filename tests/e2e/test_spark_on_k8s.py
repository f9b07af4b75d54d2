"""Spark on Kubernetes for real: spark-on-k8s/submit.sh (`spark-submit --master k8s://<API server>
--deploy-mode cluster`) runs the example streaming job against the real control plane. Spark's own
Kubernetes scheduler creates the driver pod (as the `spark` ServiceAccount of spark-on-k8s/, which
also submits) and the driver its executor pods, through the API server; the pod runner runs them from
the local PySpark install (podrunner's `spark_image`); the job reads a Brook topic served by a broker
pod in the same namespace and writes its counts exactly once."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from brook.dev.supervisor import die_with_parent
from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import start_runner, tail
from tests.e2e.podrunner import RunnerThread
from tests.e2e.podrunner.runner import spark_image

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]
SPARK = REPO / "spark-on-k8s"
NS = "spark-e2e"  # not `spark`: test_control_plane.py applies and deletes that one in the same run
VIEWS = 3000
SUBMIT_TIMEOUT = 420  # spark-submit waits for the driver; on a loaded 2-core machine ~2-4 minutes


def in_namespace(path: Path) -> str:
    """spark-on-k8s/ manifests as written, moved to this test's namespace."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = NS
        for subject in d.get("subjects") or []:
            subject["namespace"] = NS
    return yaml.safe_dump_all(docs)


def broker_pod() -> str:
    """One `brook broker` (the broker image's command) as pod brook-0 behind the headless Service
    `brook`: clients and Spark reach it as brook-0.brook.<ns>.svc:9092."""
    host = f"brook-0.brook.{NS}.svc:9092"
    return yaml.safe_dump_all(
        [
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "brook", "namespace": NS},
                "spec": {
                    "clusterIP": "None",
                    "selector": {"app.kubernetes.io/name": "brook"},
                    "ports": [{"name": "kafka", "port": 9092}],
                },
            },
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "brook-0",
                    "namespace": NS,
                    "labels": {"app.kubernetes.io/name": "brook"},
                },
                "spec": {
                    "hostname": "brook-0",
                    "subdomain": "brook",
                    "containers": [
                        {
                            "name": "broker",
                            "image": "ghcr.io/brook-dev/brook:0.1.0",
                            "command": ["brook"],
                            "args": [
                                "broker",
                                "--listeners",
                                "PLAINTEXT://0.0.0.0:9092",
                                "--advertised-listeners",
                                f"PLAINTEXT://{host}",
                                "--metrics-port",
                                "-1",
                                "--data-dir",
                                "/data",
                            ],
                            "ports": [{"name": "kafka", "containerPort": 9092}],
                            "readinessProbe": {"tcpSocket": {"port": "kafka"}, "periodSeconds": 1},
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                },
            },
        ]
    )


@dataclass
class Setup:
    kube: Kube
    runner: RunnerThread
    workdir: Path
    bootstrap: str  # the broker from the test's side


@pytest.fixture(scope="module")
def setup(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    from tests.spark.helpers import create_topic

    workdir = tmp_path_factory.mktemp("spark-on-k8s")
    kube.kubectl("create", "namespace", NS)
    for name in ("rbac.yaml", "checkpoint-pvc.yaml"):
        kube.kubectl("apply", "-f", "-", input=in_namespace(SPARK / "manifests" / name))
    runner = start_runner(kube, workdir / "runner", NS)
    try:
        kube.kubectl("apply", "-f", "-", input=broker_pod())
        kube.kubectl("wait", "-n", NS, "--for=condition=Ready", "pod/brook-0", "--timeout=90s", timeout=100)
        bootstrap = f"127.0.0.1:{runner.host_ports(NS, 'brook-0')[9092]}"
        create_topic(bootstrap, "page-views", 2)
        create_topic(bootstrap, "page-view-counts", 2, {"cleanup.policy": "compact"})
        yield Setup(kube, runner, workdir, bootstrap)
    finally:
        runner.stop(grace=5)
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)


class PodLog:
    """Every Spark pod of the namespace seen by polling the API server while the job runs (the
    executors are deleted at its end)."""

    def __init__(self, kube: Kube) -> None:
        from kubernetes import client

        self.api = client.CoreV1Api(kube.client())
        self.seen: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.is_set():
            for pod in self.api.list_namespaced_pod(NS, label_selector="spark-role").items:
                self.seen.setdefault(pod.metadata.name, pod)
            self._stop.wait(0.5)

    def __enter__(self) -> PodLog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def role(self, role: str) -> list[Any]:
        return [p for p in self.seen.values() if p.metadata.labels.get("spark-role") == role]


def pod_logs(workdir: Path, pod: str) -> str:
    logs = sorted((workdir / "runner" / "pods" / NS).glob(f"{pod}-*/logs/*.log"))
    return "\n".join(f"--- {pod}: {p.name}\n{tail(p, 60)}" for p in logs) or f"(no logs of {pod})"


def test_spark_submit_cluster_mode_runs_the_job_on_driver_and_executor_pods(setup: Setup) -> None:
    kube = setup.kube
    from tests.spark.helpers import latest_counts, load_job

    gen = load_job("generate_page_views")
    expected = gen.generate(setup.bootstrap, "page-views", count=VIEWS, seed=11)
    image = spark_image()
    spark = kube.as_service_account(NS, "spark")  # submits as the account the driver runs as
    env = dict(
        spark.env,
        **image.env,
        K8S_API=kube.url,
        NAMESPACE=NS,
        BROOK_BOOTSTRAP=f"brook-0.brook.{NS}.svc:9092",
        EXECUTORS="1",
        TRIGGER="available-now",
    )
    ports = [setup.runner.reserve_port() for _ in range(2)]
    # No cluster DNS or kube-proxy for the API server: the driver is told its address; the driver's
    # RPC and block manager listen on ports picked free for this host (one host for every pod).
    confs = {
        "spark.kubernetes.driver.master": kube.url,
        "spark.driver.port": ports[0],
        "spark.driver.blockManager.port": ports[1],
        "spark.ui.enabled": "false",
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.sql.shuffle.partitions": "2",
        "spark.kubernetes.submission.waitAppCompletion": "true",
        "spark.kubernetes.report.interval": "5s",
    }
    argv = [
        str(SPARK / "submit.sh"),
        "streaming",
        *(a for k, v in confs.items() for a in ("--conf", f"{k}={v}")),
    ]
    started = time.monotonic()
    with PodLog(kube) as pods:
        try:
            r = subprocess.run(
                argv,
                env=env,
                capture_output=True,
                text=True,
                timeout=SUBMIT_TIMEOUT,
                cwd=setup.workdir,
                preexec_fn=die_with_parent,  # no spark-submit outlives a killed test run
            )
        except subprocess.TimeoutExpired:
            state = kube.kubectl("get", "pods", "-n", NS, "-o", "wide", check=False).stdout
            logs = "".join(f"\n{pod_logs(setup.workdir, name)}" for name in pods.seen)
            pytest.fail(f"spark-submit did not finish in {SUBMIT_TIMEOUT}s; the pods:\n{state}{logs}")
    took = time.monotonic() - started
    drivers, executors = pods.role("driver"), pods.role("executor")
    # spark-submit's own lines (no stack frames): where a refusal by the API server shows.
    said = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith(("\tat ", "\t..."))]
    context = f"spark-submit exited {r.returncode} after {took:.0f}s:\n" + "\n".join(said[-30:])
    context += "".join(f"\n{pod_logs(setup.workdir, p.metadata.name)}" for p in drivers + executors)
    assert r.returncode == 0 and len(drivers) == 1, context
    driver = drivers[0]
    phase = kube.kubectl("get", "pod", "-n", NS, driver.metadata.name, "-o", "jsonpath={.status.phase}")
    assert phase.stdout == "Succeeded", context

    # Spark made the pods through the API server: the driver as the `spark` account, its executors
    # owned by the driver pod (garbage-collected with it).
    assert driver.spec.service_account_name == "spark"
    assert executors, "no executor pod was created\n" + context
    for ex in executors:
        owners = [(o.kind, o.name, o.uid) for o in ex.metadata.owner_references or []]
        assert owners == [("Pod", driver.metadata.name, driver.metadata.uid)], owners
        assert ex.spec.containers[0].image == "brook-spark:4.3.0"
    logs = setup.workdir / "runner" / "pods" / NS
    executor_log = "".join(p.read_text() for p in logs.glob(f"{executors[0].metadata.name}-*/logs/*.log"))
    assert "Successfully registered with driver" in executor_log, context

    # Every page view counted exactly once: the newest count per (page, window) equals what was produced.
    got = latest_counts(setup.bootstrap)
    assert got == dict(expected), context
    assert sum(got.values()) == VIEWS

    # The driver deleted its executors when the job ended.
    kube.wait_for(
        lambda: not pods.api.list_namespaced_pod(NS, label_selector="spark-role=executor").items,
        timeout=60,
        interval=1,
        what="the executor pods deleted",
    )
    names = [e.metadata.name for e in executors]
    print(f"spark-submit: {took:.0f}s, driver {driver.metadata.name}, executors {names}")
