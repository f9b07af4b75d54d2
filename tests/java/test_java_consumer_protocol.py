"""Apache Kafka's Java consumer 4.4 with the consumer group protocol (KIP-848, `group.protocol=consumer`)
against a Brook broker: two members split a topic, consume every record once, commit, and the group
describes as a consumer group."""

from __future__ import annotations

import pytest

from tests.support.broker import BrokerProcess
from tests.support.jvm import JavaClients

from .test_java_consumer import consumer, poll_until, produce
from .test_java_producer import create

pytestmark = pytest.mark.slow


def test_two_members_split_consume_and_commit(jbroker: BrokerProcess, java: JavaClients) -> None:
    topic, group = "kip848", "g-kip848"
    create(java, jbroker.bootstrap, topic, partitions=6)
    produce(java, jbroker.bootstrap, topic, 120)
    new = {"group.protocol": "consumer"}
    consumer(java, "c1", jbroker.bootstrap, group, **new)
    java.call("subscribe", name="c1", topics=[topic])
    first: list[list[object]] = [[]]
    poll_until(java, ["c1"], lambda: len(java.call("assignment", name="c1")) == 6)
    first = poll_until(java, ["c1"], lambda: True)
    while len(first[0]) < 120:
        first[0] += poll_until(java, ["c1"], lambda: True)[0]
    java.call("commit_sync", name="c1")  # c2 starts where c1 left off: each record read once
    consumer(java, "c2", jbroker.bootstrap, group, **new)
    java.call("subscribe", name="c2", topics=[topic])

    def split() -> bool:
        a1, a2 = java.call("assignment", name="c1"), java.call("assignment", name="c2")
        return len(a1) == 3 and len(a2) == 3 and not set(a1) & set(a2)

    got = poll_until(java, ["c1", "c2"], split)
    records = first[0] + got[0] + got[1]
    assert len(records) == 120, len(records)
    java.call("commit_sync", name="c1")
    java.call("commit_sync", name="c2")
    java.call("admin", name="a", config={"bootstrap.servers": jbroker.bootstrap})
    desc = java.call("describe_groups", name="a", groups=[group])[group]
    assert desc["type"] == "CONSUMER" and desc["groupState"] == "STABLE", desc
    assert desc["partitionAssignor"] == "uniform" and len(desc["members"]) == 2, desc
    offsets = java.call("list_group_offsets", name="a", group=group)
    assert sum(offsets.values()) == 120, offsets
    java.call("close", name="c2")
    poll_until(java, ["c1"], lambda: len(java.call("assignment", name="c1")) == 6)
