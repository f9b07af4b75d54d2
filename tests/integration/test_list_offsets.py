"""ListOffsets over the wire: lookups by timestamp at record granularity (records with distinct
timestamps inside one compressed batch), and the special timestamps per advertised version."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition
from kafka.protocol.consumer import ListOffsetsRequest

from brook.protocol.errors import ErrorCode
from tests.integration.test_bad_input import create, produce
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow

LZ4 = 3
# One batch, offsets 0-4, timestamps out of order inside it.
DELTAS = [1000, 2000, 5000, 3000, 4000]


def _one_batch_topic(broker: BrokerProcess, name: str, configs: dict[str, str] | None = None) -> int:
    base = int(time.time() * 1000) - 60_000
    with RawClient(broker.bootstrap) as c:
        assert create(c, name, 1, configs) == 0
        values = [b"v%d" % i for i in range(5)]
        records = batch(values, timestamps=[base + d for d in DELTAS], compression=LZ4)
        assert produce(c, name, records) == (0, 0)
    return base


def test_offsets_for_times_finds_the_record_inside_a_batch(broker: BrokerProcess) -> None:
    base = _one_batch_topic(broker, "lo-records")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
    try:
        for target, offset in [(500, 0), (1500, 1), (2000, 1), (2500, 2), (5000, 2), (5001, -1)]:
            found = c.offsets_for_times([TopicPartition("lo-records", 0, base + target)], timeout=10)
            assert (found[0].error, found[0].offset) == (None, offset), target
    finally:
        c.close()

    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("lo-records", 0)
    top = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)  # ListOffsets v7+
    assert (top.offset, top.timestamp) == (2, base + 5000)
    assert a.list_offsets({tp: OffsetSpec.earliest()})[tp].result(10).offset == 0
    assert a.list_offsets({tp: OffsetSpec.latest()})[tp].result(10).offset == 5

    k = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        ktp = KTopicPartition("lo-records", 0)
        got = k.offsets_for_times({ktp: base + 3500})[ktp]
        assert got is not None and (got.offset, got.timestamp) == (2, base + 5000)
        got = k.offsets_for_times({ktp: base + 1001})[ktp]
        assert got is not None and (got.offset, got.timestamp) == (1, base + 2000)
        assert k.offsets_for_times({ktp: base + 9999})[ktp] is None
    finally:
        k.close()


def test_log_append_time_topic_answers_with_the_append_time(broker: BrokerProcess) -> None:
    before = int(time.time() * 1000)
    _one_batch_topic(broker, "lo-append", {"message.timestamp.type": "LogAppendTime"})
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lo"})
    try:
        found = c.offsets_for_times([TopicPartition("lo-append", 0, before - 1000)], timeout=10)
        assert found[0].offset == 0  # every record carries the batch's append time
    finally:
        c.close()
    a = AdminClient({"bootstrap.servers": broker.bootstrap})
    tp = TopicPartition("lo-append", 0)
    top = a.list_offsets({tp: OffsetSpec.max_timestamp()})[tp].result(10)
    assert top.offset == 0 and before <= top.timestamp <= int(time.time() * 1000)


def _list(c: RawClient, version: int, parts: list[tuple[int, int]], topic: str = "lo-special") -> list[Any]:
    L = ListOffsetsRequest
    req = L(
        replica_id=-1,
        isolation_level=0,
        topics=[
            L.ListOffsetsTopic(
                name=topic,
                partitions=[
                    L.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=p, current_leader_epoch=-1 if version < 4 else 0, timestamp=ts
                    )
                    for p, ts in parts
                ],
            )
        ],
        timeout_ms=0,
    )
    return list(c.request(req, version).topics[0].partitions)


def test_special_timestamps_follow_the_request_version(broker: BrokerProcess) -> None:
    base = _one_batch_topic(broker, "lo-special")
    unsupported = ErrorCode.UNSUPPORTED_VERSION
    with RawClient(broker.bootstrap) as c:
        for version in range(1, 11):

            def answer(ts: int, v: int = version) -> tuple[int, int, int]:
                (p,) = _list(c, v, [(0, ts)])
                return int(p.error_code), int(p.offset), int(p.timestamp)

            assert answer(-1) == (0, 5, -1), version
            assert answer(-2) == (0, 0, -1), version
            assert answer(base + 2500) == (0, 2, base + 5000), version
            # KIP-734 max timestamp (v7+), KIP-405 earliest local (v8+), KIP-1005 latest tiered (v9+).
            assert answer(-3) == ((0, 2, base + 5000) if version >= 7 else (unsupported, -1, -1)), version
            assert answer(-4) == ((0, 0, -1) if version >= 8 else (unsupported, -1, -1)), version
            assert answer(-5) == ((0, -1, -1) if version >= 9 else (unsupported, -1, -1)), version
            assert answer(-7) == (unsupported, -1, -1), version

        (p,) = _list(c, 9, [(0, -5)])
        assert p.leader_epoch == -1
        (p,) = _list(c, 9, [(0, -3)])
        assert p.leader_epoch == 0  # the epoch of the batch holding the record
        dup = _list(c, 7, [(0, -1), (0, -2)])
        assert [(p.partition_index, p.error_code) for p in dup] == [(0, ErrorCode.INVALID_REQUEST)]
        L = ListOffsetsRequest
        stale = L(
            replica_id=-1,
            isolation_level=0,
            topics=[
                L.ListOffsetsTopic(
                    name="lo-special",
                    partitions=[
                        L.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=0, current_leader_epoch=7, timestamp=-1
                        )
                    ],
                )
            ],
            timeout_ms=0,
        )
        assert c.request(stale, 7).topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
