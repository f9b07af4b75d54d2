"""Share groups (KIP-932) with librdkafka's ShareConsumer (confluent-kafka) and Kafka's own Java
KafkaShareConsumer: acknowledgement kinds and redelivery, a work queue of worker processes with one
killed -9 holding records and a poison record, and acknowledgements surviving a broker crash."""

from __future__ import annotations

import json
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer, TopicCollection
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic
from prometheus_client.parser import text_string_to_metric_families

from brook.broker.share_state import SHARE_STATE_TOPIC
from brook.protocol.errors import ErrorCode
from brook.protocol.messages import request_class
from brook.protocol.versions import ApiKey
from brook.share.state_records import ShareKey, key_hash
from tests.conftest import GROUP_ARGS
from tests.integration.test_clients import create_topic
from tests.integration.test_console import as_json, brook
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.jvm import kafka_tool
from tests.support.ports import free_port
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


METRICS_PORT = free_port()


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    args = [*GROUP_ARGS, "--metrics-port", str(METRICS_PORT)]
    b = BrokerProcess(tmp_path_factory.mktemp("share") / "data", args=args).start()
    try:
        yield b
    finally:
        b.stop()


def share_counts() -> dict[str, float]:
    """The broker's brook_share_* counters (scraped from its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{METRICS_PORT}/metrics", timeout=5) as r:
        text = r.read().decode()
    return {
        s.name: s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
        if s.name.startswith("brook_share_") and s.name.endswith("_total")
    }


def group_configs(bootstrap: str, group: str, **configs: str) -> None:
    """Set a share group's configs (names with '_' for '.', e.g. share_auto_offset_reset)."""
    entries = [
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
        for k, v in configs.items()
    ]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs(
        [ConfigResource("group", group, incremental_configs=entries)]
    ).values():
        f.result(15)


def create_topic_rf(
    bootstrap: str, name: str, partitions: int, replication_factor: int, **config: str
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication_factor, config=config)])[name].result(30)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % partitions)
    assert p.flush(30) == 0


def share_consumer(bootstrap: str, group: str, topic: str) -> ShareConsumer:
    c = ShareConsumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    )
    c.subscribe([topic])
    return c


def poll_until(c: ShareConsumer, n: int, timeout: float = 30) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        got += [m for m in c.poll(0.5) if m.error() is None]
    return got


def test_accept_release_reject_and_redelivery(sbroker: BrokerProcess) -> None:
    b = sbroker.bootstrap
    create_topic(b, "S1", 1)
    group_configs(b, "s1", share_auto_offset_reset="earliest")
    produce(b, "S1", [f"v{i}".encode() for i in range(10)])
    c = share_consumer(b, "s1", "S1")
    try:
        first = poll_until(c, 10)
        assert [(m.offset(), m.delivery_count()) for m in first] == [(i, 1) for i in range(10)]
        for m in first:
            kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(
                m.offset(), AcknowledgeType.ACCEPT
            )
            c.acknowledge(m, kind)
        assert all(err is None for err in c.commit_sync(15).values())
        # Only the released record comes back, delivered a second time; the rejected one never does.
        again = poll_until(c, 1)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(0, 2)]
        c.acknowledge(again[0], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        assert poll_until(c, 1, timeout=3) == []
        # Listed as a share group; described with its member, assigned the topic's partition.
        with RawClient(b) as raw:
            listed = raw.request(request_class(ApiKey.LIST_GROUPS)(types_filter=["share"]), 5)
            assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
                ("s1", "share", "Stable")
            ]
            req = request_class(ApiKey.SHARE_GROUP_DESCRIBE)(group_ids=["s1", "nope"])
            described = raw.request(req, 1).groups
        assert described[0].error_code == 0 and described[0].assignor_name == "simple"
        [member] = described[0].members
        assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [("S1", [0])]
        assert described[1].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    finally:
        c.close()


def test_poison_record_is_archived_after_five_deliveries(sbroker: BrokerProcess) -> None:
    b = sbroker.bootstrap
    create_topic(b, "S2", 1)
    group_configs(b, "s2", share_auto_offset_reset="earliest")
    produce(b, "S2", [b"poison", b"after"])
    c = share_consumer(b, "s2", "S2")
    deliveries: list[int] = []
    after: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (after and len(deliveries) >= 5):
            polled: list[Any] = list(c.poll(0.5))
            for m in polled:
                if m.error() is not None:
                    continue
                if m.value() == b"poison":
                    deliveries.append(int(m.delivery_count()))
                    c.acknowledge(m, AcknowledgeType.RELEASE)
                else:
                    after.append(int(m.offset()))
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(15)
        # Nothing more comes: the poison record was archived at the limit (5).
        assert poll_until(c, 1, timeout=3) == []
    finally:
        c.close()
    assert deliveries == [1, 2, 3, 4, 5]
    assert after == [1]


def _worker(b: str, group: str, topic: str, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.share_worker", b, group, topic, mode],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )


def _reader(proc: subprocess.Popen[str], name: int, out: queue.Queue[tuple[int, dict[str, Any]]]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        out.put((name, json.loads(line)))


def test_work_queue_with_a_worker_killed_holding_records(sbroker: BrokerProcess) -> None:
    """8 workers on a 2-partition topic of 10,000 jobs: every job acknowledged exactly once, the
    killed worker's records redelivered (delivery count 2) once its connection is gone (or at the
    latest when their lock expires), the poison record delivered 5 times and archived while the queue
    goes on."""
    b = sbroker.bootstrap
    create_topic(b, "Q", 2)
    group_configs(b, "q", share_auto_offset_reset="earliest", share_record_lock_duration_ms="3000")
    jobs = [f"job-{i}".encode() for i in range(10_000)]
    poison_index = 9_000
    jobs[poison_index] = b"poison"
    produce(b, "Q", jobs, partitions=2)
    before = share_counts()
    events: queue.Queue[tuple[int, dict[str, Any]]] = queue.Queue()
    procs: list[subprocess.Popen[str]] = []
    try:
        holder = _worker(b, "q", "Q", "hold")
        procs.append(holder)
        threading.Thread(target=_reader, args=(holder, 0, events), daemon=True).start()
        _, ev = events.get(timeout=60)
        held = {(p, o) for p, o in ev["holding"]}
        assert held
        for i in range(1, 8):
            w = _worker(b, "q", "Q", "work")
            procs.append(w)
            threading.Thread(target=_reader, args=(w, i, events), daemon=True).start()
        time.sleep(1)
        holder.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        acked: Counter[tuple[int, int]] = Counter()
        counts: dict[tuple[int, int], int] = {}
        poison: list[int] = []
        first_redelivery = None
        deadline = time.monotonic() + 180
        while (len(acked) < 9_999 or len(poison) < 5) and time.monotonic() < deadline:
            try:
                _, ev = events.get(timeout=1)
            except queue.Empty:
                continue
            for p, o, dc in ev.get("acked", []):
                acked[(p, o)] += 1
                counts[(p, o)] = dc
                if (p, o) in held and first_redelivery is None:
                    first_redelivery = time.monotonic()
            if "poison" in ev:
                poison.append(ev["poison"])
        time.sleep(2)  # anything delivered twice would show now
        while not events.empty():
            _, ev = events.get()
            for p, o, _dc in ev.get("acked", []):
                acked[(p, o)] += 1
            if "poison" in ev:
                poison.append(ev["poison"])
        # Before the workers stop: closing their connections releases what they hold.
        after = share_counts()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    delta = {k: after[k] - before.get(k, 0) for k in after}
    assert delta["brook_share_records_acknowledged_total"] == 9_999
    assert delta["brook_share_records_archived_total"] == 1  # the poison record
    # The poison record's 5 releases, and the killed worker's records (released when its connection
    # closed, or expired if another worker's fetch came first).
    returned = delta["brook_share_records_released_total"] + delta["brook_share_lock_expiries_total"]
    assert returned >= 5 + len(held)
    assert delta["brook_share_records_acquired_total"] >= 10_000 + 4 + len(held)
    expected = {(i % 2, i // 2) for i in range(10_000) if i != poison_index}
    assert set(acked) == expected, f"missing {len(expected - set(acked))}, extra {set(acked) - expected}"
    assert max(acked.values()) == 1, [k for k, n in acked.items() if n > 1][:10]
    # The killed worker's records: redelivered, counted as a second delivery.
    assert all(counts[k] == 2 for k in held if k in counts)
    assert all(n == 1 for k, n in counts.items() if k not in held)
    assert first_redelivery is not None and first_redelivery > killed_at
    assert sorted(poison) == [1, 2, 3, 4, 5]


def test_acknowledgements_survive_a_broker_crash(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=GROUP_ARGS).start()
    try:
        create_topic(b.bootstrap, "D", 1)
        group_configs(b.bootstrap, "d", share_auto_offset_reset="earliest")
        produce(b.bootstrap, "D", [f"v{i}".encode() for i in range(50)])
        c = share_consumer(b.bootstrap, "d", "D")
        got = poll_until(c, 50)
        assert len(got) == 50
        for m in got[:20]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        assert all(err is None for err in c.commit_sync(15).values())
        c.close()  # the 30 unacknowledged records are released
        b.kill()
        b.start()
        c = share_consumer(b.bootstrap, "d", "D")
        try:
            again = poll_until(c, 30)
            assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 2) for i in range(20, 50)]
            for m in again:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            assert poll_until(c, 1, timeout=3) == []
        finally:
            c.close()
    finally:
        b.stop()


def test_java_share_consumer(sbroker: BrokerProcess) -> None:
    """Kafka's own KafkaShareConsumer (kafka-console-share-consumer) reads and acknowledges."""
    b = sbroker.bootstrap
    create_topic(b, "J", 1)
    group_configs(b, "j", share_auto_offset_reset="earliest")
    produce(b, "J", [f"j{i}".encode() for i in range(5)])
    r = kafka_tool(
        "kafka-console-share-consumer",
        *("--bootstrap-server", b, "--topic", "J", "--group", "j", "--max-messages", "5"),
        *("--timeout-ms", "30000", "--formatter-property", "print.offset=true"),
        *("--formatter-property", "print.delivery=true"),
    )
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("Offset:")]
    assert lines == [f"Offset:{i}\tDelivery:1\tj{i}" for i in range(5)], r.stdout + r.stderr
    # What the Java consumer accepted is not delivered again.
    c = share_consumer(b, "j", "J")
    try:
        assert poll_until(c, 1, timeout=4) == []
    finally:
        c.close()


def test_kafka_share_groups_tool(sbroker: BrokerProcess) -> None:
    """kafka-share-groups.sh lists, describes, resets, deletes offsets and deletes a share group
    (ShareGroupDescribe, DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets,
    DeleteGroups)."""
    b = sbroker.bootstrap
    create_topic(b, "T", 1)
    group_configs(b, "t", share_auto_offset_reset="earliest")
    produce(b, "T", [f"t{i}".encode() for i in range(20)])
    c = share_consumer(b, "t", "T")
    try:
        got = poll_until(c, 20)
        for m in got[:5]:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(15)
    finally:
        c.close()

    def tool(*args: str) -> list[list[str]]:
        r = kafka_tool("kafka-share-groups", "--bootstrap-server", b, *args, check=True)
        return [ln.split() for ln in r.stdout.splitlines() if ln.strip()]

    assert ["t"] in tool("--list")
    assert tool("--describe", "--group", "t")[1:] == [["t", "T", "0", "5", "15"]]  # start offset, lag
    assert tool("--describe", "--group", "t", "--state")[1][-2:] == ["Empty", "0"]
    tool("--reset-offsets", "--group", "t", "--topic", "T", "--to-offset", "12", "--execute")
    assert tool("--describe", "--group", "t")[1:] == [["t", "T", "0", "12", "8"]]
    c = share_consumer(b, "t", "T")
    try:
        again = poll_until(c, 8)
        assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 1) for i in range(12, 20)]
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(15)
    finally:
        c.close()
    tool("--delete-offsets", "--group", "t", "--topic", "T")
    assert tool("--describe", "--group", "t") == [
        ["Share", "group", "'t'", "has", "no", "offset", "information."]
    ]
    tool("--delete", "--group", "t")
    assert ["t"] not in tool("--list")


def test_brook_group_commands(sbroker: BrokerProcess) -> None:
    """`brook group list/describe/reset-offsets` know share groups: members, start offsets, lag."""
    b = sbroker.bootstrap
    create_topic(b, "C", 2)
    group_configs(b, "c", share_auto_offset_reset="earliest")
    produce(b, "C", [f"c{i}".encode() for i in range(10)], partitions=2)
    c = share_consumer(b, "c", "C")
    try:
        got: set[tuple[int, int]] = set()  # distinct: a released record comes back
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            for m in [m for m in c.poll(0.5) if m.error() is None]:
                kind = AcknowledgeType.ACCEPT if m.partition() == 0 else AcknowledgeType.RELEASE
                c.acknowledge(m, kind)
                got.add((m.partition() or 0, m.offset() or 0))
            c.commit_sync(15)
        assert sorted(got) == [(p, o) for p in (0, 1) for o in range(5)]
        assert ["c", "STABLE", "share"] in [
            [g["group"], g["state"], g["protocol"]] for g in as_json(b, "group", "list")
        ]
        d = as_json(b, "group", "describe", "c")
        assert (d["protocol"], d["assignor"]) == ("share", "simple")
        [member] = d["members"]
        assert member["partitions"] == ["C-0", "C-1"]
        starts = {(p["partition"], p["start"], p["end"], p["lag"]) for p in d["partitions"]}
        assert starts == {(0, 5, 5, 0), (1, 0, 5, 5)}  # partition 1's records were released
        r = brook(b, "group", "reset-offsets", "c", "-t", "C", "--to-latest", "--execute", check=False)
        assert r.returncode == 1 and "active member" in r.stderr
    finally:
        c.close()
    brook(b, "group", "reset-offsets", "c", "-t", "C", "--to-latest", "--execute")
    d = as_json(b, "group", "describe", "c")
    assert {(p["partition"], p["start"], p["lag"]) for p in d["partitions"]} == {(0, 5, 0), (1, 5, 0)}


def _heartbeat_until_assigned(raw: RawClient, group: str, member: str, topic: str, n: int) -> Any:
    """ShareGroupHeartbeat until the member holds `n` partitions of `topic`: its topic id."""
    epoch, deadline = 0, time.monotonic() + 20
    while time.monotonic() < deadline:
        # As a client does first: FindCoordinator creates the offsets topic on a fresh broker.
        raw.request(request_class(ApiKey.FIND_COORDINATOR)(key=group, key_type=0), 3)
        r = raw.request(
            request_class(ApiKey.SHARE_GROUP_HEARTBEAT)(
                group_id=group, member_id=member, member_epoch=epoch, subscribed_topic_names=[topic]
            ),
            1,
        )
        if r.error_code in (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            time.sleep(0.2)  # the offsets topic is being created
            continue
        assert r.error_code == ErrorCode.NONE, r
        epoch = r.member_epoch
        if r.assignment is not None and sum(len(t.partitions) for t in r.assignment.topic_partitions) == n:
            return r.assignment.topic_partitions[0].topic_id
        time.sleep(0.2)
    raise AssertionError(f"{member} was not assigned {n} partitions of {topic}")


def _share_fetch(
    raw: RawClient,
    group: str,
    member: str,
    epoch: int,
    topic_id: Any,
    releases: dict[int, list[tuple[int, int]]],
) -> dict[int, list[Any]]:
    """One ShareFetch (v1) of the partitions in `releases`, in that order, releasing their ranges; the
    acquired records by partition."""
    fetch = request_class(ApiKey.SHARE_FETCH)
    parts = [
        fetch.FetchTopic.FetchPartition(
            partition_index=p,
            acknowledgement_batches=[
                fetch.FetchTopic.FetchPartition.AcknowledgementBatch(
                    first_offset=f,
                    last_offset=last,
                    acknowledge_types=[2],  # 2: RELEASE
                )
                for f, last in ranges
            ],
        )
        for p, ranges in releases.items()
    ]
    r = raw.request(
        fetch(
            group_id=group,
            member_id=member,
            share_session_epoch=epoch,
            max_wait_ms=500,
            min_bytes=1,
            max_bytes=1 << 20,
            max_records=500,
            batch_size=500,
            topics=[fetch.FetchTopic(topic_id=topic_id, partitions=parts)],
            forgotten_topics_data=[],
        ),
        1,
    )
    assert r.error_code == ErrorCode.NONE, r
    return {p.partition_index: p.acquired_records for t in r.responses for p in t.partitions}


def test_a_partition_after_one_with_released_records_is_served(sbroker: BrokerProcess) -> None:
    """A share session lists partition 1 before partition 0; partition 1's records are released on
    every fetch, so it always has records to hand out. Partition 0's records still come (on the second
    fetch at the latest), before partition 1's are archived for their delivery count."""
    b = sbroker.bootstrap
    create_topic(b, "O", 2)
    group_configs(b, "o", share_auto_offset_reset="earliest")
    produce(b, "O", [f"o{i}".encode() for i in range(10)], partitions=2)
    member = "m-" + uuid.uuid4().hex[:20]
    with RawClient(b) as raw:
        topic_id = _heartbeat_until_assigned(raw, "o", member, "O", 2)
        served: list[set[int]] = []
        acks: list[tuple[int, int]] = []  # partition 1's acquired ranges, released by the next fetch
        for epoch in range(4):
            got = _share_fetch(raw, "o", member, epoch, topic_id, {1: acks, 0: []})
            served.append({i for i, acquired in got.items() if acquired})
            acks = [(a.first_offset, a.last_offset) for a in got.get(1, [])]
            if 0 in served[-1]:
                break
    assert 0 in set().union(*served), f"partition 0 never served, fetches served {served}"


def test_a_closed_connection_releases_its_members_records(sbroker: BrokerProcess) -> None:
    """As Kafka 4.1+: when a share consumer's connection closes, its share session ends and the records
    it acquired go to another member at once (delivery count 2), not when their 60 s locks expire."""
    b = sbroker.bootstrap
    create_topic(b, "D", 1)
    group_configs(b, "d", share_auto_offset_reset="earliest", share_record_lock_duration_ms="60000")
    produce(b, "D", [f"d{i}".encode() for i in range(5)])
    first = "m-" + uuid.uuid4().hex[:20]
    with RawClient(b) as raw:
        topic_id = _heartbeat_until_assigned(raw, "d", first, "D", 1)
        held = _share_fetch(raw, "d", first, 0, topic_id, {0: []})[0]
        assert [(a.first_offset, a.last_offset) for a in held] == [(0, 4)]
    # The connection is closed (not a final-epoch request): the broker sees it go.
    second = "m-" + uuid.uuid4().hex[:20]
    with RawClient(b) as raw:
        _heartbeat_until_assigned(raw, "d", second, "D", 1)
        deadline, again = time.monotonic() + 10, []
        epoch = 0
        while not again and time.monotonic() < deadline:
            again = _share_fetch(raw, "d", second, epoch, topic_id, {0: []}).get(0, [])
            epoch += 1
        assert [(a.first_offset, a.last_offset, a.delivery_count) for a in again] == [(0, 4, 2)]


def _remote_state_group(b: str, topic: str) -> str:
    """A group id whose share-partition of `topic`-0 is stored in a __share_group_state partition led
    by another broker than `topic`-0's leader: its state goes there as a Produce between brokers."""
    admin = AdminClient({"bootstrap.servers": b})
    desc = admin.describe_topics(TopicCollection([topic]))[topic].result(15)
    tid = desc.topic_id
    topic_id = struct.pack(">qq", tid.get_most_significant_bits(), tid.get_least_significant_bits())
    md = admin.list_topics(timeout=10).topics
    data_leader = md[topic].partitions[0].leader
    state = md[SHARE_STATE_TOPIC].partitions
    for i in range(1000):
        group = f"f{i}"
        if state[key_hash(ShareKey(group, topic_id, 0)) % len(state)].leader != data_leader:
            return group
    raise AssertionError("no group id hashes to another broker's state partition")


def test_leader_failover_loses_no_acknowledgement(tmp_path: Path) -> None:
    """3 brokers, RF=3: the leader of a partition is killed -9; its successor reads the share-partition
    from __share_group_state (written by the old leader to another broker) and redelivers only what
    was not acknowledged."""
    c = Cluster(tmp_path, extra_args=GROUP_ARGS).start()
    try:
        b = c.bootstrap
        create_topic_rf(b, "F", 1, 3)
        # As the first share fetch would, so that the test can look its leaders up.
        create_topic_rf(b, SHARE_STATE_TOPIC, 50, 3, **{"cleanup.policy": "compact"})
        group = _remote_state_group(b, "F")
        group_configs(b, group, share_auto_offset_reset="earliest")
        produce(b, "F", [f"f{i}".encode() for i in range(100)])
        s = share_consumer(b, group, "F")
        try:
            got = poll_until(s, 100)
            assert len(got) == 100
            for m in got:
                s.acknowledge(m, AcknowledgeType.ACCEPT if m.offset() < 60 else AcknowledgeType.RELEASE)
            assert all(err is None for err in s.commit_sync(15).values())
        finally:
            s.close()
        admin = AdminClient({"bootstrap.servers": b})
        leader = admin.list_topics("F", timeout=10).topics["F"].partitions[0].leader
        c.brokers[leader].kill()
        s = share_consumer(c.bootstrap, group, "F")
        try:
            again = poll_until(s, 40, timeout=60)
            assert [(m.offset(), m.delivery_count()) for m in again] == [(i, 2) for i in range(60, 100)]
        finally:
            s.close()
    finally:
        c.stop()


def test_members_survive_a_coordinator_restart(tmp_path: Path) -> None:
    """A share group is records in __consumer_offsets: after a kill -9 and restart its member goes on
    with its member id and epoch (not UNKNOWN_MEMBER_ID), and an emptied group is still listed."""
    b = BrokerProcess(tmp_path / "data", args=GROUP_ARGS).start()
    try:
        create_topic(b.bootstrap, "R", 2)
        member = "m-" + uuid.uuid4().hex[:20]
        with RawClient(b.bootstrap) as raw:
            _heartbeat_until_assigned(raw, "r", member, "R", 2)
            epoch = raw.request(
                request_class(ApiKey.SHARE_GROUP_HEARTBEAT)(
                    group_id="r", member_id=member, member_epoch=0, subscribed_topic_names=["R"]
                ),
                1,
            ).member_epoch
            assert epoch > 0
        b.kill()
        b.start()
        with RawClient(b.bootstrap) as raw:
            deadline = time.monotonic() + 30
            while True:
                r = raw.request(
                    request_class(ApiKey.SHARE_GROUP_HEARTBEAT)(
                        group_id="r", member_id=member, member_epoch=epoch
                    ),
                    1,
                )
                if r.error_code not in (
                    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                    ErrorCode.COORDINATOR_NOT_AVAILABLE,
                ):
                    break
                assert time.monotonic() < deadline, r
                time.sleep(0.2)
            assert (r.error_code, r.member_epoch) == (ErrorCode.NONE, epoch), r
            left = raw.request(
                request_class(ApiKey.SHARE_GROUP_HEARTBEAT)(group_id="r", member_id=member, member_epoch=-1),
                1,
            )
            assert left.error_code == ErrorCode.NONE
        b.kill()
        b.start()
        with RawClient(b.bootstrap) as raw:
            wait_for_group = time.monotonic() + 30
            while True:
                listed = raw.request(request_class(ApiKey.LIST_GROUPS)(states_filter=[], types_filter=[]), 5)
                if ("r", "share") in {(g.group_id, g.group_type) for g in listed.groups}:
                    break
                assert time.monotonic() < wait_for_group, f"the emptied share group is not listed: {listed}"
                time.sleep(0.3)
    finally:
        b.stop()
