"""Round trips through kafka-python for every API in ALL_VERSIONS at its min and max version."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kafka.protocol.consumer import OffsetForLeaderEpochRequest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from brook.protocol import ALL_VERSIONS, ApiKey, CodecError
from brook.protocol.messages import decode_request, encode_response, request_class, response_class

from .samples import normalize, sample

CASES = [(k, v) for k, (lo, hi) in sorted(ALL_VERSIONS.items()) for v in sorted({lo, hi})]


def _id(case: tuple[int, int]) -> str:
    return f"{ApiKey(case[0]).name}-v{case[1]}"


def _encode_request(cls: Any, version: int, values: dict[str, Any]) -> bytes:
    # kafka-python's dict-driven struct encoder: independent of brook's own dict -> object builder.
    flexible = cls.flexible_version_q(version)
    return bytes(cls._struct.encode(values, version=version, compact=flexible, tagged=flexible))


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_request_round_trip(case: tuple[int, int]) -> None:
    api_key, version = case
    cls = request_class(api_key)
    values = sample(cls._struct, version)
    body = _encode_request(cls, version, values)
    req = decode_request(api_key, version, memoryview(body))
    assert normalize(req.to_dict(json=False)) == normalize(values)
    # The quirk: decoded objects carry no _header until we set it; re-encoding must work.
    assert bytes(req.encode(version=version)) == body


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_response_round_trip(case: tuple[int, int]) -> None:
    api_key, version = case
    cls = response_class(api_key)
    fields = sample(cls._struct, version, uuids_as_bytes=True)
    expected = sample(cls._struct, version)
    if api_key == ApiKey.API_VERSIONS:
        fields["error_code"] = expected["error_code"] = 0  # kafka-python decodes errors as v0
    body = encode_response(api_key, version, fields)
    assert isinstance(body, bytes)
    decoded = cls.decode(body, version=version)
    assert normalize(decoded.to_dict(json=False)) == normalize(expected)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_request_truncated_bytes_rejected_trailing_ignored(case: tuple[int, int]) -> None:
    api_key, version = case
    cls = request_class(api_key)
    body = _encode_request(cls, version, sample(cls._struct, version))
    # Kafka ignores trailing bytes (librdkafka sends some after an all-topics Metadata v12).
    assert decode_request(api_key, version, memoryview(body + b"\x01\x00\x00")) == decode_request(
        api_key, version, memoryview(body)
    )
    if body:  # some requests (ListGroups v0) are empty
        with pytest.raises(CodecError):
            decode_request(api_key, version, memoryview(body[:-1]))


def test_metadata_request_as_a_client_builds_it() -> None:
    req = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(version=12, name="orders")],
        allow_auto_topic_creation=True,
    )
    decoded = decode_request(ApiKey.METADATA, 12, memoryview(bytes(req.encode(version=12))))
    assert decoded.topics[0].name == "orders"
    assert decoded.topics[0].topic_id is None
    assert decoded.allow_auto_topic_creation is True
    assert decoded.include_topic_authorized_operations is False


def test_metadata_all_topics_is_none() -> None:
    body = bytes(MetadataRequest(version=9, topics=None).encode(version=9))
    assert decode_request(ApiKey.METADATA, 9, memoryview(body)).topics is None


def test_null_where_the_schema_does_not_allow_it_is_malformed() -> None:
    # DescribeConfigs v0: int32 -1 for the resources array (not nullable), then include nothing else.
    with pytest.raises(CodecError, match="null resources"):
        decode_request(ApiKey.DESCRIBE_CONFIGS, 0, memoryview(b"\xff\xff\xff\xff"))
    # Nested: CreateTopics v0, one topic whose name (int16 length) is -1.
    body = b"\x00\x00\x00\x01" + b"\xff\xff" + b"\x00" * 14 + b"\x00\x00\x00\x00"
    with pytest.raises(CodecError, match=r"null topics\.name"):
        decode_request(ApiKey.CREATE_TOPICS, 0, memoryview(body))
    # Metadata v0's topics are not nullable; from v1 null means all topics.
    with pytest.raises(CodecError, match="null topics"):
        decode_request(ApiKey.METADATA, 0, memoryview(b"\xff\xff\xff\xff"))
    assert decode_request(ApiKey.METADATA, 1, memoryview(b"\xff\xff\xff\xff")).topics is None


def test_offset_for_leader_epoch_v0_below_kafka_python_valid_versions() -> None:
    # Kafka 4 dropped v0-1 from the spec; the field ranges still encode them (no current_leader_epoch).
    req = OffsetForLeaderEpochRequest(
        version=0,
        topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                version=0,
                topic="t",
                partitions=[
                    OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                        version=0, partition=1, leader_epoch=5
                    )
                ],
            )
        ],
    )
    body = bytes(req.encode(version=0))
    assert body == b"\x00\x00\x00\x01\x00\x01t\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x05"
    decoded = decode_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 0, memoryview(body))
    assert decoded.topics[0].partitions[0].leader_epoch == 5


METADATA_FIELDS: dict[str, Any] = {
    "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}],
    "cluster_id": "brook",
    "controller_id": 0,
    "topics": [
        {
            "error_code": 0,
            "name": "t",
            "topic_id": b"\x01" * 16,
            "is_internal": False,
            "partitions": [
                {
                    "error_code": 0,
                    "partition_index": 0,
                    "leader_id": 0,
                    "leader_epoch": 0,
                    "replica_nodes": [0],
                    "isr_nodes": [0],
                }
            ],
        }
    ],
}


@pytest.mark.parametrize("version", range(13))
def test_metadata_response_one_dict_for_every_version(version: int) -> None:
    body = encode_response(ApiKey.METADATA, version, METADATA_FIELDS)
    decoded = MetadataResponse.decode(body, version=version)
    assert decoded.brokers[0].host == "127.0.0.1"
    assert decoded.topics[0].partitions[0].isr_nodes == [0]
    if version >= 10:
        assert decoded.topics[0].topic_id == uuid.UUID(bytes=b"\x01" * 16)
    if version >= 8:  # missing bitfields default to "not requested"
        assert decoded.topics[0].authorized_operations is None


def test_encode_response_defaults_and_bitfield_int() -> None:
    body = encode_response(ApiKey.METADATA, 8, {"topics": [{"name": "t", "authorized_operations": 0b1000}]})
    decoded = MetadataResponse.decode(body, version=8)
    assert decoded.throttle_time_ms == 0
    assert decoded.brokers == []
    assert decoded.topics[0].partitions == []
    assert decoded.topics[0].authorized_operations == {3}


def test_encode_response_rejects_unknown_field() -> None:
    with pytest.raises(ValueError, match="no field 'broker'"):
        encode_response(ApiKey.METADATA, 12, {"broker": []})
    with pytest.raises(ValueError, match="no field 'hostname'"):
        encode_response(ApiKey.METADATA, 12, {"brokers": [{"hostname": "x"}]})


def test_default_valued_tagged_fields_are_not_written() -> None:
    # ApiVersions v3 top-level tags (SupportedFeatures, FinalizedFeatures...) left at their defaults:
    # the body must end with throttle_time_ms then an empty tag section.
    body = encode_response(ApiKey.API_VERSIONS, 3, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0})
    assert body == b"\x00\x00" + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
    body = encode_response(
        ApiKey.API_VERSIONS, 3, {"api_keys": [], "supported_features": [], "finalized_features_epoch": -1}
    )
    assert body.endswith(b"\x00\x00\x00\x00\x00")


def test_decode_request_unknown_api_or_version() -> None:
    with pytest.raises(CodecError):
        decode_request(4, 0, memoryview(b""))
    with pytest.raises(CodecError):
        decode_request(ApiKey.METADATA, 99, memoryview(b""))
    with pytest.raises(CodecError):
        decode_request(ApiKey.METADATA, -1, memoryview(b""))


def test_librdkafka_all_topics_metadata_v12_with_trailing_bytes() -> None:
    # Captured from confluent-kafka 2.16 AdminClient.list_topics(): topics null, then 3 extra bytes.
    decoded = decode_request(ApiKey.METADATA, 12, memoryview(bytes.fromhex("00000000010000")))
    assert decoded.topics is None
