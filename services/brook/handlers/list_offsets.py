"""ListOffsets: earliest, latest, max timestamp, or the first offset at or after a timestamp."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.versions import ApiKey

from .context import Body, check_leader

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _lookup(broker: Broker, topic: str, index: int, ts: int) -> tuple[int, int]:
    """(timestamp, offset) for a ListOffsets query; -1 timestamps where Kafka answers -1."""
    p = broker.replicas.partition(topic, index)
    check_leader(p)
    if ts == LATEST:
        return -1, p.high_watermark
    if ts == EARLIEST:
        return -1, p.log.log_start_offset
    if ts == MAX_TIMESTAMP:
        found = p.log.max_timestamp()
        return found if found is not None else (-1, -1)
    if ts < 0:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"unsupported timestamp query {ts}")
    hit = p.log.offset_for_timestamp(ts)
    if hit is None or hit[0] >= p.high_watermark:
        return -1, -1
    return hit[1], hit[0]


async def handle_list_offsets(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = messages.decode_request(ApiKey.LIST_OFFSETS, version, hdr.body)
    topics: list[dict[str, Any]] = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            try:
                ts, off = _lookup(broker, t.name, p.partition_index, p.timestamp)
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": 0,
                        "timestamp": ts,
                        "offset": off,
                        "leader_epoch": broker.leader_epoch(t.name, p.partition_index),
                    }
                )
            except KafkaError as e:
                parts.append(
                    {
                        "partition_index": p.partition_index,
                        "error_code": e.code,
                        "timestamp": -1,
                        "offset": -1,
                        "leader_epoch": -1,
                    }
                )
        topics.append({"name": t.name, "partitions": parts})
    return messages.encode_response(ApiKey.LIST_OFFSETS, version, {"throttle_time_ms": 0, "topics": topics})
