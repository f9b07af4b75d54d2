"""A consumer-protocol (KIP-848) group outlives its coordinator: in a 3-broker cluster, the
coordinator is killed with SIGKILL while records flow; the broker that takes over its partition of
`__consumer_offsets` replays the group's records, so the members go on with their epochs and
partitions (nothing lost, nothing fenced) and no committed record is read twice."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from brook.protocol.versions import ApiKey
from tests.integration.test_cluster import create
from tests.integration.test_consumer_protocol import end_offsets
from tests.support.cluster import Cluster, eventually
from tests.support.consumer_member import ConsumerMember
from tests.support.differential import Wire

pytestmark = pytest.mark.slow

GROUP, TOPIC, PARTS = "GF", "F", 6
ARGS = ["--group-consumer-heartbeat-interval-ms", "300", "--group-consumer-session-timeout-ms", "30000"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, extra_args=ARGS).start()
    try:
        yield c
    finally:
        c.stop()


def coordinator(c: Cluster) -> int:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    return int(admin.describe_consumer_groups([GROUP])[GROUP].result(timeout=20).coordinator.id)


def described(c: Cluster) -> dict[str, Any]:
    """ConsumerGroupDescribe from the group's coordinator, as it answers it."""
    with Wire(c.broker(coordinator(c)).bootstrap) as w:
        answer = w.send(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]}, normalize=False)
    assert isinstance(answer, dict)
    group: dict[str, Any] = answer["groups"][0]
    assert group["error_code"] == 0, group
    return group


def test_group_survives_a_coordinator_kill_9_under_load(cluster: Cluster) -> None:
    create(cluster, TOPIC, PARTS, 3, {"min.insync.replicas": "2"})
    stop = threading.Event()

    def producer() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 5, "acks": "all"})
        i = 0
        while not stop.is_set():
            p.produce(TOPIC, f"v{i}".encode(), partition=i % PARTS)
            i += 1
            if i % 30 == 0:
                p.poll(0)
                time.sleep(0.05)
        assert p.flush(60) == 0

    t = threading.Thread(target=producer, daemon=True)
    t.start()
    members = [ConsumerMember(cluster.bootstrap, GROUP, TOPIC) for _ in range(2)]
    try:
        eventually(lambda: sorted(len(m.assigned) for m in members) == [3, 3], 60, "two members with 3 each")
        # A third member comes and goes: the epoch is past what two members joining anew would give.
        extra = ConsumerMember(cluster.bootstrap, GROUP, TOPIC)
        eventually(lambda: len(extra.assigned) == 2, 60, "the third member's share")
        extra.close()
        eventually(lambda: sorted(len(m.assigned) for m in members) == [3, 3], 60, "the two members again")
        eventually(lambda: all(len(m.records) > 50 for m in members), 60, "records read by both")
        before = described(cluster)
        assert before["group_state"] == "Stable"
        killed = coordinator(cluster)
        cluster.broker(killed).kill()

        def taken_over() -> bool:
            return coordinator(cluster) != killed

        eventually(taken_over, 60, "another broker to coordinate the group")
        read_at_kill = [len(m.records) for m in members]
        eventually(
            lambda: all(len(m.records) > n + 50 for m, n in zip(members, read_at_kill, strict=True)),
            90,
            "both members to read on after the kill",
        )
        after = described(cluster)
        stop.set()
        t.join(60)
        ends = end_offsets(cluster.bootstrap, TOPIC, PARTS)
        every = {(p, o) for p, end in ends.items() for o in range(end)}
        eventually(
            lambda: every <= {r for m in [*members, extra] for r in m.records}, 90, "every record read"
        )
    finally:
        stop.set()
        for m in members:
            m.kill()
    # The group was replayed, not rebuilt: its epoch went on and each member kept its own epoch
    # (two members joining a new group would have started over at a smaller one).
    assert after["group_epoch"] >= before["group_epoch"], (before["group_epoch"], after["group_epoch"])
    epochs = {m["member_id"]: m["member_epoch"] for m in before["members"]}
    assert {m["member_id"] for m in after["members"]} == set(epochs)
    assert all(m["member_epoch"] >= epochs[m["member_id"]] for m in after["members"]), (before, after)
    assert not any(m.lost for m in members), "a member was fenced and lost its partitions"
    reads = Counter(r for m in [*members, extra] for r in m.records)
    twice = [r for r, n in reads.items() if n > 1]
    assert not twice, f"committed records read twice: {twice[:10]}"
