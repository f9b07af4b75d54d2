"""Request headers in, response headers out, packed by hand.

kafka-python's generic header path costs ~7 % of CPU on small requests and copies the frame, so the
header is read with one struct call and the body is handed on as a zero-copy memoryview.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brook.protocol.primitives import CodecError, Reader
from brook.protocol.versions import request_is_flexible, supports

__all__ = ["RequestHeader", "parse_request", "response_prefix"]

_HEADER_V1 = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_PREFIX = struct.Struct(">ii")  # frame size, correlation_id (response header v0)
_PREFIX_FLEX = struct.Struct(">iiB")  # + empty tagged fields (response header v1)


@dataclass(slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: memoryview


def parse_request(frame: bytes | bytearray | memoryview) -> RequestHeader:
    """Parse one request (without its 4-byte size prefix).

    Header v1 always; header v2 (plus tagged fields) when the API version is flexible. For an API key
    or version outside ALL_VERSIONS only the v1 part is read, which is enough to answer
    UNSUPPORTED_VERSION; `body` is then everything after it.
    """
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    if len(view) < _HEADER_V1.size:
        raise CodecError(f"request header truncated ({len(view)} bytes)")
    api_key, api_version, correlation_id, n = _HEADER_V1.unpack_from(view, 0)
    pos = _HEADER_V1.size
    client_id: str | None
    if n == -1:
        client_id = None
    elif n < 0:
        raise CodecError(f"invalid client_id length {n}")
    else:
        if pos + n > len(view):
            raise CodecError("client_id truncated")
        try:
            client_id = str(view[pos : pos + n], "utf-8")
        except UnicodeDecodeError:
            raise CodecError("client_id is not utf-8") from None
        pos += n
    if supports(api_key, api_version) and request_is_flexible(api_key, api_version):
        if pos < len(view) and view[pos] == 0:  # the usual empty tag section
            pos += 1
        else:
            r = Reader(view, pos)
            r.skip_tagged_fields()
            pos = r.pos
    return RequestHeader(api_key, api_version, correlation_id, client_id, view[pos:])


def response_prefix(correlation_id: int, flexible: bool, body_size: int) -> bytes:
    """Frame size + response header: v1 (with the empty tag section) when `flexible`, else v0.

    `flexible` must be response_is_flexible(api_key, version), which is False for ApiVersions.
    """
    if flexible:
        return _PREFIX_FLEX.pack(body_size + 5, correlation_id, 0)
    return _PREFIX.pack(body_size + 4, correlation_id)


def request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: bytes
) -> bytes:
    """A whole request as a client sends it: size, header (v1, or v2 when flexible), body."""
    cid = (
        b"\xff\xff" if client_id is None else struct.pack(">h", len(client_id.encode())) + client_id.encode()
    )
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + cid
    if request_is_flexible(api_key, api_version):
        header += b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def parse_response_header(frame: bytes | bytearray | memoryview, flexible: bool) -> tuple[int, memoryview]:
    """(correlation id, body) of a response frame without its size prefix."""
    r = Reader(frame)
    cid = r.int32()
    if flexible:
        r.skip_tagged_fields()
    return cid, memoryview(frame)[r.pos :]
