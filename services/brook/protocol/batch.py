"""Record batch (magic 2) header: the 61 bytes Brook ever parses.

Layout (big-endian): baseOffset i64 | batchLength i32 | partitionLeaderEpoch i32 | magic i8 | crc u32 |
attributes i16 | lastOffsetDelta i32 | baseTimestamp i64 | maxTimestamp i64 | producerId i64 |
producerEpoch i16 | baseSequence i32 | recordCount i32, then the records (opaque, maybe compressed).
batchLength counts from partitionLeaderEpoch to the end, so a batch occupies 12 + batchLength bytes.
The CRC-32C covers attributes to the end, so rewriting baseOffset or the leader epoch keeps it valid.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from brook.protocol.errors import ErrorCode, KafkaError

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_START = 21  # attributes onward

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_LEN = struct.Struct(">qi")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_U = struct.Struct(">I")

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1: LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

NO_PRODUCER_ID = -1


class BatchHeader(NamedTuple):
    """A tuple, not a frozen dataclass: every produced batch and every batch a start-up replays or a
    recovery walks builds one, and a 13-field frozen dataclass costs ~9x a tuple to build."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.last_offset_delta

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the 61-byte header at `pos`; raises KafkaError(CORRUPT_MESSAGE) when it cannot."""
    if len(buf) - pos < HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch shorter than its 61-byte header")
    h = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if h.magic != 2:
        raise KafkaError(
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
            f"record batch magic {h.magic}; only magic 2 is supported",
        )
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record batch length {h.batch_length} is too small")
    return h


def check_produce_records(buf: bytes | bytearray | memoryview) -> None:
    """Kafka's ProduceRequest.validateRecords (v3+) on a partition's records, with its error codes:
    exactly one whole batch of magic 2 (INVALID_RECORD otherwise), CORRUPT_MESSAGE for a length
    below any record's overhead or a magic no Kafka ever wrote. Only the first 17 bytes are read."""
    n = len(buf)
    if n >= LOG_OVERHEAD:
        size = LOG_OVERHEAD + _I.unpack_from(buf, 8)[0]
        if size < LOG_OVERHEAD + 14:  # Kafka's LegacyRecord.RECORD_OVERHEAD_V0
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"record size {size - LOG_OVERHEAD} is too small")
        if n >= 17:
            magic = struct.unpack_from(">b", buf, 16)[0]
            if not 0 <= magic <= 2:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"invalid magic {magic} in the record batch")
            if n >= size:
                if magic != 2:
                    raise KafkaError(ErrorCode.INVALID_RECORD, "only record batches of magic 2 are allowed")
                if n > size:
                    raise KafkaError(
                        ErrorCode.INVALID_RECORD, "exactly one record batch per partition is allowed"
                    )
                return
    raise KafkaError(ErrorCode.INVALID_RECORD, "a partition's records must hold one whole record batch")


def peek_offset_and_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """(baseOffset, total size) of the batch at `pos` from its first 12 bytes."""
    base, length = _OFFSET_LEN.unpack_from(buf, pos)
    return base, LOG_OVERHEAD + length


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    end = pos + header.size
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START : end]) == header.crc


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return int(crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size]))


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _Q.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _I.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, timestamp_ms: int) -> None:
    """Stamp LogAppendTime: set the timestamp-type bit and maxTimestamp, then re-sign the CRC."""
    attrs = struct.unpack_from(">h", buf, pos + CRC_START)[0] | ATTR_TIMESTAMP_TYPE
    struct.pack_into(">h", buf, pos + CRC_START, attrs)
    _Q.pack_into(buf, pos + 35, timestamp_ms)
    _U.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


def iter_headers(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every whole batch in `buf`; raises CORRUPT_MESSAGE on a torn tail."""
    out: list[tuple[int, BatchHeader]] = []
    pos, n = 0, len(buf)
    while pos < n:
        h = parse_header(buf, pos)
        if pos + h.size > n:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "record batch extends past the end of the records")
        out.append((pos, h))
        pos += h.size
    return out
