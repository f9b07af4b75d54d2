"""The `__consumer_offsets` records of a share group (KIP-932), in Kafka 4.4's formats.

Types, as Kafka 4.4's CoordinatorRecordType: 10 ShareGroupMemberMetadata (a member's subscription),
11 ShareGroupMetadata (the group epoch and its subscribed topics' metadata hash, not tagged), 12
ShareGroupTargetAssignmentMetadata (the assignment epoch; tag 0: when it was computed), 13
ShareGroupTargetAssignmentMember, 14 ShareGroupCurrentMemberAssignment. Type 15,
ShareGroupStatePartitionMetadata (which share-partitions Kafka's share coordinator initialized), is
not written: a share-partition's state is its leader's (share/coordinator.py). Keys and values are
framed as the consumer group's (consumer_group_records.py); a null value is a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass

from .consumer_group_records import (
    Partitions,
    decode_group_record_key,
    decode_target_epoch,
    decode_target_member,
    encode_target_epoch,
    encode_target_member,
    group_record_key,
)
from .primitives import CodecError, Reader, Writer

__all__ = [
    "SHARE_RECORD_TYPES",
    "ShareCurrentAssignment",
    "ShareMemberValue",
    "decode_share_current",
    "decode_share_epoch",
    "decode_share_key",
    "decode_share_member",
    "decode_target_epoch",
    "decode_target_member",
    "encode_share_current",
    "encode_share_epoch",
    "encode_share_member",
    "encode_target_epoch",
    "encode_target_member",
    "share_key",
]

MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15
SHARE_RECORD_TYPES = frozenset(range(MEMBER_METADATA, STATE_PARTITION_METADATA + 1))
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT})
_VERSION = 0


def share_key(kind: int, group: str, member: str | None = None) -> bytes:
    assert (member is not None) == (kind in _MEMBER_KEYS)
    return group_record_key(kind, group, member)


def decode_share_key(raw: bytes) -> tuple[int, str, str | None]:
    return decode_group_record_key(raw, SHARE_RECORD_TYPES, _MEMBER_KEYS)


def _value(raw: bytes) -> Reader:
    r = Reader(memoryview(raw))
    if (version := r.int16()) != _VERSION:
        raise CodecError(f"unknown share group record value version {version}")
    return r


def encode_share_epoch(epoch: int, metadata_hash: int) -> bytes:
    w = Writer()
    w.int16(_VERSION)
    w.int32(epoch)
    w.int64(metadata_hash)
    w.uvarint(0)
    return w.getvalue()


def decode_share_epoch(raw: bytes) -> tuple[int, int]:
    r = _value(raw)
    epoch, metadata_hash = r.int32(), r.int64()
    r.skip_tagged_fields()
    return epoch, metadata_hash


@dataclass(frozen=True, slots=True)
class ShareMemberValue:
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]


def encode_share_member(v: ShareMemberValue) -> bytes:
    w = Writer()
    w.int16(_VERSION)
    w.compact_nullable_string(v.rack_id)
    w.compact_string(v.client_id)
    w.compact_string(v.client_host)
    w.compact_array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.compact_string(name)
    w.uvarint(0)
    return w.getvalue()


def decode_share_member(raw: bytes) -> ShareMemberValue:
    r = _value(raw)
    rack, client_id, host = r.compact_nullable_string(), r.compact_string(), r.compact_string()
    names = [r.compact_string() for _ in range(r.compact_array_len())]
    r.skip_tagged_fields()
    return ShareMemberValue(rack, client_id, host, names)


@dataclass(frozen=True, slots=True)
class ShareCurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 stable (a share member is always)
    assigned: Partitions


def encode_share_current(v: ShareCurrentAssignment) -> bytes:
    # The partitions are written as the target member's value is, after the three numbers.
    head = Writer()
    head.int16(_VERSION)
    head.int32(v.member_epoch)
    head.int32(v.previous_member_epoch)
    head.int8(v.state)
    return head.getvalue() + encode_target_member(v.assigned)[2:]


def decode_share_current(raw: bytes) -> ShareCurrentAssignment:
    r = _value(raw)
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    rest = raw[r.pos :]
    assigned = decode_target_member(_VERSION.to_bytes(2, "big") + rest)
    return ShareCurrentAssignment(epoch, previous, state, assigned)
