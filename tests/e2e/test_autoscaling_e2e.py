"""Broker autoscaling end to end, with real processes only: a real Kubernetes control plane
(tests/e2e/controlplane), the pod runner as its node agent (tests/e2e/podrunner: pods are local `brook
broker` and `etcd` processes), the real `brook-operator run` (kopf) as a subprocess with its
ServiceAccount from manifests/, a real Prometheus (Debian package,
scraping every broker pod each second, with the `namespace` and `pod` labels a ServiceMonitor gives) and
confluent-kafka clients.

The steps share one cluster (each step is a test):
1. bad configuration: an unreachable Prometheus, a Prometheus that scrapes no Brook broker → each a
   clear AutoscalingActive=False reason in status.autoscaling and a Warning Event; minReplicas above
   maxReplicas → refused by the API server (the CRD's CEL rule); the cluster keeps its three brokers;
2. a producer above the bytes-in target → the operator raises spec.replicas to 4, the StatefulSet
   follows, the new broker registers, partitions move onto it until balanced, the consumers keep
   reading;
3. the load stops → after the scale-down window the operator moves every replica off broker 3, lowers
   spec.replicas, the pod goes; no acknowledged record is lost.

Run: `PATH=$PWD/.venv/bin:$PATH pytest -q tests/e2e/test_autoscaling_e2e.py` (about 2 minutes).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import Kube
from tests.e2e.operator_harness import (
    install_operator,
    operator_account,
    operator_process,
    start_runner,
    tail,
)
from tests.e2e.podrunner import RunnerThread, ports_from_annotations
from tests.support.ports import free_port
from tests.support.prometheus import Prometheus

pytestmark = pytest.mark.slow

NS = "scaling"
CLUSTER = "auto"
STS = f"{CLUSTER}-broker"
KIB = 1024
TARGET = 20 * KIB  # bytes in per broker
RATE = 80  # records/s of 1 KiB: ~86 KiB/s on the wire, more than 4 brokers' worth (max 4)


@dataclass
class Env:
    kube: Kube
    runner: RunnerThread
    bootstrap: str
    workdir: Path
    operator_log: Path
    prometheus: Prometheus
    empty_prometheus: Prometheus  # scrapes nothing of Brook
    facts: dict[str, Any] = field(default_factory=dict)

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 30) -> str:
        return self.kube.kubectl(*args, "-n", NS, input=input, timeout=timeout).stdout

    def get(self, *what: str) -> Any:
        return json.loads(self.kubectl("get", *what, "-o", "json"))

    def cluster(self) -> dict[str, Any]:
        out: dict[str, Any] = self.get("cluster", CLUSTER)
        return out

    def autoscaling(self) -> dict[str, Any]:
        out: dict[str, Any] = (self.cluster().get("status") or {}).get("autoscaling") or {}
        return out

    def condition(self, kind: str) -> dict[str, Any]:
        conds = self.autoscaling().get("conditions") or []
        return next((c for c in conds if c["type"] == kind), {})

    def patch(self, autoscaling: dict[str, Any]) -> None:
        self.kubectl(
            "patch",
            f"cluster/{CLUSTER}",
            "--type",
            "merge",
            "-p",
            json.dumps({"spec": {"autoscaling": autoscaling}}),
        )

    def events(self) -> list[dict[str, Any]]:
        items = self.get("events")["items"]
        return [e for e in items if e.get("involvedObject", {}).get("name") == CLUSTER]

    def wait(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        return self.kube.wait_for(predicate, timeout=timeout, interval=0.5, what=what)

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def replicas_of(self, broker: int) -> int:
        md = self.admin().list_topics(timeout=10)
        return sum(1 for t in md.topics.values() for p in t.partitions.values() if broker in p.replicas)


def _cluster(port: int, prometheus_url: str) -> str:
    return json.dumps(
        {
            "apiVersion": "brook.dev/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": CLUSTER, "namespace": NS},
            "spec": {
                "replicas": 3,
                "listeners": [{"name": "plain", "port": port}],
                "config": {"default.replication.factor": 3, "min.insync.replicas": 2},
                "etcd": {"managed": {"replicas": 1}},
                "autoscaling": {
                    "enabled": True,
                    "minReplicas": 3,
                    "maxReplicas": 4,
                    "prometheusUrl": prometheus_url,
                    "targets": {"bytesInPerBroker": TARGET},
                    "scaleUp": {"stabilizationWindowSeconds": 3},
                    "scaleDown": {"stabilizationWindowSeconds": 10},
                    "cooldownSeconds": 5,
                },
            },
        }
    )


class TargetSync:
    """Prometheus' service discovery: every running broker pod's metrics host port, labeled with its
    namespace and pod name (what a ServiceMonitor attaches)."""

    def __init__(self, kube: Kube, prometheus: Prometheus) -> None:
        from kubernetes import client

        self._core = client.CoreV1Api(kube.client())
        self._prometheus = prometheus
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="target-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last: Any = None
        while not self._stop.is_set():
            try:
                pods = self._core.list_namespaced_pod(
                    NS,
                    label_selector=f"app.kubernetes.io/instance={CLUSTER},app.kubernetes.io/component=broker",
                ).items
                targets: dict[str, dict[str, str]] = {}
                for p in pods:
                    d = p.to_dict()
                    port = ports_from_annotations(
                        {"metadata": {"annotations": (d["metadata"] or {}).get("annotations") or {}}}
                    ).get("metrics")
                    if (
                        port
                        and not d["metadata"].get("deletion_timestamp")
                        and d["status"]["phase"] == "Running"
                    ):
                        targets[f"127.0.0.1:{port}"] = {"namespace": NS, "pod": d["metadata"]["name"]}
                if targets != last:
                    self._prometheus.set_targets(sorted(targets), targets)
                    last = targets
            except Exception:  # the API server may be briefly unavailable; try again
                pass
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture(scope="module")
def env(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    pytest.importorskip("confluent_kafka")
    pytest.importorskip("kopf")
    workdir = tmp_path_factory.mktemp("autoscaling-e2e")
    prometheus = Prometheus(workdir / "prometheus")
    empty = Prometheus(workdir / "prometheus-empty")
    install_operator(kube, NS)
    runner = start_runner(kube, workdir, NS)
    sync = TargetSync(kube, prometheus)
    port = runner.reserve_port()
    operator_log = workdir / "operator.log"
    autoscale = {
        "BROOK_OPERATOR_AUTOSCALE_INTERVAL": "1",
        "BROOK_OPERATOR_AUTOSCALE_RATE_WINDOW": "10s",
        "BROOK_OPERATOR_AUTOSCALE_MAX_MOVES": "10",
    }
    try:
        with operator_process(operator_account(kube), NS, operator_log, kube, **autoscale):
            yield Env(kube, runner, f"127.0.0.1:{port}", workdir, operator_log, prometheus, empty)
    finally:
        sync.stop()
        runner.stop(grace=5)
        prometheus.stop()
        empty.stop()
        kube.kubectl("delete", "namespace", NS, "--wait=false", check=False)


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed == failed or "env" not in request.fixturenames:
        return
    e: Env = request.getfixturevalue("env")
    print("\n--- status.autoscaling\n" + json.dumps(e.autoscaling(), indent=1))
    print("\n--- operator.log\n" + tail(e.operator_log, 80))


class Load:
    """A producer at RATE records/s (acks=all, idempotent) and a consumer group reading along."""

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Consumer

        self.bootstrap = bootstrap
        self.acked: dict[int, float] = {}
        self.errors: list[str] = []
        self.seen: set[int] = set()
        self._lock = threading.Lock()
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "autoscale-e2e",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "log_level": 3,
            }
        )
        self._consumer.subscribe(["load"])
        self._producer = threading.Thread(target=self._produce, name="producer", daemon=True)
        self._reader = threading.Thread(target=self._consume, name="consumer", daemon=True)
        self._producer.start()
        self._reader.start()

    def _ack(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[int(msg.value()[:8])] = time.monotonic()

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                "log_level": 3,
            }
        )
        i, t = 0, time.monotonic()
        while not self._stop_producing.is_set():
            p.produce("load", f"{i:08d}".encode() + b"x" * (KIB - 8), on_delivery=self._ack)
            i += 1
            t += 1 / RATE
            p.poll(0)
            time.sleep(max(0.0, t - time.monotonic()))
        p.flush(120)

    def _consume(self) -> None:
        while not self._stop_consuming.is_set():
            m = self._consumer.poll(0.2)
            if m is not None and m.error() is None:
                self.seen.add(int(m.value()[:8]))
        self._consumer.close()

    def bytes_per_second(self, seconds: float) -> float:
        now = time.monotonic()
        with self._lock:
            return sum(1 for t in self.acked.values() if t >= now - seconds) * KIB / seconds

    def stop_producing(self) -> None:
        self._stop_producing.set()
        self._producer.join(150)

    def stop_consuming(self) -> None:
        self._stop_consuming.set()
        self._reader.join(30)


# ---------------------------------------------------------------- steps


@pytest.mark.timeout(150)
def test_bad_configuration_is_a_condition_and_the_cluster_keeps_its_size(env: Env) -> None:
    started = time.monotonic()
    nowhere = f"http://127.0.0.1:{free_port()}"
    env.kubectl("apply", "-f", "-", input=_cluster(int(env.bootstrap.rsplit(":", 1)[1]), nowhere))
    env.kubectl("wait", "--for=condition=Ready", f"cluster/{CLUSTER}", "--timeout=90s", timeout=100)
    env.facts["ready_after"] = time.monotonic() - started

    def active(reason: str) -> bool:
        c = env.condition("AutoscalingActive")
        return c.get("status") == "False" and c.get("reason") == reason

    def kept() -> None:
        assert env.cluster()["spec"]["replicas"] == 3
        assert env.get("statefulset", STS)["spec"]["replicas"] == 3

    env.wait(lambda: active("PrometheusUnreachable"), 30, "PrometheusUnreachable")
    assert env.condition("AutoscalingActive")["message"].startswith(f"cannot reach Prometheus at {nowhere}")
    kept()

    env.patch({"prometheusUrl": env.empty_prometheus.url})
    env.wait(lambda: active("MetricNotFound"), 30, "MetricNotFound")
    assert "no series for brook_broker_info{" in env.condition("AutoscalingActive")["message"]
    kept()

    # The CRD's CEL rule refuses an inconsistent config before the operator sees it (the operator's own
    # InvalidAutoscalingConfig condition stays for objects stored before the rule: its unit tests).
    bad = json.dumps({"spec": {"autoscaling": {"minReplicas": 5}}})
    r = env.kube.kubectl("patch", f"cluster/{CLUSTER}", "-n", NS, "--type", "merge", "-p", bad, check=False)
    assert r.returncode != 0 and "autoscaling.minReplicas must not exceed maxReplicas" in r.stderr, r.stderr
    kept()

    warnings = {e["reason"] for e in env.events() if e.get("type") == "Warning"}
    assert {"PrometheusUnreachable", "MetricNotFound"} <= warnings, warnings

    env.patch({"prometheusUrl": env.prometheus.url})
    env.wait(lambda: env.condition("AutoscalingActive").get("reason") == "ValidMetrics", 40, "ValidMetrics")
    # idle: the metrics ask for fewer brokers than minReplicas; nothing changes
    decision = env.autoscaling()["lastDecision"]
    assert decision["action"] == "None" and decision["desiredReplicas"] == 3, decision
    kept()


@pytest.mark.timeout(200)
def test_load_above_the_target_adds_a_broker_and_moves_partitions_onto_it(env: Env) -> None:
    env.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "brook.dev/v1alpha1",
                "kind": "Topic",
                "metadata": {"name": "load", "namespace": NS},
                "spec": {"cluster": CLUSTER, "partitions": 6, "replicationFactor": 3},
            }
        ),
    )
    env.kubectl("wait", "--for=condition=Ready", "topic/load", "--timeout=40s", timeout=50)
    load = Load(env.bootstrap)
    env.facts["load"] = load
    started = time.monotonic()
    env.wait(lambda: env.cluster()["spec"]["replicas"] == 4, 90, "the operator to raise spec.replicas")
    env.facts["scale_up_decided_after"] = time.monotonic() - started
    decision = env.autoscaling()["lastDecision"]
    assert decision["action"] in ("ScaleUp", "None"), decision  # the next pass may already hold
    (m,) = env.autoscaling()["metrics"]
    if decision["action"] == "ScaleUp":  # more than 3 brokers' worth (a later pass may see more load;
        assert m["total"] > 3 * TARGET, m  # maxReplicas 4 caps it, and the ScaleUp event says 3 → 4)

    # What Prometheus has is what the producer sent, compared as totals (a rate over a window measured
    # at another moment depends on how evenly a loaded machine paces the producer). Payload plus the
    # record-batch framing; a scrape lags by about a second.
    def totals_match() -> tuple[float, int] | None:
        scraped = env.prometheus.query('sum(brook_broker_bytes_in_total{topic="load"})')
        total, sent = (float(scraped[0]["value"][1]) if scraped else 0.0), len(load.acked) * KIB
        return (total, sent) if 0 < 0.9 * sent <= total <= 1.35 * sent else None

    env.wait(totals_match, 30, "Prometheus' bytes in to match what was acknowledged")
    up = [e for e in env.events() if e["reason"] == "ScaleUp"]
    assert len(up) == 1 and "3 → 4 brokers" in up[0]["message"] and "bytes in" in up[0]["message"], up

    env.wait(lambda: env.get("statefulset", STS)["spec"]["replicas"] == 4, 30, "the StatefulSet to follow")
    env.wait(
        lambda: (env.cluster().get("status") or {}).get("registeredBrokers") == [0, 1, 2, 3],
        60,
        "broker 3 to register",
    )
    env.wait(
        lambda: (
            env.condition("AutoscalingProgressing").get("reason") == "Completed"
            and "operation" not in env.autoscaling()
        ),
        90,
        "partitions to move onto broker 3",
    )
    env.facts["scaled_out_after"] = time.monotonic() - started
    held = env.replicas_of(3)
    md = env.admin().list_topics(timeout=10)
    total = sum(len(p.replicas) for t in md.topics.values() for p in t.partitions.values())
    assert held >= total // 4, (held, total)
    assert any(e["reason"] == "PartitionsMoving" for e in env.events())
    n = len(load.seen)
    env.wait(lambda: len(load.seen) > n + RATE, 30, "the consumers to keep reading")


@pytest.mark.timeout(200)
def test_idle_cluster_moves_partitions_off_the_last_broker_then_scales_in(env: Env) -> None:
    load: Load = env.facts["load"]
    load.stop_producing()
    assert not load.errors, load.errors[:3]
    started = time.monotonic()
    env.wait(lambda: env.cluster()["spec"]["replicas"] == 3, 90, "the operator to lower spec.replicas")
    assert env.replicas_of(3) == 0  # everything moved off before spec.replicas went down
    down = [e for e in env.events() if e["reason"] == "ScaleDown"]
    assert len(down) == 1 and "4 → 3 brokers" in down[0]["message"], down
    env.wait(lambda: env.get("statefulset", STS)["spec"]["replicas"] == 3, 30, "the StatefulSet to follow")
    env.wait(
        lambda: (
            (env.cluster().get("status") or {}).get("registeredBrokers") == [0, 1, 2]
            and "operation" not in env.autoscaling()
        ),
        60,
        "broker 3 to leave",
    )
    env.facts["scaled_in_after"] = time.monotonic() - started
    assert env.condition("AutoscalingProgressing")["reason"] == "Completed"
    ready = next(c for c in env.cluster()["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True", ready

    acked = set(load.acked)
    env.wait(lambda: load.seen >= acked, 60, "the group to read every acknowledged record")
    load.stop_consuming()
    print(f"\nautoscaling e2e: {env.facts | {'load': len(acked)}}")
