"""Replication on a real cluster (etcd + three broker processes) with real clients: a deposed leader's
divergent records are truncated by leader epoch and every replica ends byte-identical; leaders killed with
batches in flight lose, duplicate and reorder nothing; committed offsets survive the group coordinator's
crash; regressions of cabb6de (reordering reassignment, __consumer_offsets replication factor)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.record.default_records import DefaultRecordBatch

from tests.integration.test_cluster import Acks
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually, wait_for_leaders
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow


# -- helpers ------------------------------------------------------------------------------------------


def start_cluster(root: Path, extra: list[str] | None = None) -> Cluster:
    c = Cluster(root, extra_args=extra)
    try:
        return c.start()
    except BaseException:
        c.stop()
        raise


def kill_cluster(c: Cluster) -> None:
    """kill -9 every broker (nothing to check at shutdown here, and it is quicker), then stop etcd."""
    for b in c.brokers:
        b.kill()
    c.etcd.stop()


def restart(b: BrokerProcess) -> None:
    """Start a killed broker again; generous on a loaded machine, with its log's tail if it hangs."""
    try:
        b.start(timeout=60)
    except TimeoutError as e:
        raise AssertionError(f"{e}:\n{b.log_path.read_text()[-4000:]}") from None


def node_id(b: BrokerProcess) -> int:
    return int(b.args[1])


def live_bootstrap(c: Cluster, *exclude: int) -> str:
    return ",".join(
        b.bootstrap
        for b in c.brokers
        if node_id(b) not in exclude and b.proc is not None and b.proc.poll() is None
    )


def create(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=config or {})])[name].result(20)
    wait_for_leaders(bootstrap, name)


def partition_md(bootstrap: str, topic: str, p: int = 0) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.list_topics(topic, timeout=5).topics[topic].partitions[p]


def log_batches(b: BrokerProcess, topic: str, partition: int = 0) -> list[bytes]:
    """The whole record batches in a replica's segment files, in offset order, as stored."""
    out: list[bytes] = []
    directory = b.data_dir / f"{topic}-{partition}"
    for seg in sorted(directory.glob("*.log")):
        data = seg.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
            if length <= 0 or pos + 12 + length > len(data):
                break  # a batch being written
            out.append(data[pos : pos + 12 + length])
            pos += 12 + length
    return out


def end_offset(batches: list[bytes]) -> int:
    if not batches:
        return 0
    last = DefaultRecordBatch(batches[-1])
    return int(last.base_offset + last.last_offset_delta + 1)


def values(batches: list[bytes]) -> list[bytes]:
    return [bytes(r.value) for raw in batches for r in DefaultRecordBatch(raw)]


def stop_signal(b: BrokerProcess, sig: int) -> None:
    assert b.proc is not None and b.proc.poll() is None
    os.kill(b.proc.pid, sig)


def produce_all(
    bootstrap: str, topic: str, vals: list[bytes], acks: str = "all", timeout: float = 30
) -> Acks:
    acked = Acks()
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "linger.ms": 0,
            "enable.idempotence": acks == "all",
            "message.timeout.ms": int(timeout * 1000),
        }
    )
    for v in vals:
        p.produce(topic, v, on_delivery=acked)
        p.poll(0)
    assert p.flush(timeout + 5) == 0
    assert not acked.errors and len(acked.ok) == len(vals), acked.errors[:3]
    return acked


# -- 1. leader-epoch truncation ----------------------------------------------------------------------


@pytest.fixture
def slow_isr_cluster(tmp_path: Path) -> Iterator[Cluster]:
    # A lag window much longer than the moments the followers are frozen, so the leader never drops them
    # from the ISR by itself; a 3 s lease so a frozen follower stays registered meanwhile.
    c = start_cluster(tmp_path, ["--replica-lag-time-max-ms", "15000", "--lease-ttl", "3"])
    try:
        yield c
    finally:
        kill_cluster(c)


@pytest.mark.parametrize("old_leader_returns_by", ["restart", "resume"])
def test_deposed_leader_truncates_its_divergent_records(
    slow_isr_cluster: Cluster, old_leader_returns_by: str
) -> None:
    """The leader appends records (acks=1) its frozen followers never fetch, then stops; a follower takes
    over and takes new writes at the same offsets; the old leader comes back (restarted after kill -9, or
    woken from SIGSTOP as a zombie that still believes it leads). It must truncate to the new leader's
    epoch boundary (OffsetForLeaderEpoch), and all replicas end byte-identical."""
    c = slow_isr_cluster
    topic = "diverge"
    create(c.bootstrap, topic, config={"min.insync.replicas": "2"})
    committed = [f"c{i:03d}".encode() for i in range(20)]
    produce_all(c.bootstrap, topic, committed)
    md = partition_md(c.bootstrap, topic)
    assert sorted(md.isrs) == [0, 1, 2]
    old = c.broker(md.leader)
    followers = [c.broker(r) for r in md.replicas if r != md.leader]
    follower_ids = [node_id(f) for f in followers]

    # Freeze the followers, then write to the leader alone. A follower may have had a fetch waiting on the
    # leader: the first write ("edge") answers it (the bytes wait in the frozen follower's socket); no
    # follower can ask again, so everything after it is certainly on the leader only.
    for f in followers:
        stop_signal(f, signal.SIGSTOP)
    try:
        produce_all(old.bootstrap, topic, [b"edge"], acks="1", timeout=10)
        lost = [f"lost{i:02d}".encode() for i in range(10)]
        produce_all(old.bootstrap, topic, lost, acks="1", timeout=10)
        if old_leader_returns_by == "restart":
            old.kill()
        else:
            stop_signal(old, signal.SIGSTOP)
    finally:
        for f in followers:
            stop_signal(f, signal.SIGCONT)
    old_log = log_batches(old, topic)
    assert values(old_log) == [*committed, b"edge", *lost]

    survivors = (
        live_bootstrap(c, node_id(old))
        if old_leader_returns_by == "restart"
        else ",".join(f.bootstrap for f in followers)
    )
    (new_leader,) = eventually(
        lambda: [lead for lead in [partition_md(survivors, topic).leader] if lead in follower_ids],
        30,
        "a follower to take over",
    )
    leader_b = c.broker(new_leader)
    # The divergence is real: the new leader's log ends before the old leader's and has none of `lost`.
    new_log = log_batches(leader_b, topic)
    assert end_offset(new_log) < end_offset(old_log)
    assert not set(values(new_log)) & set(lost)

    fresh = [f"new{i:03d}".encode() for i in range(30)]
    produce_all(survivors, topic, fresh)

    if old_leader_returns_by == "restart":
        restart(old)
    else:
        stop_signal(old, signal.SIGCONT)

    def caught_up() -> bool:
        target = end_offset(log_batches(leader_b, topic))
        md = partition_md(survivors, topic)
        ends = {node_id(b): end_offset(log_batches(b, topic)) for b in c.brokers}
        if md.leader == new_leader and sorted(md.isrs) == [0, 1, 2] and set(ends.values()) == {target}:
            return True
        raise AssertionError(f"leader {md.leader}, ISR {md.isrs}, log ends {ends}")

    eventually(caught_up, 40, "the old leader to rejoin the ISR at the new leader's log end")
    logs = {node_id(b): log_batches(b, topic) for b in c.brokers}
    expected = [*committed, *([b"edge"] if b"edge" in values(logs[new_leader]) else []), *fresh]
    for n, batches in logs.items():
        assert values(batches) == expected, f"broker {n}"
        assert batches == logs[new_leader], f"broker {n}'s batches differ from the leader's"
    # The truncation point is the new leader's epoch boundary: the batches after it carry the new epoch.
    epochs = [DefaultRecordBatch(b).leader_epoch for b in logs[node_id(old)]]
    boundary = len(committed) + (1 if b"edge" in expected else 0)
    starts = [DefaultRecordBatch(b).base_offset for b in logs[node_id(old)]]
    old_epoch = max(e for e, s in zip(epochs, starts, strict=True) if s < boundary)
    assert all(e > old_epoch for e, s in zip(epochs, starts, strict=True) if s >= boundary)
    # Segment files byte for byte (one segment each at this size).
    files = {n: b"".join(batches) for n, batches in logs.items()}
    assert len(set(files.values())) == 1


# -- 2. leaders killed with batches in flight -------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = start_cluster(tmp_path)
    try:
        yield c
    finally:
        kill_cluster(c)


def read_to_end(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60
) -> dict[int, list[tuple[int, bytes]]]:
    """Every record of each partition up to its end offset now: {partition: [(offset, value)]}."""
    cons = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{time.monotonic()}",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
        }
    )
    try:
        ends = {
            p: cons.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)
        }
        cons.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                got[m.partition()].append((m.offset(), m.value()))
                if m.offset() >= ends[m.partition()] - 1:
                    done.add(m.partition())
    finally:
        cons.close()
    assert len(done) == partitions, f"read to the end of {sorted(done)} of {partitions} partitions only"
    return got


def test_leaders_killed_with_batches_in_flight_lose_duplicate_and_reorder_nothing(cluster: Cluster) -> None:
    seed = int(os.environ.get("BROOK_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (BROOK_TEST_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    topic, partitions = "inflight", 6
    create(cluster.bootstrap, topic, partitions, {"min.insync.replicas": "2"})
    all_brokers = ",".join(b.bootstrap for b in cluster.brokers)
    acks = Acks()
    stop = threading.Event()
    produced = [0]

    def produce() -> None:
        p = Producer(
            {
                "bootstrap.servers": all_brokers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                "retry.backoff.ms": 100,
                "message.timeout.ms": 120_000,
            }
        )
        i = 0
        while not stop.is_set():
            try:
                # The value carries the record's sequence number in the whole run.
                p.produce(topic, f"{i:08d}".encode(), partition=i % partitions, on_delivery=acks)
            except BufferError:
                p.poll(0.05)
                continue
            i += 1
            produced[0] = i
            p.poll(0)
            if i % 5 == 0:
                time.sleep(0.002)  # ~2000 records/s: plenty in flight, little to read back
        assert p.flush(120) == 0
        in_flight_at_end.append(len(p))

    in_flight_at_end: list[int] = []
    t = threading.Thread(target=produce)
    t.start()
    in_flight_at_kill: list[int] = []
    try:
        for kill in range(3):
            wanted = len(acks.ok) + rng.randrange(300, 1500)
            eventually(lambda n=wanted: len(acks.ok) >= n, 30, f"{wanted} acknowledged records")
            md = AdminClient({"bootstrap.servers": live_bootstrap(cluster)}).list_topics(topic, timeout=10)
            victim = md.topics[topic].partitions[rng.randrange(partitions)].leader
            time.sleep(rng.random() * 0.1)  # a random point in the producer's stream
            outstanding = produced[0] - len(acks.ok) - len(acks.errors)
            cluster.broker(victim).kill()
            in_flight_at_kill.append(outstanding)
            print(f"kill {kill}: broker {victim} with {outstanding} records unacknowledged")
            survivors = live_bootstrap(cluster)

            def moved(victim: int = victim, survivors: str = survivors) -> bool:
                parts = AdminClient({"bootstrap.servers": survivors}).list_topics(topic, timeout=5)
                return all(p.leader not in (victim, -1) for p in parts.topics[topic].partitions.values())

            eventually(moved, 30, f"leaders away from broker {victim}")
            restart(cluster.broker(victim))

            def whole() -> bool:
                parts = AdminClient({"bootstrap.servers": live_bootstrap(cluster)}).list_topics(
                    topic, timeout=5
                )
                return all(len(p.isrs) == 3 for p in parts.topics[topic].partitions.values())

            eventually(whole, 40, "every ISR whole again")
    finally:
        stop.set()
        t.join(150)
    assert not t.is_alive()
    assert in_flight_at_end == [0]
    assert all(n > 0 for n in in_flight_at_kill), in_flight_at_kill
    assert not acks.errors, acks.errors[:3]
    assert len(acks.ok) == produced[0]
    got = read_to_end(live_bootstrap(cluster), topic, partitions)
    for p in range(partitions):
        sent = [f"{i:08d}".encode() for i in range(p, produced[0], partitions)]
        read = [v for _, v in got[p]]
        assert len(read) == len(set(read)), f"partition {p}: duplicates"
        assert read == sent, f"partition {p}: {len(read)} records read, {len(sent)} sent (lost or reordered)"
        # Each acknowledged offset holds the record it was acknowledged for.
        at = dict(got[p])
        for part, offset, value in acks.ok:
            if part == p:
                assert offset is not None and offset >= 0, f"{value!r} acknowledged without its offset"
                assert at.get(offset) == value, (
                    f"{value!r} acknowledged at {offset}, which holds {at.get(offset)!r}"
                )


# -- 4. committed offsets across the group coordinator's crash ----------------------------------------


def group_consumer(bootstrap: str, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",  # a lost commit shows up as records read again
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "fetch.queue.backoff.ms": 10,
        }
    )


def consume(c: Consumer, n: int, timeout: float = 30) -> list[tuple[int, int, bytes]]:
    got: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.partition(), m.offset(), m.value()))
    assert len(got) == n, f"read {len(got)} of {n} records"
    return got


# FindCoordinator and OffsetFetch go over the raw client: librdkafka 2.16's admin group calls abort the
# test process while the coordinator is down (rdkafka_queue.h: eonce->refcnt > 0).
def coordinator_of(c: Cluster, group: str) -> int:
    """The group's coordinator as a live broker answers FindCoordinator; -1 while there is none."""
    from kafka.protocol.metadata import FindCoordinatorRequest

    with RawClient(live_bootstrap(c).split(",")[0], timeout=10) as raw:
        r = raw.request(FindCoordinatorRequest(key=group, key_type=0), 2)
    return int(r.node_id) if r.error_code == 0 else -1


def committed_offsets(c: Cluster, group: str, topic: str, partitions: int) -> dict[int, int]:
    """OffsetFetch on the group's coordinator: {partition: committed offset} of those committed."""
    from kafka.protocol.consumer import OffsetFetchRequest as O

    coordinator = coordinator_of(c, group)
    assert coordinator >= 0, "no coordinator"
    req = O(
        group_id=group,
        topics=[O.OffsetFetchRequestTopic(name=topic, partition_indexes=list(range(partitions)))],
    )
    with RawClient(c.broker(coordinator).bootstrap, timeout=10) as raw:
        r = raw.request(req, 5)
    assert r.error_code == 0, r
    return {
        p.partition_index: p.committed_offset
        for t in r.topics
        for p in t.partitions
        if p.committed_offset >= 0
    }


def test_committed_offsets_survive_the_coordinators_crash(cluster: Cluster) -> None:
    topic, group, partitions = "work", "survivors", 3
    create(cluster.bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(600):
        p.produce(topic, f"w{i:04d}".encode(), partition=i % partitions)
    assert p.flush(30) == 0
    c = group_consumer(cluster.bootstrap, group)
    c.subscribe([topic])
    first = consume(c, 100)
    c.commit(asynchronous=False)
    second = consume(c, 150)  # a second commit further on: losing it would resume at the first
    c.commit(asynchronous=False)
    c.close()
    committed: dict[int, int] = {}
    for q, o, _ in first + second:
        committed[q] = max(committed.get(q, 0), o + 1)
    read_before = first + second
    assert committed_offsets(cluster, group, topic, partitions) == committed
    # Every replica of __consumer_offsets is on all three brokers (offsets.topic.replication.factor 3).
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("__consumer_offsets", timeout=10)
    assert {len(p.replicas) for p in md.topics["__consumer_offsets"].partitions.values()} == {3}

    coordinator = coordinator_of(cluster, group)
    cluster.broker(coordinator).kill()
    survivors = live_bootstrap(cluster)
    eventually(lambda: coordinator_of(cluster, group) not in (coordinator, -1), 30, "a new group coordinator")

    def offsets_back() -> bool:
        now = committed_offsets(cluster, group, topic, partitions)
        if now != committed:
            raise AssertionError(f"OffsetFetch answers {now}, committed {committed}")
        return True

    eventually(offsets_back, 30, "the committed offsets from the new coordinator")

    c = group_consumer(survivors, group)
    c.subscribe([topic])
    rest = consume(c, 600 - len(read_before))
    c.close()
    for p in range(partitions):
        resumed = sorted(o for q, o, _ in rest if q == p)
        start = committed.get(p, 0)
        assert resumed == list(range(start, start + len(resumed))), f"partition {p}"
    assert sorted(v for *_, v in read_before + rest) == [f"w{i:04d}".encode() for i in range(600)]


# -- 5. regressions of cabb6de ----------------------------------------------------------------------


def test_offsets_topic_replication_factor_is_capped_by_the_live_brokers(tmp_path: Path) -> None:
    """Two brokers, offsets.topic.replication.factor 3 (the cluster default): __consumer_offsets gets 2
    replicas per partition and groups work (before: its creation failed and no group had a coordinator)."""
    c = Cluster(tmp_path, brokers=2)
    try:
        c.start()
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        admin.create_topics([NewTopic("two", 1, 2)])["two"].result(20)
        produce_all(c.bootstrap, "two", [b"a", b"b"])
        cons = group_consumer(c.bootstrap, "small")
        cons.subscribe(["two"])
        consume(cons, 2)
        cons.commit(asynchronous=False)
        cons.close()
        assert committed_offsets(c, "small", "two", 1) == {0: 2}
        md = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        assert {len(p.replicas) for p in md.partitions.values()} == {2}
    finally:
        kill_cluster(c)


def test_a_reassignment_that_only_reorders_replicas_moves_leadership_to_the_first(cluster: Cluster) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTP

    topic = "reorder"
    create(cluster.bootstrap, topic, config={"min.insync.replicas": "2"})
    produce_all(cluster.bootstrap, topic, [f"a{i}".encode() for i in range(50)])
    md = partition_md(cluster.bootstrap, topic)
    target = [r for r in md.replicas if r != md.leader] + [md.leader]  # same brokers, leader last
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
    try:
        admin.alter_partition_reassignments({KTP(topic, 0): target})

        def done() -> bool:
            now = partition_md(cluster.bootstrap, topic)
            state = (list(now.replicas), now.leader, sorted(now.isrs), admin.list_partition_reassignments())
            if state[:3] == (target, target[0], [0, 1, 2]) and not state[3]:
                return True
            raise AssertionError(f"replicas, leader, ISR, reassignments: {state}")

        eventually(done, 30, "the new order, its first replica leading, the reassignment finished")
    finally:
        admin.close()
    produce_all(cluster.bootstrap, topic, [f"b{i}".encode() for i in range(50)])
    got = read_to_end(cluster.bootstrap, topic, 1)[0]
    assert [v for _, v in got] == [f"a{i}".encode() for i in range(50)] + [
        f"b{i}".encode() for i in range(50)
    ]


def test_a_dead_follower_stays_out_of_the_isr(cluster: Cluster) -> None:
    """Regression (cabb6de): a killed follower leaves the ISR and is not put back from its stale log end
    (before, the leader re-added it every ISR check and the controller removed it again)."""
    topic = "deadisr"
    create(cluster.bootstrap, topic, 3)
    produce_all(cluster.bootstrap, topic, [f"r{i}".encode() for i in range(30)])
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    dead = admin.describe_cluster().result(10).controller.id
    dead = next(b for b in range(3) if b != dead)  # not the controller: its removal is quicker to see
    cluster.broker(dead).kill()
    survivors = live_bootstrap(cluster)

    def isrs() -> list[list[int]]:
        parts = AdminClient({"bootstrap.servers": survivors}).list_topics(topic, timeout=5).topics[topic]
        return [list(p.isrs) for p in parts.partitions.values()]

    eventually(lambda: all(dead not in isr for isr in isrs()), 20, f"broker {dead} out of every ISR")
    # Watch it over many ISR checks (every 250 ms) with nothing produced: it must never come back.
    seen: list[list[list[int]]] = []
    until = time.monotonic() + 4
    while time.monotonic() < until:
        now = isrs()
        seen.append(now)
        assert all(dead not in isr for isr in now), f"dead broker {dead} back in an ISR: {now}"
        time.sleep(0.05)
    assert len(seen) > 10


# -- 3 (cluster). a consumer's long poll on a replicated partition ------------------------------------


def test_a_consumers_long_poll_returns_when_the_high_watermark_moves(cluster: Cluster) -> None:
    """On a leader the appended records are not visible to consumers until the followers have them: the
    waiting fetch must be woken by the high watermark's move, not only by the append."""
    from tests.integration.test_fetch_long_poll import PendingFetch

    topic = "hwpoll"
    create(cluster.bootstrap, topic, config={"min.insync.replicas": "2"})
    produce_all(cluster.bootstrap, topic, [b"first"])
    leader = cluster.broker(partition_md(cluster.bootstrap, topic).leader)
    with RawClient(leader.bootstrap, timeout=30) as reader:
        pending = PendingFetch(reader, topic, 1, max_wait_ms=20_000)
        assert not pending.answered_within(0.5), "answered at once with nothing to return"
        produce_all(cluster.bootstrap, topic, [b"second"])
        acked_at = time.monotonic()
        _, part = pending.result()
        assert time.monotonic() - acked_at < 5.0, "the fetch slept through the high watermark's move"
        assert part.high_watermark == 2 and len(part.records or b"") > 0
