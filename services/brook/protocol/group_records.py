"""The records of `__consumer_offsets`, in Kafka's own formats (so Kafka tools can read them).

Keys: OffsetCommitKey v1 (group, topic, partition) and GroupMetadataKey v2 (group). Values:
OffsetCommitValue v3 (offset, leader epoch, metadata, commit timestamp) and GroupMetadataValue v3
(protocol type, generation, protocol, leader, state timestamp, members). A null value is a tombstone.
Batches are built and read with kafka-python's record classes: this is control-plane traffic.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from .primitives import CodecError, Reader

_OFFSET_KEY_VERSION = 1
_GROUP_KEY_VERSION = 2
_OFFSET_VALUE_VERSION = 3
_GROUP_VALUE_VERSION = 3


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nstr(s: str | None) -> bytes:
    return struct.pack(">h", -1) if s is None else _str(s)


def _bytes(b: bytes) -> bytes:
    return struct.pack(">i", len(b)) + b


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: list[MemberValue] = field(default_factory=list)


def encode_key(key: OffsetKey | GroupKey) -> bytes:
    if isinstance(key, OffsetKey):
        return (
            struct.pack(">h", _OFFSET_KEY_VERSION)
            + _str(key.group)
            + _str(key.topic)
            + struct.pack(">i", key.partition)
        )
    return struct.pack(">h", _GROUP_KEY_VERSION) + _str(key.group)


def encode_offset_value(v: OffsetValue) -> bytes:
    return (
        struct.pack(">hqi", _OFFSET_VALUE_VERSION, v.offset, v.leader_epoch)
        + _str(v.metadata)
        + struct.pack(">q", v.commit_timestamp)
    )


def encode_group_value(v: GroupValue) -> bytes:
    out = [
        struct.pack(">h", _GROUP_VALUE_VERSION),
        _str(v.protocol_type),
        struct.pack(">i", v.generation),
        _nstr(v.protocol),
        _nstr(v.leader),
        struct.pack(">q", v.state_timestamp),
        struct.pack(">i", len(v.members)),
    ]
    for m in v.members:
        out += [
            _str(m.member_id),
            _nstr(m.group_instance_id),
            _str(m.client_id),
            _str(m.client_host),
            struct.pack(">ii", m.rebalance_timeout, m.session_timeout),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(out)


def decode_key(raw: bytes) -> OffsetKey | GroupKey:
    r = Reader(memoryview(raw))
    version = r.int16()
    if version in (0, 1):
        return OffsetKey(r.string(), r.string(), r.int32())
    if version == 2:
        return GroupKey(r.string())
    raise CodecError(f"unknown __consumer_offsets key version {version}")


def decode_offset_value(raw: bytes) -> OffsetValue:
    r = Reader(memoryview(raw))
    version = r.int16()
    offset = r.int64()
    epoch = r.int32() if version >= 3 else -1
    metadata = r.string()
    ts = r.int64()
    return OffsetValue(offset, epoch, metadata, ts)


def decode_group_value(raw: bytes) -> GroupValue:
    r = Reader(memoryview(raw))
    version = r.int16()
    protocol_type, generation = r.string(), r.int32()
    protocol, leader = r.nullable_string(), r.nullable_string()
    ts = r.int64() if version >= 2 else -1
    members = []
    for _ in range(r.int32()):
        member_id = r.string()
        instance = r.nullable_string() if version >= 3 else None
        client_id, host = r.string(), r.string()
        rebalance = r.int32() if version >= 1 else -1
        session = r.int32()
        members.append(
            MemberValue(
                member_id, instance, client_id, host, rebalance, session, bytes(r.bytes_()), bytes(r.bytes_())
            )
        )
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)


def build_batch(
    records: Sequence[tuple[bytes, bytes | None]],
    timestamp_ms: int,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    """An uncompressed magic-2 batch of (key, value) records; offsets are assigned by the log. With a
    producer id: a transactional batch of that producer (TxnOffsetCommit), without sequence."""
    b = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=producer_id >= 0,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        batch_size=2**30,
    )
    for i, (key, value) in enumerate(records):
        b.append(i, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytes(b.build())


@dataclass(frozen=True, slots=True)
class StoredBatch:
    producer_id: int
    transactional: bool
    control_type: int  # -1: a data batch; else CONTROL_ABORT / CONTROL_COMMIT
    records: list[tuple[bytes | None, bytes | None]]


def iter_batches(batches: bytes) -> Iterator[StoredBatch]:
    """Every whole batch of a run with its producer, transactional bit and (for markers) type."""
    pos, n = 0, len(batches)
    while pos + 12 <= n:
        size = 12 + struct.unpack_from(">i", batches, pos + 8)[0]
        if pos + size > n:
            break
        batch = DefaultRecordBatch(batches[pos : pos + size])
        records = [(rec.key, rec.value) for rec in batch]
        kind = -1
        if batch.is_control_batch:
            key = records[0][0] if records else None
            kind = struct.unpack_from(">h", key, 2)[0] if key is not None and len(key) >= 4 else 0
        yield StoredBatch(batch.producer_id, batch.is_transactional, kind, records)
        pos += size


def iter_records(batches: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in a run of whole batches (compressed or not)."""
    pos, n = 0, len(batches)
    while pos + 12 <= n:
        size = 12 + struct.unpack_from(">i", batches, pos + 8)[0]
        if pos + size > n:
            break  # a partial trailing batch (reads may end mid-batch)
        for rec in DefaultRecordBatch(batches[pos : pos + size]):
            yield rec.offset, rec.key, rec.value
        pos += size
