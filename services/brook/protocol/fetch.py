"""Fetch request/response, hand-written for the hot path.

The response encoder returns a list of chunks so the server can send records it never reads: a
RecordsRef (e.g. a file range for sendfile) stays its own element, preceded by its length prefix;
everything else is coalesced into bytes. Partitions without data get EMPTY records (length 0), never
null: librdkafka rejects null with "invalid MessageSetSize -1".

Versions 4-18: flexible from 12 (ClusterId tag 0 in requests), topic ids instead of names from 13,
replica id in the ReplicaState tag (1) from 15. For bytes-only records the joined output is
byte-identical to kafka-python's FetchResponse (tests/unit/protocol/test_fetch.py).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from brook.protocol.primitives import CodecError, Reader, uvarint_bytes

__all__ = [
    "FetchPartition",
    "FetchPartitionResult",
    "FetchRequest",
    "FetchTopic",
    "FetchTopicResult",
    "ForgottenTopic",
    "RecordsRef",
    "chunks_size",
    "decode_fetch_request",
    "encode_fetch_response",
]

MIN_VERSION = 4
MAX_VERSION = 18
FLEXIBLE_FROM = 12
TOPIC_IDS_FROM = 13
REPLICA_STATE_FROM = 15

_TAG_CLUSTER_ID = 0
_TAG_REPLICA_STATE = 1


class RecordsRef(Protocol):
    """Records the encoder must not read (e.g. a file range the server sends with sendfile)."""

    @property
    def size(self) -> int: ...


@dataclass(slots=True)
class FetchPartition:
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int


@dataclass(slots=True)
class FetchTopic:
    name: str | None  # v4-12
    topic_id: bytes | None  # v13+
    partitions: list[FetchPartition]


@dataclass(slots=True)
class ForgottenTopic:
    name: str | None  # v7-12
    topic_id: bytes | None  # v13+
    partitions: list[int]


@dataclass(slots=True)
class FetchRequest:
    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    session_id: int
    session_epoch: int
    topics: list[FetchTopic]
    forgotten: list[ForgottenTopic]
    rack_id: str
    cluster_id: str | None = None


@dataclass(slots=True)
class FetchPartitionResult:
    partition: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | bytearray | memoryview | RecordsRef | None
    preferred_read_replica: int = -1
    # (producer id, first offset) of aborted transactions in the returned range (read_committed); None
    # (null on the wire) where Kafka answers null: a read_uncommitted read, or one its read refused
    aborted: list[tuple[int, int]] | None = field(default_factory=list)


@dataclass(slots=True)
class FetchTopicResult:
    name: str
    topic_id: bytes
    partitions: list[FetchPartitionResult] = field(default_factory=list)


# Fixed part of a request partition, by version: (partition, current_leader_epoch, fetch_offset,
# last_fetched_epoch, log_start_offset, partition_max_bytes) with the absent ones left out.
_REQ_P4 = struct.Struct(">iqi")
_REQ_P5 = struct.Struct(">iqqi")
_REQ_P9 = struct.Struct(">iiqqi")
_REQ_P12 = struct.Struct(">iiqiqi")
# Fixed request prefix: [replica_id (<15)], max_wait_ms, min_bytes, max_bytes, isolation_level,
# [session_id, session_epoch (7+)].
_REQ_TOP4 = struct.Struct(">iiiib")
_REQ_TOP7 = struct.Struct(">iiiibii")
_REQ_TOP15 = struct.Struct(">iiibii")
_REPLICA_STATE = struct.Struct(">iq")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


def _decode_partitions(r: Reader, version: int, count: int) -> list[FetchPartition]:
    buf = r.buf
    if version >= 12:
        unpack, size, end = _REQ_P12.unpack_from, _REQ_P12.size, r.end
        out = []
        pos = r.pos
        for _ in range(count):
            if pos + size > end:
                raise CodecError("truncated Fetch partition")
            p, cle, off, lfe, lso, mx = unpack(buf, pos)
            pos += size
            if pos < end and buf[pos] == 0:
                pos += 1
            else:  # ReplicaDirectoryId (17+), HighWatermark (18+): follower-only, skipped
                r.pos = pos
                r.skip_tagged_fields()
                pos = r.pos
            out.append(FetchPartition(p, cle, off, lfe, lso, mx))
        r.pos = pos
        return out
    # Fixed-size partitions: one bounds check and one iter_unpack for the whole array.
    if version >= 9:
        start = r.advance(count * _REQ_P9.size)
        view = buf[start : r.pos]
        return [
            FetchPartition(p, cle, off, -1, lso, mx) for p, cle, off, lso, mx in _REQ_P9.iter_unpack(view)
        ]
    if version >= 5:
        start = r.advance(count * _REQ_P5.size)
        view = buf[start : r.pos]
        return [FetchPartition(p, -1, off, -1, lso, mx) for p, off, lso, mx in _REQ_P5.iter_unpack(view)]
    start = r.advance(count * _REQ_P4.size)
    view = buf[start : r.pos]
    return [FetchPartition(p, -1, off, -1, -1, mx) for p, off, mx in _REQ_P4.iter_unpack(view)]


def decode_fetch_request(version: int, body: memoryview) -> FetchRequest:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise CodecError(f"Fetch v{version} is not supported")
    r = Reader(body)
    flexible = version >= FLEXIBLE_FROM
    ids = version >= TOPIC_IDS_FROM
    array_len = r.compact_array_len if flexible else r.array_len
    replica_id = replica_epoch = -1
    session_id, session_epoch = 0, -1
    if version >= REPLICA_STATE_FROM:
        top = _REQ_TOP15.unpack_from(r.buf, r.advance(_REQ_TOP15.size))
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = top
    elif version >= 7:
        top = _REQ_TOP7.unpack_from(r.buf, r.advance(_REQ_TOP7.size))
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = top
    else:
        top = _REQ_TOP4.unpack_from(r.buf, r.advance(_REQ_TOP4.size))
        replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level = top

    topics: list[FetchTopic] = []
    for _ in range(array_len()):
        name: str | None = None
        topic_id: bytes | None = None
        if ids:
            topic_id = r.uuid()
        else:
            name = r.compact_string() if flexible else r.string()
        partitions = _decode_partitions(r, version, array_len())
        if flexible:
            r.skip_tagged_fields()
        topics.append(FetchTopic(name, topic_id, partitions))

    forgotten: list[ForgottenTopic] = []
    if version >= 7:
        for _ in range(array_len()):
            fname: str | None = None
            fid: bytes | None = None
            if ids:
                fid = r.uuid()
            else:
                fname = r.compact_string() if flexible else r.string()
            n = array_len()
            start = r.advance(4 * n)
            fparts = [p for (p,) in _I32.iter_unpack(r.buf[start : r.pos])]
            if flexible:
                r.skip_tagged_fields()
            forgotten.append(ForgottenTopic(fname, fid, fparts))

    rack_id = ""
    if version >= 11:
        rack_id = r.compact_string() if flexible else r.string()

    cluster_id: str | None = None
    if flexible:
        for tag, payload in r.tagged_fields():
            if tag == _TAG_CLUSTER_ID:
                t = Reader(payload)
                cluster_id = t.compact_nullable_string()
                t.expect_end()
            elif tag == _TAG_REPLICA_STATE and version >= REPLICA_STATE_FROM:
                t = Reader(payload)
                replica_id, replica_epoch = _REPLICA_STATE.unpack_from(t.buf, t.advance(_REPLICA_STATE.size))
                t.skip_tagged_fields()
                t.expect_end()
    r.expect_end()
    return FetchRequest(
        replica_id,
        replica_epoch,
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten,
        rack_id,
        cluster_id,
    )


# Fixed parts of a response partition, by version: partition, error_code, high_watermark,
# last_stable_offset, [log_start_offset]; then aborted_transactions; then [preferred_read_replica] and
# [records length when not flexible].
_RESP_P4 = struct.Struct(">ihqq")
_RESP_P5 = struct.Struct(">ihqqq")
_RESP_TAIL4 = struct.Struct(">i")
_RESP_TAIL11 = struct.Struct(">ii")
_ABORTED = struct.Struct(">qq")
_RESP_TOP7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id


def encode_fetch_response(
    version: int,
    topics: list[FetchTopicResult],
    throttle_time_ms: int = 0,
    error_code: int = 0,
    session_id: int = 0,
) -> list[bytes | RecordsRef]:
    """The response body as chunks: bytes, with each RecordsRef left in place after its length."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch v{version} is not supported")
    flexible = version >= FLEXIBLE_FROM
    ids = version >= TOPIC_IDS_FROM
    out: list[bytes | RecordsRef] = []
    parts: list[bytes | bytearray | memoryview] = []  # joined into one bytes at each RecordsRef
    if version >= 7:
        cur = bytearray(_RESP_TOP7.pack(throttle_time_ms, error_code, session_id))
    else:
        cur = bytearray(_I32.pack(throttle_time_ms))
    cur += uvarint_bytes(len(topics) + 1) if flexible else _I32.pack(len(topics))
    for topic in topics:
        if ids:
            if len(topic.topic_id) != 16:
                raise ValueError("topic_id must be 16 bytes")
            cur += topic.topic_id
        else:
            name = topic.name.encode()
            cur += uvarint_bytes(len(name) + 1) if flexible else _I16.pack(len(name))
            cur += name
        cur += uvarint_bytes(len(topic.partitions) + 1) if flexible else _I32.pack(len(topic.partitions))
        for p in topic.partitions:
            rec = p.records
            if rec is None:
                size = 0
            elif isinstance(rec, (bytes, bytearray, memoryview)):
                size = len(rec)
            else:
                size = rec.size
            if version >= 5:
                cur += _RESP_P5.pack(
                    p.partition, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset
                )
            else:
                cur += _RESP_P4.pack(p.partition, p.error_code, p.high_watermark, p.last_stable_offset)
            aborted = p.aborted
            if aborted is None:
                cur += b"\x00" if flexible else b"\xff\xff\xff\xff"
                aborted = []
            else:
                cur += uvarint_bytes(len(aborted) + 1) if flexible else _I32.pack(len(aborted))
            for pid, first in aborted:
                cur += _ABORTED.pack(pid, first)
                if flexible:
                    cur.append(0)
            if flexible:
                cur += _I32.pack(p.preferred_read_replica)
                cur += uvarint_bytes(size + 1)
            elif version >= 11:
                cur += _RESP_TAIL11.pack(p.preferred_read_replica, size)
            else:
                cur += _RESP_TAIL4.pack(size)
            if rec is not None and size:
                if isinstance(rec, (bytes, bytearray, memoryview)):
                    parts.append(cur)
                    parts.append(rec)
                else:
                    parts.append(cur)
                    out.append(b"".join(parts))
                    out.append(rec)
                    parts = []
                cur = bytearray()
            if flexible:
                cur.append(0)  # partition tags: none (DivergingEpoch, CurrentLeader, SnapshotId)
        if flexible:
            cur.append(0)
    if flexible:
        cur.append(0)  # top-level tags: no NodeEndpoints
    parts.append(cur)
    out.append(b"".join(parts))
    return out


def chunks_size(chunks: Iterable[bytes | RecordsRef]) -> int:
    """Total bytes the chunks put on the wire."""
    total = 0
    for c in chunks:
        total += len(c) if isinstance(c, bytes) else c.size
    return total
