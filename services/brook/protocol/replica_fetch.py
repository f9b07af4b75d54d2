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


def encode_replica_fetch(
    replica_id: int, max_wait_ms: int, min_bytes: int, max_bytes: int, partitions: list[ReplicaFetchPartition]
) -> bytes:
    by_topic: dict[str, list[ReplicaFetchPartition]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    out = [struct.pack(">iiiibiii", replica_id, max_wait_ms, min_bytes, max_bytes, 0, 0, -1, len(by_topic))]
    for topic, parts in by_topic.items():
        name = topic.encode()
        out.append(struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts)))
        out += [
            struct.pack(
                ">iiqqi", p.partition, p.current_leader_epoch, p.fetch_offset, p.log_start_offset, p.max_bytes
            )
            for p in parts
        ]
    out.append(struct.pack(">ih", 0, 0))  # no forgotten topics, empty rack id
    return b"".join(out)


def decode_replica_fetch_response(body: memoryview) -> tuple[int, list[ReplicaFetchResult]]:
    """(top-level error code, per-partition results) of a Fetch v11 response body."""
    r = Reader(body)
    r.int32()  # throttle
    error = r.int16()
    r.int32()  # session id
    results: list[ReplicaFetchResult] = []
    for _ in range(r.array_len()):
        topic = r.string()
        for _ in range(r.array_len()):
            partition, code, hw = r.int32(), r.int16(), r.int64()
            r.int64()  # last stable offset
            log_start = r.int64()
            aborted = r.nullable_array_len()
            r.skip(16 * (aborted or 0))
            r.int32()  # preferred read replica
            n = r.int32()
            if n < -1:
                raise CodecError(f"invalid records size {n}")
            records = r.raw(n) if n > 0 else memoryview(b"")
            results.append(ReplicaFetchResult(topic, partition, code, hw, log_start, records))
    return error, results
