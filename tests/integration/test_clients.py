"""Unmodified Kafka clients against a real broker process: byte-exact round trips, keys, headers."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow

Record = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


def make_records(n: int, seed: int) -> list[Record]:
    out: list[Record] = []
    for i in range(n):
        key = f"key-{i % 7}".encode()
        value = os.urandom(40) + bytes([seed, i % 256]) + b"\x00\xff"
        out.append((key, value, [("n", str(i).encode()), ("bin", b"\x00\x01\xfe")]))
    return out


def create_topic(
    bootstrap: str, name: str, partitions: int = 3, config: dict[str, str] | None = None
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    fut = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})]
    )
    fut[name].result(15)


def confluent_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout: float = 30,
    extra: dict[str, object] | None = None,
) -> list[tuple[int, int, bytes | None, bytes, list]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.queue.backoff.ms": 10,
            **(extra or {}),
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            got.append((m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or [])))
    finally:
        c.close()
    return got


def check_same(sent: list[Record], got: list[tuple[int, int, bytes | None, bytes, list]]) -> None:
    assert len(got) == len(sent)
    assert sorted((k, v, h) for k, v, h in sent) == sorted((k, v, h) for _, _, k, v, h in got)
    by_key: dict[bytes | None, set[int]] = defaultdict(set)
    for part, _, key, _, _ in got:
        by_key[key].add(part)
    assert all(len(parts) == 1 for parts in by_key.values()), "a key landed in more than one partition"
    per_part: dict[int, list[int]] = defaultdict(list)
    for part, off, *_ in got:
        per_part[part].append(off)
    for offs in per_part.values():
        assert offs == sorted(offs) and len(set(offs)) == len(offs)


def test_confluent_kafka_round_trip(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "cf")
    sent = make_records(500, 1)
    acked: list[int] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "enable.idempotence": True})
    for k, v, h in sent:
        p.produce("cf", v, k, headers=h, on_delivery=lambda err, msg: acked.append(0 if err is None else 1))
    assert p.flush(30) == 0
    assert acked.count(0) == len(sent)
    check_same(sent, confluent_consume(broker.bootstrap, "cf", 3, len(sent)))


def test_kcat_round_trip(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "kc")
    lines = [f"key-{i % 5}:value-{i}-{'x' * (i % 13)}" for i in range(300)]
    subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-P", "-t", "kc", "-K", ":", "-H", "src=kcat"],
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
        timeout=60,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%k|%s|%h|%p\n",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    rows = [r.split("|") for r in out.splitlines() if r]
    assert sorted(f"{k}:{v}" for k, v, _, _ in rows) == sorted(lines)
    assert {h for _, _, h, _ in rows} == {"src=kcat"}
    parts: dict[str, set[str]] = defaultdict(set)
    for k, _, _, p in rows:
        parts[k].add(p)
    assert all(len(v) == 1 for v in parts.values())


def test_kafka_python_round_trip(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    create_topic(broker.bootstrap, "kp")
    sent = make_records(300, 2)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)  # idempotent by default
    futures = [prod.send("kp", value=v, key=k, headers=h) for k, v, h in sent]
    metas = [f.get(timeout=30) for f in futures]
    prod.close()
    assert all(m.offset >= 0 for m in metas)
    cons = KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
    )
    cons.assign([KTP("kp", p) for p in range(3)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(sent) and time.monotonic() < deadline:
        for recs in cons.poll(timeout_ms=500).values():
            got += [(r.partition, r.offset, r.key, r.value, [(hk, hv) for hk, hv in r.headers]) for r in recs]
    cons.close()
    check_same(sent, got)


def test_aiokafka_round_trip(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    create_topic(broker.bootstrap, "ak")
    sent = make_records(300, 3)

    async def run() -> list[tuple[int, int, bytes | None, bytes, list]]:
        prod = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", enable_idempotence=True)
        await prod.start()
        try:
            for k, v, h in sent:
                await prod.send_and_wait("ak", value=v, key=k, headers=h)
        finally:
            await prod.stop()
        cons = AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await cons.start()
        got = []
        try:
            cons.assign([ATP("ak", p) for p in range(3)])
            deadline = time.monotonic() + 30
            while len(got) < len(sent) and time.monotonic() < deadline:
                batch = await cons.getmany(timeout_ms=500)
                for recs in batch.values():
                    got += [(r.partition, r.offset, r.key, r.value, list(r.headers)) for r in recs]
        finally:
            await cons.stop()
        return got

    check_same(sent, asyncio.run(run()))


def test_uvloop_broker_round_trip_with_large_fetches(tmp_path: Path) -> None:
    """--event-loop uvloop: no loop.sendfile there, so large fetch ranges go out by pread."""
    b = BrokerProcess(tmp_path / "data", args=["--event-loop", "uvloop"]).start()
    try:
        create_topic(b.bootstrap, "uv", 1)
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1_000_000})
        for i in range(3000):
            p.produce("uv", f"{i:06d}".encode() * 50)  # ~900 KB in large batches: fetches above 64 KiB
        assert p.flush(30) == 0
        got = confluent_consume(b.bootstrap, "uv", 1, 3000)
        assert [v for *_, v, _ in got] == [f"{i:06d}".encode() * 50 for i in range(3000)]
    finally:
        b.stop()
