from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer import FetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from brook.protocol import ApiKey, CodecError, parse_request, response_is_flexible, response_prefix


def _framed_request(req: object, correlation_id: int = 42, client_id: str | None = "brook-test") -> bytes:
    req.with_header(correlation_id=correlation_id, client_id=client_id)  # type: ignore[attr-defined]
    return bytes(req.encode(header=True))  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [0, 8, 9, 12])
def test_parse_metadata_header(version: int) -> None:
    req = MetadataRequest(version=version, topics=[], allow_auto_topic_creation=False)
    frame = _framed_request(req)
    h = parse_request(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, version, 42, "brook-test")
    assert bytes(h.body) == bytes(req.encode(version=version))


def test_parse_api_versions_v3_uses_header_v2() -> None:
    req = ApiVersionsRequest(version=3, client_software_name="x", client_software_version="1")
    h = parse_request(memoryview(_framed_request(req, client_id=None)))
    assert h.client_id is None
    assert bytes(h.body) == b"\x02x\x021\x00"


def test_header_tagged_fields_are_skipped() -> None:
    frame = b"\x00\x03\x00\x0c\x00\x00\x00\x01\x00\x01c" + b"\x01\x00\x02ab" + b"BODY"
    h = parse_request(frame)
    assert bytes(h.body) == b"BODY"


def test_unknown_key_or_version_parses_v1_only() -> None:
    # ApiVersions v9 (unknown to us) with a v2 header: body keeps the tag section.
    frame = b"\x00\x12\x00\x09\x00\x00\x00\x05\x00\x00\x00rest"
    h = parse_request(frame)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (18, 9, 5, "")
    assert bytes(h.body) == b"\x00rest"
    h = parse_request(b"\x00\x04\x00\x07\x00\x00\x00\x06\xff\xffxyz")
    assert (h.api_key, h.client_id, bytes(h.body)) == (4, None, b"xyz")


def test_body_is_zero_copy() -> None:
    frame = bytearray(b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00")
    h = parse_request(frame)
    assert h.body.obj is frame


@pytest.mark.parametrize(
    "frame",
    [
        b"",
        b"\x00\x03\x00\x01\x00\x00\x00",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x05abc",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\xff\xfe",
        b"\x00\x03\x00\x01\x00\x00\x00\x01\x00\x02\xc3\x28",
        b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x00",  # flexible, tag section missing
        b"\x00\x03\x00\x09\x00\x00\x00\x01\x00\x00\x01\x00\x09",  # tag longer than the frame
    ],
)
def test_malformed_headers(frame: bytes) -> None:
    with pytest.raises(CodecError):
        parse_request(frame)


def _kafka_python_framed_response(resp: object, version: int, correlation_id: int) -> bytes:
    resp.API_VERSION = version  # type: ignore[attr-defined]  # quirk: version before header
    resp.with_header(correlation_id=correlation_id)  # type: ignore[attr-defined]
    return bytes(resp.encode(header=True, framed=True))  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", [0, 8, 9, 12])
def test_response_prefix_matches_kafka_python(version: int) -> None:
    resp = MetadataResponse(version=version, brokers=[], cluster_id="c", controller_id=0, topics=[])
    body = bytes(resp.encode(version=version))
    expected = _kafka_python_framed_response(resp, version, 77)
    flexible = response_is_flexible(ApiKey.METADATA, version)
    assert response_prefix(77, flexible, len(body)) + body == expected


@pytest.mark.parametrize("version", [0, 3, 4])
def test_api_versions_response_header_is_always_v0(version: int) -> None:
    resp = ApiVersionsResponse(version=version, error_code=0, api_keys=[])
    body = bytes(resp.encode(version=version))
    expected = _kafka_python_framed_response(resp, version, 9)
    assert (
        response_prefix(9, response_is_flexible(ApiKey.API_VERSIONS, version), len(body)) + body == expected
    )
    assert expected[:8] == struct.pack(">ii", len(body) + 4, 9)


def test_fetch_response_prefix_v12() -> None:
    resp = FetchResponse(version=12, responses=[])
    body = bytes(resp.encode(version=12))
    assert response_prefix(1, True, len(body)) + body == _kafka_python_framed_response(resp, 12, 1)
