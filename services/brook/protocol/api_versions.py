"""ApiVersions response body, hand-written because every client depends on its exact bytes.

v0: error_code, [api_key, min, max]. v1-2: + throttle_time_ms. v3+ (flexible body): compact array,
each entry with an empty tag section, throttle_time_ms, then an EMPTY tag section: librdkafka 2.0.2
fails with "Read underflow" on SupportedFeatures/FinalizedFeatures tags, so they are never written.
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
        out.append(0)
    else:
        out += _I.pack(len(items))
        for key, (lo, hi) in items:
            out += _ENTRY.pack(key, lo, hi)
        if version >= 1:
            out += _I.pack(throttle_time_ms)
    return bytes(out)


def unsupported_api_versions_response(api_keys: dict[int, tuple[int, int]]) -> bytes:
    """What Kafka answers to an ApiVersions version it does not know: a v0 body with
    UNSUPPORTED_VERSION and the supported versions, so the client can retry with one of them."""
    return encode_api_versions_response(0, ErrorCode.UNSUPPORTED_VERSION, api_keys)
