"""A real cluster (etcd + three broker processes) with real clients: replication, ISR, failover."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster, eventually, wait_for_leaders
from tests.support.offsets import end_offset

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path).start()
    try:
        yield c
    finally:
        c.stop()


def create(
    c: Cluster, name: str, partitions: int = 1, rf: int = 3, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config or {})])[name].result(20)
    wait_for_leaders(c.bootstrap, name)


def partition_md(c: Cluster, topic: str, p: int = 0, timeout: float = 30) -> Any:
    """The partition's metadata. A broker learns a new topic from etcd a moment after it was created
    (its answer has no partitions yet, as Kafka's metadata propagation): asked again until it has."""
    deadline = time.monotonic() + timeout
    while True:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        t = admin.list_topics(topic, timeout=10).topics.get(topic)
        if t is not None and p in t.partitions:
            return t.partitions[p]
        assert time.monotonic() < deadline, f"{topic}-{p} not in the metadata after {timeout}s"
        time.sleep(0.2)


def consume_all(
    c: Cluster, topic: str, partitions: int, expected: int, timeout: float = 60
) -> list[tuple[int, int, bytes]]:
    """Everything up to each partition's end offset now (not a count: a retried, non-idempotent
    produce may have written a record twice)."""
    cons = Consumer(
        {
            "bootstrap.servers": c.bootstrap,
            "group.id": f"check-{time.monotonic()}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    ends = {p: end_offset(cons, topic, p) for p in range(partitions)}
    cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got: list[tuple[int, int, bytes]] = []
    done = {p for p, end in ends.items() if end == 0}
    deadline = time.monotonic() + timeout
    try:
        while len(done) < partitions and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got.append((m.partition(), m.offset(), m.value()))
                if m.offset() >= ends[m.partition()] - 1:
                    done.add(m.partition())
    finally:
        cons.close()
    assert len(done) == partitions, f"read to the end of {sorted(done)} of {partitions} partitions only"
    assert len(got) >= expected
    return got


class Acks:
    """A producer's delivery reports: acknowledged values and errors."""

    def __init__(self) -> None:
        self.ok: list[tuple[int, int, bytes]] = []
        self.errors: list[KafkaError] = []
        self.lock = threading.Lock()

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        with self.lock:
            if err is None:
                self.ok.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.errors.append(err)


def test_leader_kill_9_loses_no_acknowledged_record(cluster: Cluster) -> None:
    create(cluster, "ha", 1, 3, {"min.insync.replicas": "2"})
    leader = partition_md(cluster, "ha").leader
    acks = Acks()
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 2,
            "retry.backoff.ms": 100,
        }
    )
    killed_at = None
    for i in range(4000):
        p.produce("ha", f"v{i:05d}".encode(), on_delivery=acks)
        p.poll(0)
        if i % 200 == 0:
            p.flush(10)
        if killed_at is None and len(acks.ok) >= 1500:
            cluster.broker(leader).kill()
            killed_at = i
    assert p.flush(90) == 0
    assert killed_at is not None
    assert not acks.errors, acks.errors[:3]
    assert len(acks.ok) == 4000
    eventually(lambda: partition_md(cluster, "ha").leader not in (leader, -1), what="a new leader")
    got = consume_all(cluster, "ha", 1, 4000)
    values = [v for _, _, v in sorted(got)]
    assert values == [f"v{i:05d}".encode() for i in range(4000)]  # each exactly once, in order


def test_stopped_follower_leaves_the_isr_and_returns(cluster: Cluster) -> None:
    create(cluster, "isr", 1, 3, {"min.insync.replicas": "2"})
    md = partition_md(cluster, "isr")
    follower = next(r for r in md.replicas if r != md.leader)
    proc = cluster.broker(follower).proc
    assert proc is not None
    # Bootstrapped from the leader: a client whose bootstrap is the stopped broker waits out its socket
    # timeout (60 s) first, which says nothing about the ISR.
    p = Producer({"bootstrap.servers": cluster.broker(md.leader).bootstrap, "acks": "all", "linger.ms": 0})
    acks = Acks()
    proc.send_signal(19)  # SIGSTOP: alive for etcd until its lease runs out, silent for the leader
    try:
        eventually(
            lambda: follower not in partition_md(cluster, "isr").isrs, 20, "the follower to leave the ISR"
        )
        for i in range(200):
            p.produce("isr", f"x{i}".encode(), on_delivery=acks)
        assert p.flush(30) == 0
        assert len(acks.ok) == 200 and not acks.errors  # two in-sync replicas are enough
    finally:
        proc.send_signal(18)  # SIGCONT
    eventually(
        lambda: follower in partition_md(cluster, "isr").isrs, 30, "the follower to catch up and return"
    )
    assert len(consume_all(cluster, "isr", 1, 200)) == 200


def test_two_of_three_down_refuses_acks_all_and_loses_nothing(cluster: Cluster) -> None:
    create(cluster, "quorum", 1, 3, {"min.insync.replicas": "2"})
    p = Producer(
        {"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, "message.timeout.ms": 4000}
    )
    acks = Acks()
    for i in range(100):
        p.produce("quorum", f"a{i}".encode(), on_delivery=acks)
    assert p.flush(30) == 0 and len(acks.ok) == 100
    leader = partition_md(cluster, "quorum").leader
    others = [b for b in range(3) if b != leader]
    for b in others:
        cluster.broker(b).kill()
    eventually(
        lambda: partition_md(cluster, "quorum").isrs == [leader], 20, "the ISR to shrink to the leader"
    )
    # No retries: the broker's answer itself reaches the delivery report (a retried one would end as
    # _MSG_TIMED_OUT, which a broker that never answers produces too).
    refusing = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0, "retries": 0})
    refused = Acks()
    for i in range(5):
        refusing.produce("quorum", f"b{i}".encode(), on_delivery=refused)
    assert refusing.flush(30) == 0
    assert not refused.ok
    assert [e.code() for e in refused.errors] == [KafkaError.NOT_ENOUGH_REPLICAS] * 5, refused.errors
    for b in others:
        cluster.broker(b).start()
    eventually(lambda: len(partition_md(cluster, "quorum").isrs) == 3, 30, "the ISR to be whole again")
    values = {v for _, _, v in consume_all(cluster, "quorum", 1, 100)}
    assert {f"a{i}".encode() for i in range(100)} <= values


def test_controller_failover_after_a_kill(cluster: Cluster) -> None:
    """A killed controller's lease expires and a survivor takes over (how fast is bench/'s business)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    controller = admin.describe_cluster().result(10).controller.id
    cluster.broker(controller).kill()
    survivors = ",".join(b.bootstrap for b in cluster.brokers if b.args[1] != str(controller))

    def new_controller() -> int | None:
        # A fresh client each time: a cached one keeps asking the dead controller.
        admin = AdminClient({"bootstrap.servers": survivors})
        c = admin.describe_cluster(request_timeout=3).result(4).controller
        return c.id if c is not None and c.id != controller and c.id >= 0 else None

    eventually(new_controller, 60, "a new controller")


def test_etcd_restart_under_load(cluster: Cluster) -> None:
    create(cluster, "load", 3, 3)
    acks = Acks()
    stop = threading.Event()

    def produce() -> None:
        p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
        i = 0
        while not stop.is_set():
            p.produce("load", f"l{i}".encode(), on_delivery=acks)
            p.poll(0.001)
            i += 1
        p.flush(30)

    t = threading.Thread(target=produce)
    t.start()
    try:
        eventually(lambda: len(acks.ok) > 100, 30, "records acknowledged before etcd stops")
        cluster.etcd.stop()
        try:
            # Counted while etcd is down, and only then: the data path does not need etcd (for a lease
            # TTL: then a broker may be deposed and stops acknowledging until etcd is back).
            before = len(acks.ok)
            eventually(lambda: len(acks.ok) > before + 100, 20, "acknowledgements while etcd is down")
            assert not cluster.etcd.running
        finally:
            cluster.etcd.start()
    finally:
        stop.set()
        t.join(60)
    assert not acks.errors

    # Watches resumed: a topic created now is seen, with leaders, by every broker.
    create(cluster, "after-restart", 2, 3)

    def leaders_seen_by(bootstrap: str) -> bool:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("after-restart", timeout=10)
        parts = md.topics["after-restart"].partitions.values()
        return len(parts) == 2 and all(p.leader >= 0 for p in parts)

    for b in cluster.brokers:
        eventually(
            lambda b=b: leaders_seen_by(b.bootstrap), 30, f"{b.bootstrap} to see the new topic's leaders"
        )
    got = consume_all(cluster, "load", 3, len(acks.ok))
    assert {v for *_, v in got} >= {v for *_, v in acks.ok}


def test_reassignment_moves_a_partition_while_producing(cluster: Cluster) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    create(cluster, "moving", 1, 1)
    source = partition_md(cluster, "moving").replicas[0]
    target = (source + 1) % 3
    acks = Acks()
    stop = threading.Event()

    def produce() -> None:
        p = Producer(
            {
                "bootstrap.servers": cluster.bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        i = 0
        while not stop.is_set():
            p.produce("moving", f"m{i:06d}".encode(), on_delivery=acks)
            p.poll(0.002)
            i += 1
        p.flush(60)

    t = threading.Thread(target=produce)
    t.start()
    try:
        eventually(lambda: len(acks.ok) > 300, 20, "some records before the move")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        admin.alter_partition_reassignments({KTP("moving", 0): [target]})
        eventually(lambda: partition_md(cluster, "moving").replicas == [target], 40, "the move to finish")
        assert partition_md(cluster, "moving").leader == target
        assert (
            admin.list_partition_reassignments() in ({}, [], None) or not admin.list_partition_reassignments()
        )
        admin.close()
        n = len(acks.ok)
        eventually(lambda: len(acks.ok) > n + 100, 20, "production to continue on the new replica")
    finally:
        stop.set()
        t.join(60)
    assert not acks.errors
    got = consume_all(cluster, "moving", 1, len(acks.ok))
    assert sorted(v for *_, v in got) == sorted(v for *_, v in acks.ok)


def test_acks_all_fails_when_the_isr_shrinks_below_min_insync(cluster: Cluster) -> None:
    """A record the leader wrote while its only other in-sync follower froze is not acknowledged."""
    create(cluster, "minisr", 1, 3, {"min.insync.replicas": "2"})
    md = partition_md(cluster, "minisr")
    a, b = [r for r in md.replicas if r != md.leader]
    cluster.broker(a).kill()
    eventually(
        lambda: len(partition_md(cluster, "minisr").isrs) == 2, 20, "the ISR to lose the killed follower"
    )
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "linger.ms": 0,
            "retries": 0,
            "message.timeout.ms": 40000,
        }
    )
    acks = Acks()
    p.produce("minisr", b"before", on_delivery=acks)
    assert p.flush(10) == 0 and len(acks.ok) == 1
    proc = cluster.broker(b).proc
    assert proc is not None
    proc.send_signal(19)  # SIGSTOP
    try:
        p.produce("minisr", b"while-frozen", on_delivery=acks)
        assert p.flush(45) == 0
    finally:
        proc.send_signal(18)
    assert len(acks.ok) == 1, "acknowledged with one in-sync replica"
    # Written by the leader, then the frozen follower left the ISR: Kafka's answer for exactly that (a
    # timeout would mean the waiting produce was never released).
    assert [e.code() for e in acks.errors] == [KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND], acks.errors
