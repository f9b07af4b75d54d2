"""Produce request/response, hand-written for the hot path.

The request decoder never looks inside the records: each partition's record batches come back as a
zero-copy memoryview slice of the request body (the log parses the 61-byte batch headers itself).
The response encoder packs each partition with one precompiled struct call and is byte-identical to
kafka-python's ProduceResponse (tests/unit/protocol/test_produce.py).

Versions: request 0-12 (v0-2 lack transactional_id; Brook's handler rejects them, but decoding them
costs nothing), flexible from 9; v13 (topic ids) is not supported.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brook.protocol.primitives import CodecError, Reader, uvarint_bytes

__all__ = [
    "PartitionProduceResult",
    "ProducePartition",
    "ProduceRequest",
    "ProduceTopic",
    "decode_produce_request",
    "encode_produce_response",
]

MIN_VERSION = 0
MAX_VERSION = 12
FLEXIBLE_FROM = 9


@dataclass(slots=True)
class ProducePartition:
    index: int
    records: memoryview | None


@dataclass(slots=True)
class ProduceTopic:
    name: str
    partitions: list[ProducePartition]


@dataclass(slots=True)
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]


@dataclass(slots=True)
class PartitionProduceResult:
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[tuple[int, str | None], ...] = ()  # (batch index, message) of rejected records


_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX_LEN = struct.Struct(">ii")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def decode_produce_request(version: int, body: memoryview) -> ProduceRequest:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise CodecError(f"Produce v{version} is not supported")
    r = Reader(body)
    flexible = version >= FLEXIBLE_FROM
    try:
        if flexible:
            transactional_id = r.compact_nullable_string()
        else:
            transactional_id = r.nullable_string() if version >= 3 else None
        acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(r.buf, r.advance(6))
        topics = []
        for _ in range(r.compact_array_len() if flexible else r.array_len()):
            name = r.compact_string() if flexible else r.string()
            count = r.compact_array_len() if flexible else r.array_len()
            partitions = _flexible_partitions(r, count) if flexible else _partitions(r, count)
            if flexible:
                r.skip_tagged_fields()
            topics.append(ProduceTopic(name, partitions))
        if flexible:
            r.skip_tagged_fields()
    except (IndexError, struct.error):  # the inlined partition loops index without bounds checks
        raise CodecError("truncated Produce request") from None
    r.expect_end()
    return ProduceRequest(transactional_id, acks, timeout_ms, topics)


# The partition loops are the per-request hot spot: they work on local buf/pos and only fall back to
# the Reader for multi-byte varints and non-empty tag sections.


def _partitions(r: Reader, count: int) -> list[ProducePartition]:
    buf, pos, end = r.buf, r.pos, r.end
    unpack = _INDEX_LEN.unpack_from
    out = []
    for _ in range(count):
        index, n = unpack(buf, pos)
        pos += 8
        if n < 0:
            if n != -1:
                raise CodecError(f"invalid records length {n}")
            out.append(ProducePartition(index, None))
            continue
        if pos + n > end:
            raise CodecError("records past the end of the request")
        out.append(ProducePartition(index, buf[pos : pos + n]))
        pos += n
    r.pos = pos
    return out


def _flexible_partitions(r: Reader, count: int) -> list[ProducePartition]:
    buf, pos, end = r.buf, r.pos, r.end
    unpack = _I32.unpack_from
    out = []
    for _ in range(count):
        index = unpack(buf, pos)[0]
        pos += 4
        n = buf[pos]
        pos += 1
        if n >= 0x80:  # records are usually >= 128 bytes: inline the multi-byte varint
            n &= 0x7F
            shift = 7
            while True:
                b = buf[pos]
                pos += 1
                n |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 28:
                    raise CodecError("records length varint longer than 5 bytes")
        if n == 0:
            records = None
        else:
            n -= 1
            if pos + n > end:
                raise CodecError("records past the end of the request")
            records = buf[pos : pos + n]
            pos += n
        out.append(ProducePartition(index, records))
        if buf[pos] == 0:
            pos += 1
        else:
            r.pos = pos
            r.skip_tagged_fields()
            pos = r.pos
    r.pos = pos
    return out


def _partition_struct(version: int) -> struct.Struct:
    fmt = ">ihq"  # index, error_code, base_offset
    if version >= 2:
        fmt += "q"  # log_append_time_ms
    if version >= 5:
        fmt += "q"  # log_start_offset
    return struct.Struct(fmt)


_PARTITION = [_partition_struct(v) for v in range(MAX_VERSION + 1)]
# v8+ tail when there is no error message: empty record_errors, null error_message (+ empty tags).
_TAIL_NO_MESSAGE = b"\x00\x00\x00\x00\xff\xff"
_TAIL_NO_MESSAGE_FLEX = b"\x01\x00\x00"


def _string(s: str, flexible: bool) -> bytes:
    data = s.encode()
    return (uvarint_bytes(len(data) + 1) if flexible else _I16.pack(len(data))) + data


def _nullable_string(s: str | None, flexible: bool) -> bytes:
    if s is None:
        return b"\x00" if flexible else b"\xff\xff"
    return _string(s, flexible)


def _record_errors(errors: tuple[tuple[int, str | None], ...], flexible: bool) -> bytes:
    out = bytearray(uvarint_bytes(len(errors) + 1) if flexible else _I32.pack(len(errors)))
    for index, message in errors:
        out += _I32.pack(index) + _nullable_string(message, flexible)
        if flexible:
            out.append(0)
    return bytes(out)


def encode_produce_response(
    version: int,
    topics: list[tuple[str, list[PartitionProduceResult]]],
    throttle_time_ms: int = 0,
) -> bytes:
    """The response body (no size, no header). Brook writes record_errors empty and no
    CurrentLeader/NodeEndpoints tags."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce v{version} is not supported")
    flexible = version >= FLEXIBLE_FROM
    pack = _PARTITION[version].pack
    v2 = version >= 2
    v5 = version >= 5
    v8 = version >= 8
    out = bytearray(uvarint_bytes(len(topics) + 1) if flexible else _I32.pack(len(topics)))
    for name, partitions in topics:
        out += _string(name, flexible)
        out += uvarint_bytes(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for p in partitions:
            if v5:
                out += pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms, p.log_start_offset)
            elif v2:
                out += pack(p.index, p.error_code, p.base_offset, p.log_append_time_ms)
            else:
                out += pack(p.index, p.error_code, p.base_offset)
            if v8:
                if p.record_errors:
                    out += _record_errors(p.record_errors, flexible)
                    out += _nullable_string(p.error_message, flexible)
                    if flexible:
                        out.append(0)
                elif p.error_message is None:
                    out += _TAIL_NO_MESSAGE_FLEX if flexible else _TAIL_NO_MESSAGE
                elif flexible:
                    out += b"\x01" + _string(p.error_message, True) + b"\x00"
                else:
                    out += b"\x00\x00\x00\x00" + _string(p.error_message, False)
        if flexible:
            out.append(0)
    if version >= 1:
        out += _I32.pack(throttle_time_ms)
    if flexible:
        out.append(0)
    return bytes(out)
