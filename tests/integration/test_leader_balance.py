"""auto.leader.rebalance.enable: after a broker comes back, the controller hands it back the
partitions it is the preferred leader of (no ElectLeaders call needed), as Kafka does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster, eventually

pytestmark = [pytest.mark.slow, pytest.mark.needs_cluster]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        tmp_path_factory.mktemp("balance"), extra_args=["--leader-imbalance-check-interval-seconds", "1"]
    )
    c.start()
    try:
        yield c
    finally:
        c.stop()


def partitions(c: Cluster, topic: str) -> list[Any]:
    md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics(topic, timeout=10)
    return [md.topics[topic].partitions[i] for i in sorted(md.topics[topic].partitions)]


def test_leadership_returns_to_the_preferred_replicas(cluster: Cluster, tmp_path: Path) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})  # referenced until the future resolves
    admin.create_topics([NewTopic("spread", 6, 3)])["spread"].result(30)
    eventually(lambda: len(partitions(cluster, "spread")) == 6, 30, "the topic everywhere")
    assert any(p.replicas[0] == 0 for p in partitions(cluster, "spread"))
    cluster.broker(0).stop()  # a clean stop moves its leaderships to the others
    eventually(lambda: all(p.leader != 0 for p in partitions(cluster, "spread")), 30, "leaders off broker 0")
    cluster.broker(0).start()
    eventually(
        lambda: all(p.leader == p.replicas[0] for p in partitions(cluster, "spread")),
        60,
        "every partition led by its preferred replica again",
    )
