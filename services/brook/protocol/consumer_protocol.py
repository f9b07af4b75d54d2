"""The consumer protocol embedded in classic JoinGroup and SyncGroup: ConsumerProtocolSubscription
(a member's topics, owned partitions and rack) and ConsumerProtocolAssignment (its partitions), as
Kafka's clients/.../consumer/internals/ConsumerProtocol writes them, versions 0-3 (not flexible).

The group coordinator reads them when classic members live in a consumer-protocol group (KIP-848's
online migration): it must know what a classic member subscribes to and owns, and hand it its
assignment in this form.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .primitives import Reader, Writer

__all__ = [
    "PROTOCOL_TYPE",
    "Assignment",
    "Subscription",
    "decode_assignment",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
    "version_of",
]

PROTOCOL_TYPE = "consumer"
_MAX_VERSION = 3

# topic name -> partitions
TopicPartitions = dict[str, list[int]]


@dataclass(slots=True)
class Subscription:
    topics: list[str]
    user_data: bytes | None = None
    owned: TopicPartitions = field(default_factory=dict)  # v1+
    generation: int = -1  # v2+
    rack_id: str | None = None  # v3+
    version: int = _MAX_VERSION


@dataclass(slots=True)
class Assignment:
    partitions: TopicPartitions
    user_data: bytes | None = None


def version_of(data: bytes) -> int:
    """The version a member wrote its metadata in (Kafka's deserializeVersion); answers use it,
    capped at what this codec writes."""
    return min(Reader(memoryview(data)).int16(), _MAX_VERSION)


def _read_partitions(r: Reader) -> TopicPartitions:
    out: TopicPartitions = {}
    for _ in range(r.array_len()):
        topic = r.string()
        out.setdefault(topic, []).extend(r.int32() for _ in range(r.array_len()))
    return out


def _write_partitions(w: Writer, partitions: TopicPartitions) -> None:
    w.array_len(len(partitions))
    for topic in sorted(partitions):
        w.string(topic)
        w.array_len(len(partitions[topic]))
        for p in sorted(partitions[topic]):
            w.int32(p)


def decode_subscription(data: bytes) -> Subscription:
    """Raises ValueError (or the reader's errors) on malformed metadata. Newer versions only add
    fields at the end, so a version above 3 is read as 3."""
    r = Reader(memoryview(data))
    version = r.int16()
    if version < 0:
        raise ValueError(f"invalid consumer protocol version {version}")
    topics = [r.string() for _ in range(r.array_len())]
    user_data = r.nullable_bytes()
    sub = Subscription(topics, None if user_data is None else bytes(user_data), version=version)
    if version >= 1:
        sub.owned = _read_partitions(r)
    if version >= 2:
        sub.generation = r.int32()
    if version >= 3:
        sub.rack_id = r.nullable_string()
    return sub


def encode_subscription(sub: Subscription) -> bytes:
    w = Writer()
    version = min(sub.version, _MAX_VERSION)
    w.int16(version)
    w.array_len(len(sub.topics))
    for t in sub.topics:
        w.string(t)
    w.nullable_bytes(sub.user_data)
    if version >= 1:
        _write_partitions(w, sub.owned)
    if version >= 2:
        w.int32(sub.generation)
    if version >= 3:
        w.nullable_string(sub.rack_id)
    return w.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """An empty assignment (a member the leader gave nothing, or none yet) is no partitions."""
    if not data:
        return Assignment({})
    r = Reader(memoryview(data))
    r.int16()
    partitions = _read_partitions(r)
    user_data = r.nullable_bytes()
    return Assignment(partitions, None if user_data is None else bytes(user_data))


def encode_assignment(assignment: Assignment, version: int) -> bytes:
    w = Writer()
    w.int16(min(max(version, 0), _MAX_VERSION))
    _write_partitions(w, assignment.partitions)
    w.nullable_bytes(assignment.user_data)
    return w.getvalue()
