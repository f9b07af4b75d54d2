"""The broker autoscaler against real brokers, a real Prometheus and real clients.

A real cluster (etcd + `brook broker` processes) is scraped every second by Prometheus (Debian package
`prometheus`, on a free loopback port, targets from a file so brokers can come and go). The autoscaler's
pass (brook_operator.autoscaling.flow) runs with the real Prometheus client and the real Kafka admin;
what the operator would do through Kubernetes (set spec.replicas → the StatefulSet starts or stops the
highest-ordinal broker) the test does itself:

- a producer above the bytes-in target → the pass decides 2 → 3 brokers, with the numbers of what the
  producer sent; the third broker starts; partitions move onto it (throttled reassignments, a few at a
  time) until balanced; the consumers keep reading;
- the load stops → after the scale-down window the pass moves every replica off broker 2 and only then
  lowers spec.replicas; broker 2 stops; no acknowledged record is lost.

Also: the consumer-lag metric the HPA example scales on (prometheus-adapter's query over the recording
rule) equals the lag the group's real offsets give, and failures (no Prometheus, a Prometheus that does
not scrape Brook, a broken selector) have their reasons.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brook_operator import prometheus as prom
from brook_operator.autoscaling.flow import AutoscaleSettings, PassResult, autoscale
from brook_operator.autoscaling.planner import Assignment, is_balanced, replica_counts
from brook_operator.autoscaling.report import State
from brook_operator.facts import ClusterSnapshot
from brook_operator.kafka_admin import AdminPool
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually
from tests.support.ports import free_port
from tests.support.prometheus import Prometheus

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "services" / "brook" / "observability" / "assets" / "alerts.yaml"
EXAMPLES = REPO / "manifests" / "examples" / "autoscaling"
KIB = 1024
RECORD = 1024  # bytes of value per record
RATE = 45  # records/s: ~45 KiB/s of payload, ~49 KiB/s on the wire (batch headers)
TARGET = 20 * KIB  # bytes in per broker: the load asks for ceil(49 / 20) = 3 brokers


def create_topic(bootstrap: str, name: str, partitions: int, rf: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result
    admin.create_topics([NewTopic(name, partitions, rf)])[name].result(20)


def metrics_port(b: BrokerProcess) -> int:
    found = re.findall(r"metrics and health on http://[^:]+:(\d+)", b.log_path.read_text())
    assert found, f"no metrics line in {b.log_path}"
    return int(found[-1])


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    p = Prometheus(tmp_path / "prometheus", [ALERTS])
    try:
        yield p
    finally:
        p.stop()


def admin_is(admin: Any) -> Callable[[Any], Awaitable[Any]]:
    """autoscale's `admin_of`: this admin whatever the spec (the test knows its one cluster)."""

    async def of(spec: Any) -> Any:
        return admin

    return of


class Load:
    """A producer at a fixed record rate (acks=all, idempotent); remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.acked: dict[int, float] = {}  # record number → ack time
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def start(self) -> Load:
        self._thread.start()
        return self

    def _ack(self, err: Any, msg: Any) -> None:
        with self._lock:
            if err is not None:
                self.errors.append(str(err))
            else:
                self.acked[int(msg.value()[:8])] = time.monotonic()

    def _run(self) -> None:
        p = Producer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5}
        )
        i, t = 0, time.monotonic()
        while not self._stop.is_set():
            p.produce(self.topic, f"{i:08d}".encode() + b"x" * (RECORD - 8), on_delivery=self._ack)
            i += 1
            t += 1 / self.rate
            p.poll(0)
            time.sleep(max(0.0, t - time.monotonic()))  # poll() returns early on a delivery report
        p.flush(60)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def bytes_per_second(self, seconds: float) -> float:
        """Payload bytes acknowledged per second over the last `seconds`."""
        now = time.monotonic()
        with self._lock:
            n = sum(1 for t in self.acked.values() if t >= now - seconds)
        return n * RECORD / seconds


class Reader:
    """A consumer in a group, reading on its own thread (auto-commit) while the cluster changes."""

    def __init__(self, bootstrap: str, topic: str, group: str) -> None:
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._c = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                "fetch.queue.backoff.ms": 10,
            }
        )
        self._c.subscribe([topic])
        self._thread = threading.Thread(target=self._run, name="reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self._c.poll(0.2)
            if m is not None and m.error() is None:
                self.seen.add(int(m.value()[:8]))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._c.close()


def body(url: str, replicas: int, **autoscaling: Any) -> dict[str, Any]:
    a: dict[str, Any] = {
        "enabled": True,
        "minReplicas": 2,
        "maxReplicas": 4,
        "prometheusUrl": url,
        "targets": {"bytesInPerBroker": TARGET},
        "scaleUp": {"stabilizationWindowSeconds": 3},
        "scaleDown": {"stabilizationWindowSeconds": 8},
        "cooldownSeconds": 5,
    }
    a.update(autoscaling)
    return {
        "apiVersion": "brook.dev/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": "auto", "namespace": "test", "uid": "u", "generation": 1},
        "spec": {"replicas": replicas, "etcd": {"endpoints": ["http://127.0.0.1:2379"]}, "autoscaling": a},
    }


async def load_from(
    url: str, selector: str, *, bytes_in: bool, partitions: bool, window: str
) -> prom.BrokerLoad:
    return await prom.broker_load(
        prom.Prometheus(url, timeout=5), selector, bytes_in=bytes_in, partitions=partitions, window=window
    )


class Autoscaler:
    """Runs passes like the kopf timer; `on_replicas` plays the StatefulSet for spec.replicas changes."""

    def __init__(self, b: dict[str, Any], bootstrap: str, on_replicas: Callable[[int, int], None]) -> None:
        self.body = b
        self.bootstrap = bootstrap
        self.pool = AdminPool(10)
        self.state: State | None = None
        self.events: list[tuple[str, str, str]] = []
        self.on_replicas = on_replicas
        self.settings = AutoscaleSettings(selector='job="brook"', rate_window="10s", max_in_flight=4)

    def run(self) -> PassResult:
        r = asyncio.run(
            autoscale(
                self.body,
                state=self.state,
                admin_of=admin_is(self.pool.get(self.bootstrap)),
                load=load_from,
                settings=self.settings,
                now=time.time(),
            )
        )
        self.state = r.state
        if r.status is not None:
            self.body.setdefault("status", {})["autoscaling"] = {
                k: v for k, v in r.status.items() if v is not None
            }
        self.events += [(e.type, e.reason, e.message) for e in r.events]
        if r.replicas is not None:
            before = self.body["spec"]["replicas"]
            self.body["spec"]["replicas"] = r.replicas
            self.on_replicas(before, r.replicas)
        return r

    def until(self, what: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.run()
            if check():
                return
            time.sleep(1.0)
        raise AssertionError(
            f"{what} within {timeout}s; status: {json.dumps(self.status, indent=1)}; events: {self.events}"
        )

    @property
    def status(self) -> dict[str, Any]:
        s: dict[str, Any] = self.body.get("status", {}).get("autoscaling", {})
        return s

    def snapshot(self) -> ClusterSnapshot:
        return asyncio.run(self.pool.get(self.bootstrap).snapshot())

    def close(self) -> None:
        self.pool.forget(self.bootstrap)


def assignments(snap: ClusterSnapshot) -> list[Assignment]:
    return [Assignment(p.topic, p.partition, p.replicas) for p in snap.partitions]


@pytest.mark.timeout(180)
def test_scale_out_under_load_then_scale_in_when_it_stops(tmp_path: Path, prometheus: Prometheus) -> None:
    started = time.monotonic()
    cluster = Cluster(
        tmp_path / "cluster",
        brokers=2,
        extra_args=[
            "--default-replication-factor", "2",
            "--offsets-topic-replication-factor", "2",
            "--replication-throttled-rate", "4000000",  # reassignment copies are throttled (4 MB/s)
        ],
    ).start()  # fmt: skip
    load: Load | None = None
    reader: Reader | None = None
    scaler: Autoscaler | None = None
    try:
        targets = {b.args[1]: f"127.0.0.1:{metrics_port(b)}" for b in cluster.brokers}
        prometheus.set_targets(sorted(targets.values()))
        bootstrap = cluster.bootstrap  # brokers 0 and 1 stay throughout
        create_topic(bootstrap, "load", 6, 2)

        def statefulset(before: int, after: int) -> None:
            """What the operator's reconcile and the StatefulSet do with spec.replicas."""
            if after > before:
                for i in range(before, after):
                    b = cluster.add_broker(i)
                    targets[str(i)] = f"127.0.0.1:{metrics_port(b)}"
            else:
                for i in range(after, before):
                    assert scaler is not None
                    held = [
                        p for p in scaler.snapshot().partitions if i in p.replicas
                    ]  # the scale-down guard
                    assert not held, f"spec.replicas lowered while broker {i} holds {held}"
                    cluster.broker(i).stop()
                    del targets[str(i)]
            prometheus.set_targets(sorted(targets.values()))

        scaler = Autoscaler(body(prometheus.url, 2), bootstrap, statefulset)
        load = Load(bootstrap, "load", RATE).start()
        reader = Reader(bootstrap, "load", "autoscale-consumers")

        # 1. Above the target: the decision 2 → 3, with the numbers of what the producer did.
        scaler.until("a scale-up decision", lambda: any(e[1] == "ScaleUp" for e in scaler.events), 45)
        decision = scaler.status["lastDecision"]
        assert (decision["action"], decision["reason"]) == ("ScaleUp", "MetricAboveTarget"), decision
        assert (decision["currentReplicas"], decision["desiredReplicas"]) == (2, 3), decision
        (m,) = scaler.status["metrics"]
        # The measured rate is what asks for 3 brokers (ceil(total / target) == 3).
        assert 2 * TARGET < m["total"] <= 3 * TARGET, m
        assert m["perBroker"] == pytest.approx(m["total"] / 2, rel=1e-3) and m["target"] == TARGET

        # What Prometheus has is what the producer sent: compared as totals (a rate over a window
        # measured at another moment would depend on how evenly a loaded machine paces the producer).
        # Payload plus the record-batch framing, a few percent at 1 KiB records; a scrape lags by ~1 s.
        def totals_match() -> tuple[float, int] | None:
            scraped = prometheus.query('sum(brook_broker_bytes_in_total{topic="load"})')
            total, sent = (float(scraped[0]["value"][1]) if scraped else 0.0), len(load.acked) * RECORD
            return (total, sent) if 0 < 0.9 * sent <= total <= 1.35 * sent else None

        eventually(totals_match, 30, "Prometheus' bytes in to match what was acknowledged")
        assert m["replicas"] == 3
        assert scaler.body["spec"]["replicas"] == 3 and len(cluster.brokers) == 3
        t_decided = time.monotonic() - started

        # 2. The new broker registers; partitions move onto it until balanced; consumers keep reading.
        scaler.until(
            "the scale-out to finish",
            lambda: (
                "operation" not in scaler.status and any(e[1] == "ScalingCompleted" for e in scaler.events)
            ),
            60,
        )
        snap = scaler.snapshot()
        counts = replica_counts(assignments(snap), range(3))
        assert is_balanced(assignments(snap), range(3)), counts
        assert counts[2] >= sum(counts.values()) // 3, counts
        assert any(p.leader == 2 for p in snap.partitions if p.topic == "load"), (
            "broker 2 leads some of `load`"
        )
        assert asyncio.run(scaler.pool.get(bootstrap).list_reassignments()) == {}
        assert any(e[1] == "PartitionsMoving" for e in scaler.events)
        n = len(reader.seen)
        eventually(lambda: len(reader.seen) > n + 2 * RATE, 20, "the consumers to keep reading")
        # brook_partitions per broker (Prometheus) is the replica count the Metadata gives.
        eventually(
            lambda: (
                asyncio.run(
                    load_from(prometheus.url, 'job="brook"', bytes_in=False, partitions=True, window="10s")
                ).partitions
                == {b: float(c) for b, c in replica_counts(assignments(scaler.snapshot()), range(3)).items()}
            ),
            15,
            "brook_partitions to match the Metadata",
        )
        t_scaled_out = time.monotonic() - started

        # 3. The load stops: after the scale-down window, everything moves off broker 2, then it goes.
        load.stop()
        assert not load.errors, load.errors[:3]
        scaler.until(
            "the scale-in to finish",
            lambda: scaler.body["spec"]["replicas"] == 2 and "operation" not in scaler.status,
            70,
        )
        down = [e for e in scaler.events if e[1] == "ScaleDown"]
        assert len(down) == 1 and "3 → 2 brokers" in down[0][2], scaler.events
        assert scaler.status["lastDecision"]["minReplicas"] == 2
        snap = scaler.snapshot()
        assert snap.broker_ids == (0, 1)
        assert all(set(p.replicas) <= {0, 1} for p in snap.partitions)
        assert scaler.status["conditions"][0]["reason"] == "ValidMetrics"
        # The admin's reassignment calls answer per partition with the broker's error names.
        answers = asyncio.run(
            scaler.pool.get(bootstrap).alter_reassignments({("load", 0): [0, 7], ("load", 1): None})
        )
        assert answers == {
            ("load", 0): "INVALID_REPLICATION_ASSIGNMENT",  # broker 7 is not live
            ("load", 1): "NO_REASSIGNMENT_IN_PROGRESS",  # nothing to cancel
        }
        t_scaled_in = time.monotonic() - started

        # 4. No acknowledged record is lost; the group read them all through both moves.
        acked = set(load.acked)
        eventually(lambda: reader.seen >= acked, 30, "the group to read every acknowledged record")
        fresh = Reader(bootstrap, "load", "autoscale-audit")
        try:
            eventually(lambda: fresh.seen >= acked, 30, "a fresh reader to find every acknowledged record")
        finally:
            fresh.stop()
        print(
            f"\ntimings: decided {t_decided:.1f}s, scaled out {t_scaled_out:.1f}s, "
            f"scaled in {t_scaled_in:.1f}s, {len(acked)} records; events: {[e[1] for e in scaler.events]}"
        )
    finally:
        if load is not None and load._thread.is_alive():
            load.stop()
        if reader is not None:
            reader.stop()
        if scaler is not None:
            scaler.close()
        cluster.stop()


def adapter_query(group: str) -> str:
    """The HPA example's external metric as prometheus-adapter asks Prometheus for it."""
    values = yaml.safe_load((EXAMPLES / "prometheus-adapter-values.yaml").read_text())
    (rule,) = values["rules"]["external"]
    series = rule["seriesQuery"].split("{")[0]
    return (
        rule["metricsQuery"].replace("<<.Series>>", series).replace("<<.LabelMatchers>>", f'group="{group}"')
    )


@pytest.mark.timeout(90)
def test_the_consumer_lag_metric_is_the_lag_of_the_real_group(
    broker: BrokerProcess, prometheus: Prometheus
) -> None:
    """What the HPA example scales on equals what KEDA's Kafka scaler computes from the brokers: log
    end (ListOffsets) minus the committed offset (OffsetFetch), summed over the partitions."""
    prometheus.set_targets([f"127.0.0.1:{metrics_port(broker)}"])
    create_topic(broker.bootstrap, "lagged", 3, 1)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(300):
        p.produce("lagged", str(i).encode(), partition=i % 3)
    p.flush(20)
    c = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "lag-check", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition("lagged", i, 0) for i in range(3)])
        got = 0
        deadline = time.monotonic() + 20
        while got < 120 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None and m.offset() < 40:
                c.commit(m, asynchronous=False)
                got += 1
        # The lag as KEDA computes it, from the brokers.
        committed = c.committed([TopicPartition("lagged", i) for i in range(3)], timeout=10)
        lag = sum(c.get_watermark_offsets(tp, timeout=10)[1] - tp.offset for tp in committed)
        assert lag == 300 - 3 * 40
        q = adapter_query("lag-check")
        eventually(
            lambda: prometheus.query(q) and float(prometheus.query(q)[0]["value"][1]) == lag,
            30,
            f"{q} = {lag}",
        )
        (series,) = prometheus.query(q)
        assert series["metric"] == {"group": "lag-check"}
    finally:
        c.close()


@pytest.mark.timeout(60)
def test_failures_have_their_reasons_and_the_cluster_keeps_its_size(
    tmp_path: Path, prometheus: Prometheus
) -> None:
    """No Prometheus; a Prometheus that scrapes nothing of Brook; a selector it refuses."""

    class NoKafka:
        async def snapshot(self) -> ClusterSnapshot:
            return ClusterSnapshot("c", 0, (), ())

        async def list_reassignments(self) -> dict[Any, Any]:
            return {}

        async def alter_reassignments(self, targets: Any) -> dict[Any, Any]:
            raise AssertionError("no moves expected")

    def one_pass(url: str, selector: str = 'job="brook"') -> dict[str, Any]:
        r = asyncio.run(
            autoscale(
                body(url, 3),
                state=None,
                admin_of=admin_is(NoKafka()),
                load=load_from,
                settings=AutoscaleSettings(selector=selector),
                now=time.time(),
            )
        )
        assert r.replicas is None  # the cluster keeps its size
        assert r.status is not None
        (active,) = [c for c in r.status["conditions"] if c["type"] == "AutoscalingActive"]
        assert [e.reason for e in r.events] == [active["reason"]]
        return active

    c = one_pass(f"http://127.0.0.1:{free_port()}")
    assert (c["status"], c["reason"]) == ("False", "PrometheusUnreachable")
    c = one_pass(prometheus.url)  # scrapes no broker
    assert (c["status"], c["reason"]) == ("False", "MetricNotFound")
    assert 'no series for brook_broker_info{job="brook"}' in c["message"]
    c = one_pass(prometheus.url, selector='job=~"(brook"')  # an invalid regular expression
    assert (c["status"], c["reason"]) == ("False", "QueryFailed")
    assert "bad_data" in c["message"]
    c = one_pass(prometheus.url + "/not-prometheus")
    assert (c["status"], c["reason"]) == ("False", "QueryFailed")
