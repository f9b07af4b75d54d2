"""The share-state RPCs a group coordinator sends to a partition's leader, which holds the partition's
share-partitions (broker/share_offsets.py sends them): ReadShareGroupStateSummary (87),
InitializeShareGroupState (83: a new start offset), DeleteShareGroupState (86). Between brokers only:
CLUSTER_ACTION on the cluster, as Kafka requires of its share coordinator RPCs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from brook.broker.broker import Broker
from brook.broker.share_offsets import Part, local_delete, local_initialize, local_summary
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import Body, uuid_bytes

__all__ = [
    "handle_delete_share_group_state",
    "handle_initialize_share_group_state",
    "handle_read_share_group_state_summary",
]


async def _each(
    broker: Broker, topics: Any, answer: Callable[[Part, Any], Awaitable[dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Per partition: `answer`'s fields, or the error (CLUSTER_AUTHORIZATION_FAILED without the right)."""
    denied = not allowed(broker, Operation.CLUSTER_ACTION, ResourceType.CLUSTER)
    results = []
    for t in topics:
        parts = []
        for p in t.partitions:
            entry: dict[str, Any] = {"partition": p.partition}
            try:
                if denied:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                entry.update(await answer((uuid_bytes(t.topic_id), p.partition), p))
            except KafkaError as e:
                entry.update({"error_code": e.code, "error_message": e.message})
            parts.append(entry)
        results.append({"topic_id": t.topic_id, "partitions": parts})
    return results


async def handle_read_share_group_state_summary(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, v, hdr.body)

    async def answer(part: Part, _p: Any) -> dict[str, Any]:
        s = await local_summary(broker, req.group_id, part)
        return {
            "state_epoch": s.state_epoch,
            "leader_epoch": s.leader_epoch,
            "start_offset": s.start_offset,
            "delivery_complete_count": s.done,
        }

    results = await _each(broker, req.topics, answer)
    return messages.encode_response(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, v, {"results": results})


async def handle_initialize_share_group_state(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.INITIALIZE_SHARE_GROUP_STATE, v, hdr.body)

    async def answer(part: Part, p: Any) -> dict[str, Any]:
        await local_initialize(broker, req.group_id, part, p.start_offset)
        return {}

    results = await _each(broker, req.topics, answer)
    return messages.encode_response(ApiKey.INITIALIZE_SHARE_GROUP_STATE, v, {"results": results})


async def handle_delete_share_group_state(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DELETE_SHARE_GROUP_STATE, v, hdr.body)

    async def answer(part: Part, _p: Any) -> dict[str, Any]:
        await local_delete(broker, req.group_id, part)
        return {}

    results = await _each(broker, req.topics, answer)
    return messages.encode_response(ApiKey.DELETE_SHARE_GROUP_STATE, v, {"results": results})
