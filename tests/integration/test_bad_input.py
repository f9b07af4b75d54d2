"""Bad input over a raw socket gets the right Kafka answer, and the broker keeps serving."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest

from brook.handlers import ADVERTISED
from brook.protocol.errors import ErrorCode
from brook.protocol.versions import request_is_flexible
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient, fetch_request
from tests.support.records import batch

pytestmark = pytest.mark.slow


def create(c: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> int:
    T = CreateTopicsRequest
    req = T(
        topics=[
            T.CreatableTopic(
                name=name,
                num_partitions=partitions,
                replication_factor=1,
                assignments=[],
                configs=[
                    T.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()
                ],
            )
        ],
        timeout_ms=5000,
        validate_only=False,
    )
    return int(c.request(req, 5).topics[0].error_code)


def produce(
    c: RawClient, topic: str, records: bytes, partition: int = 0, version: int = 9
) -> tuple[int, int]:
    P = ProduceRequest
    req = P(
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            P.TopicProduceData(
                name=topic,
                partition_data=[P.TopicProduceData.PartitionProduceData(index=partition, records=records)],
            )
        ],
    )
    r = c.request(req, version).responses[0].partition_responses[0]
    return int(r.error_code), int(r.base_offset)


def fetch(
    c: RawClient, topic: str, offset: int, version: int = 11, partition: int = 0
) -> tuple[int, int, bytes | None]:
    req = fetch_request(topic, offset, partition=partition)
    p = c.request(req, version).responses[0].partitions[0]
    return int(p.error_code), int(p.high_watermark), p.records


def test_malformed_frame_closes_only_that_connection(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as bad, RawClient(broker.bootstrap) as good:
        bad.send_frame(b"\x00\x03\x00")  # a truncated request header
        assert bad.is_closed()
        r = good.request(ApiVersionsRequest(), 0)
        assert r.error_code == 0


def test_frame_over_the_size_limit_is_refused(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        c.sock.sendall(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 100)
        assert c.is_closed()
    with RawClient(broker.bootstrap) as c:
        assert c.request(ApiVersionsRequest(), 0).error_code == 0


def test_unknown_api_version_gets_unsupported_version(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        # An ApiVersions request at version 99: the answer is a v0 body with UNSUPPORTED_VERSION.
        c.send_frame(struct.pack(">hhih", 18, 99, 7, 4) + b"test")
        frame = c.read_frame()
        cid, err = struct.unpack_from(">ih", frame)
        assert (cid, err) == (7, ErrorCode.UNSUPPORTED_VERSION)
        # ... and, as Kafka, names ApiVersions' own versions only, so the client can retry with one.
        assert struct.unpack_from(">i", frame, 6)[0] == 1
        assert struct.unpack_from(">hhh", frame, 10) == (18, *ADVERTISED[18])


def test_bad_crc_is_corrupt_message_and_not_stored(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create(c, "crc") == 0
        good = batch([b"a", b"b"])
        bad = bytearray(good)
        bad[-1] ^= 0xFF
        assert produce(c, "crc", bytes(bad))[0] == ErrorCode.CORRUPT_MESSAGE
        assert produce(c, "crc", good) == (0, 0)
        err, hw, _ = fetch(c, "crc", 0)
        assert (err, hw) == (0, 2)


def test_oversized_batch_is_message_too_large(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create(c, "big", configs={"max.message.bytes": "1000"}) == 0
        assert produce(c, "big", batch([b"x" * 2000]))[0] == ErrorCode.MESSAGE_TOO_LARGE
        assert produce(c, "big", batch([b"x" * 100])) == (0, 0)


def test_unknown_topic(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert produce(c, "no-such-topic", batch([b"a"]))[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert fetch(c, "no-such-topic", 0)[0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        M = MetadataRequest
        r = c.request(
            M(
                topics=[M.MetadataRequestTopic(name="still-none")],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            9,
        )
        assert r.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_invalid_topic_name(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create(c, "bad name!") == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert create(c, "x" * 250) == ErrorCode.INVALID_TOPIC_EXCEPTION
        M = MetadataRequest
        r = c.request(
            M(
                topics=[M.MetadataRequestTopic(name="bad/name")],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            ),
            9,
        )
        assert r.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_fetch_outside_the_log_is_offset_out_of_range(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create(c, "range") == 0
        assert produce(c, "range", batch([b"a", b"b", b"c"])) == (0, 0)
        assert fetch(c, "range", 3)[0] == 0  # the log end: empty, not an error
        assert fetch(c, "range", 4)[0] == ErrorCode.OFFSET_OUT_OF_RANGE
        assert fetch(c, "range", -5)[0] == ErrorCode.OFFSET_OUT_OF_RANGE


def test_idempotent_retry_is_not_duplicated(broker: BrokerProcess) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create(c, "idem") == 0
        init = c.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
        pid, epoch = int(init.producer_id), int(init.producer_epoch)
        assert init.error_code == 0 and pid >= 0
        first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce(c, "idem", first) == (0, 0)
        assert produce(c, "idem", first) == (0, 0)  # the retry is answered with the original offset
        second = batch([b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        assert produce(c, "idem", second) == (0, 2)
        gap = batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=7)
        assert produce(c, "idem", gap)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert fetch(c, "idem", 0)[1] == 3  # three records, not five
        for seq in range(3, 9):  # push the first batch out of the five the broker remembers
            assert (
                produce(c, "idem", batch([b"n"], producer_id=pid, producer_epoch=epoch, base_sequence=seq))[0]
                == 0
            )
        assert produce(c, "idem", first)[0] == ErrorCode.DUPLICATE_SEQUENCE_NUMBER
        assert fetch(c, "idem", 0)[1] == 9


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    api=st.sampled_from(sorted(ADVERTISED.items())),
    version_pick=st.integers(0, 100),
    body=st.binary(max_size=300),
)
def test_fuzzed_requests_never_take_the_broker_down(
    broker: BrokerProcess, api: tuple[int, tuple[int, int]], version_pick: int, body: bytes
) -> None:
    key, (lo, hi) = api
    version = lo + version_pick % (hi - lo + 1)
    flexible_header = b"\x00" if request_is_flexible(key, version) else b""
    with RawClient(broker.bootstrap, timeout=10) as c:
        c.send_frame(struct.pack(">hhih", key, version, 1, 4) + b"fuzz" + flexible_header + body)
        # Then an ApiVersions request (correlation id 2) on the same connection: answers come in order,
        # so within the bound the broker either closes the connection or answers it (after answering
        # the fuzzed request, unless that needs no answer, as a Produce with acks=0). A timeout (an
        # OSError too) is a hanging request and fails.
        try:
            c.send_frame(struct.pack(">hhih", 18, 0, 2, 4) + b"fuzz")
            ids = [struct.unpack_from(">i", c.read_frame())[0]]
            if ids[0] == 1:
                ids.append(struct.unpack_from(">i", c.read_frame())[0])
        except (ConnectionError, BrokenPipeError):
            ids = []  # closed: Kafka's answer to a request it cannot parse
        assert ids in ([], [2], [1, 2]), ids
    with RawClient(broker.bootstrap) as c:
        assert c.request(ApiVersionsRequest(), 0).error_code == 0


def test_requests_larger_than_a_mebibyte(tmp_path: Path) -> None:
    """Large requests are received into a buffer that grows with the data (up to 4 MiB here)."""
    b = BrokerProcess(tmp_path / "data", args=["--topic-default", "max.message.bytes=8388608"]).start()
    try:
        with RawClient(b.bootstrap) as c:
            assert create(c, "large") == 0
            for mib in (1, 2, 4):
                big = batch([b"x" * 1024] * (mib * 1024))
                assert len(big) > mib * 1024 * 1024
                err, _ = produce(c, "large", big)
                assert err == 0, mib
            assert fetch(c, "large", 0)[1] == 7 * 1024
    finally:
        b.stop()
