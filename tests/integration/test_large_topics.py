"""A topic of a thousand partitions on 3 brokers (2-second leases, as every cluster test): opening its
logs takes each broker seconds, which must not stop its event loop, or its etcd lease lapses and the
cluster takes it for dead in the middle of the creation."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster

pytestmark = pytest.mark.slow

PARTITIONS = 1200


def test_creating_a_large_topic_keeps_every_broker_registered(tmp_path: Path) -> None:
    c = Cluster(tmp_path).start()
    try:
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        a.create_topics([NewTopic("large", PARTITIONS, 3)])["large"].result(120)
        deadline = time.monotonic() + 120
        while True:
            parts = a.list_topics("large", timeout=30).topics["large"].partitions
            whole = [p for p in parts.values() if p.leader >= 0 and len(p.isrs) == 3]
            if len(whole) == PARTITIONS or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert len(whole) == PARTITIONS, f"{len(whole)} of {PARTITIONS} with a leader and 3 replicas in sync"
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "linger.ms": 50})
        for i in range(0, PARTITIONS, 7):
            p.produce("large", b"x", partition=i)
        assert p.flush(120) == 0
        for b in c.brokers:
            text = b.log_text()
            assert "etcd lease" not in text or " lost: " not in text, b.log_path
            assert text.count(" registered (epoch ") == 1, b.log_path  # never lapsed and re-registered
    finally:
        c.stop()
