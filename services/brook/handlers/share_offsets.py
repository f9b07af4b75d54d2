"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92): a share
group's start offsets, as the admin client and kafka-share-groups.sh see and reset them.

They read and change the share-partitions this broker holds (the group coordinator's broker; on one
broker that is every share-partition): a partition asked for by name is loaded from the store.
"""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.share.state_records import ShareKey

from .authorized import Operation, ResourceType, allowed
from .context import Body
from .share_groups import other_group_type

__all__ = [
    "handle_alter_share_group_offsets",
    "handle_delete_share_group_offsets",
    "handle_describe_share_group_offsets",
]


def _check_group(broker: Broker, group_id: str, operation: Operation) -> None:
    if not allowed(broker, operation, ResourceType.GROUP, group_id):
        raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    broker.groups.check_coordinator(group_id)
    if other_group_type(broker, group_id) is not None:
        raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a share group.")


async def handle_describe_share_group_offsets(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, v, hdr.body)
    out: list[dict[str, Any]] = []
    for g in req.groups:
        try:
            _check_group(broker, g.group_id, Operation.DESCRIBE)
            if g.group_id not in broker.share.groups.groups and not broker.share.states_of(g.group_id):
                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {g.group_id} not found.")
        except KafkaError as e:
            out.append(
                {"group_id": g.group_id, "error_code": e.code, "error_message": e.message, "topics": []}
            )
            continue
        states = broker.share.states_of(g.group_id)
        if g.topics is None:  # every topic the group has state for here
            wanted: dict[str, list[int]] = {}
            for topic_id, index in sorted(states):
                meta = broker.replicas.topic_by_id(topic_id)
                if meta is not None:
                    wanted.setdefault(meta.name, []).append(index)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        topics = []
        for name, indexes in wanted.items():
            meta = broker.replicas.topic(name)
            denied = not allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, name)
            parts = []
            for index in indexes:
                entry: dict[str, Any] = {"partition_index": index, "start_offset": -1, "leader_epoch": -1}
                if denied:
                    entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif meta is None or not 0 <= index < meta.partitions:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    sp = await broker.share.lookup(ShareKey(g.group_id, meta.topic_id, index))
                    if sp is not None:
                        entry["start_offset"] = sp.start_offset
                        entry["leader_epoch"] = broker.leader_epoch(name, index)
                        entry["lag"] = _lag(broker, name, index, sp.start_offset, sp.done_count())
                parts.append(entry)
            topic_id = meta.topic_id if meta is not None else bytes(16)
            topics.append({"topic_name": name, "topic_id": topic_id, "partitions": parts})
        out.append({"group_id": g.group_id, "topics": topics})
    return messages.encode_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, v, {"groups": out})


def _lag(broker: Broker, topic: str, index: int, start: int, done: int) -> int:
    """Records not yet delivered to completion (KIP-1226): the high watermark less the start offset,
    less what is done in flight; -1 where the partition is not hosted here."""
    try:
        hw = broker.replicas.partition(topic, index).consumer_high_watermark
    except KafkaError:
        return -1
    return max(hw - start - done, 0)


async def handle_alter_share_group_offsets(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.ALTER_SHARE_GROUP_OFFSETS, v, hdr.body)
    try:
        _check_group(broker, req.group_id, Operation.READ)
        broker.share.groups.check_empty(req.group_id)
    except KafkaError as e:
        return messages.encode_response(
            ApiKey.ALTER_SHARE_GROUP_OFFSETS, v, {"error_code": e.code, "error_message": e.message}
        )
    broker.share.groups.ensure(req.group_id)
    responses = []
    for t in req.topics:
        meta = broker.replicas.topic(t.topic_name)
        denied = not allowed(broker, Operation.READ, ResourceType.TOPIC, t.topic_name)
        parts = []
        for p in t.partitions:
            code, message = ErrorCode.NONE, None
            if denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    key = ShareKey(req.group_id, meta.topic_id, p.partition_index)
                    await broker.share.reset(key, p.start_offset)
                except KafkaError as e:
                    code, message = e.code, e.message
            parts.append({"partition_index": p.partition_index, "error_code": code, "error_message": message})
        topic_id = meta.topic_id if meta is not None else bytes(16)
        responses.append({"topic_name": t.topic_name, "topic_id": topic_id, "partitions": parts})
    return messages.encode_response(ApiKey.ALTER_SHARE_GROUP_OFFSETS, v, {"responses": responses})


async def handle_delete_share_group_offsets(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DELETE_SHARE_GROUP_OFFSETS, v, hdr.body)
    try:
        _check_group(broker, req.group_id, Operation.DELETE)
        if req.group_id not in broker.share.groups.groups:
            raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} not found.")
        broker.share.groups.check_empty(req.group_id)
    except KafkaError as e:
        return messages.encode_response(
            ApiKey.DELETE_SHARE_GROUP_OFFSETS, v, {"error_code": e.code, "error_message": e.message}
        )
    states = broker.share.states_of(req.group_id)
    responses = []
    for t in req.topics:
        meta = broker.replicas.topic(t.topic_name)
        code, message = ErrorCode.NONE, None
        if not allowed(broker, Operation.READ, ResourceType.TOPIC, t.topic_name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            try:
                for topic_id, index in [tp for tp in states if tp[0] == meta.topic_id]:
                    await broker.share.forget(ShareKey(req.group_id, topic_id, index))
            except KafkaError as e:
                code, message = e.code, e.message
        topic_id = meta.topic_id if meta is not None else bytes(16)
        responses.append(
            {"topic_name": t.topic_name, "topic_id": topic_id, "error_code": code, "error_message": message}
        )
    return messages.encode_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, v, {"responses": responses})
