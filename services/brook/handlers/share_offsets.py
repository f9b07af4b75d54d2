"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91), DeleteShareGroupOffsets (92): a share
group's start offsets, as the admin client and kafka-share-groups.sh see and reset them.

The group's coordinator answers them; each share-partition is read, reset or deleted by its
partition's leader (broker/share_offsets.py: here, or through the share-state RPCs to that leader).
"""

from __future__ import annotations

from typing import Any

from brook.broker.broker import Broker
from brook.broker.share_offsets import Part
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import Body
from .share_groups import other_group_type

__all__ = [
    "delete_share_group",
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
        every = g.topics is None  # every topic the group may have state in: those with state only
        if g.topics is None:
            wanted = _all_topics(broker, g.group_id)
        else:
            wanted = {t.topic_name: list(t.partitions) for t in g.topics}
        # Each topic looked up and authorized once, before the wait: the answer describes what was asked.
        looked = {
            name: (broker.replicas.topic(name), allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, name))
            for name in wanted
        }
        asked: list[Part] = []
        for name, indexes in wanted.items():
            meta, permitted = looked[name]
            if meta is not None and permitted:
                asked += [(meta.topic_id, i) for i in indexes if 0 <= i < meta.partitions]
        summaries = await broker.share_offsets.summaries(g.group_id, asked)
        topics = []
        for name, indexes in wanted.items():
            meta, permitted = looked[name]
            denied = not permitted
            parts = []
            for index in indexes:
                entry: dict[str, Any] = {"partition_index": index, "start_offset": -1, "leader_epoch": -1}
                summary = summaries.get((meta.topic_id, index)) if meta is not None else None
                if denied:
                    entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                elif meta is None or not 0 <= index < meta.partitions:
                    entry["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                elif isinstance(summary, KafkaError):
                    entry.update({"error_code": summary.code, "error_message": summary.message})
                elif summary is not None and summary.start_offset >= 0:
                    entry["start_offset"] = summary.start_offset
                    entry["leader_epoch"] = summary.leader_epoch
                    entry["lag"] = _lag(broker, name, index, summary.start_offset, summary.done)
                elif every:
                    continue  # no state in this partition
                parts.append(entry)
            if parts or not every:
                topic_id = meta.topic_id if meta is not None else bytes(16)
                topics.append({"topic_name": name, "topic_id": topic_id, "partitions": parts})
        out.append({"group_id": g.group_id, "topics": topics})
    return messages.encode_response(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, v, {"groups": out})


async def delete_share_group(broker: Broker, group_id: str) -> None:
    """DeleteGroups of an empty share group: its share-partitions' state at each leader, then the
    group (NON_EMPTY_GROUP while it has members, before anything is deleted)."""
    broker.share.groups.check_empty(group_id)
    parts = []
    for name, indexes in _all_topics(broker, group_id).items():
        meta = broker.replicas.topic(name)
        if meta is not None:
            parts += [(meta.topic_id, i) for i in indexes]
    for error in (await broker.share_offsets.delete(group_id, parts)).values():
        if error is not None:
            raise error
    await broker.share.delete_group(group_id)


def _all_topics(broker: Broker, group_id: str) -> dict[str, list[int]]:
    """Every partition of the topics the group's members subscribed to (or a reset named), and of
    those it has state for here."""
    group = broker.share.groups.groups.get(group_id)
    names = set(group.topics) if group is not None else set()
    for topic_id, _ in broker.share.states_of(group_id):
        meta = broker.replicas.topic_by_id(topic_id)
        if meta is not None:
            names.add(meta.name)
    out: dict[str, list[int]] = {}
    for name in sorted(names):
        meta = broker.replicas.topic(name)
        if meta is not None:
            out[name] = list(range(meta.partitions))
    return out


def _lag(broker: Broker, topic: str, index: int, start: int, done: int) -> int:
    """Records not yet delivered to completion (KIP-1226): the high watermark (this broker's replica's,
    leader or follower) less the start offset, less what is done in flight; -1 where the partition has
    no replica here."""
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
    group = broker.share.groups.ensure(req.group_id)
    await broker.share.groups.persist(req.group_id)  # the group exists, also after a failover
    starts: dict[Part, int] = {}
    for t in req.topics:
        meta = broker.replicas.topic(t.topic_name)
        if meta is not None and allowed(broker, Operation.READ, ResourceType.TOPIC, t.topic_name):
            group.topics.add(t.topic_name)
            for p in t.partitions:
                if 0 <= p.partition_index < meta.partitions:
                    starts[(meta.topic_id, p.partition_index)] = p.start_offset
    results = await broker.share_offsets.initialize(req.group_id, starts)
    responses = []
    for t in req.topics:
        meta = broker.replicas.topic(t.topic_name)
        denied = not allowed(broker, Operation.READ, ResourceType.TOPIC, t.topic_name)
        parts = []
        for p in t.partitions:
            code, message = ErrorCode.NONE, None
            error = results.get((meta.topic_id, p.partition_index)) if meta is not None else None
            if denied:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif meta is None or not 0 <= p.partition_index < meta.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif error is not None:
                code, message = error.code, error.message
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
    responses = []
    for t in req.topics:
        meta = broker.replicas.topic(t.topic_name)
        code, message = ErrorCode.NONE, None
        if not allowed(broker, Operation.READ, ResourceType.TOPIC, t.topic_name):
            code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:  # every partition's state, at its leader
            parts = [(meta.topic_id, i) for i in range(meta.partitions)]
            errors = [e for e in (await broker.share_offsets.delete(req.group_id, parts)).values() if e]
            if errors:
                code, message = errors[0].code, errors[0].message
        topic_id = meta.topic_id if meta is not None else bytes(16)
        responses.append(
            {"topic_name": t.topic_name, "topic_id": topic_id, "error_code": code, "error_message": message}
        )
    return messages.encode_response(ApiKey.DELETE_SHARE_GROUP_OFFSETS, v, {"responses": responses})
