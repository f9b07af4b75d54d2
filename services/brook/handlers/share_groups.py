"""ShareGroupHeartbeat (76) and ShareGroupDescribe (77): share groups' membership (KIP-932)."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.share.group import ASSIGNOR, ShareHeartbeat

from .authorized import Operation, ResourceType, allowed, authorized_operations
from .consumer_groups import assignment_entries
from .context import CLIENT_HOST, Body

__all__ = ["handle_share_group_describe", "handle_share_group_heartbeat", "other_group_type"]


def other_group_type(broker: Broker, group_id: str) -> str | None:
    """The type of a classic or consumer group of that id (a share group cannot take its id)."""
    if group_id in broker.groups.consumer.groups:
        return "consumer"
    code, group = broker.groups.describe(group_id)
    if code == ErrorCode.NONE and group is not None and group.members:
        return "classic"
    return None


async def handle_share_group_heartbeat(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.SHARE_GROUP_HEARTBEAT, v, hdr.body)

    def error(code: ErrorCode, message: str | None = None) -> bytes:
        return messages.encode_response(
            ApiKey.SHARE_GROUP_HEARTBEAT, v, {"error_code": code, "error_message": message}
        )

    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return error(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    try:
        broker.groups.check_coordinator(req.group_id)
    except KafkaError as e:
        return error(e.code, e.message)
    other = other_group_type(broker, req.group_id) if req.group_id else None
    if other is not None:
        return error(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a share group.")
    names = req.subscribed_topic_names
    if names and any(not allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, n) for n in names):
        return error(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    result = broker.share.groups.heartbeat(
        ShareHeartbeat(
            group_id=req.group_id,
            member_id=req.member_id,
            member_epoch=req.member_epoch,
            rack_id=req.rack_id,
            subscribed_topic_names=names,
            client_id=hdr.client_id or "",
            client_host=CLIENT_HOST.get(),
        )
    )
    code = await broker.share.groups.persist(req.group_id, [result.member_id or req.member_id])
    if code is not ErrorCode.NONE:
        return error(code)
    fields: dict[str, Any] = {
        "error_code": result.error,
        "error_message": result.message,
        "member_id": result.member_id,
        "member_epoch": result.member_epoch,
        "heartbeat_interval_ms": result.heartbeat_interval_ms,
    }
    if result.assignment is not None:
        fields["assignment"] = {"topic_partitions": assignment_entries(result.assignment)}
    return messages.encode_response(ApiKey.SHARE_GROUP_HEARTBEAT, v, fields)


async def handle_share_group_describe(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.SHARE_GROUP_DESCRIBE, v, hdr.body)
    names = {t.topic_id: name for name, t in broker.replicas.topics().items()}
    out: list[dict[str, Any]] = []
    for gid in req.group_ids:
        if not allowed(broker, Operation.DESCRIBE, ResourceType.GROUP, gid):
            out.append({"group_id": gid, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED})
            continue
        try:
            broker.groups.check_coordinator(gid)
            if other_group_type(broker, gid) is not None:
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a share group.")
            group = broker.share.groups.describe(gid)
        except KafkaError as e:
            out.append({"group_id": gid, "error_code": e.code, "error_message": e.message})
            continue
        out.append(
            {
                "group_id": gid,
                "error_code": 0,
                "group_state": group.state,
                "group_epoch": group.group_epoch,
                "assignment_epoch": group.assignment_epoch,
                "assignor_name": ASSIGNOR,
                "authorized_operations": authorized_operations(
                    broker, ResourceType.GROUP, gid, bool(req.include_authorized_operations)
                ),
                "members": [
                    {
                        "member_id": m.member_id,
                        "rack_id": m.rack_id,
                        "member_epoch": m.member_epoch,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "subscribed_topic_names": sorted(m.subscribed),
                        "assignment": {"topic_partitions": assignment_entries(m.assigned, names)},
                    }
                    for m in group.members.values()
                ],
            }
        )
    return messages.encode_response(ApiKey.SHARE_GROUP_DESCRIBE, v, {"throttle_time_ms": 0, "groups": out})
