"""The consumer group protocol (KIP-848) with librdkafka's `group.protocol=consumer` (confluent-kafka):
join and commit, scaling under load without a record read twice or lost, a rolling upgrade from the
classic protocol and back, static rejoin, and a member fenced by the broker's session timeout."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.conftest import GROUP_ARGS
from tests.integration.test_clients import create_topic
from tests.integration.test_console import as_json
from tests.support.broker import BrokerProcess
from tests.support.consumer_member import ConsumerMember
from tests.support.group_member import wait_for

pytestmark = pytest.mark.slow

SESSION_MS = 4000
ARGS = [
    *GROUP_ARGS,
    "--group-consumer-heartbeat-interval-ms",
    "300",
    "--group-consumer-session-timeout-ms",
    str(SESSION_MS),
]


@pytest.fixture(scope="module")
def cbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("kip848") / "data", args=ARGS).start()
    try:
        yield b
    finally:
        b.stop()


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), key=f"k{i}".encode())
    assert p.flush(30) == 0


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    from confluent_kafka import ConsumerGroupTopicPartitions

    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    res = admin.list_consumer_group_offsets([req])[group].result()
    return {tp.partition: tp.offset for tp in res.topic_partitions}


def stop_all(members: list[ConsumerMember]) -> None:
    for m in members:
        m.kill()


def test_join_consume_commit_and_describe(cbroker: BrokerProcess) -> None:
    create_topic(cbroker.bootstrap, "J1", 4)
    produce(cbroker.bootstrap, "J1", 200)
    m = ConsumerMember(cbroker.bootstrap, "GJ", "J1")
    try:
        wait_for(lambda: m.assigned == {0, 1, 2, 3}, 30, "the member to own all 4 partitions")
        wait_for(lambda: len(m.records) >= 200, 30, "200 records")
        assert committed(cbroker.bootstrap, "GJ", "J1", 4) == end_offsets(cbroker.bootstrap, "J1", 4)

        admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})
        listed = {g.group_id: g for g in admin.list_consumer_groups().result().valid}
        assert listed["GJ"].type == ConsumerGroupType.CONSUMER
        assert listed["GJ"].state == ConsumerGroupState.STABLE
        desc = admin.describe_consumer_groups(["GJ"])["GJ"].result()
        assert desc.type == ConsumerGroupType.CONSUMER
        assert desc.partition_assignor == "uniform"
        [member] = desc.members
        assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1, 2, 3}

        # `brook group` shows the protocol, the assignor and each member's target.
        shown = as_json(cbroker.bootstrap, "group", "describe", "GJ")
        assert (shown["protocol"], shown["assignor"], shown["state"]) == ("consumer", "uniform", "STABLE")
        assert shown["members"][0]["target"] == [f"J1-{p}" for p in range(4)]
        listed_cli = {g["group"]: g for g in as_json(cbroker.bootstrap, "group", "list")}
        assert listed_cli["GJ"]["protocol"] == "consumer"
    finally:
        m.kill()


class Flow:
    """Records produced to every partition while members come and go: `wait` checks at each look
    that no partition is owned by two members, `finish` that each record was read exactly once and
    committed."""

    def __init__(self, bootstrap: str, topic: str, parts: int, members: list[ConsumerMember]) -> None:
        self.bootstrap, self.topic, self.parts, self.members = bootstrap, topic, parts, members
        self.overlaps: list[tuple[set[int], ...]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        i = 0
        while not self._stop.is_set():
            p.produce(self.topic, f"v{i}".encode(), partition=i % self.parts)
            i += 1
            if i % 20 == 0:
                p.flush(10)
                time.sleep(0.1)
        assert p.flush(30) == 0

    def wait(self, cond: object, what: str) -> None:
        def check() -> bool:
            owned = [m.assigned for m in self.members if m.proc.poll() is None]
            if sum(len(o) for o in owned) != len(set().union(*owned)):
                self.overlaps.append(tuple(set(o) for o in owned))
            return bool(cond())  # type: ignore[operator]

        wait_for(check, 40, what)

    def finish(self, group: str) -> None:
        self._stop.set()
        self._thread.join(30)
        ends = end_offsets(self.bootstrap, self.topic, self.parts)
        every = {(p, o) for p, end in ends.items() for o in range(end)}
        self.wait(lambda: every <= {rec for m in self.members for rec in m.records}, "every record read")
        assert not self.overlaps, f"a partition owned by two members at once: {self.overlaps[:3]}"
        reads = Counter(rec for m in self.members for rec in m.records)
        twice = [rec for rec, n in reads.items() if n > 1]
        assert not twice, f"records read twice: {twice[:10]}"
        assert set(reads) == every
        assert committed(self.bootstrap, group, self.topic, self.parts) == ends

    def stop(self) -> None:
        self._stop.set()
        stop_all(self.members)


def test_scale_1_3_1_while_producing_reads_each_record_once(cbroker: BrokerProcess) -> None:
    """Partitions move between members while records flow; each member commits every record before
    reading the next, so a partition handed over only after its owner gave it up is read exactly once."""
    parts = 6
    create_topic(cbroker.bootstrap, "S1", parts)
    members = [ConsumerMember(cbroker.bootstrap, "GS", "S1")]
    flow = Flow(cbroker.bootstrap, "S1", parts, members)
    try:
        flow.wait(lambda: members[0].assigned == set(range(parts)), "one member with all partitions")
        members += [ConsumerMember(cbroker.bootstrap, "GS", "S1") for _ in range(2)]
        flow.wait(
            lambda: sorted(len(m.assigned) for m in members) == [2, 2, 2], "three members with two each"
        )
        time.sleep(1)
        for m in members[1:]:
            m.close()
        flow.wait(
            lambda: members[0].assigned == set(range(parts)), "the first member with all partitions again"
        )
        flow.finish("GS")
    finally:
        flow.stop()
    assert all(m.records for m in members), "each member read records while it was in the group"


def test_a_rolling_upgrade_from_classic_and_back_reads_each_record_once(cbroker: BrokerProcess) -> None:
    """An application moves its consumers to the consumer protocol one at a time, then rolls back:
    a consumer-protocol member joins the live classic group (which becomes a consumer group, its
    classic member going on with the classic protocol and giving up half its partitions), then
    leaves (a classic group again, the classic member taking everything back). Records flow all
    along; each is read once."""
    parts = 4
    create_topic(cbroker.bootstrap, "M1", parts)
    admin = AdminClient({"bootstrap.servers": cbroker.bootstrap})

    def group_type() -> ConsumerGroupType:
        listed = {g.group_id: g for g in admin.list_consumer_groups().result().valid}
        return listed["GM"].type if "GM" in listed else ConsumerGroupType.UNKNOWN

    classic = ConsumerMember(cbroker.bootstrap, "GM", "M1", protocol="classic")
    members = [classic]
    flow = Flow(cbroker.bootstrap, "M1", parts, members)
    try:
        flow.wait(
            lambda: classic.assigned == set(range(parts)) and classic.records, "a classic member reading"
        )
        assert group_type() == ConsumerGroupType.CLASSIC
        members.append(ConsumerMember(cbroker.bootstrap, "GM", "M1"))
        flow.wait(lambda: sorted(len(m.assigned) for m in members) == [2, 2], "two members with two each")
        assert group_type() == ConsumerGroupType.CONSUMER
        flow.wait(lambda: members[1].records, "the consumer-protocol member reading")
        members[1].close()
        flow.wait(
            lambda: classic.assigned == set(range(parts)), "the classic member with all partitions again"
        )
        flow.wait(lambda: group_type() == ConsumerGroupType.CLASSIC, "a classic group again")
        flow.finish("GM")
    finally:
        flow.stop()


def test_static_member_rejoins_with_its_partitions(cbroker: BrokerProcess) -> None:
    create_topic(cbroker.bootstrap, "R1", 4)
    a = ConsumerMember(cbroker.bootstrap, "GR", "R1", instance="ia")
    b = ConsumerMember(cbroker.bootstrap, "GR", "R1", instance="ib")
    members = [a, b]
    try:
        wait_for(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 40, "two partitions each")
        mine, theirs = set(a.assigned), set(b.assigned)
        a.close()  # a static member leaves with epoch -2: its partitions wait for it
        a2 = ConsumerMember(cbroker.bootstrap, "GR", "R1", instance="ia")
        members.append(a2)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and a2.assigned != mine:
            assert b.assigned == theirs, "the other member took the absent static member's partitions"
            time.sleep(0.05)
        assert a2.assigned == mine
        assert b.assigned == theirs
    finally:
        stop_all(members)


def test_member_silent_past_session_timeout_is_fenced(cbroker: BrokerProcess) -> None:
    create_topic(cbroker.bootstrap, "F1", 4)
    a = ConsumerMember(cbroker.bootstrap, "GF", "F1")
    b = ConsumerMember(cbroker.bootstrap, "GF", "F1")
    try:
        wait_for(lambda: len(a.assigned) == 2 and len(b.assigned) == 2, 40, "two partitions each")
        os.kill(b.proc.pid, signal.SIGSTOP)  # no more heartbeats, no leave
        stopped = time.monotonic()
        wait_for(lambda: a.assigned == {0, 1, 2, 3}, 30, "the live member to get all partitions")
        took = time.monotonic() - stopped
        # Not before the broker's session timeout (less a heartbeat interval of slack).
        assert took >= SESSION_MS / 1000 - 0.5, f"partitions moved after {took:.1f}s"
    finally:
        a.kill()
        b.kill()


def test_a_regex_subscription_is_resolved_by_the_broker(cbroker: BrokerProcess) -> None:
    """librdkafka sends `^rx-[ab].*` as SubscribedTopicRegex; the broker matches it (RE2, whole names)
    against its topics and assigns their partitions, and matches a topic created later too."""
    from confluent_kafka import Consumer

    for name in ("rx-a1", "rx-b1", "rx-c1", "xrx-a1"):
        create_topic(cbroker.bootstrap, name, 1)
        produce(cbroker.bootstrap, name, 3)
    c = Consumer(
        {
            "bootstrap.servers": cbroker.bootstrap,
            "group.id": "rx-group",
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        }
    )
    try:
        c.subscribe(["^rx-[ab].*"])
        seen: set[str] = set()

        def read(until: set[str]) -> None:
            deadline = time.monotonic() + 60
            while not until <= seen:
                assert time.monotonic() < deadline, f"read from {sorted(seen)}, not {sorted(until - seen)}"
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    seen.add(m.topic() or "")

        read({"rx-a1", "rx-b1"})
        create_topic(cbroker.bootstrap, "rx-b2", 1)
        produce(cbroker.bootstrap, "rx-b2", 3)
        read({"rx-b2"})
        assert seen == {"rx-a1", "rx-b1", "rx-b2"}  # never rx-c1, never xrx-a1
        assigned = {tp.topic for tp in c.assignment()}
        assert assigned == {"rx-a1", "rx-b1", "rx-b2"}
    finally:
        c.close()
