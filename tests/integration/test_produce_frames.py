"""Produce requests of every frame size, many in flight on one connection: small frames (copied out of
the connection's scratch buffer) and large ones (received into buffers of their own, grown as bytes
arrive) get their offsets assigned in the request's own buffer, and what is read back is each batch with
its offsets, nothing else (kafka-python decodes and checks the CRCs)."""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatch

from brook.protocol.messages import response_class
from tests.integration.test_bad_input import create, fetch
from tests.integration.test_produce_pipelining import produce_frame
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow

VERSION = 9


@pytest.mark.parametrize("acks", [1, -1])
def test_pipelined_requests_small_and_large_get_their_offsets_in_order(
    broker: BrokerProcess, acks: int
) -> None:
    topic = f"frames-{'all' if acks == -1 else acks}"
    # Record counts and value sizes: a few bytes, just under and over the 64 KiB scratch buffer, and
    # 2.5 MB (its buffer grows twice while it arrives), interleaved with small ones.
    shapes = [(5, 100), (3, 21_000), (1, 70_000), (2, 10), (1, 2_500_000), (5, 100), (40, 2_000)]
    batches = [
        batch([bytes([65 + i]) * size + b"-%d" % j for j in range(count)])
        for i, (count, size) in enumerate(shapes)
    ]
    with RawClient(broker.bootstrap, timeout=60) as c:
        assert create(c, topic, configs={"max.message.bytes": "4000000"}) == 0
        # All requests in one write: the broker reads several per receive and has them in flight together.
        frames = [produce_frame(topic, 100 + i, b, acks, VERSION) for i, b in enumerate(batches)]
        c.sock.sendall(b"".join(struct.pack(">i", len(f)) + f for f in frames))
        cls = response_class(0)
        expected = 0
        for i, (count, _) in enumerate(shapes):
            frame = c.read_frame()
            assert struct.unpack_from(">i", frame)[0] == 100 + i  # answers in request order
            p = cls.decode(frame[5:], version=VERSION).responses[0].partition_responses[0]
            assert (p.error_code, p.base_offset) == (0, expected)
            expected += count
        offset = 0
        for i, (count, size) in enumerate(shapes):
            err, hw, records = fetch(c, topic, offset)
            assert err == 0 and hw == expected and records
            stored = DefaultRecordBatch(bytes(records[: len(batches[i])]))
            assert stored.validate_crc() and stored.base_offset == offset
            values = [r.value for r in stored]
            assert values == [bytes([65 + i]) * size + b"-%d" % j for j in range(count)]
            offset += count
