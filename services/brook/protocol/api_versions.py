"""ApiVersions response body, hand-written because every client depends on its exact bytes.

v0: error_code, [api_key, min, max]. v1-2: + throttle_time_ms. v3+ (flexible body): compact array,
each entry with an empty tag section, throttle_time_ms, then the tag section with the features as
Kafka 4.4 names them: SupportedFeatures, FinalizedFeaturesEpoch, FinalizedFeatures (group.version,
share.version).
The response header is always v0 (see versions.response_is_flexible).
"""

from __future__ import annotations

import struct

from brook.protocol.errors import ErrorCode
from brook.protocol.primitives import uvarint_bytes

__all__ = ["encode_api_versions_response", "unsupported_api_versions_response"]

_ENTRY = struct.Struct(">hhh")
_ENTRY_FLEX = struct.Struct(">hhhB")
_H = struct.Struct(">h")
_I = struct.Struct(">i")


# Feature name -> (min, max) version: what this broker supports, and what the cluster runs at
# (finalized). group.version 1 is the consumer group protocol (KIP-848); share.version 2 share groups
# (KIP-932) with RENEW acknowledgements (KIP-1222), as Kafka 4.4 finalizes them; every broker serves both.
SUPPORTED_FEATURES = {"group.version": (0, 1), "share.version": (0, 2)}
FINALIZED_FEATURES = {"group.version": (1, 1), "share.version": (2, 2)}
_FINALIZED_EPOCH = 0  # the features never change: one epoch (Kafka's is its metadata log offset)


def encode_api_versions_response(
    version: int, error_code: int, api_keys: dict[int, tuple[int, int]], throttle_time_ms: int = 0
) -> bytes:
    """The body (no size, no header). `api_keys` maps API key to (min_version, max_version)."""
    items = sorted(api_keys.items())
    out = bytearray(_H.pack(error_code))
    if version >= 3:
        out += uvarint_bytes(len(items) + 1)
        for key, (lo, hi) in items:
            out += _ENTRY_FLEX.pack(key, lo, hi, 0)
        out += _I.pack(throttle_time_ms)
        out += _features(version) if error_code == 0 else b"\x00"
    else:
        out += _I.pack(len(items))
        for key, (lo, hi) in items:
            out += _ENTRY.pack(key, lo, hi)
        if version >= 1:
            out += _I.pack(throttle_time_ms)
    return bytes(out)


def _features(version: int) -> bytes:
    """The tag section: SupportedFeatures (0), FinalizedFeaturesEpoch (1), FinalizedFeatures (2).
    Below v4, as Kafka does (KIP-1022), no supported feature whose lowest version is 0 is named."""
    supported = {n: r for n, r in SUPPORTED_FEATURES.items() if version >= 4 or r[0] > 0}
    tags = [_feature_list(supported), struct.pack(">q", _FINALIZED_EPOCH), _feature_list(FINALIZED_FEATURES)]
    out = bytearray(uvarint_bytes(len(tags)))
    for tag, data in enumerate(tags):
        out += uvarint_bytes(tag) + uvarint_bytes(len(data)) + data
    return bytes(out)


def _feature_list(features: dict[str, tuple[int, int]]) -> bytes:
    out = bytearray(uvarint_bytes(len(features) + 1))
    for name, (lo, hi) in sorted(features.items()):
        raw = name.encode()
        out += uvarint_bytes(len(raw) + 1) + raw + _H.pack(lo) + _H.pack(hi) + b"\x00"
    return bytes(out)


def unsupported_api_versions_response(api_keys: dict[int, tuple[int, int]]) -> bytes:
    """What Kafka answers to an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and the supported versions, so the client can retry with one of them."""
    return encode_api_versions_response(0, ErrorCode.UNSUPPORTED_VERSION, api_keys)
