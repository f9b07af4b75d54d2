"""Manual replica assignments in CreateTopics and CreatePartitions, through a real admin client: used as
given, or refused with Kafka's errors."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.integration.test_cluster import cluster  # noqa: F401 (fixture)
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster

pytestmark = pytest.mark.slow


def replicas(a: AdminClient, topic: str) -> list[list[int]]:
    parts = a.list_topics(topic, timeout=10).topics[topic].partitions
    return [list(parts[i].replicas) for i in sorted(parts)]


def refused(future: object) -> str:
    with pytest.raises(KafkaException) as e:
        future.result(10)  # type: ignore[attr-defined]
    return str(e.value.args[0].name())


def test_manual_assignments_in_a_cluster(cluster: Cluster) -> None:  # noqa: F811
    a = AdminClient({"bootstrap.servers": cluster.bootstrap})
    a.create_topics([NewTopic("manual", 3, -1, replica_assignment=[[2, 1, 0], [0, 1, 2], [1, 2, 0]])])[
        "manual"
    ].result(20)
    assert replicas(a, "manual") == [[2, 1, 0], [0, 1, 2], [1, 2, 0]]
    a.create_partitions([NewPartitions("manual", 5, replica_assignment=[[2, 0, 1], [0, 2, 1]])])[
        "manual"
    ].result(20)
    assert replicas(a, "manual")[3:] == [[2, 0, 1], [0, 2, 1]]
    for bad in ([[0, 9]], [[0, 0]], [[0, 1], [2]]):
        assert refused(a.create_topics([NewTopic("bad", len(bad), -1, replica_assignment=bad)])["bad"]) == (
            "INVALID_REPLICA_ASSIGNMENT"
        )
    assert refused(
        a.create_partitions([NewPartitions("manual", 6, replica_assignment=[[0, 1]])])["manual"]
    ) == (
        "INVALID_REPLICA_ASSIGNMENT"  # three replicas per partition in this topic
    )


def test_manual_assignment_on_a_single_node(broker: BrokerProcess) -> None:
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    a.create_topics([NewTopic("single-manual", 2, -1, replica_assignment=[[0], [0]])])[
        "single-manual"
    ].result(10)
    assert replicas(a, "single-manual") == [[0], [0]]
    assert refused(
        a.create_topics([NewTopic("elsewhere", 1, -1, replica_assignment=[[1]])])["elsewhere"]
    ) == ("INVALID_REPLICA_ASSIGNMENT")
