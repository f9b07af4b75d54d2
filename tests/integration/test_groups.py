"""Consumer groups with real clients: queue and pub-sub, failover of a killed member, commits, lag."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.conftest import GROUP_ARGS
from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess
from tests.support.group_member import GroupMember, wait_for

pytestmark = pytest.mark.slow


def produce(bootstrap: str, topic: str, n: int, prefix: str = "v") -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, f"{prefix}{i}".encode(), key=f"k{i}".encode())
    assert p.flush(30) == 0


def test_queue_and_pub_sub_with_a_killed_member(gbroker: BrokerProcess) -> None:
    create_topic(gbroker.bootstrap, "T1", 4)
    produce(gbroker.bootstrap, "T1", 400)
    members: list[GroupMember] = []
    try:
        c1 = GroupMember(gbroker.bootstrap, "G1", "T1")
        members.append(c1)
        wait_for(lambda: c1.assigned == {0, 1, 2, 3}, 30, "C1 to own all 4 partitions")

        c2 = GroupMember(gbroker.bootstrap, "G1", "T1")
        members.append(c2)
        wait_for(
            lambda: (
                len(c1.assigned) == 2 and len(c2.assigned) == 2 and c1.assigned | c2.assigned == {0, 1, 2, 3}
            ),
            30,
            "2 + 2",
        )

        members += [GroupMember(gbroker.bootstrap, "G1", "T1") for _ in range(3)]

        def one_idle() -> bool:
            # Every member joined: with the fifth not yet in, the first four's assignment also looks
            # like this, and the fifth's join then revokes everything (eager).
            if not all(m.assignments for m in members):
                return False
            sizes = sorted(len(m.assigned) for m in members)
            union = set().union(*(m.assigned for m in members))
            return sizes == [0, 1, 1, 1, 1] and union == {0, 1, 2, 3}

        wait_for(one_idle, 40, "4 members with one partition each and one idle")

        # G2 gets every record, independently of G1.
        g2 = GroupMember(gbroker.bootstrap, "G2", "T1")
        wait_for(lambda: len(g2.records) >= 400, 30, "G2 to read all 400 records")
        assert sorted(v for _, _, v in g2.records) == sorted(f"v{i}" for i in range(400))
        g2.kill()

        # Every record was consumed by G1 at least once.
        wait_for(
            lambda: {v for m in members for *_, v in m.records} >= {f"v{i}" for i in range(400)},
            30,
            "G1 to read all 400",
        )

        # Kill -9 a member that owns a partition: nobody leaves the group, the session times out. Work
        # remains in its partition: records produced after the kill only a survivor can read.
        victim = next(m for m in members if m.assigned)
        lost = set(victim.assigned)
        victim.kill()
        produce(gbroker.bootstrap, "T1", 400, prefix="w")
        survivors = [m for m in members if m is not victim]
        wait_for(
            lambda: (
                set().union(*(m.assigned for m in survivors)) == {0, 1, 2, 3}
                and sorted(len(m.assigned) for m in survivors) == [1, 1, 1, 1]
            ),
            40,
            f"partitions {lost} to move to the survivors",
        )
        after = {f"w{i}" for i in range(400)}
        wait_for(
            lambda: {v for m in survivors for *_, v in m.records} >= after,
            40,
            "the survivors to read every record produced after the kill",
        )
        assert not {v for *_, v in victim.records} & after
        assert any(p in lost and v in after for m in survivors for p, _, v in m.records), lost
    finally:
        for m in members:
            m.kill()


def test_cooperative_sticky_moves_only_what_must_move(gbroker: BrokerProcess) -> None:
    create_topic(gbroker.bootstrap, "coop", 4)
    c1 = GroupMember(gbroker.bootstrap, "Gcoop", "coop", "cooperative-sticky")
    c2: GroupMember | None = None
    try:
        wait_for(lambda: c1.assigned == {0, 1, 2, 3}, 30, "C1 to own all 4 partitions")
        c2 = GroupMember(gbroker.bootstrap, "Gcoop", "coop", "cooperative-sticky")
        wait_for(lambda: len(c1.assigned) == 2 and c2 is not None and len(c2.assigned) == 2, 30, "2 + 2")
        # Incremental: C1 gave up exactly the two partitions C2 got, and kept the others all along.
        assert c1.revoked == [sorted(c2.assigned)]
    finally:
        c1.kill()
        if c2 is not None:
            c2.kill()


def _positions(c: Consumer) -> list[tuple[int, int]]:
    """Where the consumer stands on each assigned partition: its position, or, before it consumed
    anything there (OFFSET_INVALID: a partition read to its end before the commit), its committed
    offset."""
    assigned = c.assignment()
    committed = {t.partition: t.offset for t in c.committed(assigned, 10)}
    return sorted(
        (t.partition, t.offset if t.offset >= 0 else committed[t.partition]) for t in c.position(assigned)
    )


def test_commit_then_resume_after_the_last_commit(gbroker: BrokerProcess) -> None:
    create_topic(gbroker.bootstrap, "resume", 2)
    produce(gbroker.bootstrap, "resume", 100)
    conf = {
        "bootstrap.servers": gbroker.bootstrap,
        "group.id": "Gres",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
    }
    c = Consumer(conf)
    c.subscribe(["resume"])
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while len(seen) < 60 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            seen.append(m.value().decode())
            if len(seen) == 50:
                c.commit(asynchronous=False)
    c.close()  # leaves the group; the 10 records after the commit are uncommitted
    c = Consumer(conf)
    c.subscribe(["resume"])
    ends = [
        TopicPartition("resume", p, c.get_watermark_offsets(TopicPartition("resume", p), 10)[1])
        for p in (0, 1)
    ]
    again: list[str] = []
    deadline = time.monotonic() + 30
    # Read to the end of both partitions, not to a count: a record delivered again is seen and counted.
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            again.append(m.value().decode())
        positions = _positions(c)
        if positions == [(t.partition, t.offset) for t in ends]:
            break
    c.close()
    assert positions == [(t.partition, t.offset) for t in ends], "did not read to the end"
    assert set(seen[:50]).isdisjoint(again)  # committed records are not read again
    assert set(seen) | set(again) == {f"v{i}" for i in range(100)}  # nothing lost
    assert len(again) == 50  # at-least-once: only the uncommitted records come again


def test_offsets_survive_a_broker_restart_and_lag_is_exact(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=GROUP_ARGS).start()
    try:
        create_topic(b.bootstrap, "lag", 3)
        produce(b.bootstrap, "lag", 90)
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "Glag"})
        c.commit(
            offsets=[TopicPartition("lag", 0, 5), TopicPartition("lag", 1, 0), TopicPartition("lag", 2, 17)],
            asynchronous=False,
        )
        c.close()
        b.stop()
        b.start()
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "Glag"})
        committed = c.committed([TopicPartition("lag", p) for p in range(3)], timeout=10)
        assert [tp.offset for tp in committed] == [5, 0, 17]
        # KEDA's lag: ListOffsets latest - OffsetFetch, per partition.
        ends = [c.get_watermark_offsets(TopicPartition("lag", p), timeout=10)[1] for p in range(3)]
        c.close()
        assert sum(ends) == 90
        # The same numbers through another client (kafka-python's admin, as a lag exporter would).
        from kafka import KafkaAdminClient, KafkaConsumer
        from kafka import TopicPartition as KTP

        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        offsets = admin.list_group_offsets({"Glag": None})["Glag"]
        admin.close()
        kc = KafkaConsumer(bootstrap_servers=b.bootstrap)
        end_offsets = kc.end_offsets([KTP("lag", p) for p in range(3)])
        kc.close()
        lag = {tp.partition: end_offsets[KTP("lag", tp.partition)] - om.offset for tp, om in offsets.items()}
        assert lag == {0: ends[0] - 5, 1: ends[1], 2: ends[2] - 17}
    finally:
        b.stop()


def test_kafka_python_and_aiokafka_groups(gbroker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    create_topic(gbroker.bootstrap, "pyg", 2)
    produce(gbroker.bootstrap, "pyg", 50)
    kc = KafkaConsumer(
        "pyg",
        bootstrap_servers=gbroker.bootstrap,
        group_id="Gpy",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=15000,
    )
    got = []
    for m in kc:
        got.append(m.value)
        if len(got) == 50:
            break
    kc.commit()
    kc.close()
    assert len(got) == 50

    async def aio() -> list[bytes]:
        c = AIOKafkaConsumer(
            "pyg",
            bootstrap_servers=gbroker.bootstrap,
            group_id="Gaio",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await c.start()
        out: list[bytes] = []
        try:
            deadline = time.monotonic() + 30
            while len(out) < 50 and time.monotonic() < deadline:
                for recs in (await c.getmany(timeout_ms=500)).values():
                    out += [r.value for r in recs]
            await c.commit()
            committed = await c.committed(next(iter(c.assignment())))
            assert committed is not None and committed > 0
        finally:
            await c.stop()
        return out

    assert len(asyncio.run(aio())) == 50
    # kafka-python's commit is visible to a new member of the same group: nothing is left to read.
    # "earliest": with kafka-python's default ("latest") a lost commit would also leave nothing to read.
    kc = KafkaConsumer(
        "pyg",
        bootstrap_servers=gbroker.bootstrap,
        group_id="Gpy",
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
    )
    assert [m for m in kc] == []
    kc.close()


def test_kcat_balanced_consumer(gbroker: BrokerProcess) -> None:
    create_topic(gbroker.bootstrap, "kcg", 2)
    produce(gbroker.bootstrap, "kcg", 40)
    out = subprocess.run(
        [
            "kcat",
            "-b",
            gbroker.bootstrap,
            "-G",
            "Gkcat",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%s\n",
            "-X",
            "session.timeout.ms=6000",
            "kcg",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert sorted(out.split()) == sorted(f"v{i}" for i in range(40))


def test_group_admin_describe_list_delete(gbroker: BrokerProcess) -> None:
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    create_topic(gbroker.bootstrap, "adm", 2)
    produce(gbroker.bootstrap, "adm", 20)
    member = GroupMember(gbroker.bootstrap, "Gadm", "adm")
    admin = AdminClient({"bootstrap.servers": gbroker.bootstrap})
    try:
        wait_for(lambda: member.assigned == {0, 1}, 30, "the member to own both partitions")
        groups = admin.list_consumer_groups().result(10)
        assert "Gadm" in {g.group_id for g in groups.valid}
        desc = admin.describe_consumer_groups(["Gadm"])["Gadm"].result(10)
        assert desc.state.name == "STABLE" and len(desc.members) == 1
        assert {tp.partition for tp in desc.members[0].assignment.topic_partitions} == {0, 1}
        # A group with members cannot be deleted.
        with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
            admin.delete_consumer_groups(["Gadm"])["Gadm"].result(10)
    finally:
        member.kill()
    wait_for(
        lambda: admin.describe_consumer_groups(["Gadm"])["Gadm"].result(10).state.name == "EMPTY",
        30,
        "the killed member's session to expire",
    )
    c = Consumer({"bootstrap.servers": gbroker.bootstrap, "group.id": "Gadm"})
    c.commit(offsets=[TopicPartition("adm", 0, 3), TopicPartition("adm", 1, 4)], asynchronous=False)
    c.close()
    ka = KafkaAdminClient(bootstrap_servers=gbroker.bootstrap)
    ka.delete_group_offsets("Gadm", [KTP("adm", 0)])
    left = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("Gadm")])["Gadm"].result(10)
    assert {tp.partition for tp in left.topic_partitions} == {1}
    ka.close()
    admin.delete_consumer_groups(["Gadm"])["Gadm"].result(10)
    assert "Gadm" not in {g.group_id for g in admin.list_consumer_groups().result(10).valid}


class StaticConsumer:
    """A confluent-kafka consumer with a group.instance.id, in this process; its rebalance events are
    recorded when poll() serves them."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str) -> None:
        self.instance = instance
        self.assigned: set[int] = set()
        self.events: list[tuple[str, list[int]]] = []
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.instance.id": instance,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                "enable.auto.commit": False,
            }
        )
        self.consumer.subscribe([topic], on_assign=self._assign, on_revoke=self._revoke, on_lost=self._revoke)

    def _assign(self, _: Consumer, parts: list[TopicPartition]) -> None:
        self.assigned = {p.partition for p in parts}
        self.events.append(("assign", sorted(self.assigned)))

    def _revoke(self, _: Consumer, parts: list[TopicPartition]) -> None:
        self.assigned = set()
        self.events.append(("revoke", sorted(p.partition for p in parts)))


def poll_until(consumers: list[StaticConsumer], cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in consumers:
            c.consumer.poll(0.05)
        if cond():
            return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_static_member_restart_gets_its_partitions_back_without_a_rebalance(gbroker: BrokerProcess) -> None:
    """KIP-345: a static member closed without leaving and restarted within session.timeout.ms gets
    the same partitions; the other member sees no revocation. Both restart in turn, so one of them is
    the group's leader whichever joined first."""
    create_topic(gbroker.bootstrap, "static", 4)
    members = [StaticConsumer(gbroker.bootstrap, "Gstatic", "static", i) for i in ("a", "b")]
    try:
        poll_until(members, lambda: [len(m.assigned) for m in members] == [2, 2], 30, "2 + 2")
        for i in (1, 0):
            old, other = members[i], members[1 - i]
            owned, kept = set(old.assigned), set(other.assigned)
            other.events.clear()
            started = time.monotonic()
            old.consumer.close()  # a static member sends no LeaveGroup
            new = StaticConsumer(gbroker.bootstrap, "Gstatic", "static", old.instance)
            members[i] = new
            poll_until([other, new], lambda n=new: bool(n.assigned), 20, f"{new.instance} to be reassigned")
            assert time.monotonic() - started < 10, "not within the session timeout"
            assert new.assigned == owned and new.events == [("assign", sorted(owned))]
            # An eager rebalance cannot complete before every member has served its revocation.
            assert other.events == [] and other.assigned == kept
    finally:
        for m in members:
            with contextlib.suppress(RuntimeError):  # already closed
                m.consumer.close()
