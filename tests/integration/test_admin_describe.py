"""Descriptions through real admin clients: authorized operations (KIP-430) of topics, the cluster and
groups, and consumer groups listed by type (ListGroups v5)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient

from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow

TOPIC_OPS = {"READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
CLUSTER_OPS = {"CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER"}
GROUP_OPS = {"READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


def names(ops: list[AclOperation] | None) -> set[str] | None:
    return None if ops is None else {op.name for op in ops}


def test_authorized_operations_when_asked(gbroker: BrokerProcess) -> None:
    a = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    create_topic(gbroker.bootstrap, "ops", 1)
    asked = a.describe_topics(TopicCollection(["ops"]), include_authorized_operations=True)["ops"].result(10)
    assert names(asked.authorized_operations) == TOPIC_OPS
    plain = a.describe_topics(TopicCollection(["ops"]))["ops"].result(10)
    assert not plain.authorized_operations
    cluster = a.describe_cluster(include_authorized_operations=True).result(10)
    assert names(cluster.authorized_operations) == CLUSTER_OPS | {"DESCRIBE"}
    assert not a.describe_cluster().result(10).authorized_operations
    c = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": "ops-group"})
    try:
        c.subscribe(["ops"])
        c.poll(5)
        group = a.describe_consumer_groups(["ops-group"], include_authorized_operations=True)["ops-group"]
        assert names(group.result(10).authorized_operations) == GROUP_OPS
    finally:
        c.close()


def test_list_groups_by_type(gbroker: BrokerProcess) -> None:
    a = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    create_topic(gbroker.bootstrap, "typed", 1)
    c = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": "typed-group"})
    try:
        c.subscribe(["typed"])
        c.poll(5)
        classic = a.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(10)
        listed = {g.group_id: g.type for g in classic.valid}
        assert listed["typed-group"] == ConsumerGroupType.CLASSIC
        consumer = a.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(10)
        assert not consumer.valid  # every group here speaks the classic protocol
    finally:
        c.close()
