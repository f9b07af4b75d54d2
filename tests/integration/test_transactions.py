"""Kafka transactions with confluent-kafka (librdkafka) against a real broker: commit and abort across
topics with offsets, read_committed versus read_uncommitted, fencing by a second producer, the abort
of a killed producer's transaction after transaction.timeout.ms, and exactly-once
consume-transform-produce through a SIGKILL."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from tests.conftest import GROUP_ARGS
from tests.integration.test_clients import create_topic
from tests.support.broker import BrokerProcess
from tests.support.cluster import eventually

pytestmark = pytest.mark.slow

TXN_ARGS = [
    *GROUP_ARGS,
    "--transaction-state-log-num-partitions",
    "5",
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "500",
]


@pytest.fixture(scope="module")
def tbroker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", args=TXN_ARGS).start()
    try:
        yield b
    finally:
        b.stop()


def txn_producer(bootstrap: str, txn_id: str, timeout_ms: int = 60_000) -> Producer:
    p = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "transaction.timeout.ms": timeout_ms}
    )
    p.init_transactions(60)
    return p


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, group: str | None = None
) -> list[bytes]:
    """Every record a consumer with this isolation level gets, up to the end it sees (EOF on all)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group or f"reader-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, i, 0) for i in range(partitions)])
    out: list[bytes] = []
    eof: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(eof) < partitions and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            out.append(m.value())
    finally:
        c.close()
    assert len(eof) == partitions, f"no end of {topic} seen"
    return sorted(out)


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, i) for i in range(partitions)], timeout=30)
        return [tp.offset for tp in tps]
    finally:
        c.close()


def test_commit_spans_topics_and_offsets_and_abort_hides_records(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    create_topic(bs, "tx.a", 2)
    create_topic(bs, "tx.b", 1)
    create_topic(bs, "tx.in", 2)
    p = txn_producer(bs, "t-commit")
    consumer = Consumer({"bootstrap.servers": bs, "group.id": "tx-group", "enable.auto.commit": False})
    try:
        p.begin_transaction()
        for i in range(10):
            p.produce("tx.a", f"c{i}".encode(), partition=i % 2)
        p.produce("tx.b", b"c-b")
        offsets = [TopicPartition("tx.in", 0, 7), TopicPartition("tx.in", 1, 3)]
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 30)
        p.commit_transaction(60)

        p.begin_transaction()
        for i in range(5):
            p.produce("tx.a", f"a{i}".encode(), partition=i % 2)
        p.send_offsets_to_transaction(
            [TopicPartition("tx.in", 0, 99)], consumer.consumer_group_metadata(), 30
        )
        assert p.flush(30) == 0  # the aborted records are in the log, not just in the client
        p.abort_transaction(60)
    finally:
        consumer.close()

    committed_view = read_all(bs, "tx.a", 2, "read_committed")
    assert committed_view == sorted(f"c{i}".encode() for i in range(10))
    assert read_all(bs, "tx.b", 1, "read_committed") == [b"c-b"]
    uncommitted = read_all(bs, "tx.a", 2, "read_uncommitted")
    assert uncommitted == sorted([f"c{i}".encode() for i in range(10)] + [f"a{i}".encode() for i in range(5)])
    # The committed transaction's offsets count; the aborted one's (99) never do.
    assert committed(bs, "tx-group", "tx.in", 2) == [7, 3]


def test_a_second_producer_fences_the_first(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    create_topic(bs, "tx.fence", 1)
    first = txn_producer(bs, "t-fence")
    first.begin_transaction()
    first.produce("tx.fence", b"zombie")
    assert first.flush(30) == 0

    second = txn_producer(bs, "t-fence")  # aborts the first's open transaction, bumps the epoch
    second.begin_transaction()
    second.produce("tx.fence", b"winner")
    second.commit_transaction(60)

    with pytest.raises(KafkaException) as info:
        first.produce("tx.fence", b"late")
        first.commit_transaction(30)
    err = info.value.args[0]
    assert err.fatal(), err
    assert err.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)
    assert read_all(bs, "tx.fence", 1, "read_committed") == [b"winner"]
    assert read_all(bs, "tx.fence", 1, "read_uncommitted") == [b"winner", b"zombie"]


KILLED_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "t-killed",
              "transaction.timeout.ms": 3000})
p.init_transactions(60)
p.begin_transaction()
for i in range(20):
    p.produce(sys.argv[2], b"open%d" % i, partition=0)
assert p.flush(30) == 0
print("open", flush=True)
time.sleep(600)
"""


def test_a_killed_producers_transaction_is_aborted_after_its_timeout(tbroker: BrokerProcess) -> None:
    bs = tbroker.bootstrap
    create_topic(bs, "tx.killed", 1)
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_PRODUCER, bs, "tx.killed"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "open"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    after = Producer({"bootstrap.servers": bs})
    after.produce("tx.killed", b"after", partition=0)
    assert after.flush(30) == 0

    # The open transaction holds the last stable offset: "after" stays invisible to read_committed
    # until the coordinator aborts the transaction (transaction.timeout.ms 3 s), then only it is seen.
    def lso_moved() -> bool:
        return read_all(bs, "tx.killed", 1, "read_committed") == [b"after"]

    eventually(lso_moved, 60, "the timed-out transaction to be aborted and the LSO to advance")
    assert len(read_all(bs, "tx.killed", 1, "read_uncommitted")) == 21


EOS_PROCESSOR = """
import sys, time
from confluent_kafka import Consumer, Producer, TopicPartition
bs, src, dst, die_after = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = Consumer({"bootstrap.servers": bs, "group.id": "eos", "enable.auto.commit": False,
              "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
c.assign([TopicPartition(src, 0), TopicPartition(src, 1)])
p = Producer({"bootstrap.servers": bs, "transactional.id": "t-eos", "transaction.timeout.ms": 60000})
p.init_transactions(60)
done = 0
idle = 0
while idle < 10:
    msgs = c.consume(50, 1.0)
    if not msgs:
        idle += 1
        continue
    idle = 0
    p.begin_transaction()
    for m in msgs:
        assert not m.error(), m.error()
        p.produce(dst, m.value().upper(), partition=m.partition())
        done += 1
        if die_after and done >= die_after:
            p.flush(30)
            print("dying", flush=True)
            time.sleep(600)  # killed here, in the middle of a transaction
    pos = [TopicPartition(m.topic(), m.partition(), m.offset() + 1) for m in msgs]
    p.send_offsets_to_transaction(pos, c.consumer_group_metadata(), 30)
    p.commit_transaction(60)
print("finished", done, flush=True)
"""


def test_consume_transform_produce_is_exactly_once_through_a_kill(
    tbroker: BrokerProcess, tmp_path: Path
) -> None:
    bs = tbroker.bootstrap
    create_topic(bs, "eos.in", 2)
    create_topic(bs, "eos.out", 2)
    src = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for i in range(400):
        src.produce("eos.in", f"r{i}".encode(), partition=i % 2)
    assert src.flush(30) == 0

    first = subprocess.Popen(
        [sys.executable, "-c", EOS_PROCESSOR, bs, "eos.in", "eos.out", "150"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "dying"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    second = subprocess.run(
        [sys.executable, "-c", EOS_PROCESSOR, bs, "eos.in", "eos.out", "0"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    out = read_all(bs, "eos.out", 2, "read_committed")
    assert out == sorted(f"R{i}".encode() for i in range(400))  # each input once: none lost, none twice
