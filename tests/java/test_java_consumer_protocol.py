"""Apache Kafka's Java consumer 4.4 with the consumer group protocol (KIP-848, `group.protocol=consumer`)
against Brook: two members split a topic, consume every record once, commit, and the group describes
as a consumer group; a classic member and a consumer-protocol one share a group while it migrates
and back; in a cluster, they go on across a kill -9 of the group's coordinator."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.test_cluster import create as create_replicated
from tests.integration.test_consumer_protocol_failover import ARGS as FAILOVER_ARGS
from tests.integration.test_consumer_protocol_failover import GROUP, coordinator, described
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.jvm import JavaClients

from .test_java_consumer import consumer, poll_until, produce
from .test_java_producer import create

pytestmark = pytest.mark.slow


def test_two_members_split_consume_and_commit(jbroker: BrokerProcess, java: JavaClients) -> None:
    topic, group = "kip848", "g-kip848"
    create(java, jbroker.bootstrap, topic, partitions=6)
    sent = produce(java, jbroker.bootstrap, topic, 120)
    assert len(sent) == 120, sent
    new = {"group.protocol": "consumer"}
    consumer(java, "c1", jbroker.bootstrap, group, **new)
    java.call("subscribe", name="c1", topics=[topic])
    # The records of the poll that brought the assignment count too: dropping them once left the
    # loop below waiting 300 s for records already read.
    first = poll_until(java, ["c1"], lambda: len(java.call("assignment", name="c1")) == 6)
    deadline = time.monotonic() + 60
    while len(first[0]) < 120:
        assert time.monotonic() < deadline, (len(first[0]), java.call("assignment", name="c1"))
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


@pytest.mark.parametrize("classic_assignor", ["RangeAssignor", "CooperativeStickyAssignor"])
def test_a_classic_member_migrates_with_its_group(
    jbroker: BrokerProcess, java: JavaClients, classic_assignor: str
) -> None:
    """A Java consumer of the classic protocol owns the group; a consumer-protocol member joins (the
    group becomes a consumer group, the classic member gives up half its partitions through
    JoinGroup/SyncGroup), reads the new records, and leaves (a classic group again, the classic
    member back to every partition). Each record is read once."""
    topic, group = f"migrate-{classic_assignor}", f"g-migrate-{classic_assignor}"
    create(java, jbroker.bootstrap, topic, partitions=6)
    produce(java, jbroker.bootstrap, topic, 60)
    strategy = f"org.apache.kafka.clients.consumer.{classic_assignor}"
    consumer(java, "old", jbroker.bootstrap, group, **{"partition.assignment.strategy": strategy})
    java.call("subscribe", name="old", topics=[topic])
    read = poll_until(java, ["old"], lambda: len(java.call("assignment", name="old")) == 6)[0]
    while len(read) < 60:
        read += poll_until(java, ["old"], lambda: True)[0]
    java.call("commit_sync", name="old")
    java.call("admin", name="a", config={"bootstrap.servers": jbroker.bootstrap})

    def group_type() -> str:
        return str(java.call("describe_groups", name="a", groups=[group])[group]["type"])

    assert group_type() == "CLASSIC"
    consumer(java, "new", jbroker.bootstrap, group, **{"group.protocol": "consumer"})
    java.call("subscribe", name="new", topics=[topic])

    def split() -> bool:
        a1, a2 = java.call("assignment", name="old"), java.call("assignment", name="new")
        return len(a1) == 3 and len(a2) == 3 and not set(a1) & set(a2)

    got = poll_until(java, ["old", "new"], split)
    assert group_type() == "CONSUMER"
    produce(java, jbroker.bootstrap, topic, 60)
    later: list[list[object]] = [[], []]
    while len(later[0]) + len(later[1]) < 60:
        more = poll_until(java, ["old", "new"], lambda: True)
        later = [later[0] + more[0], later[1] + more[1]]
    assert later[0] and later[1], "both members read records while they shared the group"
    java.call("commit_sync", name="old")
    java.call("commit_sync", name="new")
    java.call("close", name="new")
    poll_until(java, ["old"], lambda: len(java.call("assignment", name="old")) == 6)
    assert group_type() == "CLASSIC"
    records = read + got[0] + got[1] + later[0] + later[1]
    assert len(records) == 120, len(records)  # none read twice
    java.call("commit_sync", name="old")
    assert sum(java.call("list_group_offsets", name="a", group=group).values()) == 120
    java.call("close", name="old")


def test_members_go_on_after_a_coordinator_kill_9(tmp_path: Path, java: JavaClients) -> None:
    """Java consumers of one group in a 3-broker cluster: the group's coordinator is killed with
    SIGKILL; the broker that takes over replays the group from __consumer_offsets, so the members
    keep their epochs and partitions (none lost) and no committed record is read again."""
    c = Cluster(tmp_path / "cluster", extra_args=FAILOVER_ARGS).start()
    try:
        topic = "kip848-failover"
        create_replicated(c, topic, 6, 3, {"min.insync.replicas": "2"})
        produce(java, c.bootstrap, topic, 300)
        for name in ("c1", "c2"):
            consumer(java, name, c.bootstrap, GROUP, **{"group.protocol": "consumer"})
            java.call("subscribe", name=name, topics=[topic])
        read: list[tuple[int, int]] = []

        def consume_until(done: Callable[[], bool], what: str) -> None:
            deadline = time.monotonic() + 120
            while not done():
                assert time.monotonic() < deadline, f"timed out waiting for {what}; read {len(set(read))}"
                for name in ("c1", "c2"):
                    got = java.call("poll", name=name, count=1_000_000, timeout_ms=200)
                    read.extend((r["partition"], r["offset"]) for r in got)
                    java.call("commit_sync", name=name)  # what was read is committed before more is

        def split() -> bool:
            a1, a2 = java.call("assignment", name="c1"), java.call("assignment", name="c2")
            return len(a1) == 3 and len(a2) == 3 and not set(a1) & set(a2)

        consume_until(lambda: split() and len(read) >= 300, "two members with 3 partitions each")
        before = described(c)
        killed = coordinator(c)
        c.broker(killed).kill()
        produce(java, c.bootstrap, topic, 300)
        consume_until(lambda: len(set(read)) >= 600, "every record after the kill")
        after = described(c)
        assert coordinator(c) != killed
        events = [e for name in ("c1", "c2") for e in java.call("events", name=name)]
    finally:
        c.stop()
    assert not [e for e in events if e["event"] == "lost"], events
    assert after["group_epoch"] >= before["group_epoch"] >= 3, (before, after)
    epochs = {m["member_id"]: m["member_epoch"] for m in before["members"]}
    assert {m["member_id"]: m["member_epoch"] for m in after["members"]} == epochs, (before, after)
    assert len(read) == len(set(read)) == 600, f"{len(read) - len(set(read))} records read twice"
