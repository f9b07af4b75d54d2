"""OffsetForLeaderEpoch: where an epoch ended on this leader, so a follower can truncate divergence."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed, require
from .context import Body, check_leader


async def handle_offset_for_leader_epoch(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, v, hdr.body)
    topics: list[dict[str, Any]] = []
    # Followers (replica id >= 0, v3+) need CLUSTER_ACTION; clients DESCRIBE on the topic.
    follower = req.replica_id >= 0
    cluster_ok = not follower or allowed(broker, Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    for t in req.topics:
        parts = []
        for q in t.partitions:
            entry: dict[str, Any] = {
                "partition": q.partition,
                "error_code": 0,
                "leader_epoch": -1,
                "end_offset": -1,
            }
            try:
                if not cluster_ok:
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "CLUSTER_ACTION denied")
                if not follower:
                    require(broker, Operation.DESCRIBE, ResourceType.TOPIC, t.topic)
                p = broker.replicas.partition(t.topic, q.partition)
                check_leader(p, getattr(q, "current_leader_epoch", -1))
                epoch, end = p.epochs.end_offset_for(q.leader_epoch, p.log.log_end_offset)
                entry.update(leader_epoch=epoch, end_offset=end)
            except KafkaError as e:
                entry["error_code"] = e.code
            parts.append(entry)
        topics.append({"topic": t.topic, "partitions": parts})
    return messages.encode_response(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, v, {"throttle_time_ms": 0, "topics": topics}
    )
