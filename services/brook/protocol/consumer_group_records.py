"""The `__consumer_offsets` records of a consumer-protocol (KIP-848) group, in Kafka's formats.

A key is its record type (int16) and non-flexible strings; a value is version 0 of a flexible
message (compact strings and arrays, tagged fields). Types, as Kafka 4.4's CoordinatorRecordType:
3 ConsumerGroupMetadata (group epoch; tag 0: the subscribed topics' metadata hash), 4
ConsumerGroupPartitionMetadata (no longer written by Kafka 4.x: read and ignored), 5
ConsumerGroupMemberMetadata (a member's subscription), 6 ConsumerGroupTargetAssignmentMetadata
(the assignment epoch; tag 0: when it was computed), 7 ConsumerGroupTargetAssignmentMember, 8
ConsumerGroupCurrentMemberAssignment (with Kafka 4.4's per-partition assignment epochs in each
topic's tag 0, written when every partition's is known), 16 ConsumerGroupRegularExpression (the
topics a subscribed regex matched; keyed by group and regex). A null value is a tombstone.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from .primitives import CodecError, Reader, Writer

__all__ = [
    "CONSUMER_RECORD_TYPES",
    "ClassicMemberMetadata",
    "CurrentAssignmentValue",
    "MemberMetadataValue",
    "Partitions",
    "ResolvedRegex",
    "consumer_key",
    "decode_consumer_key",
    "decode_current_assignment",
    "decode_group_epoch",
    "decode_group_record_key",
    "decode_member_metadata",
    "decode_regex",
    "decode_target_epoch",
    "decode_target_member",
    "encode_current_assignment",
    "encode_group_epoch",
    "encode_member_metadata",
    "encode_regex",
    "encode_target_epoch",
    "encode_target_member",
    "group_record_key",
    "metadata_hash",
    "record_type",
]

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8
REGULAR_EXPRESSION = 16
CONSUMER_RECORD_TYPES = frozenset(range(GROUP_METADATA, CURRENT_MEMBER_ASSIGNMENT + 1)) | {REGULAR_EXPRESSION}
# Keys with a second string after the group id: the member id, or (type 16) the regex.
_MEMBER_KEYS = frozenset(
    {MEMBER_METADATA, TARGET_ASSIGNMENT_MEMBER, CURRENT_MEMBER_ASSIGNMENT, REGULAR_EXPRESSION}
)
_VALUE_VERSION = 0
_CLASSIC_MEMBER_TAG = 0

# topic id -> partitions
Partitions = Mapping[bytes, set[int]]
# (topic id, partition) -> epoch
Epochs = Mapping[tuple[bytes, int], int]


def metadata_hash(metadata: Mapping[str, tuple[bytes, int]]) -> int:
    """A 64-bit digest of the subscribed topics (name, id, partitions): a coordinator that loads the
    group compares it with today's topics to know whether they changed while it was away. Never 0,
    which the record reads as "no hash"."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(metadata):
        topic_id, partitions = metadata[name]
        h.update(b"%s\0%s\0%d\0" % (name.encode(), topic_id, partitions))
    return int.from_bytes(h.digest(), "big", signed=True) or 1


def record_type(raw_key: bytes) -> int:
    if len(raw_key) < 2:
        raise CodecError("a __consumer_offsets key shorter than its type")
    return int.from_bytes(raw_key[:2], "big", signed=True)


def group_record_key(kind: int, group: str, member: str | None) -> bytes:
    """A modern group record's key: its type, the group id and, for per-member kinds, a second
    string (the member id, or a regex)."""
    w = Writer()
    w.int16(kind)
    w.string(group)
    if member is not None:
        w.string(member)
    return w.getvalue()


def decode_group_record_key(
    raw: bytes, kinds: frozenset[int], member_kinds: frozenset[int]
) -> tuple[int, str, str | None]:
    """(record type, group id, second string or None) of a key whose type is one of `kinds`."""
    r = Reader(memoryview(raw))
    kind = r.int16()
    if kind not in kinds:
        raise CodecError(f"not a group record type of this kind: {kind}")
    group = r.string()
    return kind, group, r.string() if kind in member_kinds else None


def consumer_key(kind: int, group: str, member: str | None = None) -> bytes:
    assert (member is not None) == (kind in _MEMBER_KEYS)
    return group_record_key(kind, group, member)


def decode_consumer_key(raw: bytes) -> tuple[int, str, str | None]:
    """(record type, group id, member id or regex or None) of a consumer group record's key."""
    return decode_group_record_key(raw, CONSUMER_RECORD_TYPES, _MEMBER_KEYS)


def _value(r: Reader) -> Reader:
    version = r.int16()
    if version != _VALUE_VERSION:
        raise CodecError(f"unknown consumer group record value version {version}")
    return r


def _end(w: Writer, tags: Mapping[int, bytes] | None = None) -> None:
    tags = tags or {}
    w.uvarint(len(tags))
    for tag in sorted(tags):
        w.uvarint(tag)
        w.uvarint(len(tags[tag]))
        w.raw(tags[tag])


def _epoch_value(epoch: int, tagged: int) -> bytes:
    """A version-0 value of one int32 and, in tag 0, an int64 written only when set (as Kafka's
    generated writer does with a field at its default)."""
    w = Writer()
    w.int16(_VALUE_VERSION)
    w.int32(epoch)
    _end(w, {0: tagged.to_bytes(8, "big", signed=True)} if tagged else None)
    return w.getvalue()


def _decode_epoch_value(raw: bytes) -> tuple[int, int]:
    r = _value(Reader(memoryview(raw)))
    epoch, tagged = r.int32(), 0
    for tag, data in r.tagged_fields():
        if tag == 0 and len(data) == 8:
            tagged = int.from_bytes(data, "big", signed=True)
    return epoch, tagged


def encode_group_epoch(epoch: int, metadata_hash: int) -> bytes:
    """ConsumerGroupMetadataValue: the group epoch; tag 0, the subscribed topics' hash."""
    return _epoch_value(epoch, metadata_hash)


def decode_group_epoch(raw: bytes) -> tuple[int, int]:
    """(group epoch, metadata hash; 0 when absent)."""
    return _decode_epoch_value(raw)


def encode_target_epoch(epoch: int, timestamp_ms: int) -> bytes:
    """ConsumerGroupTargetAssignmentMetadataValue: the assignment epoch; tag 0, when it was computed."""
    return _epoch_value(epoch, timestamp_ms)


def decode_target_epoch(raw: bytes) -> tuple[int, int]:
    """(assignment epoch, when it was computed in ms; 0 when absent)."""
    return _decode_epoch_value(raw)


@dataclass(frozen=True, slots=True)
class ClassicMemberMetadata:
    """A classic-protocol member of a consumer group: its session timeout and JoinGroup protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: list[str]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMemberMetadata | None = None


def _encode_classic(classic: ClassicMemberMetadata | None) -> bytes:
    """Tag 0's payload: Kafka's generated writer emits it even when null, as a 0 byte; a present
    struct follows a 1 byte (a nullable struct's marker)."""
    if classic is None:
        return b"\x00"
    w = Writer()
    w.int8(1)
    w.int32(classic.session_timeout_ms)
    w.compact_array_len(len(classic.protocols))
    for name, metadata in classic.protocols:
        w.compact_string(name)
        w.compact_bytes(metadata)
        _end(w)
    _end(w)
    return w.getvalue()


def _decode_classic(data: memoryview) -> ClassicMemberMetadata | None:
    r = Reader(data)
    if r.int8() != 1:
        return None
    timeout = r.int32()
    protocols = []
    for _ in range(r.compact_array_len()):
        name, metadata = r.compact_string(), bytes(r.compact_bytes())
        r.skip_tagged_fields()
        protocols.append((name, metadata))
    return ClassicMemberMetadata(timeout, tuple(protocols))


def encode_member_metadata(v: MemberMetadataValue) -> bytes:
    w = Writer()
    w.int16(_VALUE_VERSION)
    w.compact_nullable_string(v.instance_id)
    w.compact_nullable_string(v.rack_id)
    w.compact_string(v.client_id)
    w.compact_string(v.client_host)
    w.compact_array_len(len(v.subscribed_topic_names))
    for name in v.subscribed_topic_names:
        w.compact_string(name)
    w.compact_nullable_string(v.subscribed_topic_regex)
    w.int32(v.rebalance_timeout_ms)
    w.compact_nullable_string(v.server_assignor)
    # Tag 0 is ClassicMemberMetadata (for classic members of a consumer group).
    _end(w, {_CLASSIC_MEMBER_TAG: _encode_classic(v.classic)})
    return w.getvalue()


def decode_member_metadata(raw: bytes) -> MemberMetadataValue:
    r = _value(Reader(memoryview(raw)))
    instance, rack = r.compact_nullable_string(), r.compact_nullable_string()
    client_id, client_host = r.compact_string(), r.compact_string()
    names = [r.compact_string() for _ in range(r.compact_array_len())]
    regex = r.compact_nullable_string()
    timeout = r.int32()
    assignor = r.compact_nullable_string()
    classic = None
    for tag, data in r.tagged_fields():
        if tag == _CLASSIC_MEMBER_TAG and len(data):
            classic = _decode_classic(data)
    return MemberMetadataValue(
        instance, rack, client_id, client_host, names, regex, timeout, assignor, classic
    )


def _write_partitions(w: Writer, partitions: Partitions, epochs: Epochs | None = None) -> None:
    topics = sorted((t, ps) for t, ps in partitions.items() if ps)
    w.compact_array_len(len(topics))
    for topic_id, ps in topics:
        w.uuid(topic_id)
        w.compact_array_len(len(ps))
        for p in sorted(ps):
            w.int32(p)
        tags = None
        if epochs is not None and all((topic_id, p) in epochs for p in ps):
            e = Writer()  # AssignmentEpochs: one per partition, in the partitions' order
            e.compact_array_len(len(ps))
            for p in sorted(ps):
                e.int32(epochs[(topic_id, p)])
            tags = {0: e.getvalue()}
        _end(w, tags)


def _read_partitions(r: Reader, epochs: dict[tuple[bytes, int], int] | None = None) -> dict[bytes, set[int]]:
    out: dict[bytes, set[int]] = {}
    for _ in range(r.compact_array_len()):
        topic_id = bytes(r.uuid())
        ps = [r.int32() for _ in range(r.compact_array_len())]
        out.setdefault(topic_id, set()).update(ps)
        for tag, data in r.tagged_fields():
            if tag == 0 and epochs is not None:
                e = Reader(data)
                n = e.compact_array_len()
                if n == len(ps):
                    epochs.update({(topic_id, p): e.int32() for p in ps})
    return out


def encode_target_member(partitions: Partitions) -> bytes:
    w = Writer()
    w.int16(_VALUE_VERSION)
    _write_partitions(w, partitions)
    _end(w)
    return w.getvalue()


def decode_target_member(raw: bytes) -> dict[bytes, set[int]]:
    r = _value(Reader(memoryview(raw)))
    out = _read_partitions(r)
    r.skip_tagged_fields()
    return out


@dataclass(frozen=True, slots=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: int  # Kafka's MemberState: 0 STABLE, 1 UNREVOKED_PARTITIONS, 2 UNRELEASED_PARTITIONS
    assigned: Partitions = field(default_factory=dict)
    pending_revocation: Partitions = field(default_factory=dict)
    # (topic id, partition) -> the member epoch it was assigned at (Kafka 4.4's AssignmentEpochs)
    epochs: Epochs = field(default_factory=dict)


def encode_current_assignment(v: CurrentAssignmentValue) -> bytes:
    w = Writer()
    w.int16(_VALUE_VERSION)
    w.int32(v.member_epoch)
    w.int32(v.previous_member_epoch)
    w.int8(v.state)
    _write_partitions(w, v.assigned, v.epochs)
    _write_partitions(w, v.pending_revocation, v.epochs)
    _end(w)
    return w.getvalue()


def decode_current_assignment(raw: bytes) -> CurrentAssignmentValue:
    r = _value(Reader(memoryview(raw)))
    epoch, previous, state = r.int32(), r.int32(), r.int8()
    epochs: dict[tuple[bytes, int], int] = {}
    assigned, pending = _read_partitions(r, epochs), _read_partitions(r, epochs)
    r.skip_tagged_fields()
    return CurrentAssignmentValue(epoch, previous, state, assigned, pending, epochs)


@dataclass(frozen=True, slots=True)
class ResolvedRegex:
    """ConsumerGroupRegularExpressionValue: the topics a regex matched, the metadata version it was
    matched against (Kafka's image offset; Brook has none and writes 0) and when, in ms."""

    topics: list[str]
    version: int
    timestamp_ms: int


def encode_regex(v: ResolvedRegex) -> bytes:
    w = Writer()
    w.int16(_VALUE_VERSION)
    w.compact_array_len(len(v.topics))
    for name in v.topics:
        w.compact_string(name)
    w.int64(v.version)
    w.int64(v.timestamp_ms)
    _end(w)
    return w.getvalue()


def decode_regex(raw: bytes) -> ResolvedRegex:
    r = _value(Reader(memoryview(raw)))
    topics = [r.compact_string() for _ in range(r.compact_array_len())]
    version, timestamp = r.int64(), r.int64()
    r.skip_tagged_fields()
    return ResolvedRegex(topics, version, timestamp)
