"""The autoscaler pass against in-memory Kafka and Prometheus: decisions, operations, status, Events."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping, Sequence
from typing import Any

from brook_operator.admin_access import cluster_admin
from brook_operator.autoscaling import report
from brook_operator.autoscaling.flow import AutoscaleSettings, PassResult, autoscale
from brook_operator.autoscaling.report import State
from brook_operator.facts import AdminError, BrokerInfo, ClusterSnapshot, PartitionInfo, Reassignment
from brook_operator.prometheus import BrokerLoad, MetricNotFound, PrometheusError, PrometheusUnreachable
from brook_operator.spec import ClusterSpec
from tests.manifests.support import cr_errors
from tests.unit.operator.fakes import FakeKube

KIB = 1024
URL = "http://prometheus.monitoring.svc:9090"


class FakeKafka:
    """Metadata and reassignments; moves complete when `complete()` is called."""

    def __init__(self, brokers: int, partitions: Sequence[tuple[str, int, tuple[int, ...]]]) -> None:
        self.brokers = list(range(brokers))
        self.parts = {(t, p): r for t, p, r in partitions}
        self.moving: dict[tuple[str, int], tuple[int, ...]] = {}
        self.submitted: list[dict[tuple[str, int], Sequence[int] | None]] = []
        self.down = False
        self.refuse: dict[tuple[str, int], str] = {}

    async def snapshot(self) -> ClusterSnapshot:
        if self.down:
            raise AdminError("Metadata: Local: Broker transport failure", code="_TRANSPORT", unavailable=True)
        parts = tuple(PartitionInfo(t, p, r[0], r, r) for (t, p), r in sorted(self.parts.items()))
        return ClusterSnapshot("cid", 0, tuple(BrokerInfo(b, f"b{b}", 9092) for b in self.brokers), parts)

    async def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        return {
            k: Reassignment(k[0], k[1], target + tuple(b for b in self.parts[k] if b not in target),
                            tuple(b for b in target if b not in self.parts[k]),
                            tuple(b for b in self.parts[k] if b not in target))
            for k, target in self.moving.items()
        }  # fmt: skip

    async def alter_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        self.submitted.append(dict(targets))
        out: dict[tuple[str, int], str | None] = {}
        for k, t in targets.items():
            if k in self.refuse:
                out[k] = self.refuse[k]
            else:
                assert t is not None
                self.moving[k] = tuple(t)
                out[k] = None
        return out

    def complete(self) -> None:
        self.parts.update(self.moving)
        self.moving.clear()

    def held_by(self, broker: int) -> int:
        return sum(1 for r in self.parts.values() if broker in r)


class FakePrometheus:
    def __init__(self) -> None:
        self.bytes_in = 0.0  # total bytes/s, spread evenly
        self.error: PrometheusError | None = None
        self.calls: list[tuple[str, str, str]] = []

    async def __call__(
        self, url: str, selector: str, *, bytes_in: bool, partitions: bool, window: str
    ) -> BrokerLoad:
        self.calls.append((url, selector, window))
        if self.error is not None:
            raise self.error
        brokers = tuple(range(3))
        return BrokerLoad(
            brokers,
            {b: self.bytes_in / len(brokers) for b in brokers} if bytes_in else None,
            {b: 10.0 for b in brokers} if partitions else None,
        )


def cluster(autoscaling: dict[str, Any] | None = None, replicas: int = 2) -> dict[str, Any]:
    a = {
        "enabled": True,
        "minReplicas": 2,
        "maxReplicas": 4,
        "prometheusUrl": URL,
        "targets": {"bytesInPerBroker": 25 * KIB},
        "scaleUp": {"stabilizationWindowSeconds": 0},
        "scaleDown": {"stabilizationWindowSeconds": 60},
        "cooldownSeconds": 30,
    }
    a.update(autoscaling or {})
    return {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "demo", "namespace": "kafka", "uid": "u1", "generation": 4},
        "spec": {"replicas": replicas, "etcd": {"endpoints": ["http://etcd:2379"]}, "autoscaling": a},
    }


class Driver:
    """Runs passes the way the kopf timer does: status and spec.replicas patched back into the body."""

    def __init__(self, body: dict[str, Any], kafka: FakeKafka, metrics: FakePrometheus) -> None:
        self.body = body
        self.kafka = kafka
        self.metrics = metrics
        self.state: State | None = None
        self.events: list[tuple[str, str, str]] = []
        self.bootstraps: list[str] = []

    def run(self, now: float, *, keep_memory: bool = True) -> PassResult:
        def admin_for(bootstrap: str, security: Mapping[str, str] | None = None) -> FakeKafka:
            self.bootstraps.append(bootstrap)
            return self.kafka

        async def admin_of(spec: ClusterSpec) -> FakeKafka:
            template = "{name}-bootstrap.{namespace}.svc:{port}"
            return await cluster_admin(admin_for, FakeKube(), "demo", "kafka", spec, template)

        r = asyncio.run(
            autoscale(
                copy.deepcopy(self.body),
                state=self.state if keep_memory else None,
                load=self.metrics,
                settings=AutoscaleSettings(rate_window="30s", max_in_flight=2),
                admin_of=admin_of,
                now=now,
            )
        )
        self.state = r.state
        if r.status is not None:
            st = self.body.setdefault("status", {})
            st["autoscaling"] = {k: v for k, v in r.status.items() if v is not None}
        if r.replicas is not None:
            self.body["spec"]["replicas"] = r.replicas
        self.events += [(e.type, e.reason, e.message) for e in r.events]
        return r

    @property
    def status(self) -> dict[str, Any]:
        s: dict[str, Any] = self.body["status"]["autoscaling"]
        return s

    def condition(self, type_: str) -> tuple[str, str, str]:
        (c,) = [c for c in self.status["conditions"] if c["type"] == type_]
        return c["status"], c["reason"], c["message"]


def rf2(partitions: int, brokers: int) -> list[tuple[str, int, tuple[int, ...]]]:
    return [("load", p, (p % brokers, (p + 1) % brokers)) for p in range(partitions)]


def test_disabled_autoscaling_writes_nothing() -> None:
    d = Driver(cluster({"enabled": False}), FakeKafka(2, rf2(4, 2)), FakePrometheus())
    r = d.run(1.0)
    assert r.status is None and r.replicas is None and r.events == ()
    assert d.metrics.calls == []


def test_scale_out_then_rebalance_then_cooldown() -> None:
    kafka, metrics = FakeKafka(2, rf2(8, 2)), FakePrometheus()
    d = Driver(cluster(), kafka, metrics)
    metrics.bytes_in = 61 * KIB  # 30.5 KiB/s per broker over 2, target 25: 3 brokers
    r = d.run(1000.0)
    assert r.replicas == 3 and d.body["spec"]["replicas"] == 3
    assert metrics.calls == [(URL, 'namespace="kafka",pod=~"demo-broker-[0-9]+"', "30s")]
    assert d.bootstraps == ["demo-bootstrap.kafka.svc:9092"]
    kind, reason, message = d.events[0]
    assert (kind, reason) == ("Normal", "ScaleUp")
    assert message.startswith("MetricAboveTarget: bytes in 61.0 KiB/s over 2 brokers = 30.5 KiB/s per broker")
    assert message.endswith("recommended 3, stabilized 3, bounds [2, 4]: 2 → 3 brokers")
    st = d.status
    assert st["lastDecision"]["action"] == "ScaleUp" and st["lastDecision"]["desiredReplicas"] == 3
    assert st["metrics"] == [
        {"name": "bytesInPerBroker", "total": 62464.0, "perBroker": 31232.0, "target": 25600, "ratio": 1.22,
         "replicas": 3}
    ]  # fmt: skip
    assert st["largestReplicationFactor"] == 2
    assert st["operation"]["phase"] == "WaitingForBrokers"
    assert d.condition("AutoscalingActive")[:2] == ("True", "ValidMetrics")
    assert d.condition("AutoscalingLimited")[:2] == ("False", "DesiredWithinRange")
    assert d.condition("AutoscalingProgressing") == (
        "True", "WaitingForBrokers", "scale-out 2 → 3: waiting for brokers 2 to register"
    )  # fmt: skip
    assert cr_errors(d.body) == []

    d.run(1010.0)  # broker 2 not there yet
    assert kafka.submitted == []
    kafka.brokers.append(2)
    d.run(1020.0)
    assert len(kafka.submitted) == 1 and len(kafka.submitted[0]) == 2  # max_in_flight
    assert all(2 in t for t in kafka.submitted[0].values() if t is not None)
    assert d.events[-1][1] == "PartitionsMoving"
    assert d.status["operation"]["phase"] == "MovingPartitions"
    d.run(1025.0)  # both still in flight: nothing new
    assert len(kafka.submitted) == 1
    for t in range(1030, 1200, 10):
        kafka.complete()
        d.run(float(t))
        if "operation" not in d.status:
            break
    assert kafka.held_by(2) == 16 // 3 or kafka.held_by(2) == 16 // 3 + 1
    assert d.events[-1][:2] == ("Normal", "ScalingCompleted")
    assert d.condition("AutoscalingProgressing")[:2] == ("False", "Completed")
    done = report.parse_time(d.status["lastScaleTime"])
    assert done is not None

    metrics.bytes_in = 200 * KIB  # asks for 8, max 4, but the cooldown holds
    d.run(done + 5)
    assert d.body["spec"]["replicas"] == 3
    assert d.status["lastDecision"]["reason"] == "CoolingDown"
    assert d.condition("AutoscalingLimited")[:2] == ("True", "TooManyReplicas")
    assert d.condition("AutoscalingProgressing")[:2] == ("False", "Completed")  # still shows the last one
    d.run(done + 31)
    assert d.body["spec"]["replicas"] == 4 and d.events[-1][1] in ("ScaleUp", "PartitionsMoving")


def test_scale_in_moves_everything_off_the_last_broker_before_lowering_replicas() -> None:
    kafka, metrics = FakeKafka(3, rf2(9, 3)), FakePrometheus()
    d = Driver(cluster({"scaleDown": {"stabilizationWindowSeconds": 60}}, replicas=3), kafka, metrics)
    metrics.bytes_in = 75 * KIB  # exactly 3 brokers' worth
    d.run(0.0)
    metrics.bytes_in = 10 * KIB  # asks for 1 (min 2), but the window remembers 3
    d.run(30.0)
    assert d.status["lastDecision"]["reason"] == "Stabilizing" and d.body["spec"]["replicas"] == 3
    assert d.events[-1][:2] == ("Normal", "AutoscalingDecision")
    d.run(61.0)
    assert d.events[-2][:2] == ("Normal", "ScaleDown") or d.events[-1][:2] == ("Normal", "ScaleDown")
    assert d.body["spec"]["replicas"] == 3  # not yet: broker 2 holds replicas
    assert d.condition("AutoscalingLimited")[:2] == ("True", "TooFewReplicas")
    assert d.status["operation"]["kind"] == "ScaleIn" and d.status["operation"]["targetReplicas"] == 2
    for t in range(70, 300, 10):
        kafka.complete()
        d.run(float(t))
        if d.body["spec"]["replicas"] == 2:
            break
    assert kafka.held_by(2) == 0 and d.body["spec"]["replicas"] == 2
    assert d.status["operation"]["phase"] == "RemovingBrokers"
    d.run(400.0)
    assert "operation" in d.status  # broker 2 still registered
    kafka.brokers.remove(2)
    d.run(410.0)
    assert "operation" not in d.status and d.events[-1][:2] == ("Normal", "ScalingCompleted")
    assert d.events[-1][2] == "scale-in 3 → 2 done"


def test_invalid_config_is_a_condition_and_the_size_stays() -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    d = Driver(cluster({"minReplicas": 5, "maxReplicas": 3}), kafka, metrics)
    metrics.bytes_in = 500 * KIB
    r = d.run(1.0)
    assert r.replicas is None and d.body["spec"]["replicas"] == 2
    status, reason, message = d.condition("AutoscalingActive")
    assert (status, reason) == ("False", "InvalidAutoscalingConfig")
    assert message == "spec.autoscaling.minReplicas must not exceed maxReplicas; the cluster keeps its size"
    assert d.events == [("Warning", "InvalidAutoscalingConfig", message)]
    d.run(2.0)
    assert len(d.events) == 1  # reported once, not every pass
    assert metrics.calls == []


def test_replication_factor_above_max_is_an_invalid_config() -> None:
    kafka, metrics = FakeKafka(3, [("t", 0, (0, 1, 2))]), FakePrometheus()
    d = Driver(cluster({"minReplicas": 1, "maxReplicas": 2}, replicas=3), kafka, metrics)
    r = d.run(1.0)
    assert r.replicas is None
    status, reason, message = d.condition("AutoscalingActive")
    assert (status, reason) == ("False", "InvalidAutoscalingConfig")
    assert message.startswith("maxReplicas 2 is below the largest replication factor 3")


def test_prometheus_failures_are_conditions_and_the_size_stays() -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    d = Driver(cluster(), kafka, metrics)
    metrics.error = PrometheusUnreachable(f"cannot reach Prometheus at {URL}: Connection refused")
    r = d.run(1.0)
    assert r.replicas is None
    assert d.condition("AutoscalingActive") == (
        "False", "PrometheusUnreachable",
        f"cannot reach Prometheus at {URL}: Connection refused; the cluster keeps its size",
    )  # fmt: skip
    assert d.events[-1][:2] == ("Warning", "PrometheusUnreachable")
    metrics.error = MetricNotFound("no series for brook_broker_info{...}")
    d.run(2.0)
    assert d.condition("AutoscalingActive")[:2] == ("False", "MetricNotFound")
    assert d.events[-1][:2] == ("Warning", "MetricNotFound")
    metrics.error = None
    metrics.bytes_in = 50 * KIB
    d.run(3.0)
    assert d.condition("AutoscalingActive")[:2] == ("True", "ValidMetrics")
    assert d.body["spec"]["replicas"] == 2
    assert cr_errors(d.body) == []


def test_kafka_unavailable_is_a_condition() -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    kafka.down = True
    d = Driver(cluster(), kafka, metrics)
    r = d.run(1.0)
    assert r.replicas is None
    assert d.condition("AutoscalingActive")[:2] == ("False", "KafkaUnavailable")


def test_a_restarted_operator_resumes_from_the_status() -> None:
    kafka, metrics = FakeKafka(2, rf2(8, 2)), FakePrometheus()
    d = Driver(cluster({"scaleDown": {"stabilizationWindowSeconds": 600}}), kafka, metrics)
    metrics.bytes_in = 61 * KIB
    d.run(1000.0)
    kafka.brokers.append(2)
    d.run(1010.0, keep_memory=False)  # no memory: the operation is read back from the status
    assert d.status["operation"]["phase"] == "MovingPartitions" and kafka.submitted
    state = report.state_from_status(d.status)
    assert state.operation is not None and state.operation.target == 3
    assert [r.replicas for r in state.history] == [3]
    assert state.history[0].time == 1010.0


def test_refused_moves_are_reported_and_retried() -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    d = Driver(cluster(), kafka, metrics)
    metrics.bytes_in = 61 * KIB
    d.run(1.0)
    kafka.brokers.append(2)
    kafka.refuse = {
        ("load", 0): "INVALID_REPLICATION_ASSIGNMENT",
        ("load", 1): "INVALID_REPLICATION_ASSIGNMENT",
    }
    d.run(2.0)
    assert d.events[-1][:2] == ("Warning", "PartitionMoveFailed")
    assert "INVALID_REPLICATION_ASSIGNMENT" in d.condition("AutoscalingProgressing")[2]
    kafka.refuse = {}
    d.run(3.0)
    assert kafka.moving


def test_disabling_during_an_operation_abandons_it() -> None:
    kafka, metrics = FakeKafka(2, rf2(4, 2)), FakePrometheus()
    d = Driver(cluster(), kafka, metrics)
    metrics.bytes_in = 61 * KIB
    d.run(1.0)
    d.body["spec"]["autoscaling"]["enabled"] = False
    d.run(2.0)
    assert "operation" not in d.status
    status, reason, message = d.condition("AutoscalingActive")
    assert (status, reason) == ("False", "AutoscalingDisabled")
    assert message == "spec.autoscaling.enabled is false; the ScaleOut 2 → 3 was abandoned"
    assert cr_errors(d.body) == []
