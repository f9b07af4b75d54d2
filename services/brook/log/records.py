"""Record-level view of magic-2 record batches, for the paths that need it: the log cleaner (keys),
the Iceberg writer (whole records, off the produce and fetch paths),
ListOffsets by timestamp (each record's offset and timestamp, from the one or few batches found), and the
appends whose topic config needs the records (a compacted topic's keys, a compression.type other than
`producer`).

The produce and fetch paths otherwise keep batches opaque. A batch's
records section (after the 61-byte header, compressed as a whole when attributes & 7 != 0) holds
`recordCount` records, each: length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | headers. Varints are zigzag
encoded; a length of -1 is null (a null value is a tombstone).

Rebuilding a batch copies the kept records' bytes unchanged (their deltas stay relative to the original
base offset and base timestamp) and keeps every header field but the record count, the max timestamp
(recomputed from the kept records unless the batch uses LogAppendTime) and the CRC.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import crc32c
from kafka import codec as kafka_codec

from brook.protocol.batch import (
    ATTR_COMPRESSION_MASK,
    ATTR_TIMESTAMP_TYPE,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
)

CODEC_NONE = 0
CODEC_GZIP = 1
CODEC_SNAPPY = 2
CODEC_LZ4 = 3
CODEC_ZSTD = 4

# compression.type -> the codec batches are stored with (`producer`: as sent, absent here).
TOPIC_CODECS = {
    "uncompressed": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}

_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordCount
_BEFORE_CRC = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc


class RecordError(ValueError):
    """A batch whose records cannot be decoded (corrupt, or compressed with an unavailable codec)."""


@dataclass(frozen=True, slots=True)
class Record:
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool  # null value
    raw: bytes  # the whole record as stored, length varint included


def read_varint(buf: bytes, pos: int, max_bytes: int = 10) -> tuple[int, int]:
    """(value, next position) of the zigzag varint at `pos`."""
    shift = 0
    z = 0
    end = min(len(buf), pos + max_bytes)
    while pos < end:
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if not b & 0x80:
            return (z >> 1) ^ -(z & 1), pos
        shift += 7
    raise RecordError("truncated or overlong varint")


def _codec_call(name: str, data: bytes) -> bytes:
    fn = cast(Any, getattr(kafka_codec, name))
    try:
        return bytes(fn(data))
    except Exception as e:  # each codec library raises its own error types
        raise RecordError(f"{name} failed: {e}") from e


_DECODERS = {
    CODEC_GZIP: "gzip_decode",
    CODEC_SNAPPY: "snappy_decode",
    CODEC_LZ4: "lz4_decode",
    CODEC_ZSTD: "zstd_decode",
}
_ENCODERS = {
    CODEC_GZIP: "gzip_encode",
    CODEC_SNAPPY: "snappy_encode",
    CODEC_LZ4: "lz4_encode",
    CODEC_ZSTD: "zstd_encode",
}


def decompress(codec: int, data: bytes) -> bytes:
    if codec == CODEC_NONE:
        return data
    name = _DECODERS.get(codec)
    if name is None:
        raise RecordError(f"unknown compression codec {codec}")
    return _codec_call(name, data)


def compress(codec: int, data: bytes) -> bytes:
    if codec == CODEC_NONE:
        return data
    name = _ENCODERS.get(codec)
    if name is None:
        raise RecordError(f"unknown compression codec {codec}")
    return _codec_call(name, data)


def decode_records(batch: bytes, header: BatchHeader) -> list[Record]:
    """The records of one whole batch (`batch` starts at its base offset). Raises RecordError."""
    if header.record_count == 0:
        return []  # an emptied batch (its codec bits may be set: nothing to decompress)
    payload = decompress(header.attributes & ATTR_COMPRESSION_MASK, batch[HEADER_SIZE : header.size])
    records: list[Record] = []
    pos = 0
    n = len(payload)
    for _ in range(header.record_count):
        start = pos
        length, pos = read_varint(payload, pos, 5)
        body = pos
        end = body + length
        if length < 1 or end > n:
            raise RecordError(f"record length {length} runs past the records section")
        pos += 1  # attributes (int8, unused)
        ts_delta, pos = read_varint(payload, pos)
        offset_delta, pos = read_varint(payload, pos, 5)
        key_len, pos = read_varint(payload, pos, 5)
        key: bytes | None = None
        if key_len >= 0:
            key = payload[pos : pos + key_len]
            pos += key_len
        value_len, pos = read_varint(payload, pos, 5)
        if value_len > 0:
            pos += value_len
        if pos > end or key_len < -1 or value_len < -1 or not 0 <= offset_delta <= header.last_offset_delta:
            raise RecordError("record fields run past its length, or a length or offset delta is invalid")
        records.append(Record(offset_delta, ts_delta, key, value_len < 0, payload[start:end]))
        pos = end  # the headers are kept as bytes, never looked at
    if pos != n:
        raise RecordError(f"{n - pos} bytes left after {header.record_count} records")
    return records


def record_timestamps(batch: bytes, header: BatchHeader) -> list[tuple[int, int]]:
    """(offset, timestamp) of each record of one whole batch. Under LogAppendTime every record has the
    batch's max timestamp (the broker's append time), as Kafka's record iterators report it."""
    records = decode_records(batch, header)
    base = header.base_offset
    if header.attributes & ATTR_TIMESTAMP_TYPE:
        return [(base + r.offset_delta, header.max_timestamp) for r in records]
    return [(base + r.offset_delta, header.base_timestamp + r.timestamp_delta) for r in records]


@dataclass(frozen=True, slots=True)
class FullRecord:
    """One data record with everything a reader sees (brook.iceberg's rows)."""

    offset: int
    timestamp: int  # ms
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def full_records(batch: bytes, header: BatchHeader) -> list[FullRecord]:
    """Every record of one whole batch with its value and headers decoded. Raises RecordError."""
    out: list[FullRecord] = []
    log_append = header.attributes & ATTR_TIMESTAMP_TYPE
    for r in decode_records(batch, header):
        raw = r.raw
        _, pos = read_varint(raw, 0, 5)  # the record's length
        pos += 1  # attributes
        _, pos = read_varint(raw, pos)  # timestamp delta (in r)
        _, pos = read_varint(raw, pos, 5)  # offset delta (in r)
        key_len, pos = read_varint(raw, pos, 5)
        pos += max(key_len, 0)
        value_len, pos = read_varint(raw, pos, 5)
        value = None if value_len < 0 else raw[pos : pos + value_len]
        pos += max(value_len, 0)
        count, pos = read_varint(raw, pos, 5)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(count):
            n, pos = read_varint(raw, pos, 5)
            name = raw[pos : pos + max(n, 0)].decode("utf-8", "replace")
            pos += max(n, 0)
            n, pos = read_varint(raw, pos, 5)
            headers.append((name, None if n < 0 else raw[pos : pos + n]))
            pos += max(n, 0)
        if pos > len(raw):
            raise RecordError("record headers run past its length")
        ts = header.max_timestamp if log_append else header.base_timestamp + r.timestamp_delta
        out.append(FullRecord(header.base_offset + r.offset_delta, ts, r.key, value, headers))
    return out


def _encode(
    header: BatchHeader, attributes: int, base_ts: int, max_ts: int, count: int, body: bytes
) -> bytes:
    after_crc = (
        _AFTER_CRC.pack(
            attributes,
            header.last_offset_delta,  # kept: the batch still spans its original offsets
            base_ts,
            max_ts,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            count,
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)  # batchLength counts from the leader epoch on
    return (
        _BEFORE_CRC.pack(header.base_offset, length, header.partition_leader_epoch, header.magic, crc)
        + after_crc
    )


def rebuild_batch(header: BatchHeader, kept: Sequence[Record]) -> bytes:
    """The batch with only `kept` (non-empty, in order): same offsets, producer fields and codec."""
    codec = header.attributes & ATTR_COMPRESSION_MASK
    body = compress(codec, b"".join(r.raw for r in kept))
    if header.attributes & ATTR_TIMESTAMP_TYPE:
        max_ts = header.max_timestamp  # LogAppendTime: every record's timestamp is the batch's
    else:
        max_ts = max(header.base_timestamp + r.timestamp_delta for r in kept)
    return _encode(header, header.attributes, header.base_timestamp, max_ts, len(kept), body)


def recompress_batch(header: BatchHeader, records: Sequence[Record], codec: int) -> bytes:
    """The batch holding `records` (all of the batch's, decoded from it) compressed with `codec`.

    Everything else is kept: offset and timestamp deltas (the records' bytes are unchanged), producer id,
    epoch and base sequence, the transactional and timestamp-type bits; the CRC is recomputed.
    """
    attributes = (header.attributes & ~ATTR_COMPRESSION_MASK) | codec
    body = compress(codec, b"".join(r.raw for r in records))
    return _encode(header, attributes, header.base_timestamp, header.max_timestamp, len(records), body)


def empty_batch(header: BatchHeader) -> bytes:
    """A record-less batch keeping the header's offsets and producer state (as Kafka retains them)."""
    attributes = header.attributes & ~ATTR_COMPRESSION_MASK
    ts = header.max_timestamp
    return _encode(header, attributes, ts, ts, 0, b"")
