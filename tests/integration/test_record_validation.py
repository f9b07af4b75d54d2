"""Record-level validation on append with real clients: a topic's compression.type recompresses batches
sent with another codec, and a compacted topic rejects keyless records with INVALID_RECORD."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, Producer

from tests.integration.test_clients import check_same, confluent_consume, create_topic
from tests.integration.test_durability import compressible, stored_codecs
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient

pytestmark = pytest.mark.slow


def kafka_python_consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list[tuple]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    cons = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    cons.assign([KTP(topic, p) for p in range(partitions)])
    got: list[tuple] = []
    deadline = time.monotonic() + 30
    while len(got) < expected and time.monotonic() < deadline:
        for recs in cons.poll(timeout_ms=500).values():
            got += [(r.partition, r.offset, r.key, r.value, [(k, v) for k, v in r.headers]) for r in recs]
    cons.close()
    return got


def test_zstd_topic_recompresses_an_lz4_batch(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "recompress", partitions=2, config={"compression.type": "zstd"})
    sent = compressible(300)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 20})
    for k, v, h in sent:
        p.produce("recompress", v, k, headers=h)
    assert p.flush(30) == 0
    assert stored_codecs(broker.data_dir, "recompress") == {4}
    via_confluent = confluent_consume(broker.bootstrap, "recompress", 2, len(sent))
    check_same(sent, via_confluent)
    via_kafka_python = kafka_python_consume(broker.bootstrap, "recompress", 2, len(sent))
    assert sorted(via_kafka_python) == sorted(via_confluent)  # same offsets, keys, values, headers


def test_uncompressed_topic_stores_batches_uncompressed(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "plain", partitions=1, config={"compression.type": "uncompressed"})
    sent = compressible(50)
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "gzip", "linger.ms": 20})
    for k, v, h in sent:
        p.produce("plain", v, k, headers=h)
    assert p.flush(30) == 0
    assert stored_codecs(broker.data_dir, "plain") == {0}
    check_same(sent, confluent_consume(broker.bootstrap, "plain", 1, len(sent)))


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_compacted_topic_rejects_keyless_records(broker: BrokerProcess, codec: str) -> None:
    topic = f"compact-{codec}"
    create_topic(broker.bootstrap, topic, partitions=1, config={"cleanup.policy": "compact"})
    errors: list[KafkaError | None] = []
    # linger.ms far above the loop's time, even on a loaded machine: the five records must share one
    # batch (flush() sends it at once). The partition's leader is known first: otherwise the records
    # wait for metadata in librdkafka's unassigned queue, and if it arrives during flush() (which
    # ignores linger.ms) they are moved to the partition one by one while its broker thread already
    # sends what is there (seen once under load: the first record in a batch of its own).
    p = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5000})
    p.list_topics(topic, timeout=10)
    # One batch: keyless records fail it whole. The response names them (record_errors), so librdkafka
    # reports the others as failed because of a different record (it only does with two or more).
    for i in range(5):
        key = None if i in (1, 3) else f"k{i}".encode()
        p.produce(topic, b"v" * 100, key, on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    codes = [e.code() if e is not None else None for e in errors]
    different, invalid = KafkaError._INVALID_DIFFERENT_RECORD, KafkaError.INVALID_RECORD
    assert codes == [different, invalid, different, invalid, different]
    assert stored_codecs(broker.data_dir, topic) == set()  # nothing stored
    errors.clear()
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), f"k{i}".encode(), on_delivery=lambda err, msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None] * 5
    got = confluent_consume(broker.bootstrap, topic, 1, 5)
    assert [(off, k) for _, off, k, _, _ in got] == [(i, f"k{i}".encode()) for i in range(5)]


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_raw_produce_names_the_keyless_records(broker: BrokerProcess, version: int) -> None:
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    topic = f"compact-raw-{version}"
    create_topic(broker.bootstrap, topic, partitions=1, config={"cleanup.policy": "compact"})
    b = DefaultRecordBatchBuilder(
        magic=2, compression_type=3, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=2**30,
    )  # fmt: skip
    for i in range(6):
        b.append(i, timestamp=1, key=None if i in (2, 5) else b"k", value=b"v", headers=[])
    t, p = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    partition = p(version=version, index=0, records=bytes(b.build()))
    req = ProduceRequest(
        version=version, transactional_id=None, acks=1, timeout_ms=5000,
        topic_data=[t(version=version, name=topic, partition_data=[partition])],
    )  # fmt: skip
    with RawClient(broker.bootstrap) as c:
        resp = c.request(req, version).responses[0].partition_responses[0]
    assert (resp.error_code, resp.base_offset) == (87, -1)
    if version >= 8:
        assert [e.batch_index for e in resp.record_errors] == [2, 5]
        assert "without key" in resp.error_message
    assert stored_codecs(broker.data_dir, topic) == set()
