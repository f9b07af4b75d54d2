"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups, DeleteGroups."""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.groups.coordinator import OFFSETS_TOPIC
from brook.groups.group import GroupState, JoinRequest
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.transactions import TXN_STATE_TOPIC

from .authorized import Operation, ResourceType, allowed, authorized_operations, failed, filter_allowed
from .context import CLIENT_HOST, LISTENER_NAME, Body
from .share_offsets import delete_share_group


async def _coordinator(broker: Broker, key: str, key_type: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "key": key,
        "node_id": -1,
        "host": "",
        "port": -1,
        "error_code": 0,
        "error_message": None,
    }
    rtype = ResourceType.TRANSACTIONAL_ID if key_type == 1 else ResourceType.GROUP
    if key and not allowed(broker, Operation.DESCRIBE, rtype, key):
        entry.update(
            error_code=failed(rtype), error_message=f"DESCRIBE on {rtype.name.lower()} '{key}' denied"
        )
        return entry
    if key_type not in (0, 1):
        entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"unknown key type {key_type}")
        return entry
    if not key:
        what = "group id" if key_type == 0 else "transactional id"
        entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"the {what} is empty")
        return entry
    try:
        if key_type == 0:
            await broker.groups.ensure_offsets_topic()
            leader = broker.partition_state(OFFSETS_TOPIC, broker.groups.partition_for(key)).leader
        else:
            await broker.transactions.ensure_topic()
            leader = broker.partition_state(TXN_STATE_TOPIC, broker.transactions.partition_for(key)).leader
    except KafkaError as e:  # the offsets topic is being created, or not yet known here: retriable
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=e.message)
        return entry
    endpoint = broker.endpoint(leader, LISTENER_NAME.get())
    if endpoint is None:
        entry.update(
            error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message="the coordinator has no leader"
        )
        return entry
    entry.update(node_id=leader, host=endpoint[0], port=endpoint[1])
    return entry


def _group_denied(api: ApiKey, v: int) -> bytes:
    """The answer to a group request the principal may not make (READ on the group)."""
    fields: dict[str, Any] = {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if api == ApiKey.JOIN_GROUP:
        fields.update(generation_id=-1, leader="", member_id="")
    return messages.encode_response(api, v, fields)


async def handle_find_coordinator(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.FIND_COORDINATOR, v, hdr.body)
    key_type = req.key_type or 0
    if v >= 4:
        coordinators = [await _coordinator(broker, k, key_type) for k in req.coordinator_keys]
        return messages.encode_response(
            ApiKey.FIND_COORDINATOR, v, {"throttle_time_ms": 0, "coordinators": coordinators}
        )
    c = await _coordinator(broker, req.key, key_type)
    del c["key"]
    return messages.encode_response(ApiKey.FIND_COORDINATOR, v, {"throttle_time_ms": 0, **c})


async def handle_join_group(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.JOIN_GROUP, v, hdr.body)
    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return _group_denied(ApiKey.JOIN_GROUP, v)
    joining = JoinRequest(
        req.group_id,
        req.member_id,
        req.group_instance_id,
        req.protocol_type,
        [(p.name, bytes(p.metadata)) for p in req.protocols],
        req.session_timeout_ms,
        req.rebalance_timeout_ms,
        hdr.client_id or "",
        CLIENT_HOST.get(),
        require_known_member_id=v >= 4,
        skip_assignment_supported=v >= 9,
    )
    result = await broker.groups.join(joining)
    return messages.encode_response(
        ApiKey.JOIN_GROUP,
        v,
        {
            "throttle_time_ms": 0,
            "error_code": result.error,
            "generation_id": result.generation,
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol if (result.protocol is not None or v >= 7) else "",
            "leader": result.leader,
            "skip_assignment": result.skip_assignment,
            "member_id": result.member_id,
            "members": [
                {"member_id": m, "group_instance_id": i, "metadata": meta} for m, i, meta in result.members
            ],
        },
    )


async def handle_sync_group(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.SYNC_GROUP, v, hdr.body)
    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return _group_denied(ApiKey.SYNC_GROUP, v)
    code, assignment, ptype, pname = await broker.groups.sync(
        req.group_id,
        req.generation_id,
        req.member_id,
        req.group_instance_id,
        req.protocol_type,
        req.protocol_name,
        {a.member_id: bytes(a.assignment) for a in req.assignments},
    )
    return messages.encode_response(
        ApiKey.SYNC_GROUP,
        v,
        {
            "throttle_time_ms": 0,
            "error_code": code,
            "protocol_type": ptype,
            "protocol_name": pname,
            "assignment": assignment,
        },
    )


async def handle_heartbeat(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.HEARTBEAT, v, hdr.body)
    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return _group_denied(ApiKey.HEARTBEAT, v)
    code = broker.groups.heartbeat(req.group_id, req.generation_id, req.member_id, req.group_instance_id)
    return messages.encode_response(ApiKey.HEARTBEAT, v, {"throttle_time_ms": 0, "error_code": code})


async def handle_leave_group(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.LEAVE_GROUP, v, hdr.body)
    if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
        return _group_denied(ApiKey.LEAVE_GROUP, v)
    members: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in req.members] if v >= 3 else [(req.member_id, None)]
    )
    code, per_member = await broker.groups.leave(req.group_id, members)
    if v < 3 and code == ErrorCode.NONE:
        code = per_member[0]
    return messages.encode_response(
        ApiKey.LEAVE_GROUP,
        v,
        {
            "throttle_time_ms": 0,
            "error_code": code,
            "members": [
                {"member_id": m, "group_instance_id": i, "error_code": e}
                for (m, i), e in zip(members, per_member, strict=True)
            ],
        },
    )


async def handle_describe_groups(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_GROUPS, v, hdr.body)
    with_ops = req.include_authorized_operations
    out: list[dict[str, Any]] = []
    for gid in req.groups:
        if not allowed(broker, Operation.DESCRIBE, ResourceType.GROUP, gid):
            out.append(
                {"error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": ""}
            )
            continue
        code, group = broker.groups.describe(gid)
        ops = authorized_operations(broker, ResourceType.GROUP, gid, with_ops)
        entry: dict[str, Any] = {
            "error_code": code,
            "group_id": gid,
            "group_state": GroupState.DEAD.value,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": ops,
        }
        if group is not None:
            protocol = group.protocol or ""
            stable = group.is_(GroupState.STABLE)
            entry.update(
                group_state=group.state.value,
                protocol_type=group.protocol_type or "",
                protocol_data=protocol if stable else "",
                members=[
                    {
                        "member_id": m.member_id,
                        "group_instance_id": m.group_instance_id,
                        "client_id": m.client_id,
                        "client_host": m.client_host,
                        "member_metadata": m.metadata_for(protocol) if stable else b"",
                        "member_assignment": m.assignment if stable else b"",
                    }
                    for m in group.members.values()
                ],
            )
        out.append(entry)
    return messages.encode_response(ApiKey.DESCRIBE_GROUPS, v, {"throttle_time_ms": 0, "groups": out})


async def handle_list_groups(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.LIST_GROUPS, v, hdr.body)
    states = {s.lower() for s in (req.states_filter or [])}
    types = {t.lower() for t in (req.types_filter or [])}  # v5 (KIP-848)
    # DESCRIBE on the cluster lists every group; else only those the principal may describe.
    every = allowed(broker, Operation.DESCRIBE, ResourceType.CLUSTER)
    found = [
        (g.group_id, g.protocol_type or "", g.state.value, "classic") for g in broker.groups.list_groups()
    ]
    found += [(g.group_id, "consumer", g.state, "consumer") for g in broker.groups.consumer.list_groups()]
    found += [(g.group_id, "share", g.state, "share") for g in broker.share.groups.groups.values()]
    groups = [
        {"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": gtype}
        for gid, ptype, state, gtype in sorted(found)
        if (not states or state.lower() in states)
        and (not types or gtype in types)
        and (every or allowed(broker, Operation.DESCRIBE, ResourceType.GROUP, gid))
    ]
    return messages.encode_response(
        ApiKey.LIST_GROUPS, v, {"throttle_time_ms": 0, "error_code": 0, "groups": groups}
    )


async def handle_delete_groups(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DELETE_GROUPS, v, hdr.body)
    names = list(dict.fromkeys(req.groups_names))  # a group named twice is deleted once, answered once
    may = filter_allowed(broker, Operation.DELETE, ResourceType.GROUP, names)
    share = [g for g in names if g in may and g in broker.share.groups.groups]
    results = await broker.groups.delete_groups([g for g in names if g in may and g not in share])
    for g in share:
        try:
            broker.groups.check_coordinator(g)
            await delete_share_group(broker, g)
            results[g] = ErrorCode.NONE
        except KafkaError as e:
            results[g] = e.code
    results.update({g: ErrorCode.GROUP_AUTHORIZATION_FAILED for g in names if g not in may})
    return messages.encode_response(
        ApiKey.DELETE_GROUPS,
        v,
        {"throttle_time_ms": 0, "results": [{"group_id": g, "error_code": c} for g, c in results.items()]},
    )
