from __future__ import annotations

import pytest
from kafka.protocol.metadata import ApiVersionsResponse

from brook.protocol import (
    ALL_VERSIONS,
    ErrorCode,
    encode_api_versions_response,
    unsupported_api_versions_response,
)

KEYS = {18: (0, 4), 3: (0, 12), 0: (0, 12), 1: (4, 17)}


def _kafka_python(version: int, error_code: int, keys: dict[int, tuple[int, int]], throttle: int) -> bytes:
    Key = ApiVersionsResponse.ApiVersion
    resp = ApiVersionsResponse(
        version=version,
        error_code=error_code,
        api_keys=[
            Key(version=version, api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(keys.items())
        ],
        throttle_time_ms=throttle,
    )
    return bytes(resp.encode(version=version))


@pytest.mark.parametrize("version", range(5))
def test_byte_identical_to_kafka_python(version: int) -> None:
    """Up to the tag section (v3+), which kafka-python does not write: the features."""
    ours = encode_api_versions_response(version, 0, KEYS, throttle_time_ms=12)
    theirs = _kafka_python(version, 0, KEYS, 12)
    if version < 3:
        assert ours == theirs
    else:
        assert ours[: len(theirs) - 1] == theirs[:-1] and ours[len(theirs) - 1] == 3  # three tags
    decoded = ApiVersionsResponse.decode(ours, version=version)
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [
        (k, lo, hi) for k, (lo, hi) in sorted(KEYS.items())
    ]


def test_all_versions_advertised() -> None:
    body = encode_api_versions_response(3, 0, ALL_VERSIONS)
    decoded = ApiVersionsResponse.decode(body, version=3)
    assert {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys} == ALL_VERSIONS


GROUP_VERSION = b"\x0egroup.version"
SHARE_VERSION = b"\x0eshare.version"


@pytest.mark.parametrize("version", [3, 4])
def test_v3_ends_with_throttle_then_the_features(version: int) -> None:
    body = encode_api_versions_response(version, 0, {18: (0, 4)}, throttle_time_ms=0)
    # SupportedFeatures: group.version 0-1 and share.version 0-2 from v4 on (KIP-1022: none with a
    # lowest version 0 below)
    supported = (
        b"\x03" + GROUP_VERSION + b"\x00\x00\x00\x01\x00" + SHARE_VERSION + b"\x00\x00\x00\x02\x00"
        if version >= 4
        else b"\x01"
    )
    finalized = b"\x03" + GROUP_VERSION + b"\x00\x01\x00\x01\x00" + SHARE_VERSION + b"\x00\x02\x00\x02\x00"
    tags = (
        b"\x03"
        + b"\x00" + bytes([len(supported)]) + supported
        + b"\x01\x08" + b"\x00" * 8  # FinalizedFeaturesEpoch
        + b"\x02" + bytes([len(finalized)]) + finalized
    )  # fmt: skip
    # error, compact array of 1, entry + empty tags, throttle, the features
    assert body == b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x04\x00" + b"\x00\x00\x00\x00" + tags
    # An error answer names no features.
    assert encode_api_versions_response(version, ErrorCode.INVALID_REQUEST, {}).endswith(
        b"\x00\x00\x00\x00\x00"
    )


def test_unsupported_version_answer_is_v0() -> None:
    body = unsupported_api_versions_response({18: (0, 4)})
    assert body == b"\x00\x23" + b"\x00\x00\x00\x01" + b"\x00\x12\x00\x00\x00\x04"
    # kafka-python (like every client) decodes an error answer as v0 whatever it asked for.
    decoded = ApiVersionsResponse.decode(body, version=4)
    assert decoded.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert decoded.api_keys[0].max_version == 4
