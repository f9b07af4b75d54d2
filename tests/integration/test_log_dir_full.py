"""A full disk (a small tmpfs): the broker answers KAFKA_STORAGE_ERROR at once, says so once in its log,
/readyz and brook_offline_log_directory_count report it, nothing acknowledged is lost, and it comes back
when space is freed or after a restart. In a cluster, leadership moves to the brokers with room."""

from __future__ import annotations

import json
import re
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import MetadataRequest

from brook.protocol.errors import ErrorCode
from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster, eventually
from tests.support.offsets import end_offset
from tests.support.ports import free_port
from tests.support.raw import RawClient, fetch_request
from tests.support.small_fs import ballast, fill_up, resize, small_filesystem

pytestmark = pytest.mark.slow

RECORD = 1024
PROBE_ARGS = ["--log-dir-probe-interval-ms", "200", "--log-dir-min-free-bytes", str(256 * 1024)]


def record(i: int) -> bytes:
    return struct.pack(">q", i) + bytes(RECORD - 8)


class Deliveries:
    """Delivery reports: ids acknowledged, ids refused with their error and how long it took."""

    def __init__(self) -> None:
        self.acked: list[int] = []
        self.refused: list[tuple[int, str, float]] = []

    def callback(self, i: int) -> Any:
        sent = time.monotonic()

        def report(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self.acked.append(i)
            else:
                self.refused.append((i, err.name(), time.monotonic() - sent))

        return report


def fill(bootstrap: str, topic: str, first: int, out: Deliveries, limit: int = 20_000) -> int:
    """Produce 1 KiB records (acks=all, no retries: each refusal is reported as the broker gave it)
    until the broker refuses them; returns the next id."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "enable.idempotence": False,
            "retries": 0,
            "linger.ms": 5,
            "message.timeout.ms": 15_000,
        }
    )
    i = first
    while not out.refused and i < first + limit:
        for _ in range(min(100, first + limit - i)):
            p.produce(topic, record(i), on_delivery=out.callback(i))
            i += 1
        p.flush(20)
    assert p.flush(20) == 0
    return i


def read_all(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 20) -> list[int]:
    """The ids of every record up to each partition's end offset."""
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    try:
        ends = {p: end_offset(cons, topic, p) for p in range(partitions)}
        cons.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        ids: list[int] = []
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout
        while len(done) < partitions and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and m.error() is None:
                ids.append(struct.unpack_from(">q", m.value())[0])
                if m.offset() >= ends[m.partition()] - 1:
                    done.add(m.partition())
        assert len(done) == partitions, f"read to the end of {sorted(done)} of {partitions} partitions"
        return ids
    finally:
        cons.close()


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def offline_dirs(metrics_port: int) -> float:
    _, text = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    m = re.search(r"^brook_offline_log_directory_count (\S+)$", text, re.M)
    assert m is not None, "brook_offline_log_directory_count is not exported"
    return float(m.group(1))


def fetch_error(bootstrap: str, topic: str) -> int:
    req = fetch_request(topic)
    with RawClient(bootstrap) as c:
        return int(c.request(req, 11).responses[0].partitions[0].error_code)


def error_lines(log_path: Path) -> list[str]:
    return [line for line in log_path.read_text().splitlines() if " ERROR " in line]


def metrics_port_of(b: BrokerProcess) -> int:
    m = re.search(r"metrics and health on http://[^:]+:(\d+)", b.log_path.read_text())
    assert m is not None, "no metrics port in the broker's log"
    return int(m.group(1))


def metadata_from(bootstrap: str, topic: str) -> tuple[set[int], dict[int, tuple[int, list[int]]]]:
    """(brokers, {partition: (leader, ISR)}) as this one broker answers Metadata."""
    M = MetadataRequest
    req = M(
        topics=[M.MetadataRequestTopic(name=topic)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with RawClient(bootstrap) as c:
        r = c.request(req, 9)
    parts = {p.partition_index: (p.leader_id, list(p.isr_nodes)) for p in r.topics[0].partitions}
    return {b.node_id for b in r.brokers}, parts


@pytest.fixture
def full_disk_broker(tmp_path: Path) -> Iterator[tuple[BrokerProcess, int, Path]]:
    """A broker whose data directory is a 3 MiB tmpfs, 1 MiB of it taken by a file to free later."""
    with small_filesystem(tmp_path / "data", "3m") as data:
        spare = ballast(data, 1024 * 1024)
        metrics_port = free_port()
        b = BrokerProcess(
            data, args=["--num-partitions", "1", "--metrics-port", str(metrics_port), *PROBE_ARGS]
        )
        b.start()
        try:
            yield b, metrics_port, spare
        finally:
            b.stop()


def test_a_full_disk_is_refused_at_once_reported_and_recovered(
    full_disk_broker: tuple[BrokerProcess, int, Path],
) -> None:
    broker, metrics_port, spare = full_disk_broker
    data = broker.data_dir
    out = Deliveries()
    next_id = fill(broker.bootstrap, "t", 0, out)

    # The client gets KAFKA_STORAGE_ERROR, quickly (its request timeout is 15 s), for every record the
    # broker could not take; everything else was acknowledged.
    assert out.acked and out.refused
    assert {name for _, name, _ in out.refused} == {"KAFKA_STORAGE_ERROR"}
    slowest = max(t for _, _, t in out.refused)
    assert slowest < 2.0, slowest
    assert fetch_error(broker.bootstrap, "t") == ErrorCode.KAFKA_STORAGE_ERROR
    status, body = http_get(f"http://127.0.0.1:{metrics_port}/readyz")
    assert status == 503 and "offline" in json.loads(body)["reason"], body
    assert offline_dirs(metrics_port) == 1
    errors = error_lines(broker.log_path)
    assert len(errors) == 1 and str(data) in errors[0] and "ENOSPC" in errors[0], errors

    # An operator frees space: the broker comes back by itself, with every acknowledged record.
    spare.unlink()
    eventually(lambda: offline_dirs(metrics_port) == 0, 15, "the log directory to come back")
    assert http_get(f"http://127.0.0.1:{metrics_port}/readyz")[0] == 200
    assert "is back online" in broker.log_path.read_text()
    refused = {i for i, _, _ in out.refused}
    ids = read_all(broker.bootstrap, "t")
    assert len(ids) == len(set(ids))
    # Exactly what was acknowledged: nothing lost, and no refused record served (a failed append
    # leaves nothing of its batch readable).
    assert set(ids) == set(out.acked), (set(out.acked) - set(ids), set(ids) - set(out.acked))
    assert not set(ids) & refused

    # Full again, and stopped while full. The disk fills up entirely meanwhile, so the broker's start
    # cannot recover its logs (that rewrites indexes): it starts with its log directory offline, and
    # comes back when the volume grows.
    again = Deliveries()
    fill(broker.bootstrap, "t", next_id, again)
    assert again.acked and {name for _, name, _ in again.refused} == {"KAFKA_STORAGE_ERROR"}
    assert len(error_lines(broker.log_path)) == 2  # one line per failure
    broker.stop()
    fill_up(data)
    broker.start()
    assert http_get(f"http://127.0.0.1:{metrics_port}/readyz")[0] == 503
    assert fetch_error(broker.bootstrap, "t") == ErrorCode.KAFKA_STORAGE_ERROR
    resize(data, "4m")
    eventually(lambda: offline_dirs(metrics_port) == 0, 15, "the log directory to come back")
    ids = read_all(broker.bootstrap, "t")
    assert len(ids) == len(set(ids))
    assert set(ids) == set(out.acked) | set(again.acked)


@pytest.mark.parametrize("freed_by", ["retention", "deleted-topic"])
def test_space_freed_by_the_broker_itself_brings_it_back(tmp_path: Path, freed_by: str) -> None:
    with small_filesystem(tmp_path / "data", "3m") as data:
        metrics_port = free_port()
        # Retention runs where the log directory is probed, not only on its usual timer (an hour here).
        b = BrokerProcess(
            data,
            args=[
                "--metrics-port",
                str(metrics_port),
                "--retention-check-interval-ms",
                "3600000",
                *PROBE_ARGS,
            ],
        )
        b.start()
        try:
            admin = AdminClient({"bootstrap.servers": b.bootstrap})
            configs = {"segment.bytes": str(256 * 1024), "retention.bytes": str(512 * 1024)}
            topics = [NewTopic("t", 1, 1, config=configs if freed_by == "retention" else {})]
            if freed_by == "deleted-topic":
                topics.append(NewTopic("junk", 1, 1))
            for f in admin.create_topics(topics).values():
                f.result(10)
            kept = Deliveries()
            fill(b.bootstrap, "t", 0, kept, limit=100)
            assert len(kept.acked) == 100
            out = Deliveries()
            fill(b.bootstrap, "t" if freed_by == "retention" else "junk", 100, out)
            assert out.refused and offline_dirs(metrics_port) == 1
            if freed_by == "deleted-topic":
                admin.delete_topics(["junk"])["junk"].result(10)
            eventually(lambda: offline_dirs(metrics_port) == 0, 15, "the log directory to come back")
            more = Deliveries()
            fill(b.bootstrap, "t", 100_000, more, limit=10)
            assert len(more.acked) == 10 and not more.refused
            ids = read_all(b.bootstrap, "t")
            assert len(ids) == len(set(ids)) and set(more.acked) <= set(ids)
            if freed_by == "deleted-topic":
                assert set(kept.acked) <= set(ids)
            else:  # retention deleted the oldest: what is left is the newest, in order
                assert ids == sorted(ids) and max(out.acked) in ids
        finally:
            b.stop()


def test_a_full_disk_in_a_cluster_moves_leadership_and_loses_nothing(tmp_path: Path) -> None:
    """Broker 2's data directory is a 2 MiB tmpfs; 0 and 1 have room. A topic of 3 partitions, RF 3,
    min.insync.replicas 2, gets 3 MiB from an idempotent acks=all producer."""
    with small_filesystem(tmp_path / "broker-2", "2m") as small:
        cluster = Cluster(tmp_path, extra_args=PROBE_ARGS)
        try:
            cluster.start()
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            topic = NewTopic("full", 3, 3, config={"min.insync.replicas": "2"})
            admin.create_topics([topic])["full"].result(20)
            out = Deliveries()
            p = Producer(
                {
                    "bootstrap.servers": cluster.bootstrap,
                    "acks": "all",
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "message.timeout.ms": 30_000,
                }
            )
            n = 3000
            for i in range(n):
                p.produce("full", record(i), on_delivery=out.callback(i))
                p.poll(0)
                if i % 100 == 99:
                    p.flush(30)
            assert p.flush(60) == 0
            # Nothing refused: the producer carried on with the leaders on brokers 0 and 1.
            assert not out.refused, out.refused[:3]
            assert sorted(out.acked) == list(range(n))
            b2 = cluster.broker(2)
            errors = error_lines(b2.log_path)
            assert len(errors) == 1 and str(small) in errors[0] and "ENOSPC" in errors[0], errors

            def moved() -> bool:
                md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("full", timeout=10)
                parts = md.topics["full"].partitions.values()
                return 2 not in md.brokers and all(pm.leader in (0, 1) and 2 not in pm.isrs for pm in parts)

            eventually(moved, 15, "the leaderships and ISRs to leave broker 2")
            # Broker 2 itself answers Metadata with the new leaders, and is not ready.
            brokers, parts = metadata_from(b2.bootstrap, "full")
            assert 2 not in brokers and all(leader in (0, 1) for leader, _ in parts.values()), parts
            assert http_get(f"http://127.0.0.1:{metrics_port_of(b2)}/readyz")[0] == 503
            assert sorted(read_all(cluster.bootstrap, "full", 3)) == list(range(n))

            # The volume grows: broker 2 comes back, catches up, and is in every ISR again.
            resize(small, "16m")

            def whole() -> bool:
                md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics("full", timeout=10)
                parts = md.topics["full"].partitions.values()
                return 2 in md.brokers and all(sorted(pm.isrs) == [0, 1, 2] for pm in parts)

            eventually(whole, 30, "broker 2 to return to every ISR")
        finally:
            cluster.stop()
