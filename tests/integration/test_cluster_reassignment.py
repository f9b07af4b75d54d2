"""Moving a partition's leadership while an idempotent producer keeps writing: nothing lost, nothing
duplicated, order kept, no fatal sequence error from the new leader.

The old leader learns of metadata changes late on purpose (its etcd connection goes through a proxy
that holds etcd's answers back): the controller moves leadership as soon as the old leader's ISR write
lands, while the old leader still sees the ISR it had before that write.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.test_cluster import Acks, create, partition_md
from tests.support.broker import BrokerProcess
from tests.support.cluster import CLUSTER_ARGS, Cluster, eventually
from tests.support.delay_proxy import DelayProxy

pytestmark = pytest.mark.slow

DELAY_S = 1.5  # how late the old leader hears from etcd; the lease TTL below keeps it registered


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Cluster, DelayProxy]]:
    c = Cluster(tmp_path)
    c.etcd.start()
    proxy = DelayProxy(("127.0.0.1", c.etcd.client_port))
    try:
        for node_id in range(3):  # broker 0, first up, is the controller, with a prompt view
            etcd = proxy.endpoint if node_id == 2 else c.etcd.endpoint
            args = ["--node-id", str(node_id), "--etcd-endpoints", etcd, *CLUSTER_ARGS, "--lease-ttl", "6"]
            c.brokers.append(BrokerProcess(tmp_path / f"broker-{node_id}", args=args).start())
        yield c, proxy
    finally:
        proxy.delay_s = 0.0
        c.stop()
        proxy.close()


class Writer:
    """An idempotent producer on a thread, writing m000000, m000001, ... until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acks = Acks()
        self.fatal: list[Any] = []
        self.produced = 0
        self._stop = threading.Event()
        self._p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
                "error_cb": self._on_error,
            }
        )
        self._topic = topic
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal.append(err)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._p.produce(self._topic, f"m{self.produced:06d}".encode(), on_delivery=self.acks)
                self.produced += 1
                self._p.poll(0.002)
        except KafkaException as e:  # a fatal error fails every produce() after it
            self.fatal.append(e)

    def acked(self) -> int:
        return len(self.acks.ok)

    def wait_for_more(self, n: int, what: str) -> None:
        start = self.acked()
        eventually(lambda: self.fatal or self.acked() >= start + n, 30, what)
        assert not self.fatal, self.fatal

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        left = self._p.flush(60)
        assert left == 0, f"{left} records still unacknowledged after 60 s; fatal errors: {self.fatal}"
        del self._p  # no reconnect attempts to brokers the fixture stops


def read_in_offset_order(bootstrap: str, topic: str) -> list[bytes]:
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic()}"})
    end = cons.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    cons.assign([TopicPartition(topic, 0, 0)])
    got: dict[int, bytes] = {}
    deadline = time.monotonic() + 30
    try:
        while len(got) < end and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got[m.offset()] = m.value()
    finally:
        cons.close()
    assert len(got) == end, f"read {len(got)} of {end} records"
    return [got[o] for o in sorted(got)]


def move(c: Cluster, topic: str, replicas: list[int]) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
    try:
        admin.alter_partition_reassignments({KTP(topic, 0): replicas})
        eventually(
            lambda: (md := partition_md(c, topic)).replicas == replicas and md.leader == replicas[0],
            40,
            f"{topic}-0 to move to {replicas}",
        )
        eventually(lambda: not admin.list_partition_reassignments(), 20, "the reassignment to finish")
    finally:
        admin.close()


def test_leadership_moves_under_an_idempotent_producer_lose_and_reorder_nothing(
    cluster: tuple[Cluster, DelayProxy],
) -> None:
    c, proxy = cluster
    assert AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(timeout=10).controller_id == 0
    create(c, "moving", 1, 1)
    if partition_md(c, "moving").replicas != [2]:
        move(c, "moving", [2])  # the leader whose view lags
    w = Writer(c.bootstrap, "moving")
    try:
        w.wait_for_more(300, "records before the moves")
        proxy.delay_s = DELAY_S
        move(c, "moving", [1])  # broker 2 hands over while it still sees its old ISR
        proxy.delay_s = 0.0
        w.wait_for_more(200, "production to go on at broker 1")
        move(c, "moving", [0, 1])  # a second replica, then the preferred leader 0 takes over
        w.wait_for_more(200, "production to go on at broker 0")
    finally:
        w.stop()
    assert not w.fatal, w.fatal
    assert not w.acks.errors, w.acks.errors
    expected = [f"m{i:06d}".encode() for i in range(w.produced)]
    assert sorted(v for *_, v in w.acks.ok) == expected, "every record acknowledged once"
    assert read_in_offset_order(c.bootstrap, "moving") == expected, "the log holds each once, in order"
