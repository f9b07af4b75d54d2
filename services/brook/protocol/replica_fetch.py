"""The follower's side of Fetch (v11, topic names): a request encoder and a response decoder.

Hand-written like the broker's side: replication moves every byte of every partition, so records stay
memoryview slices of the response frame, appended to the follower's log as they are.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .primitives import CodecError, Reader

VERSION = 11


@dataclass(frozen=True, slots=True)
class ReplicaFetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class ReplicaFetchResult:
    topic: str
    partition: int
    error_code: int
    high_watermark: int
    log_start_offset: int
    records: memoryview


_REQUEST_HEAD = struct.Struct(">iiiibiii")
_REQUEST_PARTITION = struct.Struct(">iiqqi")
# partition, error code, high watermark, last stable offset, log start offset, aborted transactions count
_PARTITION_HEAD = struct.Struct(">ihqqqi")
_PARTITION_TAIL = struct.Struct(">ii")  # preferred read replica, records size


def encode_replica_fetch(
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partitions: list[ReplicaFetchPartition],
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: list[tuple[str, int]] | None = None,
) -> bytes:
    """A Fetch v11 request; with a session (KIP-227) `partitions` are only those whose position changed
    and `forgotten` those the session drops."""
    by_topic: dict[str, list[ReplicaFetchPartition]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    out = [
        _REQUEST_HEAD.pack(
            replica_id, max_wait_ms, min_bytes, max_bytes, 0, session_id, session_epoch, len(by_topic)
        )
    ]
    pack = _REQUEST_PARTITION.pack
    for topic, parts in by_topic.items():
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)))
        out += [
            pack(p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, p.max_bytes)
            for p in parts
        ]
    gone: dict[str, list[int]] = {}
    for topic, index in forgotten or ():
        gone.setdefault(topic, []).append(index)
    out.append(struct.pack(">i", len(gone)))
    for topic, indexes in gone.items():
        name = topic.encode()
        out.append(
            struct.pack(">h", len(name)) + name + struct.pack(f">i{len(indexes)}i", len(indexes), *indexes)
        )
    out.append(struct.pack(">h", 0))  # empty rack id
    return b"".join(out)


def decode_replica_fetch_response(body: memoryview) -> tuple[int, int, list[ReplicaFetchResult]]:
    """(top-level error code, session id, per-partition results) of a Fetch v11 response body."""
    r = Reader(body)
    r.int32()  # throttle
    error = r.int16()
    session_id = r.int32()
    buf, end = r.buf, r.end
    head, tail = _PARTITION_HEAD, _PARTITION_TAIL
    empty = memoryview(b"")
    results: list[ReplicaFetchResult] = []
    for _ in range(r.array_len()):
        topic = r.string()
        count = r.array_len()
        pos = r.pos
        for _ in range(count):
            # One unpack per fixed run of fields: this runs for every partition of every replica fetch.
            if pos + head.size > end:
                raise CodecError(f"truncated partition at {pos}")
            partition, code, hw, _lso, log_start, aborted = head.unpack_from(buf, pos)
            pos += head.size + 16 * max(aborted, 0)
            if pos + tail.size > end:
                raise CodecError(f"truncated partition at {pos}")
            _preferred, n = tail.unpack_from(buf, pos)
            pos += tail.size
            if n < -1 or pos + max(n, 0) > end:
                raise CodecError(f"invalid records size {n}")
            records = buf[pos : pos + n] if n > 0 else empty
            pos += max(n, 0)
            results.append(ReplicaFetchResult(topic, partition, code, hw, log_start, records))
        r.pos = pos
    return error, session_id, results
