"""ConsumerGroupHeartbeat and ConsumerGroupDescribe: the consumer group protocol (KIP-848)."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from brook.broker.broker import Broker
from brook.groups.consumer_coordinator import Heartbeat
from brook.protocol import messages
from brook.protocol.errors import ErrorCode
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed, authorized_operations, filter_allowed
from .context import CLIENT_HOST, Body, uuid_bytes

__all__ = ["assignment_entries", "handle_consumer_group_describe", "handle_consumer_group_heartbeat"]


async def handle_consumer_group_heartbeat(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.CONSUMER_GROUP_HEARTBEAT, v, hdr.body)
    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return messages.encode_response(
            ApiKey.CONSUMER_GROUP_HEARTBEAT, v, {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
        )
    if req.subscribed_topic_names:
        # As Kafka 4.4's KafkaApis: one subscribed topic the member may not describe fails the whole
        # heartbeat, without naming it.
        wanted = set(req.subscribed_topic_names)
        if len(filter_allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, wanted)) < len(wanted):
            return messages.encode_response(
                ApiKey.CONSUMER_GROUP_HEARTBEAT, v, {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
            )
    owned = None
    if req.topic_partitions is not None:
        owned = {uuid_bytes(tp.topic_id): set(tp.partitions) for tp in req.topic_partitions}
    result = await broker.groups.consumer_heartbeat(
        Heartbeat(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            instance_id=req.instance_id,
            rack_id=req.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            subscribed_topic_names=req.subscribed_topic_names,
            subscribed_topic_regex=req.subscribed_topic_regex,
            server_assignor=req.server_assignor,
            owned=owned,
            client_id=hdr.client_id or "",
            client_host=CLIENT_HOST.get(),
            version=v,
        )
    )
    fields: dict[str, Any] = {
        "throttle_time_ms": 0,
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
    }
    if result.assignment is not None:
        fields["assignment"] = {"topic_partitions": assignment_entries(result.assignment)}
    return messages.encode_response(ApiKey.CONSUMER_GROUP_HEARTBEAT, v, fields)


def assignment_entries(
    assignment: Mapping[bytes, Collection[int]], names: Mapping[bytes, str] | None = None
) -> list[Any]:
    """An assignment's TopicPartitions entries (with topic names when `names` is given)."""
    out: list[dict[str, Any]] = []
    for t, ps in sorted(assignment.items()):
        if ps:
            entry: dict[str, Any] = {"topic_id": uuid.UUID(bytes=t), "partitions": sorted(ps)}
            if names is not None:
                entry["topic_name"] = names.get(t, "")
            out.append(entry)
    return out


async def handle_consumer_group_describe(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.CONSUMER_GROUP_DESCRIBE, v, hdr.body)
    names = {tid: name for name, (tid, _) in broker.groups.consumer.topics().items()}
    out: list[dict[str, Any]] = []
    for gid in req.group_ids:
        if not allowed(broker, Operation.DESCRIBE, ResourceType.GROUP, gid):
            out.append({"group_id": gid, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED})
            continue
        code, message, group = broker.groups.consumer.describe(gid)
        entry: dict[str, Any] = {"group_id": gid, "error_code": code, "error_message": message}
        if group is not None:
            entry.update(
                group_state=group.state,
                group_epoch=group.group_epoch,
                assignment_epoch=group.assignment_epoch,
                assignor_name=group.assignor,
                authorized_operations=authorized_operations(
                    broker, ResourceType.GROUP, gid, bool(req.include_authorized_operations)
                ),
                members=[
                    {
                        "member_id": m.member_id,
                        "instance_id": m.instance_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": sorted(m.subscribed_names),
                        "subscribed_topic_regex": m.subscribed_regex or "",
                        "assignment": {"topic_partitions": assignment_entries(m.assigned, names)},
                        "target_assignment": {
                            "topic_partitions": assignment_entries(group.target.get(m.member_id, {}), names)
                        },
                        "member_type": 1 if m.classic is None else 0,  # KIP-1099: 0 classic, 1 consumer
                    }
                    for m in group.members.values()
                ],
            )
        out.append(entry)
    return messages.encode_response(ApiKey.CONSUMER_GROUP_DESCRIBE, v, {"throttle_time_ms": 0, "groups": out})
