"""Transaction records in Kafka's formats: control batches (COMMIT/ABORT markers) and the records of
`__transaction_state` (TransactionLog key v0, value v0), so Kafka's tools can read both.

Control batch: attributes transactional + control, baseSequence -1, one record whose key is
(version int16 = 0, type int16: 0 ABORT, 1 COMMIT) and value (version int16 = 0, coordinatorEpoch int32).
Built and read by hand: one small uncompressed record, never on a data path.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, compute_crc
from .primitives import CodecError, Reader, Writer

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

_BATCH = struct.Struct(">qiibIhiqqqhii")


def build_control_batch(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int, timestamp_ms: int
) -> bytes:
    """A marker batch (offset 0: the log assigns it); the leader epoch is stamped on append."""
    rec = Writer()
    rec.int8(0)  # record attributes
    rec.varlong(0)  # timestamp delta
    rec.varint(0)  # offset delta
    rec.varint(4)
    rec.int16(0)
    rec.int16(CONTROL_COMMIT if commit else CONTROL_ABORT)
    rec.varint(6)
    rec.int16(0)
    rec.int32(coordinator_epoch)
    rec.varint(0)  # headers
    body = Writer()
    body.varint(len(rec))
    body.raw(rec.buf)
    size = HEADER_SIZE + len(body)
    buf = bytearray(size)
    _BATCH.pack_into(
        buf, 0, 0, size - LOG_OVERHEAD, -1, 2, 0, ATTR_TRANSACTIONAL | ATTR_CONTROL, 0,
        timestamp_ms, timestamp_ms, producer_id, producer_epoch, -1, 1,
    )  # fmt: skip
    buf[HEADER_SIZE:] = body.buf
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, size))
    return bytes(buf)


def control_type(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    """CONTROL_COMMIT or CONTROL_ABORT of the control batch at `pos` (its first record's key)."""
    return control_marker(buf, pos, header)[0]


def control_marker(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> tuple[int, int]:
    """(CONTROL_COMMIT or CONTROL_ABORT, coordinator epoch; -1 when the value holds none) of the control
    batch at `pos`."""
    if not header.is_control:
        raise CodecError("not a control batch")
    r = Reader(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    r.varint()  # record length
    r.int8()
    r.varlong()
    r.varint()
    if r.varint() < 4:
        raise CodecError("control record key is too short")
    r.int16()  # key version
    kind = r.int16()
    if kind not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise CodecError(f"unknown control record type {kind}")
    if r.varint() < 6:  # value length: no (version, coordinator epoch)
        return kind, -1
    r.int16()  # value version
    return kind, r.int32()


# -- __transaction_state ---------------------------------------------------------------------------

_KEY_VERSION = 0
_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: int  # Kafka's TransactionState ids (brook.transactions.state.TxnState)
    partitions: tuple[tuple[str, int], ...]
    last_update_ms: int
    start_ms: int


def encode_txn_key(transactional_id: str) -> bytes:
    w = Writer()
    w.int16(_KEY_VERSION)
    w.string(transactional_id)
    return w.getvalue()


def decode_txn_key(raw: bytes) -> str:
    r = Reader(memoryview(raw))
    version = r.int16()
    if version != _KEY_VERSION:
        raise CodecError(f"unknown __transaction_state key version {version}")
    return r.string()


def encode_txn_value(v: TxnLogValue) -> bytes:
    w = Writer()
    w.int16(_VALUE_VERSION)
    w.int64(v.producer_id)
    w.int16(v.producer_epoch)
    w.int32(v.timeout_ms)
    w.int8(v.state)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in v.partitions:
        by_topic.setdefault(topic, []).append(partition)
    w.array_len(len(by_topic))
    for topic, parts in by_topic.items():
        w.string(topic)
        w.array_len(len(parts))
        for p in parts:
            w.int32(p)
    w.int64(v.last_update_ms)
    w.int64(v.start_ms)
    return w.getvalue()


def decode_txn_value(raw: bytes) -> TxnLogValue:
    r = Reader(memoryview(raw))
    version = r.int16()
    if version != _VALUE_VERSION:
        raise CodecError(f"unsupported __transaction_state value version {version}")
    pid, epoch, timeout, state = r.int64(), r.int16(), r.int32(), r.int8()
    partitions: list[tuple[str, int]] = []
    n = r.nullable_array_len()
    for _ in range(n or 0):
        topic = r.string()
        for _ in range(r.array_len()):
            partitions.append((topic, r.int32()))
    return TxnLogValue(pid, epoch, timeout, state, tuple(partitions), r.int64(), r.int64())
