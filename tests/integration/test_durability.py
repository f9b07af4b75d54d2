"""Compression stored as sent, kill -9 durability, retention, against a real broker process."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from brook.protocol.batch import iter_headers
from tests.integration.test_clients import Record, check_same, confluent_consume, create_topic, make_records
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow

CODECS = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def compressible(n: int) -> list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]]:
    # Clients send a batch uncompressed when compression would not shrink it: give them text.
    return [(k, v + b"the quick brown fox " * 10, h) for k, v, h in make_records(n, 4)]


def stored_codecs(data_dir: Path, topic: str) -> set[int]:
    codecs = set()
    for seg in data_dir.glob(f"{topic}-*/*.log"):
        codecs |= {h.attributes & 0x07 for _, h in iter_headers(seg.read_bytes())}
    return codecs


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_librdkafka_compression_is_stored_as_sent(broker: BrokerProcess, codec: str) -> None:
    topic = f"lz-{codec}"
    create_topic(broker.bootstrap, topic)
    sent = compressible(200)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 20})
    for k, v, h in sent:
        p.produce(topic, v, k, headers=h)
    assert p.flush(30) == 0
    check_same(sent, confluent_consume(broker.bootstrap, topic, 3, len(sent)))
    assert stored_codecs(broker.data_dir, topic) == {CODECS[codec]}


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_kafka_python_compression_is_stored_as_sent(broker: BrokerProcess, codec: str) -> None:
    from kafka import KafkaProducer

    topic = f"kpz-{codec}"
    create_topic(broker.bootstrap, topic)
    sent = compressible(200)
    prod = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for f in [prod.send(topic, value=v, key=k, headers=h) for k, v, h in sent]:
        f.get(timeout=30)
    prod.close()
    check_same(sent, confluent_consume(broker.bootstrap, topic, 3, len(sent)))
    assert stored_codecs(broker.data_dir, topic) == {CODECS[codec]}


def test_kill_9_keeps_every_acknowledged_record(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, "durable", partitions=2)
        acked: list[tuple[int, int]] = []
        p = Producer(
            {"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 2, "enable.idempotence": True}
        )

        def on_delivery(err: object, msg: object) -> None:
            if err is None:
                acked.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

        for i in range(5000):
            p.produce("durable", f"v{i}".encode(), f"k{i}".encode(), on_delivery=on_delivery)
            if i % 500 == 0:
                p.poll(0)
        p.flush(30)
        assert len(acked) == 5000
        b.kill()
        b.start()
        got = confluent_consume(b.bootstrap, "durable", 2, 5000)
        assert {(part, off) for part, off, *_ in got} >= set(acked)
        assert sorted(v for *_, v, _ in got) == sorted(f"v{i}".encode() for i in range(5000))
    finally:
        b.stop()


def test_kill_9_after_a_clean_restart_verifies_only_what_came_after(tmp_path: Path) -> None:
    """A clean stop leaves each partition's recovery point; after the restart, more records, and kill
    -9, recovery re-validates only what each active segment gained since, and every record reads back."""
    b = BrokerProcess(tmp_path / "data").start()
    try:
        create_topic(b.bootstrap, "restarted", partitions=2)
        first, later = make_records(3000, 1), make_records(2000, 2)
        _produce_acked(b.bootstrap, "restarted", first)
        b.stop()
        b.start()
        _produce_acked(b.bootstrap, "restarted", later)
        b.kill()
        b.start()
        log = b.log_text()
        for partition in (0, 1):
            resumed = f"restarted-{partition}/{'0' * 20}.log: verifying from the recovery point, position "
            assert resumed in log, log[-2000:]
        got = confluent_consume(b.bootstrap, "restarted", 2, 5000)
        assert sorted(v for *_, v, _ in got) == sorted(v for _, v, _ in first + later)
    finally:
        b.stop()


def _produce_acked(bootstrap: str, topic: str, records: list[Record]) -> None:
    """Produce with acks=all; every record must be acknowledged."""
    errors: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2, "enable.idempotence": True})
    for k, v, h in records:
        p.produce(topic, v, k, headers=h, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0 and len(errors) == len(records) and not any(errors), errors[:3]


def _watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return int(low), int(high)
    finally:
        c.close()


# By time: the first 50 records carry timestamps an hour old, the last 10 are new and stay for 10
# minutes, so what retention keeps is never empty and the content checks below always run.
@pytest.mark.parametrize("config", [{"retention.bytes": "3000"}, {"retention.ms": "600000"}])
def test_retention_deletes_old_segments(tmp_path: Path, config: dict[str, str]) -> None:
    b = BrokerProcess(tmp_path / "data", args=["--retention-check-interval-ms", "200"]).start()
    try:
        create_topic(b.bootstrap, "ret", partitions=1, config={"segment.bytes": "1000", **config})
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
        hour_ago = int(time.time() * 1000) - 3_600_000
        for i in range(60):
            p.produce("ret", b"x" * 200, partition=0, timestamp=hour_ago if i < 50 else 0)
            p.flush(10)

        # 60 batches of ~270 bytes in 1000-byte segments: about 20 segments were written.
        def segments() -> int:
            return len(list((b.data_dir / "ret-0").glob("*.log")))

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (_watermarks(b.bootstrap, "ret")[0] == 0 or segments() >= 15):
            time.sleep(0.3)
        assert segments() < 15
        low, high = _watermarks(b.bootstrap, "ret")
        assert high == 60
        assert 0 < low <= 60
        # What is left is readable from the log start (retention may move it on while we read).
        got = confluent_consume(b.bootstrap, "ret", 1, high - low, extra={"auto.offset.reset": "earliest"})
        offsets = [off for _, off, *_ in got]
        assert low < high and len(offsets) > 0, (low, high)
        assert offsets[-1] == high - 1 and all(off >= low for off in offsets)
        assert offsets == list(range(offsets[0], high))  # no gap in what remains
    finally:
        b.stop()
